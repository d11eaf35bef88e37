// nic::Port on whatever NICs the preset has (one binary, a variant per driver as the VFIO selftests run
// one test per device): nic::open_port picks the driver from the IDs, and every check goes through
// the interface. Frames A to B byte-exact and counted over ring laps, RX straight into the window, MAC
// loopback where the driver offers it, interrupts, a device no driver takes, and examples/capture's
// pcap file read back by tcpdump.
#include <sys/wait.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/peer_window.hpp"
#include "lab_env.hpp"
#include "nic/drivers.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using nic::Packet;

namespace {

struct Bed {
    // open_b false: NIC B is left to another process (its IOMMU group can be open in one process only).
    explicit Bed(bool open_b = true) {
        if (!std::getenv("BARDRIVE_LAB"))
            SKIP("not in a lab guest: run it with lab/lab run basic|e1000e|virtio -- <this binary>");
        nics = labenv::bdfs("BARDRIVE_LAB_NICS");
        windows = labenv::bdfs("BARDRIVE_LAB_WINDOWS");
        REQUIRE(nics.size() >= 2);
        domain = std::make_unique<vfio::Domain>();
        a = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[0]));
        if (open_b) b = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[1]));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, 4096);
    }
    std::unique_ptr<nic::Port> open(vfio::Device& d, nic::PortOptions o = {}) {
        return nic::open_port(d, *iovas, *pool, o);
    }
    std::vector<pci::Bdf> nics, windows;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a, b;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
};

std::uint32_t length_of(std::uint64_t seq) { return 60 + static_cast<std::uint32_t>(seq * 37 % 1455); }

// `count` test frames of varied lengths from tx to rx, at most 32 in flight; how many came back
// byte-exact and in order. Received frames go to `keep` (or back to their pool).
std::uint64_t exchange(nic::Port& tx, nic::Port& rx, dma::BufferPool& pool, std::uint64_t count,
                       std::vector<Packet>* keep = nullptr) {
    std::uint64_t sent = 0, good = 0, seen = 0;
    auto idle = std::chrono::steady_clock::now();
    while (seen < count && std::chrono::steady_clock::now() - idle < std::chrono::seconds(5)) {
        dma::BufferPool::Buffer buf;
        if (sent < count && sent - seen < 32 && pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, length_of(sent), rx.mac(), tx.mac(), sent);
            Packet p{d, buf.iova, length_of(sent), buf.index, &pool};
            if (tx.tx_burst(0, std::span(&p, 1)) == 1)
                ++sent;
            else
                pool.free(buf.index);
        }
        Packet got[16];
        const std::uint16_t n = rx.rx_burst(0, got);
        for (std::uint16_t i = 0; i < n; ++i, ++seen) {
            auto seq = nic::check_test_frame(got[i].data, got[i].len);
            if (seq && *seq == seen && got[i].len == length_of(seen)) ++good;
            if (keep)
                keep->push_back(got[i]);
            else
                nic::Port::release(got[i]);
        }
        if (n) idle = std::chrono::steady_clock::now();
        tx.tx_reclaim(0);
    }
    return good;
}

std::string run(const std::string& cmd, int* status) {
    FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(f);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    const int st = ::pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

// The frames of `tcpdump -r FILE -nn -xx`: a line per frame, then its bytes in hex lines ("\t0x0000: ...").
std::vector<std::vector<std::uint8_t>> tcpdump_frames(const std::string& text) {
    std::vector<std::vector<std::uint8_t>> frames;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty()) continue;
        if (line[0] != '\t' && line[0] != ' ') {
            if (line.find("reading from file") == std::string::npos) frames.emplace_back();
            continue;
        }
        std::istringstream words(line);
        std::string offset;
        words >> offset;  // "0x0010:"
        REQUIRE(!frames.empty());
        for (std::string group; words >> group;) {
            for (std::size_t i = 0; i + 1 < group.size(); i += 2)
                frames.back().push_back(static_cast<std::uint8_t>(std::stoul(group.substr(i, 2), nullptr, 16)));
        }
    }
    return frames;
}

}  // namespace

