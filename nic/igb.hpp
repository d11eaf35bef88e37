// nic::Igb: a userspace driver for the Intel 82576 (QEMU's igb model; real 82576 where the registers match).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "../dma/buffer_pool.hpp"
#include "../dma/iova_allocator.hpp"
#include "../dma/mapping.hpp"
#include "../dma/memory.hpp"
#include "../vfio/device.hpp"
#include "../vfio/mmio.hpp"
#include "e1000_common.hpp"
#include "mac_address.hpp"
#include "packet.hpp"
#include "queue_pair.hpp"
#include "ring.hpp"

namespace bardrive::nic {

struct IgbOptions {
    std::uint16_t rx_queues = 1;  // 1..8; more than one spreads IP flows by RSS (non-IP frames go to queue 0)
    std::uint16_t tx_queues = 1;  // 1..8
    std::uint32_t rx_ring = 512;  // descriptors per queue: a power of two from 8 to 32768
    std::uint32_t tx_ring = 512;
    bool promiscuous = false;  // accept every unicast and multicast frame
    bool broadcast = true;     // accept broadcast frames (RCTL.BAM)
    Loopback loopback = Loopback::none;
    bool interrupts = false;  // MSI-X: RX queue q raises vector q (wait_rx), link changes vector rx_queues
                              // (link_fd); otherwise poll only
    // Interrupt moderation (EITR, 8.8.12): at most one RX interrupt per queue every this many microseconds
    // (0: every completion may interrupt; up to 8191). Frames that land in between wait for the next one,
    // as the kernel's igb moderates (its default is about 160 us).
    std::uint32_t interrupt_interval_us = 0;
    int link_timeout_ms = 5000;  // how long init waits for link up before it throws
    // Longest frame sent or accepted, without CRC: 1514 (1500-byte MTU) up to 9728 - 4 (the 82576's
    // 9.5 KB); above 1514 the device accepts long packets (RCTL.LPE, RLPML). Every frame lands in one
    // buffer (one Packet): the pool's buffers must hold max_frame in whole KiB (e.g. 9216 for 9014).
    std::uint32_t max_frame = 1514;
    // RX offloads: IPv4/TCP/UDP checksums checked by the device and reported in Packet::flags (pkt::RX_*;
    // a bad checksum is reported, the frame still delivered); VLAN tags stripped into Packet::vlan.
    // TX offloads need no option: they are asked per frame (pkt::TX_*).
    bool rx_checksum = true;
    bool vlan_strip = false;
    // The station address in RAL0/RAH0 instead of the one loaded from the EEPROM.
    std::optional<MacAddress> mac;
    // The rings are driven from outside nic::Igb (a DMA engine such as nic::LoopbackQueue) through
    // queue_pair(): they start empty, no pool is needed, rx_burst/tx_burst must not be used. With it:
    std::uint32_t rx_buffer_bytes = 0;  // SRRCTL.BSIZEPACKET (a multiple of 1 KiB up to 127 KiB)
    std::uint32_t rx_header_bytes = 0;  // > 0: header split, always into a header buffer of this size
                                        // (a multiple of 64 up to 960; SRRCTL.DESCTYPE 101b)
    bool external_queues = false;
};
// Taking over: the constructor checks the device (vendor/device ID, BAR 0), enables bus mastering,
// resets it, brings the link up (throws after link_timeout_ms), reads the MAC address, sets up the
// rings (descriptor memory from dma::Memory, mapped through `iovas` into the device's domain), fills
// every RX ring with buffers from `rx_pool` (or its queue's pool of `rx_pools`) and enables RX and TX. Errors are
// bardrive::Error naming the device and the step. Data path (never throws or allocates; one thread per queue, and one
// thread for all queues whose buffers share a dma::BufferPool, which is not thread-safe):
// - rx_burst(q, out): up to out.size() frames; refills the ring from the pool; one RDT write per call.
//   The frames' buffers belong to the caller until it gives them back (release(), or tx_burst).
// - tx_burst(q, pkts): queues frames in order, one TDT write per call; returns how many it took (the
//   rest stay the caller's). Frames the device has finished with go back to their Packet::pool.
// - wait_rx(q, ms): interrupt mode; true when RX queue q has (or may have) work.
// Destruction stops the device (reset) before its rings and buffers go, and returns every buffer.
// Move-only is not offered: the rings point into this object; keep it in place or in a unique_ptr.
class Igb {
public:
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const IgbOptions& options = {});
    // One pool per RX queue (rx_pools.size() == options.rx_queues; a single pool is shared by all): a
    // thread per queue then refills and releases without a lock (RSS with a thread per queue).
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools,
        const IgbOptions& options);
    // For options.external_queues: no receive pool.
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, const IgbOptions& options);
    ~Igb();
    Igb(const Igb&) = delete;
    Igb& operator=(const Igb&) = delete;

    std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept;
    std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept;
    // Returns finished TX buffers to their pools without sending; how many it freed.
    std::uint32_t tx_reclaim(std::uint16_t queue) noexcept;
    std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept;
    std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept;
    bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept;
    static void release(const Packet& p) noexcept;  // gives a received frame's buffer back to its pool

    // Whether nic::Igb takes a device with these IDs (the 82576 family).
    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;

    const IgbOptions& options() const noexcept { return options_; }
    MacAddress mac() const noexcept { return mac_; }
    bool link_up() const noexcept;
    unsigned link_speed_mbps() const noexcept;
    // A link change since the last call (init leaves the link up): polls STATUS.LU and the speed. With
    // interrupts it also re-arms the link vector, whose eventfd link_fd() gives (-1 without interrupts).
    std::optional<LinkEvent> poll_link() noexcept;
    int link_fd() const noexcept;
    std::uint64_t link_changes() const noexcept { return link_watch_.changes; }
    void set_promiscuous(bool on) noexcept;
    void add_multicast(const MacAddress& group) noexcept;  // set its bit in the multicast table

    std::uint16_t rx_queues() const noexcept { return static_cast<std::uint16_t>(rx_.size()); }
    std::uint16_t tx_queues() const noexcept { return static_cast<std::uint16_t>(tx_.size()); }
    QueueStats rx_stats(std::uint16_t queue) const noexcept;
    QueueStats tx_stats(std::uint16_t queue) const noexcept;
    const DeviceStats& device_stats() noexcept;  // reads the device's counters, adds them up, returns totals

    // Register access for diagnostics and lab tests (forcing a register to see the driver cope).
    const vfio::Mmio& registers() const noexcept { return bar0_; }
    const vfio::Device& device() const noexcept { return *dev_; }
    // The descriptor ring of a queue, as the device sees it (lab tests poison it on purpose).
    std::span<igb::AdvRxDesc> rx_descriptors(std::uint16_t queue) const noexcept;
    std::uint32_t rx_next_to_clean(std::uint16_t queue) const noexcept;
    // The word TX queue `queue`'s head is written back to (lab tests make the device lie through it).
    std::uint32_t* tx_head_writeback(std::uint16_t queue) const noexcept;

    // One queue pair's raw pieces for a driver outside this class (options.external_queues), with
    // rx_ring + tx_ring header slots of rx_header_bytes (64 when 0) each.
    // Throws bardrive::Error unless the port was opened with external_queues and `queue` exists.
    QueuePair queue_pair(std::uint16_t queue) const;

