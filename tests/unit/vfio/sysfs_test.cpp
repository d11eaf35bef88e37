#include "vfio/sysfs.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"
#include "fake_sysfs.hpp"
#include "vfio/bind.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
const pci::Bdf nic0 = pci::Bdf::parse("0000:01:00.0");
const pci::Bdf nic1 = pci::Bdf::parse("0000:01:00.1");
const pci::Bdf nvme = pci::Bdf::parse("0000:02:00.0");
}  // namespace

TEST_CASE("sysfs view reads drivers, groups and members") {
    FakeSysfs fake;
    fake.device(nic0.str(), 12, "igb");
    fake.device(nic1.str(), 12, "");
    fake.device(nvme.str(), 13, "vfio-pci");
    vfio::Sysfs sys(fake.root());
    CHECK(sys.exists(nic0));
    CHECK_FALSE(sys.exists(pci::Bdf::parse("0000:09:00.0")));
    CHECK(sys.driver(nic0) == "igb");
    CHECK(sys.driver(nic1).empty());
    CHECK(sys.iommu_group(nvme) == 13u);
    CHECK(sys.group_members(12) == std::vector<pci::Bdf>{nic0, nic1});
    CHECK(sys.devices().size() == 3);
    CHECK(sys.ids(nic0) == "8086:10c9");
}

TEST_CASE("an IOMMU group link that names no group number is an error naming it, not group 0") {
    for (const char* name : {"4294967296", "99999999999999999999999", "2147483648", "12abc"}) {
        INFO(name);
        FakeSysfs fake;
        fake.device(nic0.str(), -1, "igb");
        fs::create_symlink(fs::path("../../../kernel/iommu_groups") / name,
                           fs::path(fake.root()) / "devices/pci0000:00" / nic0.str() / "iommu_group");
        vfio::Sysfs sys(fake.root());
        CHECK_THROWS_WITH(sys.iommu_group(nic0), ContainsSubstring(nic0.str()) &&
                                                     ContainsSubstring(std::string("names '") + name + "'") &&
                                                     ContainsSubstring("not a group number"));
        CHECK_THROWS_WITH(vfio::list_bindings(sys, {}), ContainsSubstring("not a group number"));
    }
    FakeSysfs fake;
    fake.device(nic0.str(), 2147483647, "igb");
    CHECK(vfio::Sysfs(fake.root()).iommu_group(nic0) == 2147483647u);
}

TEST_CASE("opening a device explains why it cannot be opened") {
    FakeSysfs fake;
    fake.device(nic0.str(), 12, "igb");
    fake.device(nic1.str(), -1, "vfio-pci");
    fake.device(nvme.str(), 13, "");
    vfio::Sysfs sys(fake.root());

    CHECK_THROWS_WITH(vfio::check_openable(sys, nic0), ContainsSubstring("bound to igb, not vfio-pci") &&
                                                           ContainsSubstring("bardrive bind 0000:01:00.0"));
    CHECK_THROWS_WITH(vfio::check_openable(sys, nvme), ContainsSubstring("not bound to any driver"));
    CHECK_THROWS_WITH(vfio::check_openable(sys, nic1),
                      ContainsSubstring("no IOMMU group") && ContainsSubstring("intel_iommu=on"));
    CHECK_THROWS_WITH(vfio::check_openable(sys, pci::Bdf::parse("0000:09:00.0")),
                      ContainsSubstring("no such PCI device") && ContainsSubstring("--list"));
}

TEST_CASE("a group that is not viable names its members and their drivers") {
    FakeSysfs fake;
    fake.device(nic0.str(), 12, "vfio-pci");
    fake.device(nic1.str(), 12, "e1000e");
    fake.device("0000:00:1c.0", 12, "pcieport");
    vfio::Sysfs sys(fake.root());
    bardrive::Error e = vfio::group_not_viable(sys, 12);
    std::string msg = e.what();
    CHECK_THAT(msg, ContainsSubstring("0000:01:00.0 (vfio-pci)"));
    CHECK_THAT(msg, ContainsSubstring("0000:01:00.1 (e1000e)"));
    CHECK_THAT(msg, ContainsSubstring("0000:00:1c.0 (pcieport)"));
    CHECK_THAT(msg, ContainsSubstring("bardrive bind 0000:01:00.1'"));  // only the member that blocks
}

