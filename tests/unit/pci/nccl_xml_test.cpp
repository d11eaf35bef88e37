// NCCL topology files: the four cloud machines of ../shared/topologies checked against their
// SOURCE.md, hand-written fixtures with NVSwitch and direct NVLinks (NV<n> as nvidia-smi counts it),
// and files that are broken or odd.
#include <sys/stat.h>

#include <catch2/catch_test_macros.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "pci/p2p.hpp"
#include "pci/topology.hpp"

using namespace bardrive;
using namespace bardrive::pci;

namespace {

bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

std::size_t idx(const Topology& t, const char* bdf) {
    auto i = t.find(Bdf::parse(bdf));
    REQUIRE(i);
    return *i;
}

std::string cls(const Topology& t, const char* a, const char* b) {
    return class_name(find_path(t, idx(t, a), idx(t, b)).cls);
}

std::vector<std::size_t> of_kind(const Topology& t, const std::string& kind) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < t.devices.size(); ++i)
        if (device_kind(t.devices[i]) == kind && !t.devices[i].is_bridge) out.push_back(i);
    return out;
}

std::size_t bridges(const Topology& t) {
    std::size_t n = 0;
    for (const auto& d : t.devices) n += d.is_bridge;
    return n;
}

// The NICs a GPU meets as `cls`, by address.
std::set<std::string> nics_at(const Topology& t, const char* gpu, PathClass c) {
    std::set<std::string> out;
    for (auto n : of_kind(t, "nic"))
        if (find_path(t, idx(t, gpu), n).cls == c) out.insert(t.devices[n].bdf.str());
    return out;
}

std::string all_warnings(const Topology& t) {
    std::string s;
    for (const auto& w : t.warnings) s += w + "\n";
    for (const auto& d : t.devices)
        for (const auto& w : d.warnings) s += d.bdf.str() + ": " + w + "\n";
    return s;
}

bool has_reason(const P2pReport& r, Reason::Effect e, const std::string& text) {
    for (const auto& x : r.reasons)
        if (x.effect == e && x.text.find(text) != std::string::npos) return true;
    return false;
}

const std::string shared = SHARED_TOPOLOGIES;

}  // namespace

TEST_CASE("NCCL XML of AWS p4d.24xlarge: 2 sockets x 2 switches x (2 A100 + 1 EFA)", "[pci][nccl]") {
    const std::string file = shared + "/aws-p4d-24xl-nccl-topo/p4d-24xl-topo.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES " (they live beside the repository)");
    auto t = read_nccl_xml(file);
    INFO(all_warnings(t));
    CHECK(t.source == "NCCL XML " + file);
    CHECK_FALSE(t.groups_known);
    CHECK_FALSE(t.bars_known);
    CHECK(t.numa_nodes == 2);
    CHECK(t.host_bridges.size() == 2);
    CHECK(t.cpu_vendor == "GenuineIntel");
    CHECK(t.cpu_family == 6);
    auto gpus = of_kind(t, "gpu"), nics = of_kind(t, "nic");
    REQUIRE(gpus.size() == 8);
    REQUIRE(nics.size() == 4);
    CHECK(bridges(t) == 4);
    for (auto g : gpus) {
        CHECK(t.devices[g].vendor_id == 0x10de);
        CHECK(t.devices[g].device_id == 0x20b0);
        CHECK(t.devices[g].class_code == 0x030200);
    }
    for (auto n : nics) CHECK(t.devices[n].vendor_id == 0x1d0f);
    // The switches' ids are fake (0xffff): unknown, not a vendor.
    const auto& sw = t.devices[idx(t, "ffff:ff:01.0")];
    CHECK(sw.vendor_id == 0xffff);
    CHECK(sw.subsystem_vendor_id == 0);
    CHECK(sw.is_bridge);
    // Each GPU pairs with the one EFA of its switch (PIX), with the other switch of its socket
    // through the CPU (PHB), and with the other socket across it (SYS).
    CHECK(cls(t, "0000:10:1c.0", "0000:10:1d.0") == "PIX");
    CHECK(nics_at(t, "0000:10:1c.0", PathClass::PIX) == std::set<std::string>{"0000:10:1b.0"});
    CHECK(nics_at(t, "0000:20:1d.0", PathClass::PIX) == std::set<std::string>{"0000:20:1b.0"});
    CHECK(nics_at(t, "0000:90:1c.0", PathClass::PIX) == std::set<std::string>{"0000:90:1b.0"});
    CHECK(nics_at(t, "0000:a0:1d.0", PathClass::PIX) == std::set<std::string>{"0000:a0:1b.0"});
    CHECK(nics_at(t, "0000:10:1c.0", PathClass::PHB) == std::set<std::string>{"0000:20:1b.0"});
    CHECK(nics_at(t, "0000:10:1c.0", PathClass::SYS) == std::set<std::string>{"0000:90:1b.0", "0000:a0:1b.0"});
    CHECK(cls(t, "0000:10:1c.0", "0000:20:1c.0") == "PHB");
    CHECK(cls(t, "0000:10:1c.0", "0000:a0:1d.0") == "SYS");
    const auto& g0 = t.devices[idx(t, "0000:10:1c.0")];
    CHECK(g0.numa_node == 0);
    CHECK(g0.local_cpus == "0-23,48-71");  // affinity 000000ff,ffff0000,00ffffff
    CHECK(t.devices[idx(t, "0000:90:1c.0")].local_cpus == "24-47,72-95");
    REQUIRE(g0.link);
    CHECK(g0.link->cur_gts == 8.0);
    CHECK(g0.link->cur_width == 16);
    // No <nvlink> in this file (the machine has NVSwitches): unknown, not "none".
    CHECK(t.nvlinks.empty());
    CHECK(t.nvlink_source.empty());
    CHECK(all_warnings(t).find("no <nvlink> elements") != std::string::npos);
}

