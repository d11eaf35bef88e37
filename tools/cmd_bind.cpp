// bardrive bind / unbind: hand PCI devices to vfio-pci and back. Logic lives in vfio/bind.*; this
// file only reads options and prints.
#include <cstdio>
#include <map>

#include "core/error.hpp"
#include "pci/bdf.hpp"
#include "tools/args.hpp"
#include "tools/commands.hpp"
#include "vfio/bind.hpp"

namespace bardrive::tools {
namespace {

const char* bind_usage =
    "usage: bardrive bind BDF... [--force]\n"
    "       bardrive bind --list\n"
    "\n"
    "Hands each device to vfio-pci (driver_override, unbind, reprobe) so bardrive can own it, and\n"
    "remembers the driver it had for 'bardrive unbind --restore'. Checks everything first and changes\n"
    "nothing when it refuses: a device with a network interface up (unless --force), or an IOMMU group\n"
    "member left out that a driver is using (the group would not be viable; it names the command that\n"
    "binds the whole group).\n"
    "  --list            every PCI device by IOMMU group: driver, remembered driver, whether the group is viable\n"
    "  --force           bind even a device whose network interface is up\n"
    "  --state-dir DIR   where previous drivers are remembered (default /run/bardrive)\n"
    "  --sysfs DIR       another sysfs root (default /sys)\n";

const char* unbind_usage =
    "usage: bardrive unbind BDF... [--restore]\n"
    "\n"
    "Releases devices from vfio-pci and clears driver_override; with --restore each goes back to the\n"
    "driver 'bardrive bind' remembered, otherwise it is left without a driver.\n"
    "  --state-dir DIR   where previous drivers are remembered (default /run/bardrive)\n"
    "  --sysfs DIR       another sysfs root (default /sys)\n";

std::vector<pci::Bdf> parse_bdfs(const Args& args, const char* usage) {
    if (args.positional().empty()) {
        std::fputs(usage, stderr);
        throw UsageError("read arguments", "", "no device given", "pass one or more PCI addresses, e.g. 0000:01:00.0");
    }
    std::vector<pci::Bdf> out;
    for (const auto& a : args.positional()) out.push_back(usage_value([&] { return pci::Bdf::parse(a); }));
    return out;
}

vfio::BindOptions options(const Args& args) {
    vfio::BindOptions o;
    if (auto d = args.value("state-dir")) o.state_dir = *d;
    o.force = args.has("force");
    return o;
}

int list(const vfio::Sysfs& sys, const vfio::BindOptions& opt) {
    std::map<long, std::vector<vfio::BindingRow>> groups;  // -1: no group
    for (auto& r : vfio::list_bindings(sys, opt)) groups[r.group ? static_cast<long>(*r.group) : -1].push_back(r);
    std::printf("%-6s %-13s %-10s %-12s %-12s\n", "GROUP", "DEVICE", "IDS", "DRIVER", "REMEMBERED");
    for (const auto& [group, rows] : groups) {
        std::string blocking;
        bool any_vfio = false;
        for (const auto& r : rows) {
            std::printf("%-6s %-13s %-10s %-12s %-12s\n", group < 0 ? "-" : std::to_string(group).c_str(),
                        r.bdf.str().c_str(), r.ids.c_str(), r.driver.empty() ? "-" : r.driver.c_str(),
                        r.remembered.empty() ? "-" : r.remembered.c_str());
            any_vfio |= r.driver == "vfio-pci";
            if (!vfio::driver_keeps_group_viable(r.driver)) blocking += " " + r.bdf.str() + " (" + r.driver + ")";
        }
        if (any_vfio && !blocking.empty())
            std::printf("       ^ group %ld is not viable for VFIO:%s\n", group, blocking.c_str());
    }
    if (groups.count(-1)) std::printf("devices without a group: the IOMMU is off (intel_iommu=on / amd_iommu=on)\n");
    return 0;
}

}  // namespace

int run_bind(const CommandArgs& argv) {
    Args args("bind", argv, {"help", "list", "force"}, {"state-dir", "sysfs"});
    if (args.has("help")) {
        std::fputs(bind_usage, stdout);
        return 0;
    }
    vfio::Sysfs sys(args.value("sysfs").value_or("/sys"));
    if (args.has("list")) {
        if (!args.positional().empty())  // it lists every device; a BDF here was once silently ignored
            throw UsageError("bardrive bind", "--list " + bounded(args.positional().front()), "--list takes no device",
                             "run 'bardrive bind --list' alone (it lists every device), or bind without --list");
        return list(sys, options(args));
    }
    for (const auto& line : vfio::bind(sys, parse_bdfs(args, bind_usage), options(args)))
        std::printf("%s\n", line.c_str());
    return 0;
}

int run_unbind(const CommandArgs& argv) {
    Args args("unbind", argv, {"help", "restore"}, {"state-dir", "sysfs"});
    if (args.has("help")) {
        std::fputs(unbind_usage, stdout);
        return 0;
    }
    vfio::Sysfs sys(args.value("sysfs").value_or("/sys"));
    for (const auto& line : vfio::unbind(sys, parse_bdfs(args, unbind_usage), args.has("restore"), options(args)))
        std::printf("%s\n", line.c_str());
    return 0;
}

}  // namespace bardrive::tools
