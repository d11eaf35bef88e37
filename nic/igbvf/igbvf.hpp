// nic::Igbvf: a userspace driver for the Intel 82576's SR-IOV virtual function (8086:10ca; QEMU's igb
// model emulates it), while the kernel's igb keeps the physical function and the port. What a VF may do
// the PF decides, over the mailbox: its MAC address, multicast and VLAN filters, the longest frame.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../../dma/buffer_pool.hpp"
#include "../../dma/iova_allocator.hpp"
#include "../../dma/mapping.hpp"
#include "../../dma/memory.hpp"
#include "../../vfio/device.hpp"
#include "../../vfio/mmio.hpp"
#include "../e1000/common.hpp"
#include "../e1000/ring.hpp"
#include "../port.hpp"
#include "regs.hpp"

namespace bardrive::nic {

// A request the PF did not take or answer in time (VfMailbox::call).
struct MailboxTimeout : Error {
    using Error::Error;
};

// The VF's side of the mailbox (82576 7.8.2.9): one request at a time, each answered by the PF with the
// request's type and ACK or NACK. Every wait is bounded; a PF that does not answer is an error naming the
// request, never a hang.
class VfMailbox {
public:
    VfMailbox(const vfio::Mmio& regs, std::string who) : regs_(&regs), who_(std::move(who)) {}

    // Sends `request` and returns the PF's answer (its words, as many as `reply` holds). Throws
    // MailboxTimeout when the PF does not take or answer it within timeout_ms.
    void call(std::span<const std::uint32_t> request, std::span<std::uint32_t> reply, int timeout_ms = 1000);
    // Whether the PF has reset (or is resetting) since the last call: the VF must be set up again.
    bool pf_reset() noexcept;
    // Waits until the PF is not resetting (RSTI clear), and takes the PF's reset-done mark (RSTD, set once
    // per PF reset); false after timeout_ms. After a VF's own reset the PF's answer to RESET says the rest.
    bool wait_reset_done(int timeout_ms) noexcept;

private:
    std::uint32_t read_control() noexcept;  // V2PMAILBOX, keeping its read-to-clear bits
    bool take(std::uint32_t bit) noexcept;  // a read-to-clear bit seen since the last take
    bool lock() noexcept;

    const vfio::Mmio* regs_;
    std::string who_;
    std::uint32_t seen_ = 0;  // read-to-clear bits read but not yet taken
};

// The options every port takes; the VF has one queue pair here (the 82576 gives a VF two, and no RSS
// to spread flows over them), no loopback (the PF's switch loops VF-to-VF traffic back itself), no
// promiscuous mode (the PF grants a VF none), and sets max_frame through the PF (SET_LPE).
// Contract as every nic::Port (port.hpp). Set-up: identity check, VF reset (the PF not resetting), the RESET
// message (the PF answers with the MAC it assigned, or NACK when it assigned none: then PortOptions::mac,
// else a random locally administered one, is asked for), the longest frame, the rings, MSI-X.
// TX completions come from each descriptor's DD bit.
class Igbvf final : public Port {
public:
    Igbvf(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const PortOptions& options = {});
    ~Igbvf() override;

    std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept override;
    std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept override;
    std::uint32_t tx_reclaim(std::uint16_t queue) noexcept override;
    std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept override;
    std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept override;
    bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept override;
    int rx_fd(std::uint16_t queue) const noexcept override;
    const char* driver() const noexcept override { return "igbvf"; }
    const vfio::Device& device() const noexcept override { return *dev_; }
    std::uint16_t rx_queues() const noexcept override { return 1; }
    std::uint16_t tx_queues() const noexcept override { return 1; }
    std::uint32_t features() const noexcept override;
    MacAddress mac() const noexcept override { return mac_; }

    bool link_up() const noexcept override { return e1000::link_up(bar0_) && !pf_reset_; }
    unsigned link_speed_mbps() const noexcept override { return link_up() ? e1000::link_speed_mbps(bar0_) : 0; }
    // STATUS.LU (the PF's link) and the mailbox: a PF reset reads as link down until reset() ran again.
    std::optional<LinkEvent> poll_link() noexcept override;
    int link_fd() const noexcept override { return interrupts_ ? dev_->irq_fd(1) : -1; }
    std::uint64_t link_changes() const noexcept override { return link_watch_.changes; }
    // Whether the PF reset the VF (its rings are gone): call reset() to take the VF up again.
    bool needs_reset() noexcept;
    // Sets the VF up again after a PF reset: received frames already handed out stay the caller's;
    // frames queued for TX and not yet sent are given back to their pools (counted as not sent).
    void reset();

    // Promiscuous: refused (throws), the PF gives a VF none. Multicast and VLAN filters: asked of the PF;
    // a NACK throws naming what the PF refused.
    void set_promiscuous(bool on) override;
    void add_multicast(const MacAddress& group) override;
    void add_vlan(std::uint16_t vlan_id);

    QueueStats rx_stats(std::uint16_t queue) const noexcept override;
    QueueStats tx_stats(std::uint16_t queue) const noexcept override;
    // The VF's own running counters (good packets and octets both ways, multicast received).
    const DeviceStats& device_stats() noexcept override;

    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;
    static std::unique_ptr<Port> open(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options);
    const vfio::Mmio& registers() const noexcept { return bar0_; }

private:
    void check_options(const PortOptions& o) const;
    void init();
    void reset_vf();
    void ask_pf_after_reset();
    void setup_rings();
    void setup_interrupts();
    void refill() noexcept;
    [[gnu::noinline]] std::uint16_t receive(std::span<Packet> out) noexcept;
    [[gnu::noinline, gnu::cold]] void refill_and_ring() noexcept;
    void stop() noexcept;

    vfio::Device* dev_;
    dma::BufferPool* pool_;
    PortOptions options_;
    std::string who_;
    vfio::Mmio bar0_;
    VfMailbox mailbox_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;
    std::optional<RxRing> rx_;
    std::optional<TxRing> tx_;
    e1000::Doorbell rx_doorbell_, tx_doorbell_;  // RDT, TDT
    std::uint64_t no_buffers_ = 0;
    std::vector<std::uint16_t> multicast_;  // the hashes asked for so far (the PF takes the whole list each time)
    MacAddress mac_;
    bool interrupts_ = false;
    bool pf_reset_ = false;
    e1000::LinkWatch link_watch_;
    DeviceStats device_stats_;
    struct Counters {
        std::uint32_t gprc = 0, gptc = 0, gorc = 0, gotc = 0, mprc = 0;
    } last_;  // the running counters' values at the last device_stats()
};

}  // namespace bardrive::nic
