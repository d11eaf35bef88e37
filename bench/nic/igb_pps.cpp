// igb-pps: packets per second from NIC A to NIC B, bardrive's userspace igb driver against the kernel's
// igb driver, in the same guest, same frames, same batch sizes. Run it in the lab with only the window
// bound (so vfio-pci is loaded and both NICs start on the kernel's igb):
//   lab/lab run basic --bind 0000:03:00.0 -- build/bench/nic/igb-pps
// Kernel: pktgen on A's interface (in-kernel, `burst` = batch), its own reported rate; B's igb driver counts
// what arrived. Then both NICs are handed to vfio-pci and bardrive does the same: tx_burst of `batch` on A,
// rx_burst on B, rate = frames B received / time from the first send to the last receive (so bardrive's
// figure includes receiving; pktgen's does not), every frame's sequence number checked. Under TCG the
// device model's cost is in both figures.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/nic/a_to_b.hpp"
#include "bench/nic/kernel_port.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/port.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using bench::KernelPort;
using Clock = std::chrono::steady_clock;

namespace {

// The kernel's own packet generator (pktgen: in-kernel, `burst` = batch through igb's xmit_more path) on
// A. Its rate is the one pktgen reports for the run; B's igb driver counts what arrived, read once the
// run is over (reading it during the run would steal the guest's CPUs from the kernel). Returns an
// empty result when pktgen cannot be driven.
bench::FrameRun run_pktgen(KernelPort& a, KernelPort& b, std::uint32_t len, std::uint32_t batch, std::uint64_t count) {
    bench::FrameRun r;
    auto rx_packets = [&] { return bench::if_counter(b.name, "rx_packets"); };
    const std::uint64_t rx0 = rx_packets();
    double pps = bench::Pktgen::send(a.name, b.mac, len, batch, count);
    if (pps <= 0) return r;
    auto end = Clock::now() + std::chrono::seconds(2);
    while (rx_packets() - rx0 < count && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.received = r.in_order = rx_packets() - rx0;
    r.seconds = static_cast<double>(r.received) / pps;  // pps() then gives pktgen's rate
    return r;
}

}  // namespace

int main(int argc, char** argv) try {
    std::uint64_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 20000;
    auto nics = bench::lab_nics();
    if (nics.size() < 2) {
        std::fprintf(stderr,
                     "igb-pps: needs two igb NICs on one wire: run it in the lab (lab/lab run basic --bind "
                     "0000:03:00.0 -- igb-pps [FRAMES])\n");
        return 77;
    }
    const std::uint32_t sizes[] = {60, 508, 1496};  // 64, 512 and 1500 bytes on the wire with the CRC
    const std::uint32_t batches[] = {1, 4, 16, 32, 64};
    struct Row {
        std::uint32_t size, batch;
        bench::FrameRun pktgen, bardrive;
    };
    std::vector<Row> rows;

    {  // 1. the kernel's igb on both NICs
        KernelPort a(nics[0]), b(nics[1]);
        bool have_pktgen = bench::Pktgen::load();
        for (auto s : sizes)
            for (auto bt : batches) {
                Row row{s, bt, {}, {}};
                if (have_pktgen) row.pktgen = run_pktgen(a, b, s, bt, count);
                rows.push_back(row);
            }
        a.set_up(false);
        b.set_up(false);
    }
    // 2. the same NICs handed to vfio-pci, driven by bardrive
    vfio::BindOptions bo;
    bo.force = true;
    vfio::bind(vfio::Sysfs(), {nics[0], nics[1]}, bo);
    vfio::Domain domain;
    auto a_dev = vfio::Device::open(domain, nics[0]);
    auto b_dev = vfio::Device::open(domain, nics[1]);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2048, 4096);
    auto a = nic::open_port(a_dev, iovas, pool), b = nic::open_port(b_dev, iovas, pool);
    for (auto& r : rows) r.bardrive = bench::a_to_b(*a, *b, pool, r.size, r.batch, bench::kMaxBatch, count);

    std::printf("igb-pps: %llu frames per run, NIC A %s -> NIC B %s (QEMU igb, one hub)\n",
                static_cast<unsigned long long>(count), nics[0].str().c_str(), nics[1].str().c_str());
    std::printf(
        "| frame (wire) | batch | kernel igb + pktgen kpps | bardrive kpps | ratio | B received: kernel / bardrive "
        "(in order) |\n");
    std::printf("|---:|---:|---:|---:|---:|---|\n");
    bool ok = true;
    for (const auto& r : rows) {
        double ratio = r.pktgen.pps() > 0 ? r.bardrive.pps() / r.pktgen.pps() : 0;
        std::printf(
            "| %u | %u | %.1f | %.1f | %.2fx | %llu / %llu (%llu) |\n", r.size + 4, r.batch, r.pktgen.pps() / 1e3,
            r.bardrive.pps() / 1e3, ratio, static_cast<unsigned long long>(r.pktgen.received),
            static_cast<unsigned long long>(r.bardrive.received), static_cast<unsigned long long>(r.bardrive.in_order));
        ok = ok && r.bardrive.received == count && r.bardrive.in_order == count;
    }
    return ok ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "igb-pps: error: %s\n", e.what());
    return 2;
}