TEST_CASE("NCCL XML of AWS p5.48xlarge: 8 bridges x (1 H100 + 4 EFA) under one CPU", "[pci][nccl]") {
    const std::string file = shared + "/aws-p5.48xl-nccl-topo/p5.48xl-topo.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_nccl_xml(file);
    INFO(all_warnings(t));
    CHECK(t.numa_nodes == 1);
    CHECK(t.host_bridges.size() == 1);
    CHECK(t.cpu_vendor == "AuthenticAMD");
    CHECK(t.cpu_family == 25);
    auto gpus = of_kind(t, "gpu"), nics = of_kind(t, "nic");
    REQUIRE(gpus.size() == 8);
    CHECK(nics.size() == 32);
    CHECK(bridges(t) == 8);
    const char* gpu_bdfs[] = {"0000:4f:00.0", "0000:60:00.0", "0000:70:00.0", "0000:80:00.0",
                              "0000:90:00.0", "0000:a0:00.0", "0000:b0:00.0", "0000:c0:00.0"};
    for (int k = 0; k < 8; ++k) {
        INFO(gpu_bdfs[k]);
        const auto& g = t.devices[idx(t, gpu_bdfs[k])];
        CHECK(g.os_names == std::vector<std::string>{"cuda:" + std::to_string(k)});
        CHECK(g.local_cpus == "0-47");
        CHECK(nics_at(t, gpu_bdfs[k], PathClass::PIX).size() == 4);
        CHECK(nics_at(t, gpu_bdfs[k], PathClass::PHB).size() == 28);
    }
    CHECK(nics_at(t, "0000:4f:00.0", PathClass::PIX) ==
          std::set<std::string>{"0000:50:00.0", "0000:51:00.0", "0000:52:00.0", "0000:53:00.0"});
    CHECK(t.devices[idx(t, "0000:50:00.0")].os_names == std::vector<std::string>{"rdma:rdmap79s0"});
    REQUIRE(t.devices[idx(t, "0000:50:00.0")].link);
    CHECK(t.devices[idx(t, "0000:50:00.0")].link->cur_width == 8);
    CHECK(cls(t, "0000:4f:00.0", "0000:c0:00.0") == "PHB");
    // An AMD Zen CPU (family 25): Linux's p2pdma lets peer traffic through its root complex.
    auto r = judge_p2p(t, idx(t, "0000:4f:00.0"), idx(t, "0000:60:00.0"));
    CHECK(has_reason(r, Reason::Effect::ok, "AMD Zen CPU (family 0x19)"));
}

