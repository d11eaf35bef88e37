// A fabricated /sys tree in a temporary directory: PCI devices with driver and IOMMU-group links
// laid out as the kernel lays them out, for the sysfs diagnoses and bind logic.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

class FakeSysfs {
public:
    FakeSysfs() {
        char tmpl[] = "/tmp/bardrive-sysfs-XXXXXX";
        root_ = ::mkdtemp(tmpl);
        fs::create_directories(root_ / "bus/pci/devices");
        fs::create_directories(root_ / "bus/pci/drivers");
        write("bus/pci/drivers_probe", "");
    }
    ~FakeSysfs() {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    std::string root() const { return root_.string(); }

    void driver(const std::string& name) {
        fs::create_directories(root_ / "bus/pci/drivers" / name);
        write("bus/pci/drivers/" + name + "/unbind", "");
        write("bus/pci/drivers/" + name + "/bind", "");
    }

    // A device in `group` bound to `drv` ("" none), with vendor/device ids.
    void device(const std::string& bdf, int group, const std::string& drv) {
        fs::path dev = root_ / "devices/pci0000:00" / bdf;
        fs::create_directories(dev);
        fs::create_symlink(fs::path("../../../devices/pci0000:00") / bdf, root_ / "bus/pci/devices" / bdf);
        write("devices/pci0000:00/" + bdf + "/vendor", "0x8086\n");
        write("devices/pci0000:00/" + bdf + "/device", "0x10c9\n");
        write("devices/pci0000:00/" + bdf + "/driver_override", "(null)\n");
        if (!drv.empty()) {
            driver(drv);
            fs::create_symlink(fs::path("../../../bus/pci/drivers") / drv, dev / "driver");
        }
        if (group >= 0) {
            fs::path g = root_ / "kernel/iommu_groups" / std::to_string(group);
            fs::create_directories(g / "devices");
            fs::create_symlink(fs::path("../../../kernel/iommu_groups") / std::to_string(group), dev / "iommu_group");
            fs::create_symlink(fs::path("../../../../devices/pci0000:00") / bdf, g / "devices" / bdf);
        }
    }

    void net(const std::string& bdf, const std::string& ifname, const std::string& state) {
        fs::create_directories(root_ / "devices/pci0000:00" / bdf / "net" / ifname);
        write("devices/pci0000:00/" + bdf + "/net/" + ifname + "/operstate", state + "\n");
    }

    void write(const std::string& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
    std::string read(const std::string& rel) const {
        std::ifstream in(root_ / rel);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

private:
    fs::path root_;
};
