#include "vfio/bind.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/file.hpp"
#include "core/log.hpp"

namespace fs = std::filesystem;

namespace bardrive::vfio {

namespace {

std::string state_file(const BindOptions& o, const pci::Bdf& b) { return o.state_dir + "/" + b.str() + ".driver"; }

std::string describe(const Sysfs& sys, const pci::Bdf& b) {
    std::string drv = sys.driver(b);
    std::string s = b.str() + " (" + (drv.empty() ? "no driver" : drv);
    auto nets = sys.net_interfaces(b);
    for (std::size_t i = 0; i < nets.size(); ++i) s += (i == 0 ? ", interfaces " : " ") + nets[i];
    return s + ")";
}

bool any_interface_up(const Sysfs& sys, const pci::Bdf& b) {
    for (const auto& n : sys.net_interfaces(b))
        if (n.find("(up)") != std::string::npos) return true;
    return false;
}

std::string join(const std::vector<pci::Bdf>& v) {
    std::string s;
    for (const auto& b : v) s += (s.empty() ? "" : " ") + b.str();
    return s;
}

// The state file is ours, not a sysfs attribute: create it (file::write_text only opens).
void remember(const std::string& path, const std::string& driver) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    std::string text = driver + "\n";
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        throw Error::from_errno("remember the driver in", path, errno,
                                "is /run writable? pass another state directory");
}

// The VFs of `pf` (its virtfnN links) that a driver holds and that are not in `wanted`.
std::vector<pci::Bdf> vfs_in_use(const Sysfs& sys, const pci::Bdf& pf, const std::set<pci::Bdf>& wanted) {
    std::vector<pci::Bdf> used;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(sys.device_dir(pf), ec)) {
        if (e.path().filename().string().rfind("virtfn", 0) != 0) continue;
        auto vf = pci::Bdf::try_parse(fs::read_symlink(e.path(), ec).filename().string());
        if (vf && !wanted.count(*vf) && !sys.driver(*vf).empty()) used.push_back(*vf);
    }
    std::sort(used.begin(), used.end());
    return used;
}

void require_device(const Sysfs& sys, const pci::Bdf& b, const char* op) {
    if (!sys.exists(b))
        throw Error(op, b.str(), "no such PCI device", "'bardrive bind --list' lists the devices present");
}

}  // namespace

std::vector<std::string> bind(const Sysfs& sys, const std::vector<pci::Bdf>& devices, const BindOptions& options) {
    // The devices first: an absent one is the mistake to name, not the driver.
    for (const auto& b : devices) require_device(sys, b, "bind to vfio-pci");
    const std::string vfio_dir = sys.root() + "/bus/pci/drivers/vfio-pci";
    std::error_code ec;
    if (!fs::exists(vfio_dir, ec))
        throw Error(
            "bind to vfio-pci", join(devices), "the vfio-pci driver is not loaded (" + vfio_dir + " is missing)",
            "run 'modprobe vfio-pci'; if that fails the kernel lacks VFIO or the IOMMU is off (intel_iommu=on)");
    std::set<pci::Bdf> wanted(devices.begin(), devices.end());
    // Check everything before touching anything.
    for (const auto& b : devices) {
        if (!options.force && sys.driver(b) != "vfio-pci" && any_interface_up(sys, b))
            throw Error("bind to vfio-pci", describe(sys, b), "a network interface of it is up and may be in use",
                        "take it down first ('ip link set DEV down'), or pass --force");
        // Taking a PF from its driver resets every VF it has under whoever drives them (SR-IOV: the PF stays
        // with the kernel while programs drive its VFs).
        if (auto used = vfs_in_use(sys, b, wanted); !used.empty() && sys.driver(b) != "vfio-pci") {
            std::string who;
            for (const auto& vf : used) who += (who.empty() ? "" : ", ") + describe(sys, vf);
            throw Error("bind to vfio-pci", describe(sys, b),
                        "it is the physical function of VFs in use: " + who + "; taking it from its driver resets them",
                        "drive the VFs and leave the PF to its driver; to take the PF, release the VFs first "
                        "(unbind them, or echo 0 > /sys/bus/pci/devices/" +
                            b.str() + "/sriov_numvfs)");
        }
        auto group = sys.iommu_group(b);
        if (!group) {
            if (sys.noiommu_mode()) continue;  // vfio-pci makes it a no-IOMMU group of its own when it binds
            throw Error("bind to vfio-pci", b.str(), "has no IOMMU group: the IOMMU is off",
                        "enable VT-d / AMD-Vi in the firmware and boot with intel_iommu=on (or amd_iommu=on); in a VM "
                        "without a vIOMMU, VFIO's no-IOMMU mode ('modprobe vfio enable_unsafe_noiommu_mode=1', DMA "
                        "unprotected; docs/iommu-modes.md)");
        }
        std::vector<pci::Bdf> in_use;
        for (const auto& m : sys.group_members(*group))
            if (!wanted.count(m) && !driver_keeps_group_viable(sys.driver(m))) in_use.push_back(m);
        if (!in_use.empty()) {
            std::string who;
            for (const auto& m : in_use) who += (who.empty() ? "" : ", ") + describe(sys, m);
            std::vector<pci::Bdf> all(wanted.begin(), wanted.end());
            all.insert(all.end(), in_use.begin(), in_use.end());
            std::sort(all.begin(), all.end());
            throw Error("bind to vfio-pci", b.str(),
                        "IOMMU group " + std::to_string(*group) + " also holds " + who +
                            ", which a driver is using; binding without it leaves the group not viable for VFIO",
                        "bind the whole group ('bardrive bind " + join(all) + "') or release those devices first");
        }
    }
    std::vector<std::string> done;
    for (const auto& b : devices) {
        const std::string dir = sys.device_dir(b);
        std::string old = sys.driver(b);
        if (old == "vfio-pci") {
            done.push_back(b.str() + ": already bound to vfio-pci");
            continue;
        }
        if (!old.empty()) {
            fs::create_directories(options.state_dir, ec);
            if (ec) throw Error("create state directory", options.state_dir, ec.message());
            remember(state_file(options, b), old);
        }
        file::write_text(dir + "/driver_override", "vfio-pci");
        if (!old.empty()) file::write_text(dir + "/driver/unbind", b.str());
        file::write_text(sys.root() + "/bus/pci/drivers_probe", b.str());
        std::string now = sys.driver(b);
        if (now != "vfio-pci")
            throw Error(
                "bind to vfio-pci", b.str(),
                "vfio-pci did not take the device (its driver is now " + (now.empty() ? std::string("none") : now) +
                    ")",
                "check 'dmesg' for vfio-pci's reason; 'bardrive unbind --restore " + b.str() + "' gives it back");
        done.push_back(b.str() + ": " + (old.empty() ? std::string("no driver") : old) + " -> vfio-pci");
    }
    return done;
}

