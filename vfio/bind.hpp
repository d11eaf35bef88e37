// Handing devices to vfio-pci and back (what `bardrive bind` / `bardrive unbind` do).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "../pci/bdf.hpp"
#include "sysfs.hpp"

namespace bardrive::vfio {

struct BindOptions {
    std::string state_dir = "/run/bardrive";  // remembers each device's previous driver
    bool force = false;                       // bind even a device whose network interface is up
};

// bind(): checks everything first and changes nothing when it refuses: unknown device, vfio-pci not
// loaded, a device with a network interface up (unless force), or an IOMMU group member left out of
// `devices` that is bound to a driver doing DMA (binding the rest would leave the group not viable
// while that member is in use; the error names it and the command that binds the whole group).
// Then, per device: remember its driver in state_dir, set driver_override to vfio-pci, unbind it,
// reprobe, and verify vfio-pci took it. Returns one line per device saying what happened.
std::vector<std::string> bind(const Sysfs& sys, const std::vector<pci::Bdf>& devices, const BindOptions& options);

// unbind(): releases devices from vfio-pci and clears driver_override; with restore, binds each to
// the driver remembered by bind() (error if none was remembered), else leaves it without a driver.
std::vector<std::string> unbind(const Sysfs& sys, const std::vector<pci::Bdf>& devices, bool restore,
                                const BindOptions& options);

struct BindingRow {
    pci::Bdf bdf;
    std::string ids;     // vendor:device
    std::string driver;  // "" none
    std::optional<unsigned> group;
    std::string remembered;  // driver bind() saved for --restore, "" none
};
std::vector<BindingRow> list_bindings(const Sysfs& sys, const BindOptions& options);

}  // namespace bardrive::vfio
