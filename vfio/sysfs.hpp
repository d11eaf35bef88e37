// vfio::Sysfs: what the kernel says about a device's driver and IOMMU group, and the diagnoses
// built from it (why a device cannot be opened, why a group is not viable).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../pci/bdf.hpp"

namespace bardrive::vfio {

// A view of /sys (the root is a parameter so tests can use a captured or fabricated tree).
class Sysfs {
public:
    explicit Sysfs(std::string root = "/sys") : root_(std::move(root)) {}

    const std::string& root() const noexcept { return root_; }
    std::string device_dir(const pci::Bdf& bdf) const;  // <root>/bus/pci/devices/<bdf>
    bool exists(const pci::Bdf& bdf) const;
    std::string driver(const pci::Bdf& bdf) const;                       // "" when no driver is bound
    std::optional<unsigned> iommu_group(const pci::Bdf& bdf) const;      // nullopt: no group; throws for a bad link
    std::vector<pci::Bdf> group_members(unsigned group) const;           // sorted
    std::vector<pci::Bdf> devices() const;                               // every PCI device, sorted
    std::vector<std::string> net_interfaces(const pci::Bdf& bdf) const;  // "eth0 (up)", ...
    std::string ids(const pci::Bdf& bdf) const;                          // "8086:10c9"
    // VFIO's no-IOMMU mode is on (vfio's enable_unsafe_noiommu_mode=Y): vfio-pci then gives a device without an
    // IOMMU group a no-IOMMU group of its own when it binds (a VM without a vIOMMU; DMA unprotected).
    bool noiommu_mode() const;

private:
    std::string root_;
};

// Drivers that leave a group viable for VFIO (they do not let the device DMA on its own behalf).
bool driver_keeps_group_viable(const std::string& driver);

// Throws the error that explains why `bdf` cannot be opened through VFIO, if sysfs shows one:
// no such device, not bound to vfio-pci (naming its driver and the `bardrive bind` fix), no IOMMU
// group (IOMMU off). Returns the group number otherwise.
unsigned check_openable(const Sysfs& sys, const pci::Bdf& bdf);

// The error for a group the kernel reports as not viable: names every member and its driver.
Error group_not_viable(const Sysfs& sys, unsigned group);

}  // namespace bardrive::vfio
