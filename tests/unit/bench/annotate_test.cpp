#include "bench/p2p/annotate.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>

using namespace bardrive;
using namespace bardrive::bench;
using Catch::Matchers::WithinRel;

namespace {

// Two GPUs on two root ports of one host bridge; the first root port runs at Gen4, the rest Gen5.
pci::Topology two_gpus() {
    pci::Topology t;
    t.source = "hand-built";
    t.numa_nodes = 2;
    t.host_bridges.push_back(pci::HostBridge{"pci0000:00", 0, 0, 0, std::nullopt, {}});
    auto add = [&](const char* bdf, std::uint32_t cls, bool bridge, double gts, int numa) {
        pci::Device d;
        d.bdf = pci::Bdf::parse(bdf);
        d.class_code = cls;
        d.is_bridge = bridge;
        d.numa_node = numa;
        if (gts > 0) d.link = pci::LinkInfo{gts, 16, gts, 16};
        t.devices.push_back(d);
    };
    add("00:00.0", 0x060000, false, 0, 0);
    add("00:01.0", 0x060400, true, 16.0, 0);
    add("00:02.0", 0x060400, true, 32.0, 0);
    add("01:00.0", 0x030200, false, 32.0, 0);
    add("02:00.0", 0x030200, false, 32.0, -1);
    pci::assemble(t,
                  {std::nullopt, std::nullopt, std::nullopt, pci::Bdf::parse("00:01.0"), pci::Bdf::parse("00:02.0")});
    return t;
}

}  // namespace

TEST_CASE("a link's theoretical rate follows its encoding") {
    CHECK_THAT(link_gbps({32.0, 16, 32.0, 16}), WithinRel(63.015, 1e-4));  // Gen5 x16, 128b/130b
    CHECK_THAT(link_gbps({8.0, 16, 2.5, 1}), WithinRel(0.25, 1e-9));       // trained down to Gen1 x1, 8b/10b
    CHECK_THAT(link_gbps({64.0, 16, 64.0, 16}), WithinRel(118.0, 1e-9));   // Gen6 Flit: 236 of 256 bytes
    CHECK(link_gbps({32.0, 16, 0, 0}) == 0);                               // link down
}

TEST_CASE("paths get their class and the slowest link on the way") {
    Report r;
    PathResult peer = make_path("peer", "gpu0", "gpu1", false);
    peer.src_bdf = "0000:01:00.0";
    peer.dst_bdf = "0000:02:00.0";
    PathResult both = make_path("peer", "gpu0", "gpu1", true);
    both.src_bdf = peer.src_bdf;
    both.dst_bdf = peer.dst_bdf;
    PathResult local = make_path("ce", "host0", "gpu0", false);
    local.dst_bdf = "0000:01:00.0";
    local.host_node = 0;
    PathResult remote = make_path("ce", "host1", "gpu0", false);
    remote.dst_bdf = "0000:01:00.0";
    remote.host_node = 1;
    PathResult unknown = make_path("ce", "host0", "gpu1", false);
    unknown.dst_bdf = "0000:02:00.0";
    unknown.host_node = 0;
    PathResult cpu = make_path("mmio-wc", "host", "bar", false);
    cpu.dst_bdf = "0000:01:00.0";
    PathResult elsewhere = make_path("ce", "host0", "gpu7", false);
    elsewhere.dst_bdf = "0000:99:00.0";
    elsewhere.topology = "kept";
    PathResult nvlink = peer;
    nvlink.points = {{1 << 30, 396.0, 395.0}};
    r.paths = {peer, both, local, remote, unknown, cpu, elsewhere, nvlink};
    annotate(r, two_gpus());

    CHECK(r.paths[0].topology == "PHB");
    CHECK_THAT(r.paths[0].link_gbps, WithinRel(31.508, 1e-4));  // the Gen4 root port bounds it
    CHECK_THAT(r.paths[1].link_gbps, WithinRel(2 * 31.508, 1e-4));
    CHECK(r.paths[2].topology == "NUMA local");
    CHECK_THAT(r.paths[2].link_gbps, WithinRel(31.508, 1e-4));
    CHECK(r.paths[3].topology == "NUMA remote");
    CHECK(r.paths[4].topology == "NUMA node of device unknown");
    CHECK_THAT(r.paths[4].link_gbps, WithinRel(63.015, 1e-4));
    CHECK(r.paths[5].topology == "CPU to device on NUMA node 0");
    CHECK(r.paths[6].topology == "kept");
    CHECK(r.paths[6].link_gbps == 0);
    CHECK(r.paths[7].topology == "PHB");
    CHECK(r.paths[7].note.find("faster than its PCIe route (31.5 GB/s)") != std::string::npos);
    CHECK(r.paths[7].link_gbps == 0);  // no share of a link the bytes did not take
}
