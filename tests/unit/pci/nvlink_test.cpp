// NVLinks: the table NVML's answers travel in (/nvml/nvlinks), its parse over hand-made and hostile
// lines, a snapshot round trip that carries it, and the live path on a machine without NVML.
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/file.hpp"
#include "pci/nvml.hpp"
#include "pci/source.hpp"
#include "pci/topology.hpp"

using namespace bardrive;
using namespace bardrive::pci;

namespace {
const Bdf gpu0 = Bdf::parse("0000:1a:00.0"), gpu1 = Bdf::parse("0000:1b:00.0"), gpu2 = Bdf::parse("0000:af:00.0");

// The dual-socket fixture (GPUs at 1a:00.0, 1b:00.0 and af:00.0) with `table` as what NVML said.
SnapshotData fixture_with(const std::optional<std::string>& table) {
    auto d = read_snapshot(PCI_FIXTURES "/dual-socket.snapshot");
    if (table) d.texts[nvlink_table_path] = *table;
    return d;
}

Topology read_with(const std::string& table) {
    SnapshotSource src(fixture_with(table), "nvlink");
    return read_topology(src);
}

// Notes about NVLinks as a whole (not the warnings about single lines of the table).
std::vector<std::string> nvlink_notes(const Topology& t) {
    std::vector<std::string> out;
    for (const auto& w : t.warnings)
        if (w.rfind("NVLink", 0) == 0) out.push_back(w);
    return out;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x + "\n";
    return s;
}

// Forwards to another source and counts the questions for the NVLink table.
class CountingSource final : public Source {
public:
    explicit CountingSource(Source& inner) : inner_(inner) {}
    std::optional<std::string> text(const std::string& path) override {
        asked += path == nvlink_table_path;
        return inner_.text(path);
    }
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                   std::size_t len) override {
        return inner_.bytes(path, offset, len);
    }
    std::optional<std::string> link(const std::string& path) override { return inner_.link(path); }
    std::optional<std::vector<std::string>> list(const std::string& dir) override { return inner_.list(dir); }
    std::string describe() const override { return inner_.describe(); }
    int asked = 0;

private:
    Source& inner_;
};

// A recorded machine whose NVLink table comes from this machine's NVML, as LiveSource gives it.
class LiveNvmlSource final : public Source {
public:
    explicit LiveNvmlSource(Source& inner) : inner_(inner) {}
    std::optional<std::string> text(const std::string& path) override {
        return path == nvlink_table_path ? live_.text(path) : inner_.text(path);
    }
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                   std::size_t len) override {
        return inner_.bytes(path, offset, len);
    }
    std::optional<std::string> link(const std::string& path) override { return inner_.link(path); }
    std::optional<std::vector<std::string>> list(const std::string& dir) override { return inner_.list(dir); }
    std::string describe() const override { return inner_.describe(); }

private:
    Source& inner_;
    LiveSource live_;
};
}  // namespace

TEST_CASE("NVLink table: links between two GPUs", "[pci][nvlink]") {
    auto t = read_with(
        "# NVLinks from NVML: GPU PEER-TYPE PEER LINKS\n"
        "0000:1a:00.0 gpu 0000:1b:00.0 12\n"
        "0000:1b:00.0 gpu 0000:1a:00.0 12\n"
        "0000:af:00.0 none");
    INFO(joined(t.warnings));
    CHECK(nvlink_notes(t).empty());
    CHECK(t.nvlink_source == "NVML");
    REQUIRE(t.nvlinks.size() == 2);
    CHECK(t.devices[t.nvlinks[0].gpu].bdf == gpu0);
    CHECK(t.nvlinks[0].peer_type == NvLink::Peer::gpu);
    CHECK(t.nvlinks[0].peer == gpu1);
    CHECK(t.nvlinks[0].links == 12);
    CHECK(t.devices[t.nvlinks[1].gpu].bdf == gpu1);
    CHECK(t.nvlinks[1].peer == gpu0);
    CHECK(t.nvlinks[1].links == 12);
}