TEST_CASE("port: A to B byte-exact over ring laps, counted by the driver (and the device where it counts)") {
    Bed bed;
    nic::PortOptions o;
    o.rx_ring = o.tx_ring = 64;
    auto a = bed.open(*bed.a, o), b = bed.open(*bed.b, o);
    INFO("drivers " << a->driver() << " -> " << b->driver());
    CHECK(a->link_up());
    CHECK(a->mac() != b->mac());
    CHECK(a->rx_queues() >= 1);
    a->device_stats();
    b->device_stats();
    const std::uint64_t n = 64 * 10;  // ten laps of each ring
    CHECK(exchange(*a, *b, *bed.pool, n) == n);
    CHECK(b->rx_stats(0).packets == n);
    CHECK(a->tx_stats(0).packets == n);
    CHECK(b->rx_stats(0).bad_length == 0);
    CHECK(b->rx_stats(0).bad_head == 0);
    if (a->features() & nic::feature::DEVICE_COUNTERS) {
        CHECK(a->device_stats().tx_packets == n);
        CHECK(b->device_stats().rx_packets == n);
    }
}

TEST_CASE("port: RX straight into the window's BAR, every frame inside it and byte-exact") {
    Bed bed;
    REQUIRE(!bed.windows.empty());
    auto win_dev = vfio::Device::open(*bed.domain, bed.windows[0]);
    auto window = dma::PeerWindow::map(*bed.domain, *bed.iovas, win_dev, 2);
    dma::BufferPool win_pool(window, 2048);
    auto a = bed.open(*bed.a);
    auto b = nic::open_port(*bed.b, *bed.iovas, win_pool);
    std::vector<Packet> held;
    CHECK(exchange(*a, *b, *bed.pool, 300, &held) == 300);
    for (const Packet& p : held) {
        CHECK(p.iova >= window.iova());
        CHECK(p.iova + p.len <= window.iova() + window.size());
        nic::Port::release(p);
    }
}

TEST_CASE("port: MAC loopback where the driver offers it") {
    Bed bed;
    nic::PortOptions lo;
    lo.loopback = nic::Loopback::mac;
    {
        auto probe = bed.open(*bed.a);
        if (!(probe->features() & nic::feature::MAC_LOOPBACK)) SKIP(probe->driver() << " has no MAC loopback");
    }
    auto a = bed.open(*bed.a, lo);
    CHECK(exchange(*a, *a, *bed.pool, 100) == 100);
}

TEST_CASE("port: with interrupts wait_rx sleeps until a frame lands on RX queue 0") {
    Bed bed;
    nic::PortOptions irq;
    irq.interrupts = true;
    auto a = bed.open(*bed.a), b = bed.open(*bed.b, irq);
    CHECK(b->rx_fd(0) >= 0);
    CHECK(b->link_fd() >= 0);
    CHECK_FALSE(b->wait_rx(0, 200));  // nothing on the wire
    for (std::uint64_t i = 0; i < 10; ++i) {
        INFO("frame " << i);
        dma::BufferPool::Buffer buf;
        REQUIRE(bed.pool->alloc(buf));
        nic::write_test_frame(reinterpret_cast<std::uint8_t*>(buf.data), 100, b->mac(), a->mac(), i);
        Packet p{reinterpret_cast<std::uint8_t*>(buf.data), buf.iova, 100, buf.index, bed.pool.get()};
        REQUIRE(a->tx_burst(0, std::span(&p, 1)) == 1);
        REQUIRE(b->wait_rx(0, 5000));
        Packet got[4];
        std::uint16_t n = 0;
        REQUIRE(labenv::wait_for([&] { return (n = b->rx_burst(0, got)) > 0; }, std::chrono::seconds(2)));
        CHECK(n == 1);
        CHECK(nic::check_test_frame(got[0].data, got[0].len) == i);
        nic::Port::release(got[0]);
        a->tx_reclaim(0);
    }
}

