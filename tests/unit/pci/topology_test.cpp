// Topology building and P2P classification over captured snapshots: the hand-built dual-socket server
// pair by pair, real servers' hwloc XML from ../shared/topologies, and inputs that lie.
#include "pci/topology.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <map>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/file.hpp"
#include "pci/p2p.hpp"

using namespace bardrive;
using namespace bardrive::pci;

namespace {

Topology dual_socket() {
    auto src = open_source(PCI_FIXTURES "/dual-socket.snapshot");
    return read_topology(*src);
}

std::size_t idx(const Topology& t, const char* bdf) {
    auto i = t.find(Bdf::parse(bdf));
    REQUIRE(i);
    return *i;
}

std::string cls(const Topology& t, const char* a, const char* b) {
    return class_name(find_path(t, idx(t, a), idx(t, b)).cls);
}

bool has_reason(const P2pReport& r, Reason::Effect e, const std::string& text) {
    for (const auto& x : r.reasons)
        if (x.effect == e && x.text.find(text) != std::string::npos) return true;
    return false;
}

std::string dump(const P2pReport& r) {
    std::string s = verdict_name(r.verdict);
    for (const auto& x : r.reasons) s += std::string("\n  ") + effect_name(x.effect) + ": " + x.text;
    return s;
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("dual-socket fixture: tree, roles and per-device facts", "[pci][topology]") {
    auto t = dual_socket();
    CHECK(t.devices.size() == 23);
    CHECK(t.host_bridges.size() == 4);
    CHECK(t.numa_nodes == 2);
    CHECK(t.cpu_vendor == "GenuineIntel");
    CHECK(t.cpu_family == 6);

    const auto& gpu0 = t.devices[idx(t, "0000:1a:00.0")];
    CHECK(gpu0.role == Role::endpoint);
    REQUIRE(gpu0.parent);
    CHECK(t.devices[*gpu0.parent].bdf.str() == "0000:19:00.0");
    CHECK(t.devices[*gpu0.parent].role == Role::switch_downstream);
    CHECK(t.devices[idx(t, "0000:18:00.0")].role == Role::switch_upstream);
    CHECK(t.devices[idx(t, "0000:17:00.0")].role == Role::root_port);
    // 1e:00.0 has 64 config bytes: its role is inferred from the tree.
    CHECK(t.devices[idx(t, "0000:1e:00.0")].role == Role::switch_downstream);
    CHECK_FALSE(t.devices[idx(t, "0000:1e:00.0")].port_type);
    CHECK(gpu0.numa_node == 0);
    CHECK(gpu0.iommu_group == 20);
    CHECK(gpu0.driver == "vfio-pci");
    REQUIRE(gpu0.bars.size() == 3);
    CHECK(gpu0.bars[1].index == 1);
    CHECK(gpu0.bars[1].size == (std::uint64_t{64} << 30));
    CHECK(gpu0.bars[1].is64);
    CHECK(gpu0.bars[1].prefetchable);
    CHECK_FALSE(gpu0.bars[0].prefetchable);
    CHECK(gpu0.bars[1].resizable_sizes.back() == (std::uint64_t{64} << 30));
    REQUIRE(gpu0.link);
    CHECK_FALSE(gpu0.link->downgraded());
    CHECK(gpu0.aer);
    CHECK(gpu0.os_names == std::vector<std::string>{"nvidia:0"});
    CHECK(t.devices[idx(t, "0000:af:00.0")].os_names == std::vector<std::string>{"nvidia:2"});

    const auto& nvme0 = t.devices[idx(t, "0000:1f:00.0")];
    REQUIRE(nvme0.link);
    CHECK(nvme0.link->downgraded());
    CHECK(nvme0.os_names == std::vector<std::string>{"nvme:nvme0", "block:nvme0n1"});
    CHECK(device_kind(nvme0) == "nvme");

    const auto& nic0 = t.devices[idx(t, "0000:1c:00.0")];
    REQUIRE(nic0.sriov);
    CHECK(nic0.sriov->total_vfs == 8);
    CHECK(nic0.sriov->num_vfs == 1);
    CHECK(nic0.ats);
    const auto& vf = t.devices[idx(t, "0000:1c:00.2")];
    REQUIRE(vf.physfn);
    CHECK(vf.physfn->str() == "0000:1c:00.0");
    CHECK_FALSE(vf.link);
    CHECK(t.devices[idx(t, "0000:1c:00.1")].os_names == std::vector<std::string>{"net:ens1f1"});

    const auto& dsp = t.devices[idx(t, "0000:19:08.0")];
    REQUIRE(dsp.acs);
    CHECK(acs::describe(dsp.acs->control) == "SV RR CR UF");
    CHECK(t.group_members(22).size() == 2);
    CHECK(t.host_bridges[t.devices[idx(t, "0000:af:00.0")].host_bridge].numa_node == 1);
}

TEST_CASE("dual-socket fixture: path classes pair by pair", "[pci][p2p]") {
    auto t = dual_socket();
    const std::map<std::pair<std::string, std::string>, std::string> expected = {
        {{"0000:1a:00.0", "0000:1a:00.0"}, "X"},
        {{"0000:1a:00.0", "0000:1b:00.0"}, "PIX"},  // two ports of one switch
        {{"0000:1a:00.0", "0000:1c:00.0"}, "PIX"},
        {{"0000:1c:00.0", "0000:1c:00.1"}, "PIX"},  // two functions below one port
        {{"0000:1c:00.0", "0000:1c:00.2"}, "PIX"},  // PF and its VF
        {{"0000:1a:00.0", "0000:1f:00.0"}, "PXB"},  // through a second, nested switch
        {{"0000:1c:00.1", "0000:1f:00.0"}, "PXB"},
        {{"0000:1a:00.0", "0000:3b:00.0"}, "NODE"},  // two host bridges of socket 0
        {{"0000:1f:00.0", "0000:3b:00.0"}, "NODE"},
        {{"0000:af:00.0", "0000:b0:00.0"}, "PHB"},  // two root ports of one host bridge
        {{"0000:1a:00.0", "0000:af:00.0"}, "SYS"},  // socket 0 to socket 1
        {{"0000:3b:00.0", "0000:b0:00.0"}, "SYS"},
    };
    for (const auto& [pair, want] : expected) {
        INFO(pair.first << " <-> " << pair.second);
        CHECK(cls(t, pair.first.c_str(), pair.second.c_str()) == want);
        CHECK(cls(t, pair.second.c_str(), pair.first.c_str()) == want);  // symmetric
    }
    auto p = find_path(t, idx(t, "0000:1a:00.0"), idx(t, "0000:1b:00.0"));
    std::vector<std::string> hops;
    for (auto x : p.bridges()) hops.push_back(t.devices[x].bdf.str());
    CHECK(hops == std::vector<std::string>{"0000:19:00.0", "0000:18:00.0", "0000:19:04.0"});
    CHECK_FALSE(p.via_host_bridge);
}

TEST_CASE("dual-socket fixture: P2P verdicts and their reasons", "[pci][p2p]") {
    auto t = dual_socket();
    using E = Reason::Effect;
    auto judge = [&](const char* a, const char* b) { return judge_p2p(t, idx(t, a), idx(t, b)); };

    auto r = judge("0000:1a:00.0", "0000:1b:00.0");  // GPU0 -> GPU1 across the switch
    INFO(dump(r));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, E::ok, "common upstream bridge 0000:18:00.0"));
    CHECK(has_reason(r, E::note, "BAR1 64 GiB, 64-bit, prefetchable"));

