// The snapshots captured in every lab preset (`bardrive topo snapshot` inside `lab/lab run PRESET
// --bind all`, committed under fixtures/) classify and judge as the presets are built.
#include <catch2/catch_test_macros.hpp>

#include "lab_expect.hpp"
#include "pci/p2p.hpp"
#include "pci/topology.hpp"

using namespace bardrive::pci;

TEST_CASE("lab preset snapshots: tree, default matrix devices, classes and verdicts", "[pci][lab-fixture]") {
    for (const auto& p : lab_expect::presets()) {
        INFO("preset " << p.name);
        auto src = open_source(std::string(PCI_FIXTURES) + "/lab-" + p.name + ".snapshot");
        auto t = read_topology(*src);
        CHECK(t.host_bridges.size() == p.host_bridges);
        std::vector<std::string> got;
        for (auto i : p2p_candidates(t, false)) got.push_back(t.devices[i].bdf.str());
        CHECK(got == std::vector<std::string>(p.matrix.begin(), p.matrix.end()));
        for (const auto& pair : p.pairs) {
            INFO(pair.a << " -> " << pair.b);
            auto a = t.find(Bdf::parse(pair.a)), b = t.find(Bdf::parse(pair.b));
            REQUIRE(a);
            REQUIRE(b);
            CHECK(class_name(find_path(t, *a, *b).cls) == std::string(pair.cls));
            CHECK(class_name(find_path(t, *b, *a).cls) == std::string(pair.cls));
            auto r = judge_p2p(t, *a, *b);
            std::string why;
            for (const auto& x : r.reasons) why += std::string(effect_name(x.effect)) + ": " + x.text + "\n";
            INFO(why);
            CHECK(verdict_name(r.verdict) == std::string(pair.verdict));
            CHECK(t.devices[*a].driver == "vfio-pci");
            CHECK(t.devices[*a].iommu_group >= 0);
        }
    }
}

TEST_CASE("lab switch preset: roles from the PCIe capability, ACS of QEMU's root ports", "[pci][lab-fixture]") {
    auto src = open_source(PCI_FIXTURES "/lab-switch.snapshot");
    auto t = read_topology(*src);
    auto role = [&](const char* bdf) { return t.devices[*t.find(Bdf::parse(bdf))].role; };
    CHECK(role("0000:00:02.0") == Role::root_port);
    CHECK(role("0000:01:00.0") == Role::switch_upstream);
    CHECK(role("0000:02:00.0") == Role::switch_downstream);
    const auto& rp = t.devices[*t.find(Bdf::parse("0000:00:02.0"))];
    REQUIRE(rp.acs);  // QEMU root ports expose ACS; the xio3130 switch ports do not
    CHECK(rp.acs->control & acs::p2p_request_redirect);
    CHECK_FALSE(t.devices[*t.find(Bdf::parse("0000:02:00.0"))].acs);
    const auto& win = t.devices[*t.find(Bdf::parse("0000:04:00.0"))];
    REQUIRE(win.largest_memory_bar());
    CHECK(win.largest_memory_bar()->index == 2);
    CHECK(win.largest_memory_bar()->size == (std::uint64_t{64} << 20));
}

TEST_CASE("lab numa preset: host bridges carry their NUMA nodes", "[pci][lab-fixture]") {
    auto src = open_source(PCI_FIXTURES "/lab-numa.snapshot");
    auto t = read_topology(*src);
    CHECK(t.numa_nodes == 2);
    auto node = [&](const char* bdf) {
        return t.host_bridges[t.devices[*t.find(Bdf::parse(bdf))].host_bridge].numa_node;
    };
    CHECK(node("0000:21:00.0") == 0);
    CHECK(node("0000:41:00.0") == 0);
    CHECK(node("0000:81:00.0") == 1);
}

TEST_CASE("ranking NIC -> window pairs: the NIC on the window's switch first, then by class and verdict",
          "[pci][p2p][lab-fixture]") {
    for (const char* preset : {"switch", "numa"}) {
        INFO("preset " << preset);
        auto src = open_source(std::string(PCI_FIXTURES) + "/lab-" + preset + ".snapshot");
        auto t = read_topology(*src);
        std::vector<std::size_t> nics, windows;
        for (std::size_t i = 0; i < t.devices.size(); ++i) {
            if (t.devices[i].vendor_id == 0x8086 && t.devices[i].device_id == 0x10c9) nics.push_back(i);
            if (t.devices[i].vendor_id == 0x1af4 && t.devices[i].device_id == 0x1110) windows.push_back(i);
        }
        auto ranked = rank_p2p_pairs(t, nics, windows);
        REQUIRE(ranked.size() == nics.size() * windows.size());
        for (std::size_t k = 1; k < ranked.size(); ++k) {
            const auto &x = ranked[k - 1], &y = ranked[k];
            CHECK((x.verdict < y.verdict || (x.verdict == y.verdict && x.path.cls <= y.path.cls)));
        }
        auto pair = [&](const P2pReport& r) {
            return t.devices[r.initiator].bdf.str() + " " + t.devices[r.target].bdf.str();
        };
        if (std::string(preset) == "switch") {
            CHECK(pair(ranked.front()) == "0000:03:00.0 0000:04:00.0");  // PIX, below one switch
            CHECK(ranked.front().verdict == Verdict::supported);
        } else {
            CHECK(pair(ranked.front()) == "0000:81:00.0 0000:82:00.0");  // PHB on node 1 beats NODE and SYS
            CHECK(ranked.back().path.cls == PathClass::SYS);
        }
    }
    CHECK(rank_p2p_pairs(Topology{}, {}, {}).empty());
}