private:
    struct RxQueue {
        RxRing ring;
        dma::BufferPool* pool;
        std::uint32_t refill_at;  // free descriptors that make rx_burst refill
        std::uint32_t last_tail = 0;
        std::uint64_t doorbells = 0;
        std::uint64_t no_buffers = 0;
        igb::AdvRxDesc* descs;
    };
    struct TxQueue {
        TxRing ring;
        std::uint32_t* head_wb;
        std::uint32_t last_tail = 0;
        std::uint64_t doorbells = 0;
        igb::AdvTxDesc* descs;
    };

    void check_identity() const;
    void check_options(const IgbOptions& o, std::span<dma::BufferPool* const> rx_pools) const;
    void init(const IgbOptions& o, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools);
    void setup_rx(const IgbOptions& o, std::span<dma::BufferPool* const> pools);
    void setup_tx(const IgbOptions& o);
    void setup_interrupts(const IgbOptions& o);
    void refill(RxQueue& q) noexcept;
    void stop() noexcept;

    vfio::Device* dev_;
    vfio::Mmio bar0_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;     // after ring_memory_: leaves the IOMMU first
    std::byte* headers_ = nullptr;  // external queues: header slots inside ring_memory_
    std::vector<RxQueue> rx_;
    std::vector<TxQueue> tx_;
    IgbOptions options_;
    MacAddress mac_;
    bool interrupts_ = false;
    DeviceStats device_stats_;
    e1000x::LinkWatch link_watch_;
};

}  // namespace bardrive::nic
