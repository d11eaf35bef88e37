#include "nic/memcpy_driver.hpp"

#include <cstdio>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/drivers.hpp"

namespace bardrive::nic {

namespace {

// Rings of 1024: 32 copies of 8 frames need 256 RX and 512 TX descriptors (header + data per frame).
constexpr std::uint32_t kRing = 1024;
constexpr std::size_t kMaxSize = 8 * loopback_default_payload;

// nic::LoopbackQueue on queue 0 of a loopback engine, whatever the chip (nic::open_loopback_engine):
// the engine says its limits and how it raises an MSI-X.
class LoopbackMemcpy final : public MemcpyDriver {
public:
    LoopbackMemcpy(const Driver& driver, vfio::Device& device, dma::IovaAllocator& iovas)
        : driver_(&driver), dev_(&device), iovas_(&iovas) {}
    ~LoopbackMemcpy() override { remove(); }

    const char* name() const noexcept override { return driver_->name; }
    bool initialized() const noexcept override { return q_.has_value(); }

    void init() override {
        remove();
        try {
            EngineOptions o;
            o.ring = kRing;
            engine_ = driver_->open_engine(*dev_, *iovas_, o);
            const EngineLimits l = engine_->engine_limits();
            limits_.min_size = LoopbackQueue::min_data;
            limits_.max_size = kMaxSize;
            limits_.dst_alignment = l.dst_alignment;
            limits_.max_in_flight = LoopbackQueue::max_copies;
            limits_.max_msis_per_send = l.max_msis_per_send;
            q_ = engine_->engine_queue(0);
            engine_->arm_msi();
        } catch (...) {
            remove();
            throw;
        }
    }

    void remove() noexcept override {
        q_.reset();
        engine_.reset();  // resets the device: no DMA after this
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
        if (q_) engine_->send_msi();
    }

    int msi_fd() const noexcept override { return dev_->irq_fd(0); }

private:
    const Driver* driver_;
    vfio::Device* dev_;
    dma::IovaAllocator* iovas_;
    std::unique_ptr<LoopbackEngine> engine_;
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
    const Driver* nic = find_driver(vendor, id);
    if (nic && nic->open_engine) return std::make_unique<LoopbackMemcpy>(*nic, device, iovas);
    if (vendor == 0x1af4 && id == 0x1110) {
        if (device.irq_info(vfio::IrqType::msix).count > 0) return std::make_unique<DoorbellMsi>(device);
        throw Error("probe memcpy driver", device.bdf().str(),
                    "this ivshmem device has no MSI-X: it is ivshmem-plain, which has no doorbell",
                    "use ivshmem-doorbell (lab/lab run --doorbell)");
    }
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, id);
    std::string engines;
    for (const Driver& d : drivers()) {
        if (d.open_engine) engines += std::string(d.name) + " (" + d.devices + "), ";
    }
    throw Error("probe memcpy driver", device.bdf().str(), log::concat("no memcpy driver for device ", ids),
                "nic::MemcpyDriver runs on the NICs that serve as loopback engines: " + engines +
                    "and on ivshmem-doorbell (send_msi only)");
}

}  // namespace bardrive::nic
