// nic::E1000e: a userspace driver for the Intel 82574L (QEMU's e1000e model): one RX and one TX queue,
// extended descriptors, polling or MSI-X. Ring logic, link, MAC and statistics are shared with nic::Igb.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

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

struct E1000eOptions {
    std::uint32_t rx_ring = 256;  // descriptors: a power of two from 8 to 32768
    std::uint32_t tx_ring = 256;
    bool promiscuous = false;
    bool broadcast = true;  // accept broadcast frames (RCTL.BAM)
    Loopback loopback = Loopback::none;
    // MSI-X: RX queue 0 raises vector 0 (wait_rx), link changes vector 1 (link_fd); otherwise poll only.
    bool interrupts = false;
    int link_timeout_ms = 5000;
    // Longest frame, without CRC: 1514 up to 9014 (the 82574's 9018-byte jumbo frames); above 1514 the
    // device accepts long packets (RCTL.LPE). The driver's own rings take standard frames only.
    std::uint32_t max_frame = 1514;
    std::optional<MacAddress> mac;  // the station address instead of the EEPROM's
    // The rings are driven from outside (a DMA engine such as nic::LoopbackQueue) through queue_pair():
    // packet split receive descriptors with a header buffer of rx_header_bytes (128 to 16256 in steps of
    // 128, PSRCTL.BSIZE0) and a data buffer of rx_buffer_bytes (1 to 63 KiB in whole KiB, BSIZE1); the
    // rings start empty and no pool is used.
    std::uint32_t rx_buffer_bytes = 0;
    std::uint32_t rx_header_bytes = 0;
    bool external_queues = false;
};

// Same contract as nic::Igb (see igb.hpp): the constructor takes the device over and throws
// bardrive::Error naming the step that failed; rx_burst/tx_burst never throw or allocate, ring one
// doorbell per call, recycle buffers through their pools. TX completions come from each descriptor's
// DD bit (the 82574 has no head write-back). Destruction resets the device before the rings go.
class E1000e {
public:
    E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool,
           const E1000eOptions& options = {});
    // For options.external_queues: no receive pool.
    E1000e(vfio::Device& device, dma::IovaAllocator& iovas, const E1000eOptions& options);
    ~E1000e();
    E1000e(const E1000e&) = delete;
    E1000e& operator=(const E1000e&) = delete;

    std::uint16_t rx_burst(std::span<Packet> out) noexcept;
    std::uint16_t tx_burst(std::span<const Packet> pkts) noexcept;
    std::uint32_t tx_reclaim() noexcept;
    // Interrupt mode: true when the RX queue has (or may have) work, false after timeout_ms without.
    // Without interrupts: whether a frame is there now. Never throws.
    bool wait_rx(int timeout_ms) noexcept;

    MacAddress mac() const noexcept { return mac_; }
    bool link_up() const noexcept { return e1000x::link_up(bar0_); }
    unsigned link_speed_mbps() const noexcept { return e1000x::link_speed_mbps(bar0_); }
    // A link change since the last call (init leaves the link up): polls STATUS.LU and the speed. With
    // interrupts it also re-arms the link vector, whose eventfd link_fd() gives (-1 without interrupts).
    std::optional<LinkEvent> poll_link() noexcept;
    int link_fd() const noexcept { return interrupts_ ? dev_->irq_fd(1) : -1; }
    std::uint64_t link_changes() const noexcept { return link_watch_.changes; }
    const RxRingCounters& rx_counters() const noexcept { return rx_.counters(); }
    const TxRingCounters& tx_counters() const noexcept { return tx_.counters(); }
    // The ring counters as nic::Igb reports its queues' (doorbells and pool misses are not counted here).
    QueueStats rx_stats() const noexcept;
    QueueStats tx_stats() const noexcept;
    const DeviceStats& device_stats() noexcept;

    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;  // the 82574L

    const E1000eOptions& options() const noexcept { return options_; }
    const vfio::Device& device() const noexcept { return *dev_; }
    const vfio::Mmio& registers() const noexcept { return bar0_; }
    // The queue pair's raw pieces (options.external_queues), with rx_ring + tx_ring header slots of
    // rx_header_bytes each. Throws bardrive::Error unless the port was opened with external_queues.
    QueuePair queue_pair() const;

private:
    // What both constructors end with: the identity check, then init(), stopping the port if it throws.
    void start(const vfio::Device& device, const E1000eOptions& o);
    void init(const E1000eOptions& o);
    void setup_interrupts();
    void refill() noexcept;
    void stop() noexcept;

    vfio::Device* dev_;
    dma::BufferPool* pool_;
    vfio::Mmio bar0_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;
    RxRing rx_;
    TxRing tx_;
    std::uint32_t rx_tail_ = 0, tx_tail_ = 0;
    MacAddress mac_;
    DeviceStats device_stats_;
    E1000eOptions options_;
    e1000x::LinkWatch link_watch_;
    bool interrupts_ = false;
};

}  // namespace bardrive::nic