TEST_CASE("port: a device no driver takes is refused with its IDs and the drivers bardrive has") {
    Bed bed;
    REQUIRE(!bed.windows.empty());
    auto win_dev = vfio::Device::open(*bed.domain, bed.windows[0]);  // ivshmem: not a NIC
    using Catch::Matchers::ContainsSubstring;
    CHECK_THROWS_WITH(nic::open_port(win_dev, *bed.iovas, *bed.pool),
                      ContainsSubstring("1af4:1110") && ContainsSubstring("not a NIC bardrive drives") &&
                          ContainsSubstring("igb") && ContainsSubstring("e1000e"));
    for (const nic::Driver& d : nic::drivers()) CHECK(d.name != std::string());
}

TEST_CASE("capture: examples/capture writes a port's frames to a pcap file; tcpdump reads the same frames back") {
    Bed bed(false);  // B belongs to the capture process; this one sends from A
    const std::string file = "/tmp/bardrive-capture.pcap";
    const std::uint64_t n = 150;
    const pci::Bdf b_bdf = bed.nics[1];
    FILE* cap = ::popen((std::string(CAPTURE_BIN) + " --port " + b_bdf.str() + " --out " + file + " --count " +
                         std::to_string(n) + " --seconds 60 2>&1")
                            .c_str(),
                        "r");
    REQUIRE(cap);
    char line[512] = {};
    REQUIRE(std::fgets(line, sizeof line, cap));  // "capture: DRIVER BDF (MAC) -> FILE": the port is up
    INFO(line);
    REQUIRE_THAT(line, Catch::Matchers::StartsWith("capture: "));
    const std::string first(line);
    const auto mac_at = first.find('(');
    REQUIRE(mac_at != std::string::npos);
    const nic::MacAddress b_mac = nic::MacAddress::parse(first.substr(mac_at + 1, 17));

    auto a = bed.open(*bed.a);
    std::uint64_t sent = 0, bytes = 0;
    while (sent < n) {
        dma::BufferPool::Buffer buf;
        REQUIRE(labenv::wait_for([&] { return bed.pool->alloc(buf); }, std::chrono::seconds(2)));
        nic::write_test_frame(reinterpret_cast<std::uint8_t*>(buf.data), length_of(sent), b_mac, a->mac(), sent);
        Packet p{reinterpret_cast<std::uint8_t*>(buf.data), buf.iova, length_of(sent), buf.index, bed.pool.get()};
        if (a->tx_burst(0, std::span(&p, 1)) == 1) {
            bytes += length_of(sent);
            ++sent;
            // Paced: the capture loop under TCG must keep up, or QEMU drops frames it has no buffer for.
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        } else {
            bed.pool->free(buf.index);
        }
        a->tx_reclaim(0);
    }
    std::string rest;
    for (std::size_t k; (k = std::fread(line, 1, sizeof line, cap)) > 0;) rest.append(line, k);
    const int st = ::pclose(cap);
    INFO(rest);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    CHECK_THAT(rest, Catch::Matchers::ContainsSubstring("wrote " + std::to_string(n) + " frames, " +
                                                        std::to_string(bytes) + " bytes"));

    int status = -1;
    const std::string dump = run("tcpdump -r " + file + " -nn -xx", &status);
    REQUIRE(status == 0);
    const auto frames = tcpdump_frames(dump);
    REQUIRE(frames.size() == n);
    std::uint64_t read_bytes = 0, exact = 0;
    for (std::size_t i = 0; i < frames.size(); ++i) {
        read_bytes += frames[i].size();
        std::vector<std::uint8_t> want(length_of(i));
        nic::write_test_frame(want.data(), length_of(i), b_mac, a->mac(), i);
        if (frames[i] == want) ++exact;
    }
    CHECK(read_bytes == bytes);
    CHECK(exact == n);
}
