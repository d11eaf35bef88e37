// vfio/ against a real kernel's VFIO in the lab guest (lab/lab run basic --bind all): regions, BARs,
// config space, MSI-X, MSI and INTx raised by the igb itself (its interrupt-cause-set register), binding,
// and every bad input producing its error while the guest stays usable.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "nic/igb/regs.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"
#include "vfio/sysfs.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;
namespace igb = bardrive::nic::igb;
using labenv::lab_or_skip;
using labenv::wait_for;

namespace {

constexpr std::uint32_t icr_lsc = 1u << 2;  // 8.8.1 ICR.LSC: link status change, an "other" cause

// 8.2.1: CTRL.RST resets the MAC (registers to defaults); self-clearing.
void reset_mac(const vfio::Mmio& r) {
    r.write32(igb::CTRL, r.read32(igb::CTRL) | igb::ctrl::RST);
    REQUIRE(wait_for([&] { return (r.read32(igb::CTRL) & igb::ctrl::RST) == 0; }, std::chrono::seconds(2)));
    r.write32(igb::IMC, ~0u);
    r.write32(igb::EIMC, ~0u);
    (void)r.read32(igb::ICR);  // clear-on-read: start with no pending cause
}

// A STATUS read that returns the model's value proves the device, its BAR and the domain still work.
void still_usable(vfio::Domain& domain, const pci::Bdf& bdf) {
    vfio::Device dev = vfio::Device::open(domain, bdf);
    vfio::Mmio regs = dev.map_bar(0);
    CHECK(dev.config_read16(0) == igb::VENDOR_INTEL);
    CHECK(regs.read32(igb::STATUS) != 0xffffffffu);
}

}  // namespace

TEST_CASE("region info, BAR mapping and config space of an igb", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    INFO("IOMMU backend " << vfio::to_string(domain.backend()));
    CHECK(domain.device_count() == 1);
    REQUIRE(nic.num_regions() >= 9);  // BAR0-5, ROM, config, VGA

    vfio::RegionInfo bar0 = nic.region_info(0);
    CHECK(bar0.size == igb::BAR0_MIN_SIZE);
    CHECK((bar0.readable && bar0.writable && bar0.mmappable));
    vfio::RegionInfo cfg = nic.region_info(7);
    CHECK(cfg.size >= 256);
    CHECK_THROWS_WITH(nic.region_info(nic.num_regions()), ContainsSubstring("does not exist"));

    CHECK(nic.config_read16(0x00) == igb::VENDOR_INTEL);
    CHECK(nic.config_read16(0x02) == igb::DEVICE_82576);
    nic.enable_bus_master();
    CHECK((nic.config_read16(0x04) & 0x6) == 0x6);
    CHECK_THROWS_WITH(nic.config_read32(4096), ContainsSubstring("outside 4 KiB"));
    CHECK_THROWS_WITH(nic.config_read16(3), ContainsSubstring("unaligned"));

    vfio::Mmio regs = nic.map_bar(0);
    CHECK(regs.size() == bar0.size);
    CHECK_NOTHROW(regs.require(igb::EICR, 4));
    CHECK_THROWS_WITH(regs.require(bar0.size - 2, 4), ContainsSubstring("BAR0"));
    reset_mac(regs);
    // EIAC is read/write in MSI-X mode (8.8.12): a value written comes back, through the real mapping.
    regs.write32(igb::GPIE, igb::gpie::MSIX_MODE);
    regs.write32(igb::EIAC, 0x5);
    CHECK(regs.read32(igb::EIAC) == 0x5);

    // BARs that cannot be mapped say why: the igb's I/O-port BAR, and an absent one.
    for (unsigned bar = 1; bar < 6; ++bar) {
        vfio::RegionInfo ri = nic.region_info(bar);
        INFO("BAR" << bar << " size " << ri.size);
        std::uint32_t raw = nic.config_read32(0x10 + 4 * bar);
        if (ri.size == 0)
            CHECK_THROWS_WITH(nic.map_bar(bar), ContainsSubstring("no such BAR"));
        else if (raw & 1)
            CHECK_THROWS_WITH(nic.map_bar(bar), ContainsSubstring("does not allow mmap"));
    }
    CHECK_THROWS_WITH(nic.map_bar(6), ContainsSubstring("BARs 0 to 5"));
}