    r = judge("0000:1b:00.0", "0000:1c:00.0");  // GPU1 -> NIC0: RR/CR on the NIC's port
    INFO(dump(r));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, E::note, "ACS redirect/egress control enabled on 0000:19:08.0 (RR CR)"));
    CHECK(has_reason(r, E::ok, "on Linux's p2pdma allowlist (Intel Skylake-E host bridge 8086:2030)"));
    CHECK(
        has_reason(r, E::action, "IOMMU group 22 (2 functions) is not viable for VFIO until 0000:1c:00.1 (mlx5_core)"));

    r = judge("0000:1a:00.0", "0000:1f:00.0");  // GPU0 -> NVMe0: a port whose ACS could not be read
    INFO(dump(r));
    CHECK(r.verdict == Verdict::platform_dependent);
    CHECK(has_reason(r, E::platform, "ACS control of 0000:1e:00.0 unknown"));

    r = judge("0000:1a:00.0", "0000:3b:00.0");  // NODE between allowlisted Skylake host bridges
    INFO(dump(r));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, E::ok, "within one NUMA node"));
    CHECK(has_reason(r, E::action, "0000:3b:00.0 (igb)"));

    r = judge("0000:1a:00.0", "0000:af:00.0");  // SYS, into a 256 MiB BAR1 that could be 64 GiB
    INFO(dump(r));
    CHECK(r.verdict == Verdict::platform_dependent);
    CHECK(has_reason(r, E::platform, "inter-socket"));
    CHECK(has_reason(r, E::action, "BAR1 is 256 MiB but the device supports up to 64 GiB"));
    CHECK(has_reason(r, E::note, "window onto part of the GPU's memory"));

    r = judge("0000:af:00.0", "0000:b0:00.0");  // PHB through an allowlisted root complex
    INFO(dump(r));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, E::ok, "through root complex pci0000:ae (8086:2030)"));

    r = judge("0000:af:00.0", "0000:b1:00.0");  // target without a memory BAR
    INFO(dump(r));
    CHECK(r.verdict == Verdict::unsupported);
    CHECK(has_reason(r, E::block, "no memory BAR"));
}

