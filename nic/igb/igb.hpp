// nic::Igb: a userspace driver for the Intel 82576 (QEMU's igb model; real 82576 where the registers match).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "../../dma/buffer_pool.hpp"
#include "../../dma/iova_allocator.hpp"
#include "../../dma/mapping.hpp"
#include "../../dma/memory.hpp"
#include "../../vfio/device.hpp"
#include "../../vfio/mmio.hpp"
#include "../e1000/common.hpp"
#include "../e1000/queue_pair.hpp"
#include "../e1000/ring.hpp"
#include "../loopback_engine.hpp"
#include "../mac_address.hpp"
#include "../packet.hpp"
#include "../port.hpp"
#include "regs.hpp"

namespace bardrive::nic {

// The 82576's options: the ones every port takes, and interrupt moderation.
struct IgbOptions : PortOptions {
    // Interrupt moderation (EITR, 8.8.12): at most one RX interrupt per queue every this many microseconds
    // (0: every completion may interrupt; up to 8191). Frames that land in between wait for the next one,
    // as the kernel's igb moderates (its default is about 160 us).
    std::uint32_t interrupt_interval_us = 0;
};

// The port (PortOptions: 1-8 RX queues spread by RSS, 1-8 TX queues, rings of 8-32768, frames up to
// 9724 bytes, MAC and PHY loopback) or, opened with EngineOptions, a loopback DMA engine whose queue
// pairs nic::LoopbackQueue drives (header split, external rings; rx_burst/tx_burst then take nothing).
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
class Igb final : public Port, public LoopbackEngine {
public:
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const IgbOptions& options = {});
    // One pool per RX queue (rx_pools.size() == options.rx_queues; a single pool is shared by all): a
    // thread per queue then refills and releases without a lock (RSS with a thread per queue).
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools,
        const IgbOptions& options);
    // A loopback DMA engine (LoopbackEngine): MAC loopback, header split, no receive pool.
    Igb(vfio::Device& device, dma::IovaAllocator& iovas, const EngineOptions& options);
    ~Igb();
    Igb(const Igb&) = delete;
    Igb& operator=(const Igb&) = delete;

    // nic::Port (port.hpp says what each guarantees).
    std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept override;
    std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept override;
    std::uint32_t tx_reclaim(std::uint16_t queue) noexcept override;
    std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept override;
    std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept override;
    bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept override;
    int rx_fd(std::uint16_t queue) const noexcept override;
    const char* driver() const noexcept override { return "igb"; }
    std::uint32_t features() const noexcept override;

    // Whether nic::Igb takes a device with these IDs (the 82576 family).
    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;

    const IgbOptions& options() const noexcept { return options_; }
    MacAddress mac() const noexcept override { return mac_; }
    bool link_up() const noexcept override;
    unsigned link_speed_mbps() const noexcept override;
    // Polls STATUS.LU and the speed; with interrupts ICR.LSC raises the vector after the RX ones.
    std::optional<LinkEvent> poll_link() noexcept override;
    int link_fd() const noexcept override;
    std::uint64_t link_changes() const noexcept override { return link_watch_.changes; }
    void set_promiscuous(bool on) noexcept override;
    void add_multicast(const MacAddress& group) noexcept override;  // set its bit in the multicast table

    std::uint16_t rx_queues() const noexcept override { return static_cast<std::uint16_t>(rx_.size()); }
    std::uint16_t tx_queues() const noexcept override { return static_cast<std::uint16_t>(tx_.size()); }
    QueueStats rx_stats(std::uint16_t queue) const noexcept override;
    QueueStats tx_stats(std::uint16_t queue) const noexcept override;
    const DeviceStats& device_stats() noexcept override;

    // nic::LoopbackEngine (opened with EngineOptions; engine_queue() throws otherwise).
    EngineLimits engine_limits() const noexcept override;
    std::uint16_t engine_queues() const noexcept override { return engine_ ? rx_queues() : 0; }
    LoopbackQueue engine_queue(std::uint16_t queue) const override;
    void arm_msi() override;
    void send_msi() noexcept override;
    static std::unique_ptr<Port> open(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options);
    static std::unique_ptr<LoopbackEngine> open_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                       const EngineOptions& options);

    // Register access for diagnostics and lab tests (forcing a register to see the driver cope).
    const vfio::Mmio& registers() const noexcept { return bar0_; }
    const vfio::Device& device() const noexcept override { return *dev_; }
    // The descriptor ring of a queue, as the device sees it (lab tests poison it on purpose).
    std::span<igb::AdvRxDesc> rx_descriptors(std::uint16_t queue) const noexcept;
    std::uint32_t rx_next_to_clean(std::uint16_t queue) const noexcept;
    // The word TX queue `queue`'s head is written back to (lab tests make the device lie through it).
    std::uint32_t* tx_head_writeback(std::uint16_t queue) const noexcept;

    // One queue pair's raw pieces for a driver outside this class (an engine port), with rx_ring +
    // tx_ring header slots each. Throws bardrive::Error unless the port is an engine and `queue` exists.
    QueuePair queue_pair(std::uint16_t queue) const;

private:
    struct RxQueue {
        RxRing ring;
        dma::BufferPool* pool;
        std::uint32_t refill_at;   // free descriptors that make rx_burst refill
        e1000::Doorbell doorbell;  // RDT
        std::uint64_t no_buffers = 0;
        igb::AdvRxDesc* descs;
    };
    struct TxQueue {
        TxRing ring;
        std::uint32_t* head_wb;
        e1000::Doorbell doorbell;  // TDT
        igb::AdvTxDesc* descs;
    };

    // What set-up works from: the options, and for an engine its rings' buffer and header sizes.
    struct Config {
        IgbOptions port;
        bool engine = false;
        std::uint32_t rx_buffer_bytes = 0;  // SRRCTL.BSIZEPACKET (whole KiB up to 127 KiB)
        std::uint32_t rx_header_bytes = 0;  // header split into buffers of this size (multiple of 64 up to 960)
        std::uint32_t payload = 0;          // engine: data bytes per frame
    };
    void start(const Config& c, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools);
    void check_identity() const;
    void check_options(const Config& c, std::span<dma::BufferPool* const> rx_pools) const;
    void init(const Config& c, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools);
    void setup_rx(const Config& c, std::span<dma::BufferPool* const> pools);
    void setup_tx(const Config& c);
    void setup_interrupts(const IgbOptions& o);
    void refill(RxQueue& q) noexcept;
    [[gnu::noinline]] std::uint16_t receive(RxQueue& q, std::span<Packet> out) noexcept;
    [[gnu::noinline, gnu::cold]] void refill_and_ring(RxQueue& q) noexcept;
    void stop() noexcept;

    vfio::Device* dev_;
    vfio::Mmio bar0_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;     // after ring_memory_: leaves the IOMMU first
    std::byte* headers_ = nullptr;  // external queues: header slots inside ring_memory_
    std::vector<RxQueue> rx_;
    std::vector<TxQueue> tx_;
    // The data path's view of rx_ and tx_, set once set-up is done: a span keeps the count, so checking
    // a queue index is one compare (std::vector's size() divides by the element's size).
    std::span<RxQueue> rx_live_;
    std::span<TxQueue> tx_live_;
    IgbOptions options_;
    bool engine_ = false;
    std::uint32_t header_slot_ = 64;  // engine: bytes per header slot
    std::uint32_t payload_ = 0;       // engine: data bytes per frame
    MacAddress mac_;
    bool interrupts_ = false;
    DeviceStats device_stats_;
    e1000::LinkWatch link_watch_;
};

}  // namespace bardrive::nic