TEST_CASE("an MSI-X raised through ICS and EICS fires its eventfd", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    nic.enable_bus_master();
    vfio::Mmio r = nic.map_bar(0);
    reset_mac(r);

    vfio::IrqInfo info = nic.irq_info(vfio::IrqType::msix);
    CHECK(info.count == igb::MSIX_VECTORS);
    CHECK(info.eventfd);
    CHECK_THROWS_WITH(nic.enable_irqs(vfio::IrqType::msix, 64), ContainsSubstring("offers 10"));
    nic.enable_irqs(vfio::IrqType::msix, 2);
    REQUIRE(nic.irq_count() == 2);

    // 8.8.15 GPIE.MSIX_MODE: one EICR bit per vector. 8.8.17 IVAR_MISC byte 1: "other" causes
    // (LSC among them) go to vector 1. EIAC: EICR bits clear themselves once the MSI-X is sent,
    // so the next cause raises a new message. EIMS/IMS: unmask vectors 0-1 and ICR.LSC.
    r.write32(igb::GPIE, igb::gpie::MSIX_MODE | igb::gpie::PBA);
    r.write32(igb::IVAR_MISC, (igb::IVAR_VALID | 1u) << 8);
    r.write32(igb::EIAC, 0x3);
    r.write32(igb::EIMS, 0x3);
    r.write32(igb::IMS, icr_lsc);
    nic.wait_irq(0, 0);  // the link coming up after reset may already have raised one: drain it
    nic.wait_irq(1, 0);
    (void)r.read32(igb::ICR);

    r.write32(igb::ICS, icr_lsc);
    CHECK(nic.wait_irq(1, 2000) >= 1);
    CHECK(nic.wait_irq(0, 50) == 0);  // routed to vector 1 only

    r.write32(igb::EICS, 0x1);  // 8.8.9: set the cause of vector 0 directly
    CHECK(nic.wait_irq(0, 2000) >= 1);

    // Masked in the device (EIMC), the cause raises nothing.
    r.write32(igb::EIMC, 0x1);
    r.write32(igb::EICS, 0x1);
    CHECK(nic.wait_irq(0, 200) == 0);

    // vfio-pci masks only INTx: asking it to mask an MSI-X vector is a clear error.
    CHECK_THROWS_WITH(nic.mask_irq(0), ContainsSubstring("masks only INTx"));
    CHECK_THROWS_WITH(nic.unmask_irq(5), ContainsSubstring("not enabled"));

    nic.disable_irqs();
    CHECK(nic.irq_fd(0) == -1);
    CHECK(nic.wait_irq(0, 0) == 0);
}

TEST_CASE("INTx fires, is masked by the kernel, and unmasks", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[1]);
    nic.enable_bus_master();
    vfio::Mmio r = nic.map_bar(0);
    reset_mac(r);
    vfio::IrqInfo info = nic.irq_info(vfio::IrqType::intx);
    REQUIRE(info.count == 1);
    CHECK(info.maskable);
    CHECK(info.automasked);
    nic.enable_irqs(vfio::IrqType::intx, 1);
    nic.wait_irq(0, 0);

    r.write32(igb::GPIE, 0);  // legacy mode: ICR drives the INTx line
    r.write32(igb::IMS, icr_lsc);
    r.write32(igb::ICS, icr_lsc);
    CHECK(nic.wait_irq(0, 2000) == 1);
    (void)r.read32(igb::ICR);  // the cause is handled: the line drops
    nic.unmask_irq(0);         // the kernel masked it when it fired
    nic.mask_irq(0);
    r.write32(igb::ICS, icr_lsc);
    CHECK(nic.wait_irq(0, 200) == 0);  // masked: nothing
    nic.unmask_irq(0);                 // the line is still asserted: it fires on unmask
    CHECK(nic.wait_irq(0, 2000) == 1);
    (void)r.read32(igb::ICR);
    nic.unmask_irq(0);
}

