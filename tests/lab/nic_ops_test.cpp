// What an operator sees of a running port, on igb (preset basic) and e1000e (preset e1000e):
// statistics the owner publishes, read by `bardrive nic stats` from another process while the
// workload runs; link changes when the host pulls the cable (lab/lab's request-set_link); and the
// port's MAC loopback as a DMA engine (nic::LoopbackCopy), bytes compared.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "nic/drivers.hpp"
#include "nic/loopback_copy.hpp"
#include "nic/stats_file.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;
using nic::Packet;

namespace {

// The CLI's output and exit status.
struct Cli {
    std::string out;
    int status = -1;
};

Cli cli(const std::string& args) {
    Cli r;
    FILE* f = ::popen((std::string(BARDRIVE_CLI) + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(f);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) r.out.append(buf, n);
    int st = ::pclose(f);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

nlohmann::json stats_json(const pci::Bdf& bdf) {
    Cli r = cli("nic stats " + bdf.str() + " --json");
    INFO(r.out);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
}

// One port, whatever the preset's NIC (nic::open_port picks the driver), with the calls the tests need.
struct Port {
    std::unique_ptr<nic::Port> port;

    std::uint16_t tx(Packet& p) { return port->tx_burst(0, std::span(&p, 1)); }
    std::uint16_t rx(std::span<Packet> out) { return port->rx_burst(0, out); }
    void reclaim() { port->tx_reclaim(0); }
    nic::MacAddress mac() const { return port->mac(); }
    std::optional<nic::LinkEvent> poll_link() { return port->poll_link(); }
    void publish(nic::StatsPublisher& p) { p.publish(*port); }
    int link_fd() const { return port->link_fd(); }
};

struct Bed {
    Bed() {
        if (!std::getenv("BARDRIVE_LAB"))
            SKIP("not in a lab guest: run it with lab/lab run basic|e1000e -- <this binary>");
        nics = labenv::bdfs("BARDRIVE_LAB_NICS");
        const char* m = std::getenv("BARDRIVE_LAB_NIC_MODEL");
        model = m ? m : "";
        REQUIRE(nics.size() >= 2);
        REQUIRE(!model.empty());
        domain = std::make_unique<vfio::Domain>();
        a = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[0]));
        b = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[1]));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, 2048);
    }
    Port open(vfio::Device& d, bool interrupts = false) {
        nic::PortOptions o;
        o.rx_ring = o.tx_ring = 256;
        o.interrupts = interrupts;
        return Port{nic::open_port(d, *iovas, *pool, o)};
    }
    std::vector<pci::Bdf> nics;
    std::string model;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a, b;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
};

// `count` test frames from tx to rx (at most 32 in flight); how many came back byte-exact.
std::uint64_t exchange(Port& tx, Port& rx, dma::BufferPool& pool, std::uint64_t count, std::uint64_t first_seq) {
    std::uint64_t sent = 0, good = 0, seen = 0;
    auto idle = std::chrono::steady_clock::now();
    while (seen < count && std::chrono::steady_clock::now() - idle < std::chrono::seconds(5)) {
        dma::BufferPool::Buffer buf;
        if (sent < count && sent - seen < 32 && pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, 200, rx.mac(), tx.mac(), first_seq + sent);
            Packet p{d, buf.iova, 200, buf.index, &pool};
            if (tx.tx(p) == 1)
                ++sent;
            else
                pool.free(buf.index);
        }
        Packet got[16];
        std::uint16_t n = rx.rx(got);
        for (std::uint16_t i = 0; i < n; ++i, ++seen) {
            auto seq = nic::check_test_frame(got[i].data, got[i].len);
            if (seq && *seq == first_seq + seen && got[i].len == 200) ++good;
            if (got[i].pool) got[i].pool->free(got[i].buf);
        }
        if (n) idle = std::chrono::steady_clock::now();
        tx.reclaim();
    }
    return good;
}

// Messages counted on an eventfd within `ms` milliseconds (0 if none came).
std::uint64_t wait_fd(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return 0;
    std::uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == sizeof n ? n : 0;
}

// Receives for `ms` milliseconds, freeing what comes; how many frames came.
std::uint64_t drain(Port& rx, int ms) {
    std::uint64_t n = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
        Packet got[16];
        std::uint16_t k = rx.rx(got);
        for (std::uint16_t i = 0; i < k; ++i) {
            if (got[i].pool) got[i].pool->free(got[i].buf);
        }
        n += k;
    }
    return n;
}

}  // namespace

