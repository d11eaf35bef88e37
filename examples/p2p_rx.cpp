// p2p-rx: NIC A sends N test frames; NIC B (any NIC bardrive drives) receives them straight into another device's BAR
// window (a GPU's BAR1 in production, the lab's ivshmem BAR2 here), so the payload never touches host memory. Prints
// packet rate and bandwidth, then checks every frame's bytes through the CPU's view of the window (each frame once,
// any order). With --expect-dir
// DIR it also writes what the window must hold (expect-window0@OFFSET.bin) so the lab runner can compare it with the
// window's backing file from the host.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/peer_window.hpp"
#include "examples/common.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

static const char* kUsage =
    "p2p-rx [--tx BDF] [--rx BDF] [--window BDF] [--bar 2] [--count 10000] [--size 1024] [--batch 32]\n"
    "       [--expect-dir DIR]   (in the lab the BDFs default to BARDRIVE_LAB_NICS / BARDRIVE_LAB_WINDOWS)";

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    const pci::Bdf tx_bdf = opt.bdf("tx", "BARDRIVE_LAB_NICS", 0), rx_bdf = opt.bdf("rx", "BARDRIVE_LAB_NICS", 1);
    const pci::Bdf win_bdf = opt.bdf("window", "BARDRIVE_LAB_WINDOWS", 0);
    const auto count = opt.num("count", 10000);
    const auto size = static_cast<std::uint32_t>(opt.num("size", 1024));
    const auto batch = static_cast<std::uint32_t>(std::min<unsigned long>(opt.num("batch", 32), 64));
    if (size < nic::TEST_FRAME_MIN || size > 1514 || batch == 0) {
        throw Error("check arguments", "--size/--batch", "frames are 60..1514 bytes, batches 1..64", kUsage);
    }

    vfio::Domain domain;  // both NICs and the window share one IOMMU address space
    auto tx_dev = vfio::Device::open(domain, tx_bdf);
    auto rx_dev = vfio::Device::open(domain, rx_bdf);
    auto win_dev = vfio::Device::open(domain, win_bdf);
    dma::IovaAllocator iovas(domain);
    auto window = dma::PeerWindow::map(domain, iovas, win_dev, static_cast<unsigned>(opt.num("bar", 2)));
    dma::BufferPool win_pool(window, 2048);  // every RX buffer lives in the window
    dma::BufferPool host_pool(domain, iovas, 2048, 4096);

    nic::PortOptions rx_opt;
    rx_opt.rx_ring = 512;
    if (count + rx_opt.rx_ring > win_pool.count()) {
        throw Error("check window", window.cpu().name(),
                    log::concat("holds ", win_pool.count(), " buffers of 2 KiB; ", count, " frames plus a ring of ",
                                rx_opt.rx_ring, " do not fit"),
                    "send fewer frames (--count) or use a larger window");
    }
    auto a = nic::open_port(tx_dev, iovas, host_pool);  // whatever NICs these are: igb, e1000e, virtio-net
    auto b = nic::open_port(rx_dev, iovas, win_pool, rx_opt);
    std::printf("p2p-rx: %s %s (%s) -> %s %s (%s), RX buffers in %s BAR%lu at IOVA 0x%llx (%zu MiB)\n", a->driver(),
                tx_bdf.str().c_str(), a->mac().str().c_str(), b->driver(), rx_bdf.str().c_str(), b->mac().str().c_str(),
                win_bdf.str().c_str(), opt.num("bar", 2), static_cast<unsigned long long>(window.iova()),
                window.size() >> 20);

    std::vector<nic::Packet> held;  // received frames stay in their window buffers until checked
    held.reserve(count);
    std::uint64_t sent = 0;
    auto t0 = std::chrono::steady_clock::now(), last_rx = t0, idle = t0;
    while (held.size() < count) {
        if (sent < count) {
            nic::Packet pkts[64];
            std::uint32_t k = 0;
            dma::BufferPool::Buffer buf;
            while (k < batch && sent + k < count && host_pool.alloc(buf)) {
                auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                nic::write_test_frame(d, size, b->mac(), a->mac(), sent + k);
                pkts[k++] = nic::Packet{d, buf.iova, size, buf.index, &host_pool};
            }
            std::uint16_t took = a->tx_burst(0, std::span(pkts, k));
            for (std::uint32_t i = took; i < k; ++i) nic::Port::release(pkts[i]);
            sent += took;
        }
        nic::Packet got[64];
        std::uint16_t n = b->rx_burst(0, std::span(got, batch));
        held.insert(held.end(), got, got + n);
        auto now = std::chrono::steady_clock::now();
        if (n) last_rx = idle = now;
        if (now - idle > std::chrono::seconds(5)) break;  // nothing for 5 s: the rest is lost
    }
    a->tx_reclaim(0);

    double secs = std::chrono::duration<double>(last_rx - t0).count();
    double pps = secs > 0 ? static_cast<double>(held.size()) / secs : 0;
    std::printf("p2p-rx: %zu of %lu frames of %u bytes received in %.3f s: %.1f kpps, %.3f Gb/s into the window\n",
                held.size(), count, size, secs, pps / 1e3, pps * size * 8 / 1e9);

    // Check every frame where it landed: in the window, read through the CPU's mapping of the BAR. Each of
    // 0..count-1 must be there exactly once and byte-exact. The order is counted, not required: QEMU's network
    // layer delivers a new frame before older queued ones when the receiver has just refilled its ring
    // (net/queue.c, qemu_net_queue_send), so frames can swap on a lab wire as on a real one.
    nic::TestFrameArrivals arrivals(count, [size](std::uint64_t) { return size; });
    std::vector<std::uint8_t> image;  // the window from its start to the last frame's end, as it must be
    for (std::size_t i = 0; i < held.size(); ++i) {
        const nic::Packet& p = held[i];
        auto seq = arrivals.frame(p.data, p.len);
        std::size_t off = p.iova - window.iova();
        if (image.size() < off + size) image.resize(off + size, 0);
        // a frame that failed the check is expected as the one that belonged here, so the host sees it too
        nic::write_test_frame(image.data() + off, size, b->mac(), a->mac(), seq ? *seq : i);
    }
    const std::uint64_t good = arrivals.good(), out_of_order = arrivals.out_of_order();
    std::printf(
        "p2p-rx: %lu frames byte-exact in the window, each once (%lu out of order); driver: rx %llu, "
        "dropped %llu",
        static_cast<unsigned long>(good), static_cast<unsigned long>(out_of_order),
        static_cast<unsigned long long>(b->rx_stats(0).packets),
        static_cast<unsigned long long>(b->rx_stats(0).bad_length + b->rx_stats(0).chained +
                                        b->rx_stats(0).frame_errors));
    if (a->features() & b->features() & nic::feature::DEVICE_COUNTERS) {
        std::printf("; device: tx %llu, rx %llu", static_cast<unsigned long long>(a->device_stats().tx_packets),
                    static_cast<unsigned long long>(b->device_stats().rx_packets));
    }
    std::printf("\n");
    if (opt.has("expect-dir")) {
        std::string path =
            opt.str("expect-dir", ".") + "/expect-window0@" + std::to_string(window.bar_offset()) + ".bin";
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
        if (!f.good()) throw Error("write", path, "could not write the expected window image");
        std::printf("p2p-rx: expected window bytes (%zu) written to %s for the host to compare\n", image.size(),
                    path.c_str());
    }
    for (const auto& p : held) nic::Port::release(p);
    return good == count ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "p2p-rx: error: %s\n", e.what());
    return 2;
}