TEST_CASE("default matrix devices: GPUs, NICs, NVMe; --all adds every endpoint", "[pci][p2p]") {
    auto t = dual_socket();
    auto def = p2p_candidates(t, false);
    std::vector<std::string> got;
    for (auto i : def) got.push_back(t.devices[i].bdf.str());
    CHECK(got == std::vector<std::string>{"0000:1a:00.0", "0000:1b:00.0", "0000:1c:00.0", "0000:1c:00.1",
                                          "0000:1c:00.2", "0000:1f:00.0", "0000:3b:00.0", "0000:af:00.0",
                                          "0000:b0:00.0"});
    CHECK(p2p_candidates(t, true).size() == def.size() + 2);  // + host bridge 00:00.0 and b1:00.0
}

namespace {
// Two endpoints under two root ports of one host bridge, assembled by hand.
Topology two_root_ports(std::uint16_t hb_vendor, std::uint16_t hb_device, int group) {
    Topology t;
    t.source = "hand-built";
    t.numa_nodes = 1;
    t.host_bridges.push_back(HostBridge{"pci0000:00", 0, 0, 0, std::nullopt, {}});
    auto add = [&](const char* bdf, std::uint32_t cls, bool bridge) {
        Device d;
        d.bdf = Bdf::parse(bdf);
        d.class_code = cls;
        d.is_bridge = bridge;
        d.vendor_id = 0x8086;
        d.iommu_group = group;
        if (!bridge) d.bars.push_back(Bar{0, 0xe0000000, 1u << 20, false, false, false, {}});
        t.devices.push_back(d);
    };
    add("00:00.0", 0x060000, false);
    t.devices.back().vendor_id = hb_vendor;
    t.devices.back().device_id = hb_device;
    add("00:01.0", 0x060400, true);
    add("00:02.0", 0x060400, true);
    add("01:00.0", 0x020000, false);
    add("02:00.0", 0x020000, false);
    assemble(t, {std::nullopt, std::nullopt, std::nullopt, Bdf::parse("00:01.0"), Bdf::parse("00:02.0")});
    return t;
}
}  // namespace

TEST_CASE("root complex P2P depends on Linux's allowlist and the CPU", "[pci][p2p]") {
    auto t = two_root_ports(0x1234, 0x5678, -1);
    auto a = *t.find(Bdf::parse("01:00.0")), b = *t.find(Bdf::parse("02:00.0"));
    CHECK(class_name(find_path(t, a, b).cls) == std::string("PHB"));
    CHECK(t.devices[*t.find(Bdf::parse("00:01.0"))].role == Role::root_port);
    auto r = judge_p2p(t, a, b);
    INFO(dump(r));
    CHECK(r.verdict == Verdict::unsupported);  // no IOMMU group at all
    CHECK(has_reason(r, Reason::Effect::platform, "not on Linux's p2pdma allowlist"));
    CHECK(has_reason(r, Reason::Effect::block, "no IOMMU group"));

    t = two_root_ports(0x1234, 0x5678, 7);
    t.cpu_vendor = "AuthenticAMD";
    t.cpu_family = 0x19;
    r = judge_p2p(t, a, b);
    INFO(dump(r));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, Reason::Effect::ok, "AMD Zen CPU (family 0x19)"));
    CHECK(has_reason(r, Reason::Effect::note, "both are in IOMMU group 7"));

    t = two_root_ports(0x8086, 0x3c00, 3);  // Xeon E5: allowed within one host bridge only
    auto al = host_bridge_allowance(t, 0);
    CHECK(al.allowed);
    CHECK(al.same_host_bridge_only);
}