TEST_CASE("nic stats: another process reads a running workload's counters; they grow and end as counted") {
    Bed bed;
    Port a = bed.open(*bed.a), b = bed.open(*bed.b);
    const pci::Bdf& bdf_a = bed.nics[0];
    const pci::Bdf& bdf_b = bed.nics[1];
    {
        nic::StatsPublisher pa(bdf_a, bed.model), pb(bdf_b, bed.model);
        a.publish(pa);
        b.publish(pb);
        std::uint64_t total = 0, last_rx = 0;
        for (int round = 0; round < 4; ++round) {
            const std::uint64_t n = 150;  // over the 256-descriptor rings: the counts cross ring laps
            CHECK(exchange(a, b, *bed.pool, n, total) == n);
            total += n;
            a.publish(pa);
            b.publish(pb);
            auto jb = stats_json(bdf_b);
            auto ja = stats_json(bdf_a);
            INFO("round " << round << ": " << jb.dump());
            CHECK(jb["bdf"] == bdf_b.str());
            CHECK(jb["driver"] == bed.model);
            CHECK(jb["owner_pid"] == ::getpid());
            CHECK(jb["owner_alive"] == true);
            CHECK(jb["link"]["up"] == true);
            if (b.port->features() & nic::feature::LINK_SPEED) CHECK(jb["link"]["speed_mbps"] == 1000);
            CHECK(jb["rx"].size() == 1);
            std::uint64_t rx = jb["rx"][0]["packets"];
            CHECK(rx > last_rx);  // grows while the workload runs...
            CHECK(rx == total);   // ...and is what the workload counted at the publish
            CHECK(jb["rx"][0]["bytes"] == total * 200);
            CHECK(ja["tx"][0]["packets"] == total);
            if (b.port->features() & nic::feature::DEVICE_COUNTERS) {  // virtio-net keeps none: all 0
                CHECK(jb["device"]["rx_packets"] == total);
                CHECK(ja["device"]["tx_packets"] == total);
            }
            CHECK(jb["rx"][0]["bad_length"] == 0);
            last_rx = rx;
        }
        // The table, and --watch with --count.
        Cli table = cli("nic stats " + bdf_b.str());
        INFO(table.out);
        CHECK(table.status == 0);
        CHECK_THAT(table.out, ContainsSubstring(b.port->features() & nic::feature::LINK_SPEED
                                                    ? "link: up, 1000 Mb/s, 0 changes"
                                                    : "link: up (speed not reported), 0 changes"));
        CHECK_THAT(table.out, ContainsSubstring(std::to_string(total)));
        Cli watch = cli("nic stats " + bdf_b.str() + " --json --watch --interval 0.1 --count 3");
        INFO(watch.out);
        CHECK(watch.status == 0);
        std::size_t lines = 0;
        for (std::size_t p = 0; (p = watch.out.find('\n', p)) != std::string::npos; ++p) ++lines;
        CHECK(lines == 3);
    }
    // The publishers are gone, and so are their files.
    Cli none = cli("nic stats " + bdf_b.str());
    CHECK(none.status == 1);
    CHECK_THAT(none.out, ContainsSubstring("nobody publishes statistics there"));

    // An owner killed while publishing leaves a stale file, and the reader says so.
    pid_t child = ::fork();
    if (child == 0) {
        nic::StatsPublisher p(bdf_b, bed.model);
        nic::StatsSnapshot s;
        s.rx_queues = s.tx_queues = 1;
        s.rx[0].packets = 42;
        p.publish(s);
        ::raise(SIGKILL);
    }
    REQUIRE(child > 0);
    int st = 0;
    ::waitpid(child, &st, 0);
    REQUIRE(WIFSIGNALED(st));
    Cli stale = cli("nic stats " + bdf_b.str());
    INFO(stale.out);
    CHECK(stale.status == 1);
    CHECK_THAT(stale.out, ContainsSubstring("stale: the owner, pid " + std::to_string(child)));
    Cli last = cli("nic stats " + bdf_b.str() + " --stale --json");
    CHECK(last.status == 0);
    CHECK(nlohmann::json::parse(last.out)["rx"][0]["packets"] == 42);
    std::remove(nic::stats_file_path(bdf_b).c_str());
    // Bad input.
    CHECK(cli("nic stats").status == 2);
    Cli bad = cli("nic stats 0000:zz:00.0");
    CHECK(bad.status == 2);  // a malformed address is bad usage
}

