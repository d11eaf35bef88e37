// What the Intel e1000 family's drivers share (the 82576 igb and the 82574 e1000e keep these registers
// at the same offsets, Intel datasheets chapter 8): counters, loopback modes, and the set-up steps
// reset, PHY auto-negotiation, link wait, MAC address, statistics.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "../vfio/mmio.hpp"
#include "mac_address.hpp"
#include "ring.hpp"

namespace bardrive::nic {

enum class Loopback {
    none,
    mac,  // RCTL.LBM = 01: frames sent come back to this port's receive path, nothing leaves the port
    phy,  // PHY BMCR loopback
};

// Counters the driver keeps per queue (the data path never touches the device to count).
struct QueueStats {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t doorbells = 0;     // tail writes: one per batch that moved the tail
    std::uint64_t bad_length = 0;    // rx: impossible length from the device; tx: frames refused
    std::uint64_t chained = 0;       // rx: frames spread over several buffers (dropped)
    std::uint64_t frame_errors = 0;  // rx: the device flagged the frame bad (dropped)
    std::uint64_t no_buffers = 0;    // rx: refills that found the pool empty
    std::uint64_t bad_head = 0;      // tx: head write-back out of range (ignored)
};

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

// The device's own counters (clear-on-read registers, accumulated here since init), 8.19.
struct DeviceStats {
    std::uint64_t rx_packets = 0;     // GPRC
    std::uint64_t tx_packets = 0;     // GPTC
    std::uint64_t rx_bytes = 0;       // GORC (includes the 4-byte CRC per frame)
    std::uint64_t tx_bytes = 0;       // GOTC (includes CRC)
    std::uint64_t rx_total = 0;       // TPR
    std::uint64_t tx_total = 0;       // TPT
    std::uint64_t rx_broadcast = 0;   // BPRC
    std::uint64_t rx_multicast = 0;   // MPRC
    std::uint64_t rx_missed = 0;      // MPC
    std::uint64_t rx_no_buffers = 0;  // RNBC
    std::uint64_t rx_undersize = 0;   // RUC
    std::uint64_t rx_oversize = 0;    // ROC
    std::uint64_t crc_errors = 0;     // CRCERRS
};

// A change of link state that poll_link() reports.
struct LinkEvent {
    bool up = false;
    unsigned speed_mbps = 0;  // 10, 100 or 1000 when up; 0 when down
};

namespace e1000x {

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
// Global reset (CTRL.RST) with every interrupt masked before and after; `extended` also masks EIMC
// (82576). Throws bardrive::Error naming `who` when the reset does not complete.
void reset(const vfio::Mmio& regs, const std::string& who, bool extended);
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
// Reads the clear-on-read counters and adds them to `totals`.
void accumulate(const vfio::Mmio& regs, DeviceStats& totals) noexcept;

}  // namespace e1000x
}  // namespace bardrive::nic