TEST_CASE("sysfs input that lies: missing files, loops, unknown classes", "[pci][topology][bad-input]") {
    const std::string snap =
        "bardrive-topo-snapshot 1\n"
        "list /sys/bus/pci/devices 4\n0000:01:00.0\n0000:02:00.0\n0000:03:00.0\nnot-a-bdf\n"
        "link /sys/bus/pci/devices/0000:01:00.0 ../../../devices/pci0000:00/0000:02:00.0/0000:01:00.0\n"
        "link /sys/bus/pci/devices/0000:02:00.0 ../../../devices/pci0000:00/0000:01:00.0/0000:02:00.0\n"
        "link /sys/bus/pci/devices/0000:03:00.0 ../../../somewhere/else\n"
        "text /sys/bus/pci/devices/0000:01:00.0/class 1\n0x060400\n"
        "text /sys/bus/pci/devices/0000:02:00.0/class 1\n0x060400\n"
        "text /sys/bus/pci/devices/0000:03:00.0/class 1\n0x7a0000\n"
        "text /sys/bus/pci/devices/0000:03:00.0/resource 1\nbanana\n"
        "text /sys/bus/pci/devices/0000:03:00.0/numa_node 1\nlots\n"
        "bytes /sys/bus/pci/devices/0000:03:00.0/config 8\n8680ffff07001000\n"
        "end\n";
    SnapshotSource src(parse_snapshot(snap, "liar.snapshot"), "liar.snapshot");
    auto t = read_topology(src);
    REQUIRE(t.devices.size() == 3);
    // The parent loop is cut: every walk up the tree ends.
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        std::size_t steps = 0;
        for (auto p = t.devices[i].parent; p; p = t.devices[*p].parent) REQUIRE(++steps < 4);
    }
    auto all_warnings = [&]() {
        std::string s;
        for (const auto& w : t.warnings) s += w + "\n";
        for (const auto& d : t.devices)
            for (const auto& w : d.warnings) s += d.bdf.str() + ": " + w + "\n";
        return s;
    }();
    INFO(all_warnings);
    CHECK(all_warnings.find("not-a-bdf: not a PCI address") != std::string::npos);
    CHECK(all_warnings.find("loops") != std::string::npos);
    CHECK(all_warnings.find("does not end in pciDDDD:BB") != std::string::npos);
    CHECK(all_warnings.find("unknown class code 0x7a0000") != std::string::npos);
    CHECK(all_warnings.find("/sys/bus/pci/devices/0000:03:00.0/resource line 1: cannot parse 'banana'") !=
          std::string::npos);
    CHECK(all_warnings.find("numa_node: cannot parse 'lots'") != std::string::npos);
    CHECK(all_warnings.find("config space truncated: 8 bytes") != std::string::npos);
    CHECK(all_warnings.find("/sys/bus/pci/devices/0000:01:00.0/config: not readable") != std::string::npos);
    const auto& d3 = t.devices[*t.find(Bdf::parse("03:00.0"))];
    CHECK(d3.vendor_id == 0x8086);
    CHECK(d3.bars.empty());
    CHECK(d3.numa_node == -1);
    // Matrix and verdicts still work on what is there.
    for (std::size_t a = 0; a < t.devices.size(); ++a)
        for (std::size_t b = 0; b < t.devices.size(); ++b) judge_p2p(t, a, b);
}

