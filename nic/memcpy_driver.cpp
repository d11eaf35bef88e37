#include "nic/memcpy_driver.hpp"

#include <cstdio>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000e.hpp"
#include "nic/e1000e_regs.hpp"
#include "nic/igb.hpp"
#include "nic/igb_regs.hpp"
#include "nic/loopback_copy.hpp"

namespace bardrive::nic {

namespace {

// Rings of 1024: 32 copies of 8 frames need 256 RX and 512 TX descriptors (header + data per frame).
constexpr std::uint32_t kRing = 1024;
constexpr std::size_t kMaxSize = 8 * loopback_default_payload;

// nic::LoopbackQueue over one port, igb or e1000e; the two differ in how the port opens and how an
// MSI-X is raised.
class LoopbackMemcpy final : public MemcpyDriver {
public:
    enum class Model { igb, e1000e };

    LoopbackMemcpy(Model model, vfio::Device& device, dma::IovaAllocator& iovas)
        : model_(model), dev_(&device), iovas_(&iovas) {
        limits_.min_size = LoopbackQueue::min_data;
        limits_.max_size = kMaxSize;
        limits_.dst_alignment = model == Model::e1000e ? 2 : 1;
        limits_.max_in_flight = LoopbackQueue::max_copies;
        limits_.max_msis_per_send = model == Model::e1000e ? 2 : 1;  // QEMU's e1000e: 1 or 2 (header)
    }
    ~LoopbackMemcpy() override { remove(); }

    const char* name() const noexcept override { return model_ == Model::igb ? "igb" : "e1000e"; }
    bool initialized() const noexcept override { return q_.has_value(); }

    void init() override {
        remove();
        try {
            if (model_ == Model::igb) {
                igb_ = std::make_unique<Igb>(*dev_, *iovas_, loopback_port_options(1, kRing));
                q_ = make_loopback_queue(*igb_, 0);
            } else {
                e1000e_ = std::make_unique<E1000e>(*dev_, *iovas_, loopback_e1000e_options(kRing));
                q_ = make_loopback_queue(*e1000e_);
            }
            arm_msi();
        } catch (...) {
            remove();
            throw;
        }
    }

    void remove() noexcept override {
        q_.reset();
        igb_.reset();  // resets the device: no DMA after this
        e1000e_.reset();
        dev_->disable_irqs();
    }

    bool memcpy_start(std::uint64_t dst, std::uint64_t src, std::size_t size) noexcept override {
        if (!q_ || size > limits_.max_size || dst % limits_.dst_alignment != 0) return false;
        return q_->start(dst, src, size);  // refuses below min_size, a broken queue, a full FIFO
    }

    bool memcpy_wait(int timeout_ms) noexcept override {
        return q_ && q_->wait(static_cast<std::uint64_t>(timeout_ms < 0 ? 0 : timeout_ms) * 1000000);
    }

    const char* failure() const noexcept override {
        if (!q_ || q_->status == LoopbackQueue::Status::ok) return "";
        switch (q_->failed_check) {
            case LoopbackQueue::check_status:
                return "a frame came back without EOP or with an error bit";
            case LoopbackQueue::check_length:
                return "a frame came back with another data length than sent";
            case LoopbackQueue::check_split:
                return "a frame came back with its header not split off";
            case LoopbackQueue::check_header:
                return "a frame came back that this engine did not send next";
            case LoopbackQueue::check_head:
                return "the device reported a TX head outside what was queued";
            case LoopbackQueue::check_timeout:
                return "copies did not land in time: the device stopped answering or lost bus mastering";
            default:
                return "the engine was stopped";
        }
    }

    void send_msi() noexcept override {
        if (!q_) return;
        const vfio::Mmio& r = registers();
        if (model_ == Model::igb) {
            r.write32(igb::EICS, 1);  // vector 0's cause; EIAC clears it once the message is sent
        } else {
            // Sending cleared the cause and masked it (EIAC): unmask it again, then set it.
            r.write32(igb::IMS, e1000e::ICR_TXQ1);
            r.write32(igb::ICS, e1000e::ICR_TXQ1);
        }
    }

    int msi_fd() const noexcept override { return dev_->irq_fd(0); }

private:
    const vfio::Mmio& registers() const noexcept { return igb_ ? igb_->registers() : e1000e_->registers(); }

