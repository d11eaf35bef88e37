// vfio::Device: a PCI device owned through VFIO: regions, BARs, config space, interrupts, reset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/fd.hpp"
#include "../pci/bdf.hpp"
#include "domain.hpp"
#include "mmio.hpp"

namespace bardrive::vfio {

// Interrupt kinds; the values are vfio-pci's IRQ indices.
enum class IrqType : unsigned { intx = 0, msi = 1, msix = 2 };

struct SparseArea {
    std::uint64_t offset = 0;  // within the region
    std::uint64_t size = 0;
};

struct RegionInfo {
    unsigned index = 0;        // BAR n = index n; config space = 7 (VFIO_PCI_CONFIG_REGION_INDEX)
    std::uint64_t size = 0;    // 0: the region (BAR) does not exist
    std::uint64_t offset = 0;  // of the region in the device fd
    bool readable = false;
    bool writable = false;
    bool mmappable = false;
    std::vector<SparseArea> sparse;  // when the kernel allows mmap only of parts (MSI-X table holes)
};

struct IrqInfo {
    IrqType type = IrqType::intx;
    unsigned count = 0;  // vectors the device offers (0: none of this type)
    bool eventfd = false;
    bool maskable = false;
    bool automasked = false;  // INTx: masked by the kernel when it fires; unmask_irq() after handling
};

// Open with Device::open(domain, bdf): finds the device's IOMMU group, joins it to the domain and
// gets the device fd. Errors say what to do: not bound to vfio-pci (names the driver it has and the
// `bardrive bind` fix), group not viable (names every member and its driver), /dev/vfio missing
// (vfio-pci not loaded or no IOMMU: intel_iommu=on / amd_iommu=on), permission denied.
// - region_info(i), map_bar(bar): regions with capabilities; map_bar() mmaps a whole BAR and
//   returns its Mmio (throws for I/O-port BARs, absent BARs, or BARs the kernel will not mmap).
// - config_read*/config_write*: config space through the kernel (which virtualises parts of it);
//   enable_bus_master() sets Memory Space + Bus Master, needed before the device can DMA.
// - Interrupts: enable_irqs(type, n) routes vectors 0..n-1 to one eventfd each; wait_irq()
//   blocks up to timeout_ms and returns how many fired since the last wait (0: timeout);
//   mask_irq()/unmask_irq() act on the enabled type where vfio-pci supports it (INTx).
// - reset(): VFIO_DEVICE_RESET when the kernel offers it (can_reset()).
// Move-only; closing it disables its interrupts and releases the device. Must not outlive its Domain.
class Device {
public:
    static Device open(Domain& domain, const pci::Bdf& bdf);
    // A VF whose PF is bound to vfio-pci: vfio-pci opens it only with the token its PF's owner set
    // (set_vf_token); a missing or different token is refused with a clear error.
    static Device open(Domain& domain, const pci::Bdf& bdf, const VfToken& vf_token);

    Device(Device&& o) noexcept;
    Device& operator=(Device&& o) noexcept;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    ~Device();

    // On a PF bound to vfio-pci with SR-IOV: the token the owners of its VFs must present (vfio-pci
    // needs enable_sriov=1 to enable VFs of a PF it drives). Throws bardrive::Error with the kernel's errno.
    void set_vf_token(const VfToken& token) const;

    const pci::Bdf& bdf() const noexcept { return bdf_; }
    Domain& domain() const noexcept { return *domain_; }
    int fd() const noexcept { return fd_.get(); }
    int numa_node() const;  // from sysfs; -1 when the platform does not say

    unsigned num_regions() const noexcept { return num_regions_; }
    unsigned num_irqs() const noexcept { return num_irqs_; }
    RegionInfo region_info(unsigned index) const;
    Mmio map_bar(unsigned bar) const;

    std::uint8_t config_read8(std::uint32_t offset) const;
    std::uint16_t config_read16(std::uint32_t offset) const;
    std::uint32_t config_read32(std::uint32_t offset) const;
    void config_write8(std::uint32_t offset, std::uint8_t value) const;
    void config_write16(std::uint32_t offset, std::uint16_t value) const;
    void config_write32(std::uint32_t offset, std::uint32_t value) const;
    void enable_bus_master() const;

    IrqInfo irq_info(IrqType type) const;
    void enable_irqs(IrqType type, unsigned count);
    void disable_irqs() noexcept;
    unsigned irq_count() const noexcept { return static_cast<unsigned>(irq_fds_.size()); }
    int irq_fd(unsigned vector) const noexcept;  // the eventfd, for your own epoll; -1 if none
    std::uint64_t wait_irq(unsigned vector, int timeout_ms) const noexcept;
    void mask_irq(unsigned vector) const;
    void unmask_irq(unsigned vector) const;

    bool can_reset() const noexcept { return can_reset_; }
    void reset() const;

private:
    Device() = default;
    static Device open_with(Domain& domain, const pci::Bdf& bdf, const VfToken* vf_token);
    void config_access(bool write, std::uint32_t offset, void* buf, std::size_t len) const;
    void irq_action(std::uint32_t action, unsigned vector, const char* what) const;

    Domain* domain_ = nullptr;
    pci::Bdf bdf_;
    UniqueFd fd_;
    unsigned num_regions_ = 0;
    unsigned num_irqs_ = 0;
    bool can_reset_ = false;
    std::uint64_t config_offset_ = 0;
    IrqType irq_type_ = IrqType::intx;
    std::vector<UniqueFd> irq_fds_;
};

}  // namespace bardrive::vfio
