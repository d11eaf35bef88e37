// nic::E1000e: a userspace driver for the Intel 82574L (QEMU's e1000e model): one RX and one TX queue,
// extended descriptors, polling or MSI-X. Ring logic, link, MAC and statistics are shared with nic::Igb.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

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

// The port (PortOptions: one RX and one TX queue, standard frames, MAC and PHY loopback, MSI-X or
// polling; no checksum or VLAN offloads) or, opened with EngineOptions, a loopback DMA engine on its one
// queue pair (packet split descriptors keep the header out of the data). Same contract as every
// nic::Port (port.hpp). TX completions come from each descriptor's DD bit (the 82574 has no head
// write-back). Destruction resets the device before the rings go.
class E1000e final : public Port, public LoopbackEngine {
public:
    // What set-up works from: the options, and for an engine its data buffer size.
    struct Config {
        PortOptions port;
        bool engine = false;
        std::uint32_t rx_buffer_bytes = 0;  // engine: packet split data buffer (PSRCTL.BSIZE1, whole KiB)
        std::uint32_t payload = 0;          // engine: data bytes per frame
    };

    E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const PortOptions& options = {});
    // A loopback DMA engine (one queue): no receive pool.
    E1000e(vfio::Device& device, dma::IovaAllocator& iovas, const EngineOptions& options);
    ~E1000e() override;

    // nic::Port; the one queue is 0 (other queue numbers take and give nothing).
    std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept override;
    std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept override;
    std::uint32_t tx_reclaim(std::uint16_t queue) noexcept override;
    std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept override;
    std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept override;
    // Interrupt mode: unmasks the RX cause, then waits (a frame that landed meanwhile fires at once).
    bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept override;
    int rx_fd(std::uint16_t queue) const noexcept override;
    const char* driver() const noexcept override { return "e1000e"; }
    std::uint16_t rx_queues() const noexcept override { return 1; }
    std::uint16_t tx_queues() const noexcept override { return 1; }
    std::uint32_t features() const noexcept override;

    MacAddress mac() const noexcept override { return mac_; }
    bool link_up() const noexcept override { return e1000::link_up(bar0_); }
    unsigned link_speed_mbps() const noexcept override { return e1000::link_speed_mbps(bar0_); }
    std::optional<LinkEvent> poll_link() noexcept override;
    int link_fd() const noexcept override { return interrupts_ ? dev_->irq_fd(1) : -1; }
    std::uint64_t link_changes() const noexcept override { return link_watch_.changes; }
    void set_promiscuous(bool on) noexcept override;
    void add_multicast(const MacAddress& group) noexcept override;
    QueueStats rx_stats(std::uint16_t queue) const noexcept override;
    QueueStats tx_stats(std::uint16_t queue) const noexcept override;
    const DeviceStats& device_stats() noexcept override;
    const RxRingCounters& rx_counters() const noexcept { return rx_.counters(); }
    const TxRingCounters& tx_counters() const noexcept { return tx_.counters(); }

    // nic::LoopbackEngine (opened with EngineOptions; engine_queue() throws otherwise).
    EngineLimits engine_limits() const noexcept override;
    std::uint16_t engine_queues() const noexcept override { return engine_ ? 1 : 0; }
    LoopbackQueue engine_queue(std::uint16_t queue) const override;
    void arm_msi() override;
    void send_msi() noexcept override;

    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;  // the 82574L
    static std::unique_ptr<Port> open(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options);
    static std::unique_ptr<LoopbackEngine> open_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                       const EngineOptions& options);

    const PortOptions& options() const noexcept { return options_; }
    const vfio::Device& device() const noexcept override { return *dev_; }
    const vfio::Mmio& registers() const noexcept { return bar0_; }
    // The queue pair's raw pieces (an engine port), with rx_ring + tx_ring header slots of 128 bytes.
    // Throws bardrive::Error unless the port is an engine.
    QueuePair queue_pair() const;

private:
    E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool* rx_pool, const Config& c);
    // What the constructor ends with: the identity check, then init(), stopping the port if it throws.
    void start(const vfio::Device& device, const Config& c);
    void init(const Config& c);
    void setup_interrupts();
    void refill() noexcept;
    [[gnu::noinline]] std::uint16_t receive(std::span<Packet> out) noexcept;
    [[gnu::noinline, gnu::cold]] void refill_and_ring() noexcept;
    void stop() noexcept;

    vfio::Device* dev_;
    dma::BufferPool* pool_;
    vfio::Mmio bar0_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;
    RxRing rx_;
    TxRing tx_;
    e1000::Doorbell rx_doorbell_, tx_doorbell_;  // RDT, TDT
    std::uint64_t no_buffers_ = 0;
    MacAddress mac_;
    DeviceStats device_stats_;
    PortOptions options_;
    bool engine_ = false;
    std::uint32_t payload_ = 0;
    e1000::LinkWatch link_watch_;
    bool interrupts_ = false;
};

}  // namespace bardrive::nic