TEST_CASE("link: the host pulls the cable and puts it back; poll_link and the stats report both") {
    Bed bed;
    Port a = bed.open(*bed.a), b = bed.open(*bed.b);
    nic::StatsPublisher pa(bed.nics[0], bed.model);
    CHECK_FALSE(a.poll_link());  // init left the link up: nothing to report yet

    REQUIRE(labenv::host_set_link(0, false) == "ok");
    std::optional<nic::LinkEvent> down;
    CHECK(labenv::wait_for([&] { return (down = a.poll_link()).has_value(); }, std::chrono::seconds(5)));
    REQUIRE(down);
    CHECK_FALSE(down->up);
    CHECK(down->speed_mbps == 0);
    a.publish(pa);
    auto j = stats_json(bed.nics[0]);
    CHECK(j["link"]["up"] == false);
    CHECK(j["link"]["changes"] == 1);
    // Nothing crosses a pulled cable.
    for (std::uint64_t i = 0; i < 5; ++i) {
        dma::BufferPool::Buffer buf;
        REQUIRE(bed.pool->alloc(buf));
        nic::write_test_frame(reinterpret_cast<std::uint8_t*>(buf.data), 200, b.mac(), a.mac(), 1000 + i);
        Packet p{reinterpret_cast<std::uint8_t*>(buf.data), buf.iova, 200, buf.index, bed.pool.get()};
        if (a.tx(p) != 1) bed.pool->free(buf.index);
    }
    CHECK(drain(b, 500) == 0);

    REQUIRE(labenv::host_set_link(0, true) == "ok");
    std::optional<nic::LinkEvent> up;
    CHECK(labenv::wait_for([&] { return (up = a.poll_link()).has_value(); }, std::chrono::seconds(10)));
    REQUIRE(up);
    CHECK(up->up);
    if (a.port->features() & nic::feature::LINK_SPEED) CHECK(up->speed_mbps == 1000);
    a.publish(pa);
    j = stats_json(bed.nics[0]);
    CHECK(j["link"]["up"] == true);
    CHECK(j["link"]["changes"] == 2);
    drain(b, 500);                                    // what the model may still send of the frames queued while down
    CHECK(exchange(a, b, *bed.pool, 20, 100) == 20);  // and frames flow again
}

TEST_CASE("link with interrupts: the link vector fires when the cable goes and when it comes back") {
    Bed bed;
    Port a = bed.open(*bed.a, true);
    const int fd = a.link_fd();
    REQUIRE(fd >= 0);
    CHECK_FALSE(a.poll_link());
    CHECK(wait_fd(fd, 300) == 0);  // no change, no message

    REQUIRE(labenv::host_set_link(0, false) == "ok");
    CHECK(wait_fd(fd, 5000) >= 1);  // QEMU's e1000e may send it twice
    auto down = a.poll_link();      // re-arms the vector
    REQUIRE(down);
    CHECK_FALSE(down->up);

    REQUIRE(labenv::host_set_link(0, true) == "ok");
    std::optional<nic::LinkEvent> up;
    // The model signals the cable (and again when auto-negotiation completes): wait for the link itself.
    CHECK(labenv::wait_for(
        [&] {
            if (wait_fd(fd, 100) == 0) return false;
            up = a.poll_link();
            return up && up->up;
        },
        std::chrono::seconds(10)));
    REQUIRE(up);
    if (a.port->features() & nic::feature::LINK_SPEED) CHECK(up->speed_mbps == 1000);
    const std::uint64_t changes = a.port->link_changes();
    CHECK(changes == 2);
}

TEST_CASE("DMA engine: the port's MAC loopback copies memory to memory through nic::LoopbackCopy, exactly") {
    Bed bed;
    if (!nic::driver_for(*bed.a).open_engine) SKIP(nic::driver_for(*bed.a).name << " cannot serve as a DMA engine");
    nic::EngineOptions eo;
    eo.ring = 256;
    std::unique_ptr<nic::LoopbackEngine> engine = nic::open_loopback_engine(*bed.a, *bed.iovas, eo);
    auto copy = std::make_unique<nic::LoopbackCopy>(*engine);
    auto mem = dma::Memory::allocate(4 << 20);
    auto map = dma::Mapping::map(*bed.domain, *bed.iovas, mem);
    auto* src = reinterpret_cast<std::uint8_t*>(mem.data());
    auto* dst = src + (2 << 20);
    std::mt19937 rng(14);
    for (std::size_t i = 0; i < (1 << 20); ++i) src[i] = static_cast<std::uint8_t>(rng());
    std::uint64_t copied = 0;
    for (std::size_t size : {23u, 1514u, 4096u, 4097u, 100000u, 400000u}) {
        INFO("size " << size);
        std::memset(dst - 64, 0xaa, size + 128);
        REQUIRE(copy->start(map.iova() + (2 << 20), map.iova() + 64, size));
        REQUIRE(copy->wait(20000));
        CHECK(std::memcmp(dst, src + 64, size) == 0);
        CHECK(dst[-1] == 0xaa);    // no header before the destination...
        CHECK(dst[size] == 0xaa);  // ...and not a byte past its end
        copied += size;
    }
    CHECK(copy->bytes_copied() == copied);
    CHECK(copy->queue().status == nic::LoopbackQueue::Status::ok);
}