TEST_CASE("NCCL XML of Azure NDv4: 4 NUMA nodes x 1 switch x (2 A100 + 2 HDR IB)", "[pci][nccl]") {
    const std::string file = shared + "/azure-ndv4-nccl-topo/ndv4-topo.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_nccl_xml(file);
    INFO(all_warnings(t));
    CHECK(t.numa_nodes == 4);
    CHECK(t.host_bridges.size() == 4);
    CHECK(t.cpu_vendor == "AuthenticAMD");
    CHECK(t.cpu_family == 23);
    auto gpus = of_kind(t, "gpu"), nics = of_kind(t, "nic");
    CHECK(gpus.size() == 8);
    CHECK(nics.size() == 8);
    CHECK(bridges(t) == 4);
    for (const auto& d : t.devices) CHECK(d.vendor_id == 0xffff);  // the file gives classes only
    CHECK(t.devices[idx(t, "0101:00:00.0")].class_code == 0x020700);
    // The pairing the VM hides: two GPUs and two NICs per switch, one switch per NUMA node.
    CHECK(nics_at(t, "0003:00:00.0", PathClass::PIX) == std::set<std::string>{"0103:00:00.0", "0104:00:00.0"});
    CHECK(nics_at(t, "0001:00:00.0", PathClass::PIX) == std::set<std::string>{"0101:00:00.0", "0102:00:00.0"});
    CHECK(nics_at(t, "000e:00:00.0", PathClass::PIX) == std::set<std::string>{"0107:00:00.0", "0108:00:00.0"});
    CHECK(nics_at(t, "000b:00:00.0", PathClass::PIX) == std::set<std::string>{"0105:00:00.0", "0106:00:00.0"});
    CHECK(nics_at(t, "000b:00:00.0", PathClass::SYS).size() == 6);
    CHECK(cls(t, "0003:00:00.0", "0004:00:00.0") == "PIX");
    CHECK(cls(t, "0003:00:00.0", "0001:00:00.0") == "SYS");
    CHECK(t.devices[idx(t, "0003:00:00.0")].numa_node == 0);
    CHECK(t.devices[idx(t, "0001:00:00.0")].numa_node == 1);
    CHECK(t.devices[idx(t, "000d:00:00.0")].numa_node == 2);
    CHECK(t.devices[idx(t, "000b:00:00.0")].numa_node == 3);
    CHECK(t.devices[idx(t, "0003:00:00.0")].local_cpus == "0-23");
    CHECK(t.devices[idx(t, "0001:00:00.0")].local_cpus == "24-47");
    CHECK(t.devices[idx(t, "000d:00:00.0")].local_cpus == "48-71");
    CHECK(t.devices[idx(t, "000b:00:00.0")].local_cpus == "72-95");
}

