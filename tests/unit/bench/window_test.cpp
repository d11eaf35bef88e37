// The CPU window paths over a stand-in for sysfs: resource2 is a plain file mapped the way the
// kernel maps a BAR, so the copies, the checks and the error paths run for real.
#include "bench/p2p/window.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "bench/p2p/nic.hpp"
#include "bench/p2p/pattern.hpp"
#include "core/error.hpp"

using namespace bardrive::bench;
namespace fs = std::filesystem;

namespace {

struct FakeSysfs {
    fs::path root;
    fs::path dev;
    explicit FakeSysfs(std::uintmax_t bar_bytes, bool wc) {
        char tmpl[] = "/tmp/bench-window-XXXXXX";
        root = ::mkdtemp(tmpl);
        dev = root / "0000:00:05.0";
        fs::create_directories(dev);
        std::ofstream(dev / "resource2").close();
        fs::resize_file(dev / "resource2", bar_bytes);
        if (wc) fs::create_symlink("resource2", dev / "resource2_wc");  // one BAR, two mappings
    }
    ~FakeSysfs() { fs::remove_all(root); }
    std::vector<std::uint64_t> contents(std::size_t words) const {
        std::vector<std::uint64_t> v(words);
        std::ifstream f(dev / "resource2", std::ios::binary);
        f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(words * 8));
        return v;
    }
};

SweepConfig quick() {
    SweepConfig c;
    c.sizes = {4096, 65536, 1 << 20};
    c.repetitions = 1;
    c.warmup = 0;
    return c;
}

const WindowSpec win{{0, 0, 5, 0}, 2};

}  // namespace

TEST_CASE("window BDF/BAR is parsed, bad forms are refused") {
    auto w = parse_window("0000:00:05.0/2");
    CHECK(w.bdf.device == 5);
    CHECK(w.bar == 2);
    CHECK(parse_window("00:05.0/bar4").bar == 4);
    CHECK_THROWS_AS(parse_window("0000:00:05.0"), bardrive::Error);
    CHECK_THROWS_AS(parse_window("0000:00:05.0/6"), bardrive::Error);
    CHECK_THROWS_AS(parse_window("nonsense/2"), bardrive::Error);
}

TEST_CASE("write-combining and uncached paths move the bytes, both ways, and check them") {
    FakeSysfs sys(1 << 20, true);
    Progress quiet(false);
    auto rows = run_window_paths(win, quick(), quiet, 16 << 20, sys.root.string());
    REQUIRE(rows.size() == 4);
    for (const auto& r : rows) {
        INFO(r.id << ": " << r.reason << r.failure);
        CHECK(r.available());
        CHECK(r.failure.empty());
        CHECK(r.points.size() == 3);
        CHECK(r.points.back().gbps > 0);
        CHECK(r.dst_bdf == (r.dst == "bar" ? "0000:00:05.0" : ""));
    }
    CHECK(rows[1].method == "mmio-wc");
    CHECK(rows[1].points[0].ref_gbps == rows[0].points[0].gbps);  // WC beside UC, same run
    CHECK(rows[2].latency_us > 0);                                // reads time one 4-byte access
    // The last check wrote pattern 11 through the uncached mapping: it is in the "BAR" now.
    auto words = sys.contents((1 << 20) / 8);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < words.size(); ++i) bad += words[i] != pattern(i, 11);
    CHECK(bad == 0);
    CHECK(quiet.done() == 12);
}

TEST_CASE("a BAR without a write-combining mapping leaves the WC rows unavailable with the reason") {
    FakeSysfs sys(1 << 20, false);
    Progress quiet(false);
    auto rows = run_window_paths(win, quick(), quiet, 16 << 20, sys.root.string());
    for (const auto& r : rows) {
        if (r.method == "mmio-wc") {
            CHECK(r.reason.find("not prefetchable") != std::string::npos);
        } else {
            CHECK(r.available());
            CHECK(r.failure.empty());
        }
    }
}

TEST_CASE("sizes beyond the BAR are left out; a BAR smaller than every size says so") {
    FakeSysfs sys(64 << 10, true);
    Progress quiet(false);
    auto rows = run_window_paths(win, quick(), quiet, 16 << 20, sys.root.string());
    CHECK(rows[0].points.size() == 2);
    SweepConfig big = quick();
    big.sizes = {1 << 20};
    rows = run_window_paths(win, big, quiet, 16 << 20, sys.root.string());
    CHECK(rows[0].reason.find("exceeds the window") != std::string::npos);
}

TEST_CASE("no window, a missing BAR and a device bound to a driver give clear answers") {
    Progress quiet(false);
    auto rows = run_window_paths(std::nullopt, quick(), quiet);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].reason.find("--window") != std::string::npos);

    FakeSysfs sys(1 << 20, true);
    WindowSpec missing{{0, 0, 5, 0}, 0};
    CHECK_THROWS_AS(run_window_paths(missing, quick(), quiet, 16 << 20, sys.root.string()), bardrive::Error);

    fs::create_directories(sys.root / "drivers" / "e1000e");
    fs::create_symlink(sys.root / "drivers" / "e1000e", sys.dev / "driver");
    try {
        run_window_paths(win, quick(), quiet, 16 << 20, sys.root.string());
        FAIL("a bound device was accepted");
    } catch (const bardrive::Error& e) {
        CHECK(std::string(e.what()).find("unbind") != std::string::npos);
    }
    auto only_uc = quick();
    only_uc.methods = {"mmio-uc"};
    fs::remove(sys.dev / "driver");
    CHECK(run_window_paths(win, only_uc, quiet, 16 << 20, sys.root.string()).size() == 2);
}

TEST_CASE("NIC pairs are parsed; NIC rows say why when they cannot run") {
    auto n = parse_nics("0000:01:00.0,02:00.0");
    CHECK(n.tx.bus == 1);
    CHECK(n.rx.bus == 2);
    CHECK_THROWS_AS(parse_nics("0000:01:00.0"), bardrive::Error);
    CHECK_THROWS_AS(parse_nics("01:00.0,01:00.0"), bardrive::Error);
    CHECK_THROWS_AS(parse_nics("01:00.0,x"), bardrive::Error);

    Progress quiet(false);
    auto rows = run_nic_paths(std::nullopt, std::nullopt, quick(), quiet);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].reason.find("--nics") != std::string::npos);
    // Devices that are not there (or no VFIO on this machine): unavailable with vfio's own reason.
    rows = run_nic_paths(parse_nics("00ff:1f:1f.6,00ff:1f:1f.7"), win, quick(), quiet);
    REQUIRE(rows.size() == 2);
    for (const auto& r : rows) {
        INFO(r.id << ": " << r.reason);
        CHECK_FALSE(r.available());
        CHECK(r.points.empty());
    }
    SweepConfig only_ce = quick();
    only_ce.methods = {"ce"};
    CHECK(run_nic_paths(std::nullopt, std::nullopt, only_ce, quiet).empty());
}