std::vector<std::string> unbind(const Sysfs& sys, const std::vector<pci::Bdf>& devices, bool restore,
                                const BindOptions& options) {
    std::map<pci::Bdf, std::string> previous;
    std::error_code ec;
    for (const auto& b : devices) {
        require_device(sys, b, "unbind from vfio-pci");
        std::string drv = sys.driver(b);
        if (!drv.empty() && drv != "vfio-pci")
            throw Error("unbind from vfio-pci", b.str(), "is bound to " + drv + ", not vfio-pci", "nothing to undo");
        if (restore) {
            auto saved = file::try_read_text(state_file(options, b));
            if (!saved || saved->empty())
                throw Error("restore driver of", b.str(), "no previous driver remembered in " + state_file(options, b),
                            "bardrive bind was not used for it (or /run was cleared); bind a driver by hand: "
                            "echo " +
                                b.str() + " > /sys/bus/pci/drivers/DRIVER/bind");
            // The state file is data, not a path: only a plain driver name that the bus has now. Checked before
            // the device is released, so a refusal leaves it on vfio-pci.
            const std::string& name = *saved;
            const bool plain = name.size() <= 64 && name != "." && name != ".." &&
                               std::all_of(name.begin(), name.end(), [](unsigned char c) {
                                   return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                               });
            if (!plain) {
                throw Error(
                    "restore driver of", b.str(),
                    "the driver remembered in " + state_file(options, b) + " is not a driver name ('" +
                        name.substr(0, 64) + (name.size() > 64 ? "...'" : "'") + ")",
                    "remove that file; bind a driver by hand: echo " + b.str() + " > /sys/bus/pci/drivers/DRIVER/bind");
            }
            if (!fs::is_directory(sys.root() + "/bus/pci/drivers/" + name, ec)) {
                throw Error(
                    "restore driver of", b.str(),
                    "the remembered driver " + name + " is not loaded (no " + sys.root() + "/bus/pci/drivers/" + name +
                        ")",
                    "load it ('modprobe " + name + "') and run this again; the device stays on vfio-pci until then");
            }
            previous[b] = name;
        }
    }
    std::vector<std::string> done;
    for (const auto& b : devices) {
        const std::string dir = sys.device_dir(b);
        file::write_text(dir + "/driver_override", "\n");  // a lone newline clears the override
        if (sys.driver(b) == "vfio-pci") file::write_text(dir + "/driver/unbind", b.str());
        if (!restore) {
            done.push_back(b.str() + ": vfio-pci -> no driver");
            continue;
        }
        const std::string& drv = previous[b];
        file::write_text(sys.root() + "/bus/pci/drivers/" + drv + "/bind", b.str());
        std::string now = sys.driver(b);
        if (now != drv)
            throw Error("restore driver of", b.str(), drv + " did not take the device back", "check 'dmesg'");
        fs::remove(state_file(options, b), ec);
        done.push_back(b.str() + ": vfio-pci -> " + drv);
    }
    return done;
}

std::vector<BindingRow> list_bindings(const Sysfs& sys, const BindOptions& options) {
    std::vector<BindingRow> rows;
    for (const auto& b : sys.devices())
        rows.push_back({b, sys.ids(b), sys.driver(b), sys.iommu_group(b),
                        file::try_read_text(state_file(options, b)).value_or("")});
    return rows;
}

}  // namespace bardrive::vfio