TEST_CASE("NCCL XML of Azure NDv5: 2 NUMA nodes x 4 switches x (1 H100 + 1 NDR IB)", "[pci][nccl]") {
    const std::string file = shared + "/azure-ndv5-nccl-topo/ndv5-topo.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_nccl_xml(file);
    INFO(all_warnings(t));
    CHECK(t.numa_nodes == 2);
    CHECK(t.cpu_vendor == "GenuineIntel");
    CHECK(t.cpu_family == 6);
    CHECK(of_kind(t, "gpu").size() == 8);
    CHECK(of_kind(t, "nic").size() == 8);
    CHECK(bridges(t) == 8);
    CHECK(t.devices[idx(t, "ffff:ff:01.0")].vendor_id == 0xffff);  // vendor="0x0000": unknown
    const std::map<std::string, std::string> pair = {
        {"0001:00:00.0", "0101:00:00.0"}, {"0002:00:00.0", "0102:00:00.0"}, {"0003:00:00.0", "0103:00:00.0"},
        {"0008:00:00.0", "0104:00:00.0"}, {"0009:00:00.0", "0105:00:00.0"}, {"000a:00:00.0", "0106:00:00.0"},
        {"000b:00:00.0", "0107:00:00.0"}, {"000c:00:00.0", "0108:00:00.0"}};
    for (const auto& [gpu, nic] : pair) {
        INFO(gpu);
        CHECK(nics_at(t, gpu.c_str(), PathClass::PIX) == std::set<std::string>{nic});
    }
    CHECK(nics_at(t, "0001:00:00.0", PathClass::PHB).size() == 3);
    CHECK(nics_at(t, "0001:00:00.0", PathClass::SYS).size() == 4);
    CHECK(cls(t, "0001:00:00.0", "0008:00:00.0") == "PHB");
    CHECK(cls(t, "0001:00:00.0", "0009:00:00.0") == "SYS");
    CHECK(t.devices[idx(t, "0001:00:00.0")].local_cpus == "0-47");
    CHECK(t.devices[idx(t, "000c:00:00.0")].local_cpus == "48-95");
    REQUIRE(t.devices[idx(t, "0001:00:00.0")].link);
    CHECK(t.devices[idx(t, "0001:00:00.0")].link->cur_gts == 32.0);
}

TEST_CASE("NCCL XML with NVSwitches: NV18 between full GPUs, NV12 with the one of 12 links", "[pci][nccl][nvlink]") {
    auto t = read_nccl_xml(PCI_FIXTURES "/nccl-nvswitch.xml");
    INFO(all_warnings(t));
    CHECK(t.nvlink_source == "NCCL XML " PCI_FIXTURES "/nccl-nvswitch.xml");
    const char* g[] = {"0000:18:00.0", "0000:1a:00.0", "0000:9c:00.0", "0000:9e:00.0"};
    const unsigned expect[4][4] = {{0, 18, 18, 12}, {18, 0, 18, 12}, {18, 18, 0, 12}, {12, 12, 12, 0}};
    for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
            INFO(g[a] << " - " << g[b]);
            CHECK(nvlinks_between(t, idx(t, g[a]), idx(t, g[b])) == expect[a][b]);
        }
    CHECK(nvlinks_between(t, idx(t, g[0]), idx(t, "0000:19:00.0")) == 0);  // a NIC
    // GPU 2's last switch is one NCCL could not see: a switch without an address.
    std::vector<NvLink> of2;
    for (const auto& l : t.nvlinks)
        if (l.gpu == idx(t, g[2])) of2.push_back(l);
    REQUIRE(of2.size() == 4);
    for (const auto& l : of2) CHECK(l.peer_type == NvLink::Peer::nvswitch);
    CHECK_FALSE(of2[3].peer);
    REQUIRE(of2[0].peer);
    CHECK(of2[0].peer->str() == "0000:05:00.0");
    CHECK(t.devices[idx(t, g[2])].os_names == std::vector<std::string>{"cuda:2"});
    CHECK(t.devices[idx(t, "0000:19:00.0")].os_names == std::vector<std::string>{"rdma:mlx5_0"});
    CHECK(cls(t, g[0], "0000:19:00.0") == "PIX");

    // NVLink adds a note; the PCIe verdict stays what it is without NVLinks.
    auto r = judge_p2p(t, idx(t, g[0]), idx(t, g[3]));
    CHECK(r.nvlinks == 12);
    CHECK(has_reason(r, Reason::Effect::note, "NV12: the GPUs share 12 NVLinks through NVSwitches"));
    Topology bare = t;
    bare.nvlinks.clear();
    bare.nvlink_source.clear();
    for (auto a : of_kind(t, "gpu"))
        for (auto b : of_kind(t, "gpu")) {
            auto with = judge_p2p(t, a, b), without = judge_p2p(bare, a, b);
            CHECK(with.verdict == without.verdict);
            CHECK(with.path.cls == without.path.cls);
            CHECK(without.nvlinks == 0);
        }
}

