#include "vfio/sysfs.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"

namespace fs = std::filesystem;

namespace bardrive::vfio {

namespace {
std::string link_target_name(const std::string& path) {
    std::error_code ec;
    fs::path target = fs::read_symlink(path, ec);
    if (ec) return {};
    return target.filename().string();
}

std::vector<pci::Bdf> bdfs_in(const std::string& dir) {
    std::vector<pci::Bdf> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (auto b = pci::Bdf::try_parse(e.path().filename().string())) out.push_back(*b);
    std::sort(out.begin(), out.end());
    return out;
}
}  // namespace

std::string Sysfs::device_dir(const pci::Bdf& bdf) const { return root_ + "/bus/pci/devices/" + bdf.str(); }

bool Sysfs::exists(const pci::Bdf& bdf) const {
    std::error_code ec;
    return fs::exists(device_dir(bdf), ec);
}

std::string Sysfs::driver(const pci::Bdf& bdf) const { return link_target_name(device_dir(bdf) + "/driver"); }

bool Sysfs::noiommu_mode() const {
    auto v = file::try_read_text(root_ + "/module/vfio/parameters/enable_unsafe_noiommu_mode");
    return v && !v->empty() && (*v)[0] == 'Y';
}

std::optional<unsigned> Sysfs::iommu_group(const pci::Bdf& bdf) const {
    std::string name = link_target_name(device_dir(bdf) + "/iommu_group");
    if (name.empty()) return std::nullopt;
    // The kernel numbers groups from 0 in an int: anything else is not a kernel's sysfs (a wrapped or thrown
    // conversion once made group 4294967296 group 0, or "internal error: stoul").
    unsigned group = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), group);
    if (ec != std::errc() || end != name.data() + name.size() || group > 0x7fffffffu)
        throw Error("read IOMMU group of", bdf.str(),
                    "its iommu_group link names '" + log::bounded(name) + "', not a group number",
                    "check that " + root_ + " is a kernel's sysfs (--sysfs)");
    return group;
}

std::vector<pci::Bdf> Sysfs::group_members(unsigned group) const {
    return bdfs_in(root_ + "/kernel/iommu_groups/" + std::to_string(group) + "/devices");
}

std::vector<pci::Bdf> Sysfs::devices() const { return bdfs_in(root_ + "/bus/pci/devices"); }

std::vector<std::string> Sysfs::net_interfaces(const pci::Bdf& bdf) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(device_dir(bdf) + "/net", ec)) {
        std::string name = e.path().filename().string();
        auto state = file::try_read_text(e.path().string() + "/operstate");
        out.push_back(name + " (" + state.value_or("unknown") + ")");
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string Sysfs::ids(const pci::Bdf& bdf) const {
    auto strip = [](std::optional<std::string> s) {
        if (!s) return std::string("????");
        return s->rfind("0x", 0) == 0 ? s->substr(2) : *s;
    };
    return strip(file::try_read_text(device_dir(bdf) + "/vendor")) + ":" +
           strip(file::try_read_text(device_dir(bdf) + "/device"));
}

bool driver_keeps_group_viable(const std::string& driver) {
    // vfio-pci owns the device; pci-stub and pcieport claim no DMA ownership (driver_managed_dma);
    // an unbound device cannot DMA.
    return driver.empty() || driver == "vfio-pci" || driver == "pci-stub" || driver == "pcieport";
}

unsigned check_openable(const Sysfs& sys, const pci::Bdf& bdf) {
    if (!sys.exists(bdf))
        throw Error("open device", bdf.str(), "no such PCI device in " + sys.root() + "/bus/pci/devices",
                    "'lspci -D' or 'bardrive bind --list' lists the devices present");
    std::string drv = sys.driver(bdf);
    if (drv != "vfio-pci")
        throw Error("open device", bdf.str(),
                    drv.empty() ? "not bound to any driver (vfio-pci needed)" : "bound to " + drv + ", not vfio-pci",
                    "run 'bardrive bind " + bdf.str() + "' to hand it to vfio-pci");
    auto group = sys.iommu_group(bdf);
    if (!group)
        throw Error("open device", bdf.str(), "has no IOMMU group: the IOMMU is off",
                    "enable VT-d / AMD-Vi in the firmware and boot with intel_iommu=on (or amd_iommu=on)");
    return *group;
}

Error group_not_viable(const Sysfs& sys, unsigned group) {
    std::string members;
    std::string blocking;
    for (const auto& m : sys.group_members(group)) {
        std::string drv = sys.driver(m);
        std::string desc = m.str() + " (" + (drv.empty() ? "no driver" : drv) + ")";
        members += (members.empty() ? "" : ", ") + desc;
        if (!driver_keeps_group_viable(drv)) blocking += (blocking.empty() ? "" : " ") + m.str();
    }
    std::string hint = blocking.empty()
                           ? "a member changed driver meanwhile; check 'bardrive bind --list'"
                           : "bind every member to vfio-pci ('bardrive bind " + blocking + "') or unbind them";
    return Error("open IOMMU group", std::to_string(group), "not viable: members are " + members, hint);
}

}  // namespace bardrive::vfio