TEST_CASE("an MSI raised through ICS fires its eventfd", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[1]);
    nic.enable_bus_master();
    vfio::Mmio r = nic.map_bar(0);
    reset_mac(r);
    vfio::IrqInfo info = nic.irq_info(vfio::IrqType::msi);
    REQUIRE(info.count >= 1);
    nic.enable_irqs(vfio::IrqType::msi, 1);
    nic.wait_irq(0, 0);
    r.write32(igb::GPIE, 0);  // not MSI-X mode: an ICR cause sends the one MSI
    r.write32(igb::IMS, icr_lsc);
    (void)r.read32(igb::ICR);
    r.write32(igb::ICS, icr_lsc);
    CHECK(nic.wait_irq(0, 2000) >= 1);
    (void)r.read32(igb::ICR);
    CHECK_THROWS_WITH(nic.mask_irq(0), ContainsSubstring("masks only INTx"));
}

// Reset (IMS cleared by a function reset, for every reset method) is vfio_pci_device_test.reset in
// tests/lab/pci_device_test.cpp, for igb and e1000e.

TEST_CASE("every bad input has its error and leaves the guest usable", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;

    // Before any device: the IOMMU is not set up yet.
    CHECK_THROWS_WITH(domain.iova_ranges(), ContainsSubstring("no device is attached yet"));
    dma::Memory mem = dma::Memory::allocate(dma::page_2m);
    CHECK_THROWS_WITH(domain.map(mem.data(), 0x100000, mem.size()), ContainsSubstring("no device is attached"));

    // Devices that are not vfio-pci's, or not there.
    vfio::Sysfs sys;
    for (const auto& b : sys.devices()) {
        if (sys.driver(b) == "vfio-pci") continue;
        std::string drv = sys.driver(b);
        INFO(b.str() << " driver '" << drv << "'");
        CHECK_THROWS_WITH(vfio::Device::open(domain, b),
                          ContainsSubstring(drv.empty() ? "not bound to any driver" : "bound to " + drv) &&
                              ContainsSubstring("bardrive bind " + b.str()));
        break;
    }
    CHECK_THROWS_WITH(vfio::Device::open(domain, pci::Bdf::parse("0000:7f:1f.7")),
                      ContainsSubstring("no such PCI device"));

    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    CHECK_THROWS_WITH(vfio::Device::open(domain, lab.nics[0]), ContainsSubstring("already open in this domain"));
    {
        vfio::Domain other;  // the device (type1: its group) belongs to the first domain
        if (other.backend() == vfio::Backend::type1)
            CHECK_THROWS_WITH(vfio::Device::open(other, lab.nics[0]),
                              ContainsSubstring("/dev/vfio/") && ContainsSubstring("holds it"));
        else
            CHECK_THROWS_AS(vfio::Device::open(other, lab.nics[0]), Error);
    }

    // DMA mapping errors: overlap, outside the ranges, unaligned, unknown unmap, unmapped memory.
    const auto& ranges = domain.iova_ranges();
    REQUIRE(!ranges.empty());
    domain.map(mem.data(), 0x200000, mem.size());
    CHECK_THROWS_WITH(domain.map(mem.data(), 0x300000, mem.size()),
                      ContainsSubstring("overlaps the existing mapping IOVA 0x200000-0x3fffff"));
    CHECK_THROWS_WITH(domain.map(mem.data(), 0x100000, mem.size()), ContainsSubstring("overlaps"));
    if (ranges.size() > 1) {
        std::uint64_t hole = ranges[0].last + 1;  // x86: the MSI window 0xfee00000
        CHECK_THROWS_WITH(domain.map(mem.data(), hole, 4096),
                          ContainsSubstring("outside the IOMMU's usable IOVA ranges"));
    }
    CHECK_THROWS_WITH(domain.map(mem.data(), 0x800000, 100), ContainsSubstring("multiples of 4 KiB"));
    CHECK_THROWS_WITH(domain.unmap(0x200000, 4096), ContainsSubstring("no mapping with exactly"));
    void* gone = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(gone != MAP_FAILED);
    ::munmap(gone, 4096);
    CHECK_THROWS_WITH(domain.map(gone, 0x900000, 4096), ContainsSubstring("map DMA") && ContainsSubstring("0x900000"));
    domain.unmap(0x200000, mem.size());
    domain.map(mem.data(), 0x200000, mem.size());  // the same range maps again: nothing was left behind
    domain.unmap(0x200000, mem.size());
    CHECK_NOTHROW(nic.config_read16(0));
    still_usable(domain, lab.nics[1]);
}

