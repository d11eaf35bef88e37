// nic::StatsPublisher and read_published_stats(): what a reader gets from a good file, and the error
// it raises for each way a file can be wrong (missing, truncated, foreign, another version, impossible
// counts, an owner that is gone, an owner that never finishes writing).
#include "nic/stats_file.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/bardrive-stats-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() { fs::remove_all(path); }
};

const pci::Bdf kBdf = pci::Bdf::parse("0000:01:00.0");

std::vector<char> slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const std::string& p, const std::vector<char>& bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A published file's bytes, to damage in a copy.
std::vector<char> good_file(const TempDir& d) {
    nic::StatsPublisher pub(kBdf, "igb", d.path);
    nic::StatsSnapshot s;
    s.rx_queues = s.tx_queues = 1;
    s.rx[0].packets = 5;
    pub.publish(s);
    return slurp(pub.path());
}

template <class T>
void patch(std::vector<char>& bytes, std::size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
}

void require_error(const std::string& path, const std::string& text, bool allow_stale = false) {
    try {
        nic::read_published_stats(path, allow_stale);
        FAIL("no error raised; expected one containing: " << text);
    } catch (const Error& e) {
        CHECK_THAT(std::string(e.what()), ContainsSubstring(text));
    }
}

}  // namespace

TEST_CASE("stats file: what the owner publishes is what a reader reads, and the file goes with the owner") {
    TempDir d;
    std::string path;
    {
        nic::StatsPublisher pub(kBdf, "igb", d.path);
        path = pub.path();
        CHECK(path == d.path + "/nic-0000:01:00.0.stats");
        nic::StatsSnapshot s;
        s.link_up = true;
        s.speed_mbps = 1000;
        s.link_changes = 2;
        s.rx_queues = 2;
        s.tx_queues = 3;
        s.rx[1].packets = 11;
        s.rx[1].no_buffers = 4;
        s.tx[2].bytes = 1234;
        s.device.rx_missed = 7;
        pub.publish(s);
        s.rx[1].packets = 12;
        pub.publish(s);

        nic::PublishedStats p = nic::read_published_stats(path);
        CHECK(p.bdf == "0000:01:00.0");
        CHECK(p.driver == "igb");
        CHECK(p.owner_pid == ::getpid());
        CHECK(p.owner_alive);
        CHECK(p.publishes == 2);
        CHECK(p.updated_unix_ns > 0);
        CHECK(p.stats.link_up);
        CHECK(p.stats.speed_mbps == 1000);
        CHECK(p.stats.link_changes == 2);
        CHECK(p.stats.rx_queues == 2);
        CHECK(p.stats.tx_queues == 3);
        CHECK(p.stats.rx[1].packets == 12);
        CHECK(p.stats.rx[1].no_buffers == 4);
        CHECK(p.stats.tx[2].bytes == 1234);
        CHECK(p.stats.device.rx_missed == 7);
    }
    CHECK_FALSE(fs::exists(path));
    require_error(path, "nobody publishes statistics there");
}

TEST_CASE("stats file: BARDRIVE_STATS_DIR picks the directory, and a missing one is created") {
    TempDir d;
    ::setenv("BARDRIVE_STATS_DIR", (d.path + "/a/b").c_str(), 1);
    CHECK(nic::stats_file_path(kBdf) == d.path + "/a/b/nic-0000:01:00.0.stats");
    {
        nic::StatsPublisher pub(kBdf, "e1000e");
        CHECK(fs::exists(d.path + "/a/b/nic-0000:01:00.0.stats"));
    }
    ::unsetenv("BARDRIVE_STATS_DIR");
    CHECK(nic::stats_file_path(kBdf) == "/run/bardrive/nic-0000:01:00.0.stats");
    CHECK_THROWS_WITH(nic::StatsPublisher(kBdf, "igb", "/proc/no-such-dir"), ContainsSubstring("BARDRIVE_STATS_DIR"));
}

