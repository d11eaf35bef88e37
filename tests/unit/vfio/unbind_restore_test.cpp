// unbind --restore reads the remembered driver from the state directory: data that anyone with write access
// there controls. Only a plain driver name that the bus has is used, checked before the device is released.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "fake_sysfs.hpp"
#include "pci/bdf.hpp"
#include "vfio/bind.hpp"
#include "vfio/sysfs.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("unbind --restore refuses a remembered driver that is a path, and one that is not loaded") {
    FakeSysfs fake;
    const pci::Bdf nic = pci::Bdf::parse("0000:99:00.0");
    fake.driver("vfio-pci");
    fake.device(nic.str(), 7, "vfio-pci");
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";
    fs::create_directories(opt.state_dir);
    fs::create_directories(fs::path(fake.root()) / "victim");
    fake.write("victim/bind", "untouched");

    fake.write("run/0000:99:00.0.driver", "../../../victim\n");
    CHECK_THROWS_WITH(vfio::unbind(sys, {nic}, true, opt),
                      ContainsSubstring("is not a driver name") && ContainsSubstring("remove that file"));
    CHECK(fake.read("victim/bind") == "untouched");
    CHECK(fake.read("devices/pci0000:00/0000:99:00.0/driver_override") == "(null)\n");  // not released

    fake.write("run/0000:99:00.0.driver", std::string(5000, 'a') + "\n");
    CHECK_THROWS_WITH(vfio::unbind(sys, {nic}, true, opt), ContainsSubstring("is not a driver name"));

    fake.write("run/0000:99:00.0.driver", "igb\n");
    CHECK_THROWS_WITH(vfio::unbind(sys, {nic}, true, opt),
                      ContainsSubstring("the remembered driver igb is not loaded") &&
                          ContainsSubstring("modprobe igb") && ContainsSubstring("stays on vfio-pci"));
    CHECK(fake.read("devices/pci0000:00/0000:99:00.0/driver_override") == "(null)\n");

    fake.driver("igb");  // loaded now: restore goes ahead (the fabricated kernel does not move the device)
    CHECK_THROWS_WITH(vfio::unbind(sys, {nic}, true, opt), ContainsSubstring("igb did not take the device back"));
    CHECK(fake.read("bus/pci/drivers/igb/bind") == "0000:99:00.0");
}