TEST_CASE("NVLink table: NVSwitch peers outside the tree and without an address are kept", "[pci][nvlink]") {
    // An HGX board: 18 links per GPU over four NVSwitches (5+4+4+5), which the host may not see on PCI.
    auto t = read_with(
        "0000:1a:00.0 nvswitch 0000:c1:00.0 5\n"
        "0000:1a:00.0 nvswitch 0000:c2:00.0 4\n"
        "0000:1a:00.0 nvswitch 0000:c3:00.0 4\n"
        "0000:1a:00.0 nvswitch - 5\n"
        "0000:1b:00.0 cpu 0000:c4:00.0 3\n"
        "0000:1b:00.0 unknown - 1\n"
        "0000:af:00.0 none\n");
    INFO(joined(t.warnings));
    CHECK(nvlink_notes(t).empty());
    CHECK(t.nvlink_source == "NVML");
    REQUIRE(t.nvlinks.size() == 6);
    unsigned to_switches = 0;
    for (const auto& l : t.nvlinks)
        if (t.devices[l.gpu].bdf == gpu0) {
            CHECK(l.peer_type == NvLink::Peer::nvswitch);
            to_switches += l.links;
        }
    CHECK(to_switches == 18);
    // Sorted by GPU, then peer type, then peer: the one without an address comes first.
    CHECK_FALSE(t.nvlinks[0].peer);
    CHECK(t.nvlinks[0].links == 5);
    CHECK(t.nvlinks[1].peer == Bdf::parse("0000:c1:00.0"));
    CHECK_FALSE(t.find(Bdf::parse("0000:c1:00.0")));
    CHECK(t.nvlinks[4].peer_type == NvLink::Peer::cpu);
    CHECK(t.nvlinks[5].peer_type == NvLink::Peer::unknown);
}

TEST_CASE("NVLink table: lines that do not parse are warnings, never links", "[pci][nvlink][bad-input]") {
    const char* bad[] = {
        "hello",
        "0000:1a:00.0",
        "0000:1a:00.0 gpu",
        "0000:1a:00.0 gpu 0000:1b:00.0",
        "0000:1a:00.0 laser 0000:1b:00.0 2",
        "0000:1a:00.0 gpu zz:zz.z 2",
        "0000:1a:00.0 gpu 0000:1b:00.0 0",
        "0000:1a:00.0 gpu 0000:1b:00.0 99",
        "0000:1a:00.0 gpu 0000:1b:00.0 -3",
        "0000:1a:00.0 gpu 0000:1b:00.0 99999999999999999999",
        "0000:1a:00.0 gpu 0000:1b:00.0 2 extra",
        "0000:1a:00.0 GPU 0000:1b:00.0 2",
        "\x01\xff\x7f garbage \t",
        "0000:1a:00.0 gpu 0000:1b:00.0 0x4",
    };
    std::string table;
    for (const auto* l : bad) table += std::string(l) + "\n";
    auto t = read_with(table + "\n   \n# a comment\n");
    INFO(joined(t.warnings));
    CHECK(t.nvlinks.empty());
    CHECK(t.nvlink_source.empty());  // nothing usable: NVLinks stay unknown
    auto notes = nvlink_notes(t);
    CHECK(notes.empty());
    std::size_t ignored = 0;
    for (const auto& w : t.warnings)
        if (w.find("snapshot nvlink /nvml/nvlinks line ") == 0 && w.find("; ignored") != std::string::npos) ++ignored;
    CHECK(ignored == std::size(bad));
    CHECK(joined(t.warnings).find("line 5: peer type 'laser' is none of gpu, nvswitch, cpu, unknown") !=
          std::string::npos);
}