TEST_CASE("NCCL XML with direct NVLinks: NV4, NV2, NV1 and PCIe where there is none", "[pci][nccl][nvlink]") {
    auto t = read_nccl_xml(PCI_FIXTURES "/nccl-nvlink-direct.xml");
    INFO(all_warnings(t));
    const char* g[] = {"0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0", "0000:af:00.0"};
    const unsigned expect[4][4] = {{0, 4, 2, 0}, {4, 0, 0, 1}, {2, 0, 0, 0}, {0, 1, 0, 0}};
    for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
            INFO(g[a] << " - " << g[b]);
            CHECK(nvlinks_between(t, idx(t, g[a]), idx(t, g[b])) == expect[a][b]);
        }
    CHECK(cls(t, g[2], g[3]) == "PHB");  // each on its own root port of one CPU
    CHECK(cls(t, g[0], g[3]) == "SYS");
    CHECK(t.devices[idx(t, g[0])].local_cpus == "0-7");  // affinity 0x000000ff
    std::map<NvLink::Peer, unsigned> by_type;
    for (const auto& l : t.nvlinks)
        if (l.gpu == idx(t, g[0])) by_type[l.peer_type] += l.links;
    CHECK(by_type[NvLink::Peer::gpu] == 6);
    CHECK(by_type[NvLink::Peer::cpu] == 2);  // tclass 0x068001: an NPU, no GPU pair
    // GPU1 names GPU0 as 00000000:3b:00.0 with no tclass: the class comes from GPU0's <pci>.
    bool found = false;
    for (const auto& l : t.nvlinks)
        if (l.gpu == idx(t, g[1]) && l.peer && l.peer->str() == g[0]) {
            found = true;
            CHECK(l.peer_type == NvLink::Peer::gpu);
        }
    CHECK(found);
    auto r = judge_p2p(t, idx(t, g[0]), idx(t, g[1]));
    CHECK(r.nvlinks == 4);
    CHECK(has_reason(r, Reason::Effect::note, "NV4: the GPUs share 4 NVLinks ("));
    CHECK_FALSE(has_reason(judge_p2p(t, idx(t, g[0]), idx(t, g[3])), Reason::Effect::note, "NVLink"));
}

