// The NIC pager's set-up check of the NIC -> window path, over captured topologies (the pager itself runs
// against QEMU's igb in the lab: tests/lab/umem_nic_test.cpp).
#include "umem/nic_pager.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"
#include "pci/source.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
pci::Topology fixture(const char* name) {
    auto src = pci::open_source(std::string(PCI_FIXTURES) + "/" + name);
    return pci::read_topology(*src);
}
}  // namespace

TEST_CASE("NIC pager set-up: pci/'s verdict on the NIC -> window path decides") {
    auto server = fixture("dual-socket.snapshot");
    // Into a function with no memory BAR: unsupported, refused with the reason and what to do.
    CHECK_THROWS_WITH(
        umem::check_nic_window_path(server, pci::Bdf::parse("0000:af:00.0"), pci::Bdf::parse("0000:b1:00.0")),
        ContainsSubstring("unsupported") && ContainsSubstring("no memory BAR") &&
            ContainsSubstring("bardrive topo p2p"));
    // Across sockets: platform-dependent, a warning only; through a switch: supported.
    CHECK_NOTHROW(
        umem::check_nic_window_path(server, pci::Bdf::parse("0000:1a:00.0"), pci::Bdf::parse("0000:af:00.0")));
    auto lab = fixture("lab-switch.snapshot");
    CHECK_NOTHROW(umem::check_nic_window_path(lab, pci::Bdf::parse("0000:03:00.0"), pci::Bdf::parse("0000:04:00.0")));
    // Devices the topology does not have: not checked, not refused.
    CHECK_NOTHROW(umem::check_nic_window_path(lab, pci::Bdf::parse("0000:99:00.0"), pci::Bdf::parse("0000:04:00.0")));
}
