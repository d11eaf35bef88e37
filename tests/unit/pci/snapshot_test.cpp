// Snapshot format: round trip, recording, and files that are not (complete) snapshots.
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "core/file.hpp"
#include "pci/config.hpp"
#include "pci/source.hpp"
#include "pci/topology.hpp"

using namespace bardrive;
using namespace bardrive::pci;

namespace {
std::string temp_path(const char* name) {
    return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/bardrive-pci-test-" +
           std::to_string(::getpid()) + "-" + name;
}

std::string error_of(const std::string& content) {
    try {
        parse_snapshot(content, "bad.snapshot");
    } catch (const Error& e) {
        CHECK(e.object() == "bad.snapshot");
        return e.what();
    }
    FAIL("no error for: " << content);
    return {};
}
}  // namespace

TEST_CASE("a snapshot written and read back answers exactly what was recorded", "[pci][snapshot]") {
    SnapshotData d;
    d.comments.push_back("test");
    d.texts["/sys/a/resource"] = "0x1 0x2 0x3\n0x0 0x0 0x0";
    d.texts["/sys/a/empty"] = "";
    d.texts["/sys/a/gone"] = std::nullopt;
    std::vector<std::uint8_t> cfg(100);
    for (std::size_t i = 0; i < cfg.size(); ++i) cfg[i] = static_cast<std::uint8_t>(i * 7);
    d.blobs["/sys/a/config"] = cfg;
    d.links["/sys/a/driver"] = "../../drivers/igb";
    d.lists["/sys/a/net"] = std::vector<std::string>{"eth0", "eth1"};
    d.lists["/sys/a/nvme"] = std::nullopt;

    auto path = temp_path("roundtrip.snapshot");
    write_snapshot(d, path);
    auto back = read_snapshot(path);
    std::remove(path.c_str());
    CHECK(back.comments == d.comments);
    CHECK(back.texts == d.texts);
    CHECK(back.blobs == d.blobs);
    CHECK(back.links == d.links);
    CHECK(back.lists == d.lists);

    SnapshotSource src(back, "x");
    CHECK(src.text("/sys/a/resource") == d.texts["/sys/a/resource"]);
    CHECK_FALSE(src.text("/sys/a/gone"));
    CHECK_FALSE(src.text("/sys/never/recorded"));
    auto b = src.bytes("/sys/a/config", 0, 64);
    REQUIRE(b);
    CHECK(b->size() == 64);  // a shorter read of the same file gets the prefix
    CHECK((*b)[63] == static_cast<std::uint8_t>(63 * 7));
}

TEST_CASE("recording the dual-socket fixture and replaying it gives the same topology", "[pci][snapshot]") {
    auto inner = open_source(PCI_FIXTURES "/dual-socket.snapshot");
    RecordingSource rec(*inner);
    auto first = read_topology(rec);
    // A snapshot holds prefixes: up to the last dword read (the probe of extended space's end).
    const auto& blobs = rec.recorded().blobs;
    REQUIRE(blobs.at("/sys/bus/pci/devices/0000:1a:00.0/config"));
    CHECK(blobs.at("/sys/bus/pci/devices/0000:1a:00.0/config")->size() == 4096);
    CHECK(blobs.at("/sys/bus/pci/devices/0000:1e:00.0/config")->size() == 64);  // captured without root
    auto path = temp_path("rerecorded.snapshot");
    write_snapshot(rec.recorded(), path);
    auto again = open_source(path);
    auto second = read_topology(*again);
    std::remove(path.c_str());
    REQUIRE(first.devices.size() == second.devices.size());
    for (std::size_t i = 0; i < first.devices.size(); ++i) {
        CHECK(first.devices[i].bdf == second.devices[i].bdf);
        CHECK(first.devices[i].parent == second.devices[i].parent);
        CHECK(first.devices[i].bars.size() == second.devices[i].bars.size());
        CHECK(first.devices[i].iommu_group == second.devices[i].iommu_group);
    }
}

// Counts the config bytes a reader asks for.
class CountingSource final : public Source {
public:
    explicit CountingSource(Source& inner) : inner_(inner) {}
    std::optional<std::string> text(const std::string& p) override { return inner_.text(p); }
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& p, std::size_t off, std::size_t len) override {
        auto v = inner_.bytes(p, off, len);
        if (v && p.ends_with("/config")) config_bytes += v->size();
        return v;
    }
    std::optional<std::string> link(const std::string& p) override { return inner_.link(p); }
    std::optional<std::vector<std::string>> list(const std::string& d) override { return inner_.list(d); }
    std::string describe() const override { return inner_.describe(); }
    std::size_t config_bytes = 0;

private:
    Source& inner_;
};

TEST_CASE("a topology reads the config registers it decodes, not whole config spaces", "[pci][snapshot]") {
    auto data = read_snapshot(PCI_FIXTURES "/dual-socket.snapshot");
    std::size_t captured = 0;
    for (const auto& [path, blob] : data.blobs)
        if (blob && path.ends_with("/config")) captured += blob->size();
    SnapshotSource inner(data, "dual-socket");
    CountingSource counting(inner);
    auto t = read_topology(counting);
    REQUIRE(t.devices.size() == 23);
    INFO("read " << counting.config_bytes << " of " << captured << " captured config bytes");
    CHECK(captured > 60000);  // mostly 4 KiB dumps of PCI Express functions
    CHECK(counting.config_bytes < captured / 20);
    // What was read decodes the same as the captured dumps.
    const auto& gpu = t.devices[*t.find(Bdf::parse("1a:00.0"))];
    auto full = parse_config(*data.blobs.at("/sys/bus/pci/devices/0000:1a:00.0/config"));
    CHECK(gpu.link == full.link);
    CHECK(gpu.port_type == full.port_type);
    CHECK(gpu.config_bytes == 4096);
    REQUIRE(gpu.bars.size() >= 2);
}

TEST_CASE("a snapshot of another format version is refused with both versions named", "[pci][snapshot][bad-input]") {
    auto what = error_of("bardrive-topo-snapshot 2\nend\n");
    CHECK(what.find("format version 2") != std::string::npos);
    CHECK(what.find("reads version 1") != std::string::npos);
}

TEST_CASE("malformed snapshots are refused with the file and line", "[pci][snapshot][bad-input]") {
    CHECK(error_of("").find("line 1") != std::string::npos);
    CHECK(error_of("PK\x03\x04 zip").find("does not start with") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\ntext /sys/x 1\nabc\n").find("truncated") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\ntext /sys/x 5\nabc\nend\n").find("runs past the end") !=
          std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nbytes /sys/x 4\n0011zz22\nend\n").find("hex") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nbytes /sys/x 2\n001122\nend\n").find("line 3") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nbytes /sys/x 99999999999\nend\n").find("bad count") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nfrobnicate /sys/x\nend\n").find("unknown record") != std::string::npos);
    CHECK(error_of("bardrive-topo-snapshot 1\nlink /sys/x\nend\n").find("without a target") != std::string::npos);
}

TEST_CASE("a source that is neither a folder nor a readable file names the path", "[pci][snapshot][bad-input]") {
    try {
        open_source("/nonexistent/bardrive.snapshot");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.object() == "/nonexistent/bardrive.snapshot");
        CHECK(e.error_number() == ENOENT);
    }
}