TEST_CASE("a source without /sys/bus/pci/devices is an error that says what to do", "[pci][topology][bad-input]") {
    SnapshotSource src(parse_snapshot("bardrive-topo-snapshot 1\nend\n", "empty"), "empty");
    try {
        read_topology(src);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("snapshot empty") != std::string::npos);
        CHECK(e.hint().find("--sysfs") != std::string::npos);
    }
}

TEST_CASE("hwloc XML of a DGX-2: switch tree classes between V100s", "[pci][hwloc]") {
    const std::string file = SHARED_TOPOLOGIES "/nvidia-dgx2h-16xv100-hwloc/nvidiaDGX2.v2.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES " (they live beside the repository)");
    auto t = read_hwloc_xml(file);
    CHECK_FALSE(t.groups_known);
    CHECK(t.numa_nodes == 2);
    std::vector<std::size_t> gpus;
    for (std::size_t i = 0; i < t.devices.size(); ++i)
        if (t.devices[i].vendor_id == 0x10de && t.devices[i].class_code >> 8 == 0x0302) gpus.push_back(i);
    CHECK(gpus.size() == 16);
    // 34:00.0 and 36:00.0 hang from two ports of one leaf PLX switch; 39:00.0 from a sibling leaf
    // switch under the same top switch; b7:00.0 is on the other socket.
    CHECK(cls(t, "0000:34:00.0", "0000:36:00.0") == "PIX");
    CHECK(cls(t, "0000:34:00.0", "0000:39:00.0") == "PXB");
    CHECK(cls(t, "0000:34:00.0", "0000:b7:00.0") == "SYS");
    CHECK(t.devices[idx(t, "0000:2c:00.0")].role == Role::switch_upstream);
    CHECK(t.devices[idx(t, "0000:2d:04.0")].role == Role::switch_downstream);
    const auto& g = t.devices[idx(t, "0000:34:00.0")];
    CHECK(g.os_names == std::vector<std::string>{"coproc:nvml0"});  // osdev_type 5 in this file
    CHECK(g.numa_node == 0);
    auto r = judge_p2p(t, idx(t, "0000:34:00.0"), idx(t, "0000:36:00.0"));
    INFO(dump(r));
    CHECK(r.verdict == Verdict::platform_dependent);  // ACS unknown from hwloc XML
    CHECK(has_reason(r, Reason::Effect::note, "IOMMU groups unknown"));
    CHECK(has_reason(r, Reason::Effect::note, "BARs unknown"));
    CHECK(has_reason(r, Reason::Effect::platform, "ACS control of 0000:33:00.0, 0000:33:10.0 unknown"));
}

TEST_CASE("hwloc XML of a POWER8 Minsky: one GPU per host bridge", "[pci][hwloc]") {
    const std::string file = SHARED_TOPOLOGIES "/ibm-power8-minsky-4xp100-hwloc/power8gpudistances.xml";
    if (!exists(file)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_hwloc_xml(file);
    std::vector<std::size_t> gpus;
    for (std::size_t i = 0; i < t.devices.size(); ++i)
        if (device_kind(t.devices[i]) == "gpu") gpus.push_back(i);
    REQUIRE(gpus.size() == 4);
    std::map<std::string, int> count;
    for (auto a : gpus)
        for (auto b : gpus)
            if (a != b) ++count[class_name(find_path(t, a, b).cls)];
    CHECK(count["PIX"] == 0);
    CHECK(count["PXB"] == 0);
    CHECK(count["PHB"] == 0);
    CHECK(count["NODE"] == 4);  // domains 2-3 on node 0, a-b on node 1
    CHECK(count["SYS"] == 8);
}

TEST_CASE("an hwloc XML with an internal DTD subset is read, not a crash (hwloc's libxml2 backend dies on it)",
          "[pci][hwloc][bad-input]") {
    const std::string real = SHARED_TOPOLOGIES "/nvidia-dgx2h-16xv100-hwloc/nvidiaDGX2.v2.xml";
    if (!exists(real)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    std::string text = file::read_text(real);
    const auto doctype = text.find("<!DOCTYPE");
    REQUIRE(doctype != std::string::npos);
    for (const char* subset :
         {"<!DOCTYPE topology [ ]>", "<!DOCTYPE topology [ <!ENTITY % p SYSTEM \"file:///etc/passwd\"> %p; ]>"}) {
        INFO(subset);
        std::string hostile = text;
        hostile.replace(doctype, hostile.find('>', doctype) + 1 - doctype, subset);
        char path[] = "/tmp/bardrive-dtd-XXXXXX";
        const int fd = ::mkstemp(path);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, hostile.data(), hostile.size()) == static_cast<ssize_t>(hostile.size()));
        ::close(fd);
        try {
            auto t = read_hwloc_xml(path);  // read, or refused with an Error: either way no crash
            CHECK(t.devices.size() > 0);
        } catch (const Error& e) {
            CHECK(e.object() == path);
        }
        ::unlink(path);
    }
}

