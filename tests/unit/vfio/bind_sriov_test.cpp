// bind and SR-IOV: a PF whose VFs a driver holds is not taken from its driver (that would reset the VFs
// under their users); its VFs are bound as any device; a PF whose VFs are all free is taken as before.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "fake_sysfs.hpp"
#include "pci/bdf.hpp"
#include "vfio/bind.hpp"
#include "vfio/sysfs.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
const pci::Bdf pf = pci::Bdf::parse("0000:02:00.0");
const pci::Bdf vf0 = pci::Bdf::parse("0000:02:10.0");
const pci::Bdf vf1 = pci::Bdf::parse("0000:02:10.2");

// The PF on igb with two VFs (virtfn0, virtfn1 links, as the kernel makes them), each in its own group.
void sriov(FakeSysfs& fake, const std::string& vf0_driver, const std::string& vf1_driver) {
    fake.driver("vfio-pci");
    fake.device(pf.str(), 11, "igb");
    fake.device(vf0.str(), 13, vf0_driver);
    fake.device(vf1.str(), 14, vf1_driver);
    fs::create_symlink(fs::path("../") / vf0.str(),
                       fs::path(fake.root()) / "devices/pci0000:00" / pf.str() / "virtfn0");
    fs::create_symlink(fs::path("../") / vf1.str(),
                       fs::path(fake.root()) / "devices/pci0000:00" / pf.str() / "virtfn1");
}
}  // namespace

TEST_CASE("bind refuses a PF whose VFs are in use, naming them, and changes nothing") {
    FakeSysfs fake;
    sriov(fake, "vfio-pci", "igbvf");
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";
    CHECK_THROWS_WITH(vfio::bind(sys, {pf}, opt), ContainsSubstring("physical function of VFs in use") &&
                                                      ContainsSubstring("0000:02:10.0 (vfio-pci)") &&
                                                      ContainsSubstring("0000:02:10.2 (igbvf)") &&
                                                      ContainsSubstring("sriov_numvfs"));
    CHECK(fake.read("devices/pci0000:00/0000:02:00.0/driver_override") == "(null)\n");
    // A VF is bound like any device: the PF keeps its driver.
    CHECK_THROWS_WITH(vfio::bind(sys, {vf1}, opt), ContainsSubstring("vfio-pci did not take the device"));
    CHECK(fake.read("devices/pci0000:00/0000:02:10.2/driver_override") == "vfio-pci");
}

TEST_CASE("bind takes a PF whose VFs no driver holds") {
    FakeSysfs fake;
    sriov(fake, "", "");
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";
    // The fabricated kernel never re-probes: the last step reports that vfio-pci did not take it.
    CHECK_THROWS_WITH(vfio::bind(sys, {pf}, opt), ContainsSubstring("vfio-pci did not take the device"));
    CHECK(fake.read("devices/pci0000:00/0000:02:00.0/driver_override") == "vfio-pci");
}

TEST_CASE("bind: a device without an IOMMU group is refused unless VFIO's no-IOMMU mode is on") {
    FakeSysfs fake;
    fake.driver("vfio-pci");
    fake.device(vf0.str(), -1, "igbvf");  // no group: no IOMMU translates
    vfio::Sysfs sys(fake.root());
    vfio::BindOptions opt;
    opt.state_dir = fake.root() + "/run";
    opt.force = true;
    CHECK_FALSE(sys.noiommu_mode());
    CHECK_THROWS_WITH(vfio::bind(sys, {vf0}, opt), ContainsSubstring("has no IOMMU group") &&
                                                       ContainsSubstring("intel_iommu=on") &&
                                                       ContainsSubstring("enable_unsafe_noiommu_mode=1"));
    CHECK(fake.read("devices/pci0000:00/0000:02:10.0/driver_override") == "(null)\n");  // nothing touched
    // With the mode on, vfio-pci gives it a no-IOMMU group when it binds: bind goes ahead (the fabricated kernel
    // never re-probes, so it ends at "did not take", after writing the override).
    fs::create_directories(fs::path(fake.root()) / "module/vfio/parameters");
    fake.write("module/vfio/parameters/enable_unsafe_noiommu_mode", "Y\n");
    CHECK(sys.noiommu_mode());
    CHECK_THROWS_WITH(vfio::bind(sys, {vf0}, opt), ContainsSubstring("vfio-pci did not take the device"));
    CHECK(fake.read("devices/pci0000:00/0000:02:10.0/driver_override") == "vfio-pci");
}