TEST_CASE("NVLink table: addresses that are not in the tree", "[pci][nvlink][bad-input]") {
    auto t = read_with(
        "0000:99:00.0 gpu 0000:1a:00.0 4\n"
        "0000:1a:00.0 gpu 0000:98:00.0 4\n"
        "0000:1b:00.0 none\n"
        "0000:af:00.0 none\n");
    auto w = joined(t.warnings);
    INFO(w);
    CHECK(w.find("line 1: GPU 0000:99:00.0 is not in the topology: '0000:99:00.0 gpu 0000:1a:00.0 4'; ignored") !=
          std::string::npos);
    CHECK(w.find("NVLink peer 0000:98:00.0 of GPU 0000:1a:00.0 is not in the topology") != std::string::npos);
    REQUIRE(t.nvlinks.size() == 1);  // the link is what NVML said; the peer is just not on this bus
    CHECK(t.devices[t.nvlinks[0].gpu].bdf == gpu0);
    CHECK(t.nvlinks[0].peer == Bdf::parse("0000:98:00.0"));
    CHECK(t.nvlink_source == "NVML");
}

TEST_CASE("NVLink table: repeated lines add up", "[pci][nvlink]") {
    auto t = read_with(
        "0000:1a:00.0 gpu 0000:1b:00.0 4\n"
        "0000:1a:00.0 gpu 0000:1b:00.0 2\n"
        "0000:1b:00.0 none\n0000:af:00.0 none");
    REQUIRE(t.nvlinks.size() == 1);
    CHECK(t.nvlinks[0].links == 6);
}

TEST_CASE("NVLink table: NVML unavailable, for all GPUs or for some", "[pci][nvlink]") {
    SECTION("all: a note with NVML's reason, NVLinks unknown") {
        auto t = read_with("unavailable: nvmlInit_v2: Driver Not Loaded (9)");
        CHECK(nvlink_notes(t) == std::vector<std::string>{"NVLinks unknown: nvmlInit_v2: Driver Not Loaded (9)"});
        CHECK(t.nvlinks.empty());
        CHECK(t.nvlink_source.empty());
    }
    SECTION("one GPU failed, one NVML does not see (bound to vfio-pci)") {
        auto t = read_with(
            "0000:1a:00.0 unavailable: nvmlDeviceGetNvLinkState link 3: GPU is lost (15)\n"
            "0000:1b:00.0 gpu 0000:1a:00.0 4");
        CHECK(nvlink_notes(t).size() == 2);
        auto w = joined(t.warnings);
        INFO(w);
        CHECK(w.find("NVLinks of 0000:1a:00.0 unknown: nvmlDeviceGetNvLinkState link 3: GPU is lost (15)\n") !=
              std::string::npos);
        CHECK(w.find("NVLinks unknown for GPUs NVML does not report: 0000:af:00.0 (driver vfio-pci)\n") !=
              std::string::npos);
        CHECK(t.nvlink_source == "NVML");
        REQUIRE(t.nvlinks.size() == 1);
        CHECK(t.devices[t.nvlinks[0].gpu].bdf == gpu1);
    }
}

TEST_CASE("a snapshot of a machine with NVLinks carries them: record, write, read back", "[pci][nvlink][snapshot]") {
    const std::string table =
        "# NVLinks from NVML: GPU PEER-TYPE PEER LINKS\n"
        "0000:1a:00.0 gpu 0000:1b:00.0 12\n"
        "0000:1a:00.0 nvswitch - 6\n"
        "0000:1b:00.0 gpu 0000:1a:00.0 12\n"
        "0000:af:00.0 none";
    SnapshotSource inner(fixture_with(table), "with-nvlinks");
    RecordingSource rec(inner);
    auto first = read_topology(rec);
    REQUIRE(rec.recorded().texts.count(nvlink_table_path));
    CHECK(rec.recorded().texts.at(nvlink_table_path) == table);

    std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/bardrive-nvlink-test-" +
                       std::to_string(::getpid()) + ".snapshot";
    write_snapshot(rec.recorded(), path);
    auto text = file::read_text(path);
    CHECK(text.find("\ntext /nvml/nvlinks 5\n# NVLinks from NVML: GPU PEER-TYPE PEER LINKS\n0000:1a:00.0 gpu "
                    "0000:1b:00.0 12\n") != std::string::npos);
    auto replay = open_source(path);
    auto second = read_topology(*replay);
    std::remove(path.c_str());

    CHECK(second.nvlink_source == "NVML");
    REQUIRE(second.nvlinks.size() == first.nvlinks.size());
    REQUIRE(second.nvlinks.size() == 3);
    for (std::size_t i = 0; i < first.nvlinks.size(); ++i) {
        CHECK(second.devices[second.nvlinks[i].gpu].bdf == first.devices[first.nvlinks[i].gpu].bdf);
        CHECK(second.nvlinks[i].peer_type == first.nvlinks[i].peer_type);
        CHECK(second.nvlinks[i].peer == first.nvlinks[i].peer);
        CHECK(second.nvlinks[i].links == first.nvlinks[i].links);
    }
    CHECK(nvlink_notes(second).empty());
}