TEST_CASE("an hwloc XML that hwloc cannot load is an error naming the file and what is wrong",
          "[pci][hwloc][bad-input]") {
    auto error_of = [](const std::string& file) {
        try {
            read_hwloc_xml(file);
        } catch (const Error& e) {
            CHECK(e.object() == file);
            return std::string(e.what());
        }
        FAIL("no error for " << file);
        return std::string();
    };
    // hwloc says "Invalid argument" for each of these; the reader says what is wrong.
    auto e = error_of(PCI_FIXTURES "/dual-socket.snapshot");
    CHECK(e.find("line 1: Start tag expected") != std::string::npos);
    CHECK(e.find("Invalid argument") == std::string::npos);
    e = error_of(PCI_FIXTURES "/nccl-nvswitch.xml");
    CHECK(e.find("an NCCL topology file") != std::string::npos);
    CHECK(e.find("--nccl-xml") != std::string::npos);
    char path[] = "/tmp/bardrive-hwloc-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const std::string foo = "<?xml version=\"1.0\"?>\n<foo/>\n";
    REQUIRE(::write(fd, foo.data(), foo.size()) == static_cast<ssize_t>(foo.size()));
    ::close(fd);
    e = error_of(path);
    CHECK(e.find("root element is <foo>, not hwloc's <topology>") != std::string::npos);
    ::unlink(path);
}

namespace {
// The oracle: nvidia-smi topo -m of the same host, rows "GPU0 X NODE ..." in label order.
std::map<std::string, std::vector<std::string>> topo_m(const std::string& file) {
    std::map<std::string, std::vector<std::string>> rows;
    std::istringstream is(std::string(file::read_text(file)));
    std::vector<std::string> header;
    for (std::string line; std::getline(is, line);) {
        std::istringstream ls(line);
        std::vector<std::string> tok;
        for (std::string w; ls >> w;) tok.push_back(w);
        if (tok.empty()) continue;
        auto device_label = [](const std::string& w) { return w.rfind("GPU", 0) == 0 || w.rfind("NIC", 0) == 0; };
        if (header.empty() && tok[0] == "GPU0") {
            for (const auto& w : tok) {
                if (w == "CPU") break;  // "CPU Affinity  NUMA Affinity  GPU NUMA ID"
                header.push_back(w);
            }
        } else if (!header.empty() && device_label(tok[0]) && tok.size() > header.size())
            rows[tok[0]] =
                std::vector<std::string>(tok.begin() + 1, tok.begin() + 1 + static_cast<std::ptrdiff_t>(header.size()));
    }
    return rows;
}

// Compares every cell of topo -m with bardrive's class for the same two functions.
void compare_with_topo_m(const Topology& t, const std::string& oracle,
                         const std::vector<std::pair<std::string, const char*>>& labels) {
    auto rows = topo_m(oracle);
    REQUIRE(rows.size() == labels.size());
    for (std::size_t r = 0; r < labels.size(); ++r)
        for (std::size_t c = 0; c < labels.size(); ++c) {
            INFO(labels[r].first << " (" << labels[r].second << ") vs " << labels[c].first << " (" << labels[c].second
                                 << ")");
            CHECK(cls(t, labels[r].second, labels[c].second) == rows[labels[r].first][c]);
        }
}
}  // namespace