TEST_CASE("bind refuses, changing nothing, when it would break a group in use") {
    FakeSysfs fake;
    fake.driver("vfio-pci");
    fake.device(nic0.str(), 12, "igb");
    fake.device(nic1.str(), 12, "igb");
    fake.net(nic1.str(), "eth1", "up");
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";

    CHECK_THROWS_WITH(vfio::bind(sys, {nic0}, opt),
                      ContainsSubstring("group 12 also holds 0000:01:00.1 (igb, interfaces eth1 (up))") &&
                          ContainsSubstring("bardrive bind 0000:01:00.0 0000:01:00.1"));
    CHECK(fake.read("devices/pci0000:00/0000:01:00.0/driver_override") == "(null)\n");

    SECTION("a device whose interface is up needs --force") {
        CHECK_THROWS_WITH(vfio::bind(sys, {nic0, nic1}, opt), ContainsSubstring("0000:01:00.1") &&
                                                                  ContainsSubstring("interface of it is up") &&
                                                                  ContainsSubstring("--force"));
        CHECK(fake.read("devices/pci0000:00/0000:01:00.0/driver_override") == "(null)\n");
    }
    SECTION("with the whole group and --force it goes ahead and remembers the drivers") {
        opt.force = true;
        // The fabricated kernel never re-probes, so the last step reports that vfio-pci did not take it.
        CHECK_THROWS_WITH(vfio::bind(sys, {nic0, nic1}, opt),
                          ContainsSubstring("vfio-pci did not take the device") && ContainsSubstring("--restore"));
        CHECK(fake.read("devices/pci0000:00/0000:01:00.0/driver_override") == "vfio-pci");
        CHECK(fake.read("bus/pci/drivers/igb/unbind") == "0000:01:00.0");
        CHECK(fake.read("bus/pci/drivers_probe") == "0000:01:00.0");
        CHECK(fake.read("run/0000:01:00.0.driver") == "igb\n");
        auto rows = vfio::list_bindings(sys, opt);
        REQUIRE(rows.size() == 2);
        CHECK(rows[0].remembered == "igb");
        CHECK(rows[0].group == 12u);
    }
}

TEST_CASE("bind and unbind reject bad input before touching anything") {
    FakeSysfs fake;
    fake.device(nic0.str(), 12, "igb");
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";
    // An absent device is named first, even where vfio-pci is not loaded (it was sent to modprobe).
    const auto absent = pci::Bdf::parse("0000:09:00.0");
    CHECK_THROWS_WITH(vfio::bind(sys, {nic0, absent}, opt),
                      ContainsSubstring("0000:09:00.0") && ContainsSubstring("no such PCI device"));
    CHECK_THROWS_WITH(vfio::bind(sys, {nic0}, opt),
                      ContainsSubstring("vfio-pci driver is not loaded") && ContainsSubstring("modprobe vfio-pci"));
    fake.driver("vfio-pci");
    CHECK_THROWS_WITH(vfio::bind(sys, {pci::Bdf::parse("0000:09:00.0")}, opt), ContainsSubstring("no such PCI device"));
    CHECK_THROWS_WITH(vfio::unbind(sys, {nic0}, false, opt), ContainsSubstring("bound to igb, not vfio-pci"));
    fake.device(nvme.str(), 13, "vfio-pci");
    CHECK_THROWS_WITH(vfio::unbind(sys, {nvme}, true, opt),
                      ContainsSubstring("no previous driver remembered") && ContainsSubstring("/bind"));
    CHECK(fake.read("devices/pci0000:00/0000:02:00.0/driver_override") == "(null)\n");
}