    // One MSI-X vector whose only cause is one that send_msi() sets and no copy raises.
    void arm_msi() {
        dev_->enable_irqs(vfio::IrqType::msix, 1);
        const vfio::Mmio& r = registers();
        if (model_ == Model::igb) {
            // 82576 8.8.15: one EICR bit per vector; the RX queue's IVAR entry stays invalid.
            r.write32(igb::GPIE, igb::gpie::MSIX_MODE | igb::gpie::PBA);
            r.write32(igb::EIAC, 1);
            r.write32(igb::EIMS, 1);
        } else {
            // 82574 10.2.4.9: only TX queue 1 (never used here) has a valid IVAR entry, to vector 0.
            // EIAC: the cause clears once its message is sent; a cause left pending would be sent
            // again with every other interrupt event (seen with QEMU's model: copies fired it).
            r.write32(e1000e::IVAR, (e1000e::IVAR_ENTRY_VALID | 0u) << e1000e::IVAR_TXQ1_SHIFT);
            r.write32(e1000e::EIAC, e1000e::ICR_TXQ1);
            r.write32(igb::ICR, ~0u);  // causes left from reset and link-up: pending ones get re-sent
            r.write32(igb::IMS, e1000e::ICR_TXQ1);
        }
        dev_->wait_irq(0, 0);  // nothing may be counted before the first send_msi()
    }

    Model model_;
    vfio::Device* dev_;
    dma::IovaAllocator* iovas_;
    std::unique_ptr<Igb> igb_;
    std::unique_ptr<E1000e> e1000e_;
    std::optional<LoopbackQueue> q_;
};

// QEMU's ivshmem-doorbell (1af4:1110 with MSI-X; ivshmem-spec.rst): no DMA engine at all, so it copies
// nothing (limits of 0: every memcpy_start() is refused); send_msi() rings its own doorbell, which the
// ivshmem server's eventfd for this peer turns into MSI-X vector 0. ivshmem-plain, the same ID without
// MSI-X or doorbell, is refused at probe.
class DoorbellMsi final : public MemcpyDriver {
public:
    static constexpr std::uint32_t kIvPosition = 8, kDoorbell = 12;  // BAR0 registers

    explicit DoorbellMsi(vfio::Device& device) : dev_(&device) { limits_.max_msis_per_send = 1; }
    ~DoorbellMsi() override { remove(); }

    const char* name() const noexcept override { return "ivshmem-doorbell"; }
    bool initialized() const noexcept override { return bar0_.has_value(); }

    void init() override {
        remove();
        bar0_.emplace(dev_->map_bar(0));
        bar0_->require(0, 16);
        dev_->enable_bus_master();  // MSI-X messages are writes by the device
        dev_->enable_irqs(vfio::IrqType::msix, 1);
        peer_ = bar0_->read32(kIvPosition);
        dev_->wait_irq(0, 0);
    }
    void remove() noexcept override {
        if (!bar0_) return;
        dev_->disable_irqs();
        bar0_.reset();
    }
    bool memcpy_start(std::uint64_t, std::uint64_t, std::size_t) noexcept override { return false; }
    bool memcpy_wait(int) noexcept override { return true; }  // nothing is ever in flight
    const char* failure() const noexcept override { return ""; }
    void send_msi() noexcept override {
        if (bar0_) bar0_->write32(kDoorbell, (peer_ & 0xffff) << 16 | 0u);  // this peer, vector 0
    }
    int msi_fd() const noexcept override { return dev_->irq_fd(0); }

private:
    vfio::Device* dev_;
    std::optional<vfio::Mmio> bar0_;
    std::uint32_t peer_ = 0;
};

}  // namespace

std::unique_ptr<MemcpyDriver> probe_memcpy_driver(vfio::Device& device, dma::IovaAllocator& iovas) {
    std::uint16_t vendor = device.config_read16(0x00), id = device.config_read16(0x02);
    if (Igb::drives(vendor, id)) return std::make_unique<LoopbackMemcpy>(LoopbackMemcpy::Model::igb, device, iovas);
    if (E1000e::drives(vendor, id))
        return std::make_unique<LoopbackMemcpy>(LoopbackMemcpy::Model::e1000e, device, iovas);
    char ids[16];
    if (vendor == 0x1af4 && id == 0x1110) {
        if (device.irq_info(vfio::IrqType::msix).count > 0) return std::make_unique<DoorbellMsi>(device);
        throw Error("probe memcpy driver", device.bdf().str(),
                    "this ivshmem device has no MSI-X: it is ivshmem-plain, which has no doorbell",
                    "use ivshmem-doorbell (lab/lab run --doorbell)");
    }
    std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, id);
    throw Error("probe memcpy driver", device.bdf().str(), log::concat("no memcpy driver for device ", ids),
                "nic::MemcpyDriver has igb (82576), e1000e (82574L) and ivshmem-doorbell (send_msi only) "
                "implementations");
}

}  // namespace bardrive::nic