TEST_CASE("lspci -tv of a one-socket Threadripper: classes equal its nvidia-smi topo -m", "[pci][lspci-tv]") {
    const std::string dir = SHARED_TOPOLOGIES "/puget-wrx90-threadripperpro-2gpu-2nic-1s";
    if (!exists(dir)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_lspci_tree(file::read_text(dir + "/lspci-tv.txt"), "puget lspci-tv.txt");
    t.numa_nodes = 1;  // one socket, one NUMA node (topo -m: NUMA affinity 0)
    for (auto& h : t.host_bridges) h.numa_node = 0;
    CHECK(t.host_bridges.size() == 4);
    CHECK(t.devices[idx(t, "0000:c1:00.0")].vendor_name.find("RTX 6000 Ada") != std::string::npos);
    CHECK(t.devices[idx(t, "0000:01:00.0")].role == Role::switch_upstream);  // the NVMe switch below root port 00:03.1
    CHECK(t.devices[idx(t, "0000:02:04.0")].role == Role::switch_downstream);
    CHECK(cls(t, "0000:05:00.0", "0000:06:00.0") == "PIX");  // NVMe drives below one leaf switch
    CHECK(cls(t, "0000:05:00.0", "0000:0b:00.0") == "PXB");  // and below two
    compare_with_topo_m(
        t, dir + "/topo-m.txt",
        {{"GPU0", "0000:c1:00.0"}, {"GPU1", "0000:c2:00.0"}, {"NIC0", "0000:21:00.0"}, {"NIC1", "0000:21:00.1"}});
}

TEST_CASE("lspci -tv of a two-socket Genoa: classes equal its nvidia-smi topo -m", "[pci][lspci-tv]") {
    const std::string dir = SHARED_TOPOLOGIES "/asus-esc8000a-e12-4xrtx6000ada-2s-genoa";
    if (!exists(dir)) SKIP("shared topologies not found at " SHARED_TOPOLOGIES);
    auto t = read_lspci_tree(file::read_text(dir + "/lspci-tv.txt"), "asus lspci-tv.txt");
    // lspci -tv has no NUMA nodes: root complexes 00/20/40/60 are socket 0, 80/a0/c0/e0 socket 1 (SOURCE.md).
    t.numa_nodes = 2;
    for (auto& h : t.host_bridges) h.numa_node = h.bus < 0x80 ? 0 : 1;
    CHECK(t.host_bridges.size() == 8);
    compare_with_topo_m(t, dir + "/topo-m.txt",
                        {{"GPU0", "0000:01:00.0"},
                         {"GPU1", "0000:41:00.0"},
                         {"GPU2", "0000:c1:00.0"},
                         {"GPU3", "0000:e1:00.0"},
                         {"NIC0", "0000:21:00.0"},
                         {"NIC1", "0000:21:00.1"},
                         {"NIC2", "0000:81:00.0"},
                         {"NIC3", "0000:81:00.1"}});
}

TEST_CASE("lspci -tv text that is not a tree warns or is refused", "[pci][lspci-tv][bad-input]") {
    CHECK_THROWS_AS(read_lspci_tree("hello world\n", "junk"), Error);
    auto t = read_lspci_tree(
        "-[0000:00]-+-00.0  Host\n            +-zz.0  Bad\n           \\-01.0-[01]----00.0  Dev\n     +-05.0 orphan\n",
        "odd");
    CHECK(t.devices.size() >= 3);
    std::string w;
    for (const auto& x : t.warnings) w += x + "\n";
    INFO(w);
    CHECK(w.find("odd line 2") != std::string::npos);
    CHECK(w.find("odd line 4") != std::string::npos);
}

TEST_CASE("an address listed twice is one function, never paired with itself", "[pci][topology][bad-input]") {
    const std::string tree = "-[0000:00]-+-00.0  Host\n           +-01.0  First\n           \\-02.0  Other\n";
    auto t = read_lspci_tree(tree + tree, "twice.txt");  // two outputs pasted together
    REQUIRE(t.devices.size() == 3);
    CHECK(t.devices[*t.find(Bdf::parse("00:01.0"))].vendor_name == "First");
    std::string w;
    for (const auto& x : t.warnings) w += x + "\n";
    INFO(w);
    CHECK(w.find("twice.txt lists 0000:00:00.0, 0000:00:01.0, 0000:00:02.0 more than once (3 repeated entries") !=
          std::string::npos);

    // A snapshot whose device list names one function twice.
    const std::string snap =
        "bardrive-topo-snapshot 1\n"
        "list /sys/bus/pci/devices 3\n0000:00:01.0\n0000:00:02.0\n0000:00:01.0\n"
        "link /sys/bus/pci/devices/0000:00:01.0 ../../../devices/pci0000:00/0000:00:01.0\n"
        "link /sys/bus/pci/devices/0000:00:02.0 ../../../devices/pci0000:00/0000:00:02.0\n"
        "text /sys/bus/pci/devices/0000:00:01.0/class 1\n0x030200\n"
        "text /sys/bus/pci/devices/0000:00:02.0/class 1\n0x030200\n"
        "end\n";
    SnapshotSource src(parse_snapshot(snap, "dup.snapshot"), "dup.snapshot");
    auto s = read_topology(src);
    CHECK(s.devices.size() == 2);
    for (auto a : p2p_candidates(s, true))
        for (auto b : p2p_candidates(s, true)) CHECK((a == b) == (s.devices[a].bdf == s.devices[b].bdf));
}

TEST_CASE("an IOMMU group number that does not fit is no group, not a wrapped one", "[pci][topology][bad-input]") {
    for (const char* group : {"4294967296", "99999999999999999999999", "-3"}) {
        INFO(group);
        const std::string snap = std::string("bardrive-topo-snapshot 1\n") +
                                 "list /sys/bus/pci/devices 1\n0000:00:01.0\n"
                                 "link /sys/bus/pci/devices/0000:00:01.0 ../../../devices/pci0000:00/0000:00:01.0\n"
                                 "link /sys/bus/pci/devices/0000:00:01.0/iommu_group ../../../kernel/iommu_groups/" +
                                 group + "\nend\n";
        SnapshotSource src(parse_snapshot(snap, "group.snapshot"), "group.snapshot");
        auto t = read_topology(src);
        REQUIRE(t.devices.size() == 1);
        CHECK(t.devices[0].iommu_group == -1);
        std::string w;
        for (const auto& x : t.devices[0].warnings) w += x + "\n";
        CHECK(w.find(std::string("iommu_group: '") + group + "' is not a group number") != std::string::npos);
    }
}

TEST_CASE("ACS on a multi-function endpoint redirects traffic between its functions", "[pci][p2p]") {
    Topology t;
    t.source = "hand-built";
    t.numa_nodes = 1;
    t.host_bridges.push_back(HostBridge{"pci0000:00", 0, 0, 0, std::nullopt, {}});
    auto add = [&](const char* bdf, std::uint32_t cls, bool bridge) {
        Device d;
        d.bdf = Bdf::parse(bdf);
        d.class_code = cls;
        d.is_bridge = bridge;
        d.iommu_group = 1;
        d.ext_config = true;
        if (!bridge) d.bars.push_back(Bar{0, 0xe0000000, 1u << 20, false, true, true, {}});
        t.devices.push_back(d);
    };
    add("00:00.0", 0x060000, false);
    t.devices.back().vendor_id = 0x1234;  // not on the allowlist
    add("00:01.0", 0x060400, true);
    add("01:00.0", 0x020000, false);
    add("01:00.1", 0x020000, false);
    assemble(t, {std::nullopt, std::nullopt, Bdf::parse("00:01.0"), Bdf::parse("00:01.0")});
    auto a = *t.find(Bdf::parse("01:00.0")), b = *t.find(Bdf::parse("01:00.1"));
    auto r = judge_p2p(t, a, b);
    INFO(dump(r));
    CHECK(class_name(r.path.cls) == std::string("PIX"));
    CHECK(r.verdict == Verdict::supported);
    CHECK(has_reason(r, Reason::Effect::ok, "common upstream bridge 0000:00:01.0 (root port)"));

    t.devices[a].acs = AcsInfo{0x1f, acs::p2p_request_redirect};
    r = judge_p2p(t, a, b);
    INFO(dump(r));
    CHECK(r.verdict == Verdict::platform_dependent);
    CHECK(has_reason(r, Reason::Effect::note, "enabled on 0000:01:00.0 (RR)"));
    CHECK(has_reason(r, Reason::Effect::platform, "not on Linux's p2pdma allowlist"));
}
