// What the Intel e1000 family's drivers share (the 82576 igb and the 82574 e1000e keep these registers
// at the same offsets, Intel datasheets chapter 8): counters, loopback modes, and the set-up steps
// reset, PHY auto-negotiation, link wait, MAC address, statistics.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "../../vfio/device.hpp"
#include "../../vfio/mmio.hpp"
#include "../mac_address.hpp"
#include "../port.hpp"
#include "../stats.hpp"
#include "ring.hpp"

namespace bardrive::nic {

// A ring's counters as QueueStats (the driver adds doorbells and empty refills).
inline QueueStats rx_queue_stats(const RxRingCounters& c) noexcept {
    QueueStats s;
    s.packets = c.packets;
    s.bytes = c.bytes;
    s.bad_length = c.bad_length;
    s.chained = c.chained;
    s.frame_errors = c.frame_errors;
    return s;
}
inline QueueStats tx_queue_stats(const TxRingCounters& c) noexcept {
    QueueStats s;
    s.packets = c.packets;
    s.bytes = c.bytes;
    s.bad_length = c.bad_length + c.bad_offload;  // every frame refused
    s.bad_head = c.bad_head;
    return s;
}

namespace e1000 {

// Polls `done` every 100 us until it holds or `timeout` passes; true when it held.
template <class F>
bool poll_until(F done, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= end) return done();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

// False when the device completes register reads with all ones: it stopped answering (removed, powered
// down, PCIe link down). require_answering() throws saying so, naming `who` and `step`. reset(), phy_write(),
// bring_link_up() and read_mac() check it, so a dead device is an error there, never a link "up" or a
// MAC of ff:ff:ff:ff:ff:ff.
bool answering(const vfio::Mmio& regs) noexcept;
void require_answering(const vfio::Mmio& regs, const std::string& who, const char* step);
// Global reset (CTRL.RST) with every interrupt masked before and after, also through the part's
// extended interrupt mask clear register when it has one (the 82576's EIMC; 0: none). Throws
// bardrive::Error naming `who` when the reset does not complete.
void reset(const vfio::Mmio& regs, const std::string& who, std::uint32_t extended_mask_clear = 0);
// Writes a register of the internal PHY through MDIC; throws when MDIC reports an error or times out.
void phy_write(const vfio::Mmio& regs, const std::string& who, std::uint32_t reg, std::uint16_t value);
// Sets link up, restarts auto-negotiation (PHY loopback if asked), waits for STATUS.LU up to timeout_ms;
// throws saying so when the link stays down.
void bring_link_up(const vfio::Mmio& regs, const std::string& who, Loopback loopback, int timeout_ms);
// The address the device loaded into RAL0/RAH0; throws when RAH0.AV is clear.
MacAddress read_mac(const vfio::Mmio& regs, const std::string& who);
// Puts `mac` into RAL0/RAH0 (valid) in place of the one loaded from the EEPROM.
void write_mac(const vfio::Mmio& regs, const MacAddress& mac) noexcept;
bool link_up(const vfio::Mmio& regs) noexcept;  // false for a device not answering
unsigned link_speed_mbps(const vfio::Mmio& regs) noexcept;
// What a port last saw of its link, to report changes (STATUS.LU and speed, polled).
struct LinkWatch {
    bool up = false;
    unsigned speed_mbps = 0;
    std::uint64_t changes = 0;  // transitions reported since init
    // An event when STATUS differs from what the last call saw. A down/up bounce shorter than the
    // polling interval is not seen.
    std::optional<LinkEvent> poll(const vfio::Mmio& regs) noexcept;
};
// Throws bardrive::Error naming the device's IDs, `part` and `hint` unless `drives` takes them.
void check_identity(const vfio::Device& device, bool (*drives)(std::uint16_t, std::uint16_t) noexcept, const char* part,
                    const char* hint);
// A ring's tail doorbell: the register's address (checked once at set-up), what it last said, how often
// it was rung. ring() writes only when the tail moved, after the descriptors are visible to the device.
struct Doorbell {
    volatile std::uint32_t* reg = nullptr;
    std::uint32_t last = 0;
    std::uint64_t rings = 0;

    void ring(std::uint32_t tail) noexcept {
        if (tail == last) return;
        vfio::wmb();  // descriptors written before the device sees the new tail
        *reg = tail;
        last = tail;
        ++rings;
    }
    // Set-up's write of the tail a ring starts from: not counted among the rings.
    void start(volatile std::uint32_t* tail_reg, std::uint32_t tail) noexcept {
        reg = tail_reg;
        vfio::wmb();
        *reg = tail;
        last = tail;
    }
};
// Stops a port before its rings and buffers go: receive and transmit off, every interrupt masked (also
// through `extended_mask_clear` where the part has one), the device's vectors disabled, global reset:
// no DMA after this. Then gives every buffer the rings still hold back to its pool.
void stop_port(const vfio::Mmio& regs, vfio::Device& device, std::uint32_t extended_mask_clear,
               std::span<RxRing* const> rx, std::span<TxRing* const> tx) noexcept;

// Sets `group`'s bit in the multicast table (RCTL.MO = 00: the hash is destination bits 47:36).
void add_multicast(const vfio::Mmio& regs, const MacAddress& group) noexcept;
// Reads the clear-on-read counters and adds them to `totals`.
void accumulate(const vfio::Mmio& regs, DeviceStats& totals) noexcept;

}  // namespace e1000
}  // namespace bardrive::nic