TEST_CASE("NCCL XML that is not well-formed or not NCCL's is an error naming file and line", "[pci][nccl][bad-input]") {
    auto error_of = [](const std::string& text) {
        try {
            parse_nccl_xml(text, "t.xml");
        } catch (const Error& e) {
            return std::string(e.what()) + " | " + e.object() + " | " + e.hint();
        }
        FAIL("no error for: " << text);
        return std::string();
    };
    auto e = error_of("<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n");
    CHECK(e.find("t.xml") != std::string::npos);
    CHECK(e.find("line 3") != std::string::npos);
    CHECK(e.find("NCCL_TOPO_DUMP_FILE") != std::string::npos);
    e = error_of("<?xml version=\"1.0\"?>\n<topology version=\"2.0\"/>\n");
    CHECK(e.find("root element is <topology>, not <system>") != std::string::npos);
    CHECK(e.find("--hwloc-xml") != std::string::npos);
    CHECK(error_of("").find("t.xml") != std::string::npos);
    // Nested past libxml2's limit: said in words a user can act on, not "use XML_PARSE_HUGE".
    std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
    for (int i = 0; i < 300; ++i) deep += "<pci busid=\"0000:01:00.0\" class=\"0x060400\">";
    for (int i = 0; i < 300; ++i) deep += "</pci>";
    e = error_of(deep + "</cpu></system>");
    CHECK(e.find("nest deeper than 256 levels") != std::string::npos);
    CHECK(e.find("XML_PARSE_HUGE") == std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nend\n").find("t.xml") != std::string::npos);
    CHECK_THROWS_AS(read_nccl_xml(PCI_FIXTURES "/no-such-file.xml"), Error);
    try {
        read_nccl_xml(PCI_FIXTURES "/dual-socket.snapshot");
        FAIL("a snapshot read as NCCL XML");
    } catch (const Error& err) {
        CHECK(err.object() == PCI_FIXTURES "/dual-socket.snapshot");
    }
}

TEST_CASE("odd NCCL XML elements and attributes are warnings naming the element", "[pci][nccl][bad-input]") {
    auto t = parse_nccl_xml(R"(<system version="2">
  <cpu numaid="-7"/>
  <cpu affinity="zz" familyid="x">
    <pci class="0x060400">
      <pci busid="0000:02:00.0" class="0x030200"><gpu dev="0"/></pci>
    </pci>
    <pci busid="0000:03:00.0" class="0x03zz" vendor="0x1234567" link_speed="fast" link_width="16">
      <gpu dev="-1">
        <nvlink target="0000:04:00.0" count="many" tclass="0x030200"/>
        <nvlink target="0000:04:00.0" count="2" tclass="0x0c0330"/>
        <nvlink target="0000:09:00.0" count="1"/>
        <nvlink target="0000:03:00.0" count="4"/>
      </gpu>
      <blink/>
    </pci>
    <pci busid="0000:03:00.0" class="0x030200"/>
    <pci busid="0000:04:00.0" class="0x030200"/>
    <nic><net name="eth0" dev="0"/></nic>
  </cpu>
  <gpu/>
</system>
)",
                            "odd.xml");
    auto w = all_warnings(t);
    INFO(w);
    CHECK(t.devices.size() == 2);  // 03:00.0 and 04:00.0; the <pci> without busid is dropped with its child
    CHECK(w.find("odd.xml line 1: <system> version '2'") != std::string::npos);
    CHECK(w.find("odd.xml line 3: <cpu> has no numaid") != std::string::npos);
    CHECK(w.find("affinity 'zz' is not a CPU mask") != std::string::npos);
    CHECK(w.find("familyid 'x' is not a number") != std::string::npos);
    CHECK(w.find("odd.xml line 4: <pci> has no busid; ignored with the 1 <pci> elements below it") !=
          std::string::npos);
    CHECK(w.find("class '0x03zz' is not a hex class code") != std::string::npos);
    CHECK(w.find("vendor '0x1234567' is not a 16-bit hex ID") != std::string::npos);
    CHECK(w.find("link_speed 'fast'") != std::string::npos);
    CHECK(w.find("<gpu> dev '-1' is not a CUDA device index") != std::string::npos);
    CHECK(w.find("line 9: <nvlink> count 'many'") != std::string::npos);
    CHECK(w.find("line 10: <nvlink> target class 0x0c0330 is neither") != std::string::npos);
    CHECK(w.find("line 11: <nvlink> has no tclass and its target is not in this file") != std::string::npos);
    CHECK(w.find("<blink> is not expected inside <pci>") != std::string::npos);
    CHECK(w.find("numaid '-7' is not a NUMA node number (0 or more)") != std::string::npos);
    CHECK(w.find("line 12: <nvlink> targets its own GPU 0000:03:00.0; ignored") != std::string::npos);
    CHECK(w.find("busid 0000:03:00.0 appears twice") != std::string::npos);
    CHECK(w.find("<net> name 'eth0' hangs from the CPU") != std::string::npos);
    CHECK(w.find("line 20: <gpu> is not expected inside <system>") != std::string::npos);
    const auto& d = t.devices[idx(t, "0000:03:00.0")];
    CHECK(d.vendor_id == 0xffff);
    CHECK_FALSE(d.link);
    CHECK(d.numa_node == -1);
    CHECK(d.local_cpus.empty());
    CHECK(t.nvlinks.size() == 2);  // the two with a count, of unknown peer type
    for (const auto& l : t.nvlinks) CHECK(l.peer_type == NvLink::Peer::unknown);
    CHECK(nvlinks_between(t, idx(t, "0000:03:00.0"), idx(t, "0000:04:00.0")) == 0);
    // Classes and verdicts still compute.
    for (std::size_t a = 0; a < t.devices.size(); ++a)
        for (std::size_t b = 0; b < t.devices.size(); ++b) judge_p2p(t, a, b);
}