TEST_CASE("a group file without permission says what to do", "[lab]") {
    auto lab = lab_or_skip();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // an unprivileged user: the container is open to all, the group file is not
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
        try {
            vfio::Domain domain;
            vfio::Device::open(domain, lab.nics[0]);
            ::_exit(1);
        } catch (const Error& e) {
            std::string m = e.what();
            ::_exit(m.find("Permission denied") != std::string::npos ? 0 : 2);
        } catch (...) {
            ::_exit(4);
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 1: opened without root; 2: another message; 3: setuid failed
    vfio::Domain domain;
    still_usable(domain, lab.nics[0]);
}

TEST_CASE("bind and unbind move a device between vfio-pci and its kernel driver", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Sysfs sys;
    const pci::Bdf nic = lab.nics[1];
    REQUIRE(sys.driver(nic) == "vfio-pci");
    vfio::BindOptions opt;
    opt.state_dir = "/run/bardrive-lab";

    auto done = vfio::unbind(sys, {nic}, false, opt);
    CHECK_THAT(done.at(0), ContainsSubstring("vfio-pci -> no driver"));
    CHECK(sys.driver(nic).empty());
    {
        vfio::Domain domain;
        CHECK_THROWS_WITH(vfio::Device::open(domain, nic), ContainsSubstring("not bound to any driver") &&
                                                               ContainsSubstring("bardrive bind " + nic.str()));
    }
    const bool have_igb = std::filesystem::exists("/sys/bus/pci/drivers/igb");
    if (have_igb) {  // hand it to the kernel's driver, as a machine would have it before bardrive
        std::ofstream("/sys/bus/pci/drivers/igb/bind") << nic.str();
        REQUIRE(wait_for([&] { return sys.driver(nic) == "igb"; }, std::chrono::seconds(10)));
    }
    done = vfio::bind(sys, {nic}, opt);
    CHECK_THAT(done.at(0), ContainsSubstring("-> vfio-pci"));
    CHECK(sys.driver(nic) == "vfio-pci");
    {
        vfio::Domain domain;
        still_usable(domain, nic);
    }
    CHECK_THAT(vfio::bind(sys, {nic}, opt).at(0), ContainsSubstring("already bound"));
    if (have_igb) {
        done = vfio::unbind(sys, {nic}, true, opt);
        CHECK_THAT(done.at(0), ContainsSubstring("vfio-pci -> igb"));
        CHECK(sys.driver(nic) == "igb");
        done = vfio::bind(sys, {nic}, opt);  // leave the guest as the runner made it
        CHECK(sys.driver(nic) == "vfio-pci");
    } else {
        CHECK_THROWS_WITH(vfio::unbind(sys, {nic}, true, opt), ContainsSubstring("no previous driver remembered"));
    }
}
