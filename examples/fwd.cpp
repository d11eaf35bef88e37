// fwd: forwards every frame received on one port out of the other (any NICs bardrive drives, mixed too), both ways,
// without copying (the received buffer is the one transmitted). Both ports share one IOMMU domain and one buffer pool.
// Every 100 ms it publishes both ports' statistics (`bardrive nic stats BDF` in another shell shows
// them) and reports link changes.
//   fwd [--a BDF] [--b BDF] [--seconds 10]
#include <chrono>
#include <cstdio>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "examples/common.hpp"
#include "nic/port.hpp"
#include "nic/stats_file.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

static const char* kUsage = "fwd [--a BDF] [--b BDF] [--seconds 10]   (in the lab: the two BARDRIVE_LAB_NICS)";

namespace {
// Publishes the port's statistics and prints a link change.
void housekeeping(nic::Port& port, nic::StatsPublisher& stats) {
    if (auto ev = port.poll_link()) {
        std::printf("fwd: %s link %s", port.device().bdf().str().c_str(), ev->up ? "up" : "down");
        if (ev->up) std::printf(", %u Mb/s", ev->speed_mbps);
        std::printf("\n");
    }
    stats.publish(port);
}

// Moves one burst from `from` to `to`; frames the TX ring cannot take are dropped (back to the pool).
std::uint32_t forward(nic::Port& from, nic::Port& to) {
    nic::Packet pkts[32];
    std::uint16_t n = from.rx_burst(0, pkts);
    std::uint16_t sent = to.tx_burst(0, std::span(pkts, n));
    for (std::uint16_t i = sent; i < n; ++i) nic::Port::release(pkts[i]);
    return sent;
}
}  // namespace

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    const pci::Bdf a_bdf = opt.bdf("a", "BARDRIVE_LAB_NICS", 0), b_bdf = opt.bdf("b", "BARDRIVE_LAB_NICS", 1);
    const auto seconds = opt.num("seconds", 10);
    vfio::Domain domain;
    auto a_dev = vfio::Device::open(domain, a_bdf);
    auto b_dev = vfio::Device::open(domain, b_bdf);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2048, 4096);
    nic::PortOptions o;
    o.promiscuous = true;  // a forwarder takes every frame, whatever its destination
    auto a = nic::open_port(a_dev, iovas, pool, o), b = nic::open_port(b_dev, iovas, pool, o);
    std::printf("fwd: %s %s <-> %s %s for %lu s\n", a->driver(), a_bdf.str().c_str(), b->driver(), b_bdf.str().c_str(),
                seconds);
    nic::StatsPublisher a_stats(*a), b_stats(*b);
    std::uint64_t ab = 0, ba = 0;
    auto now = std::chrono::steady_clock::now(), next_publish = now;
    const auto end = now + std::chrono::seconds(seconds);
    while ((now = std::chrono::steady_clock::now()) < end) {
        const std::uint32_t moved_ab = forward(*a, *b), moved_ba = forward(*b, *a);
        ab += moved_ab;
        ba += moved_ba;
        if (moved_ab + moved_ba == 0) spin_pause();
        if (now >= next_publish) {  // off the data path: every 100 ms
            housekeeping(*a, a_stats);
            housekeeping(*b, b_stats);
            next_publish = now + std::chrono::milliseconds(100);
        }
    }
    std::printf("fwd: forwarded %llu frames a->b, %llu b->a; dropped (tx ring full) a: %llu b: %llu\n",
                static_cast<unsigned long long>(ab), static_cast<unsigned long long>(ba),
                static_cast<unsigned long long>(a->rx_stats(0).packets - ab),
                static_cast<unsigned long long>(b->rx_stats(0).packets - ba));
    return 0;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "fwd: error: %s\n", e.what());
    return 2;
}