TEST_CASE("a snapshot without the NVLink record says NVLinks are unknown", "[pci][nvlink][snapshot]") {
    SnapshotSource src(fixture_with(std::nullopt), "old.snapshot");
    auto t = read_topology(src);
    CHECK(nvlink_notes(t) == std::vector<std::string>{"NVLinks unknown: snapshot old.snapshot has no /nvml/nvlinks "
                                                      "(NVML answers it on the live machine; 'bardrive topo "
                                                      "snapshot' records it)"});
    CHECK(t.nvlink_source.empty());
}

TEST_CASE("no NVIDIA GPU: NVML is never asked and nothing is said about NVLinks", "[pci][nvlink]") {
    auto inner = open_source(PCI_FIXTURES "/lab-switch.snapshot");
    CountingSource src(*inner);
    auto t = read_topology(src);
    REQUIRE_FALSE(t.devices.empty());
    CHECK(src.asked == 0);
    CHECK(nvlink_notes(t).empty());
    CHECK(t.nvlink_source.empty());
}

TEST_CASE("a copied /sys folder has no NVLink table: only the live machine's NVML answers", "[pci][nvlink]") {
    LiveSource copy(PCI_FIXTURES, PCI_FIXTURES);
    CHECK_FALSE(copy.text(nvlink_table_path));
}

TEST_CASE("live NVML on a machine without the NVIDIA driver: a note with the reason, no crash", "[pci][nvlink]") {
    LiveSource live;
    auto table = live.text(nvlink_table_path);
    REQUIRE(table);
    if (table->rfind("unavailable: ", 0) != 0) SKIP("NVML works on this machine: " << *table);
    CHECK(table->find('\n') == std::string::npos);  // one line: the reason
    if (table->find("NVML not loaded") != std::string::npos)
        CHECK(table->rfind("unavailable: NVML not loaded: libnvidia-ml.so.1: ", 0) == 0);

    SnapshotSource recorded(fixture_with(std::nullopt), "gpus");
    LiveNvmlSource src(recorded);
    auto t = read_topology(src);
    CHECK(nvlink_notes(t) == std::vector<std::string>{"NVLinks unknown: " + table->substr(13)});
    CHECK(t.nvlinks.empty());
    CHECK(t.nvlink_source.empty());
    CHECK(t.devices.size() == read_with("").devices.size());  // everything else read as before
}

TEST_CASE("a real snapshot of one H200 (lent GPU machine) replays NVML's answer: no active NVLink", "[pci][nvlink]") {
    // Captured by `bardrive topo snapshot` on the nvidia-h200 VM (bench/results/topo-nvlink-nvidia-h200-2026-11-23.md),
    // where `nvidia-smi nvlink -s` lists no link.
    auto src = open_source(PCI_FIXTURES "/h200-vm.snapshot");
    auto t = read_topology(*src);
    INFO(joined(t.warnings));
    auto gpu = t.find(Bdf::parse("0000:00:06.0"));
    REQUIRE(gpu);
    CHECK(t.devices[*gpu].vendor_id == 0x10de);
    CHECK(t.devices[*gpu].device_id == 0x2335);
    CHECK(t.nvlink_source == "NVML");
    CHECK(t.nvlinks.empty());
    CHECK(nvlink_notes(t).empty());
}