TEST_CASE("stats file: malformed files are refused with what is wrong") {
    TempDir d;
    const std::vector<char> good = good_file(d);
    REQUIRE(good.size() == sizeof(nic::StatsFileLayout));
    const std::string p = d.path + "/bad.stats";

    SECTION("empty and truncated") {
        spit(p, {});
        require_error(p, "truncated");
        spit(p, std::vector<char>(good.begin(), good.begin() + 40));
        require_error(p, "truncated");
        spit(p, std::vector<char>(good.begin(), good.end() - 8));
        require_error(p, "truncated");
    }
    SECTION("a FIFO or a directory in its place: refused at once, never waited on") {
        REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
        require_error(p, "it is a FIFO");
        ::unlink(p.c_str());
        REQUIRE(::mkdir(p.c_str(), 0700) == 0);
        require_error(p, "it is a directory");
        ::rmdir(p.c_str());
    }
    SECTION("not a stats file") {
        std::vector<char> b(good.size(), 'x');
        spit(p, b);
        require_error(p, "not a bardrive NIC statistics file");
    }
    SECTION("another version") {
        auto b = good;
        patch<std::uint32_t>(b, offsetof(nic::StatsFileLayout, version), 7);
        spit(p, b);
        require_error(p, "version 7, this bardrive reads version 1");
    }
    SECTION("a size field that lies") {
        auto b = good;
        patch<std::uint32_t>(b, offsetof(nic::StatsFileLayout, size), 64);
        spit(p, b);
        require_error(p, "truncated or malformed");
    }
    SECTION("impossible queue counts") {
        auto b = good;
        patch<std::uint64_t>(b, offsetof(nic::StatsFileLayout, body) + offsetof(nic::StatsFileLayout::Body, rx_queues),
                             9);
        spit(p, b);
        require_error(p, "9 rx / 1 tx queues");
    }
    SECTION("names without their terminating zero, a pid of 0") {
        auto b = good;
        std::memset(b.data() + offsetof(nic::StatsFileLayout, bdf), 'A', 16);
        spit(p, b);
        require_error(p, "malformed header");
        b = good;
        patch<std::uint64_t>(b, offsetof(nic::StatsFileLayout, owner_pid), 0);
        spit(p, b);
        require_error(p, "malformed header");
    }
    SECTION("names that are not printable ASCII: refused, never printed to a terminal") {
        auto b = good;
        const char esc[] = "\x1b]0;PWN\x07\x1b[2J";
        std::memcpy(b.data() + offsetof(nic::StatsFileLayout, driver), esc, sizeof esc);
        spit(p, b);
        require_error(p, "the driver name holds byte 0x1b, not printable ASCII");
        b = good;
        b[offsetof(nic::StatsFileLayout, bdf) + 2] = static_cast<char>(0xc3);
        spit(p, b);
        require_error(p, "the address holds byte 0xc3");
    }
    SECTION("a file of another device under this device's name") {
        const std::string other = d.path + "/nic-0000:99:00.0.stats";
        spit(other, good);
        require_error(other, "the file is " + kBdf.str() + "'s, not 0000:99:00.0's");
        ::unlink(other.c_str());
    }
    SECTION("an owner that never finishes writing") {
        auto b = good;
        patch<std::uint64_t>(b, offsetof(nic::StatsFileLayout, seq), 3);
        spit(p, b);
        require_error(p, "the owner was writing");
    }
}

TEST_CASE("stats file: an owner that is gone makes the file stale") {
    TempDir d;
    auto b = good_file(d);
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);  // a pid nobody has now (reuse within the test is unlikely)
    patch<std::uint64_t>(b, offsetof(nic::StatsFileLayout, owner_pid), static_cast<std::uint64_t>(child));
    const std::string p = d.path + "/stale.stats";
    spit(p, b);
    require_error(p, "stale: the owner, pid " + std::to_string(child) + ", is gone");
    nic::PublishedStats s = nic::read_published_stats(p, true);
    CHECK_FALSE(s.owner_alive);
    CHECK(s.stats.rx[0].packets == 5);

    // A live process that is not the owner (another start time): the pid was reused.
    b = good_file(d);
    patch<std::uint64_t>(b, offsetof(nic::StatsFileLayout, owner_start), 1);
    spit(p, b);
    require_error(p, "is another process now");
}

TEST_CASE("stats file: a reader never sees half a publication while the owner keeps publishing") {
    TempDir d;
    nic::StatsPublisher pub(kBdf, "igb", d.path);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        nic::StatsSnapshot s;
        s.rx_queues = s.tx_queues = nic::stats_max_queues;
        for (std::uint64_t k = 1; !stop.load(std::memory_order_relaxed); ++k) {
            // Every counter of publication k is k: a torn copy mixes two values.
            for (auto& q : s.rx) q.packets = q.bytes = q.no_buffers = k;
            for (auto& q : s.tx) q.packets = q.bytes = q.bad_head = k;
            s.device.rx_packets = s.device.crc_errors = k;
            s.link_changes = k;
            pub.publish(s);
        }
    });
    std::uint64_t torn = 0, last = 0, backwards = 0, reads = 0;
    for (int i = 0; i < 2000; ++i) {
        nic::PublishedStats p;
        try {
            p = nic::read_published_stats(pub.path());
        } catch (const Error&) {
            continue;  // an owner that never pauses can outlast the reader's retries: an error, never a torn copy
        }
        ++reads;
        std::uint64_t k = p.stats.link_changes;
        for (const auto& q : p.stats.rx) torn += q.packets != k || q.bytes != k || q.no_buffers != k;
        for (const auto& q : p.stats.tx) torn += q.packets != k || q.bytes != k || q.bad_head != k;
        torn += p.stats.device.rx_packets != k || p.stats.device.crc_errors != k;
        backwards += k < last;
        last = k;
    }
    stop = true;
    writer.join();
    CHECK(torn == 0);
    CHECK(backwards == 0);
    CHECK(last > 0);
    CHECK(reads > 0);
}
