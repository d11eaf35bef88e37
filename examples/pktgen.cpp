// pktgen: sends test frames from one port (any NIC bardrive drives) as fast as it can, in batches, and prints the rate.
//   pktgen [--port BDF] [--count 100000] [--size 60] [--batch 32] [--queues 1] [--dst MAC]
#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "examples/common.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

static const char* kUsage =
    "pktgen [--port BDF] [--count 100000] [--size 60] [--batch 32] [--queues 1] [--dst ff:ff:ff:ff:ff:ff]\n"
    "       (in the lab --port defaults to the first of BARDRIVE_LAB_NICS)";

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    const pci::Bdf bdf = opt.bdf("port", "BARDRIVE_LAB_NICS", 0);
    const auto count = opt.num("count", 100000);
    const auto size = static_cast<std::uint32_t>(opt.num("size", 60));
    const auto batch = static_cast<std::uint32_t>(opt.num("batch", 32));
    const auto queues = static_cast<std::uint16_t>(opt.num("queues", 1));
    const nic::MacAddress dst = nic::MacAddress::parse(opt.str("dst", "ff:ff:ff:ff:ff:ff"));
    if (size < nic::TEST_FRAME_MIN || size > 1514 || batch == 0 || batch > 64)
        throw Error("check arguments", "--size/--batch", "frames are 60..1514 bytes, batches 1..64", kUsage);

    vfio::Domain domain;
    auto dev = vfio::Device::open(domain, bdf);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2048, 8192);
    nic::PortOptions o;
    o.tx_queues = queues;
    auto port = nic::open_port(dev, iovas, pool, o);

    std::uint64_t sent = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (sent < count) {
        nic::Packet pkts[64];
        std::uint32_t k = 0;
        dma::BufferPool::Buffer buf;
        while (k < batch && sent + k < count && pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, size, dst, port->mac(), sent + k);
            pkts[k++] = nic::Packet{d, buf.iova, size, buf.index, &pool};
        }
        auto q = static_cast<std::uint16_t>(sent / batch % queues);
        std::uint16_t took = port->tx_burst(q, std::span(pkts, k));
        for (std::uint32_t i = took; i < k; ++i) nic::Port::release(pkts[i]);
        if (took == 0) {  // the ring is full: take back what the device sent, then wait
            port->tx_reclaim(q);
            spin_pause();
        }
        sent += took;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool counted = port->features() & nic::feature::DEVICE_COUNTERS;
    std::printf("pktgen: %s %s sent %lu frames of %u bytes in %.3f s: %.1f kpps, %.3f Gb/s; device counted %s\n",
                port->driver(), bdf.str().c_str(), count, size, secs, count / secs / 1e3, count * size * 8 / secs / 1e9,
                counted ? std::to_string(port->device_stats().tx_packets).c_str() : "nothing (it keeps no counters)");
    return 0;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "pktgen: error: %s\n", e.what());
    return 2;
}
