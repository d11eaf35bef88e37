// igb-cost: the instructions bardrive's igb data path executes per packet (TX + RX), counted by callgrind.
// NIC A sends FRAMES frames of SIZE bytes in tx_bursts of BATCH, NIC B receives them with rx_bursts of
// BATCH, every frame's sequence number checked. Run it under callgrind in the lab with both NICs bound:
//   lab/lab run basic --bind all -- sh bench/nic/igb-cost.sh build/bench/nic/igb-cost
// Empty RX polls (the emulated device has not delivered yet) are counted apart: the traffic phase ends in
// a callgrind dump, then POLLS rx_bursts on an idle ring end in a second dump, so the script subtracts
// empty polls x (cost of one empty poll) from the traffic phase. Outside callgrind the dumps do nothing.
// MODE `direct` calls nic::Igb (the compiler knows the class: direct calls), `port` the same ports
// through nic::Port& (a virtual call per burst). A third dump counts call_probe(): rounds of an rx_burst
// and an empty tx_burst with the driver's functions left out, whose count the script compares between
// the modes: the difference is what the interface costs per burst, exactly.

#include <valgrind/callgrind.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/nic/a_to_b.hpp"
#include "bench/nic/kernel_port.hpp"
#include "core/error.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/igb/igb.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

constexpr std::uint32_t kIdlePolls = 1000;

namespace {
// kIdlePolls rounds of an rx_burst on B's idle ring and an empty tx_burst on A, counted with the driver's
// own functions left out (entering Igb::rx_burst/tx_burst toggles collection off again): what remains
// is the loop and the calls themselves, which differ between the modes by the interface's cost.
template <class P>
[[gnu::noinline]] std::uint64_t call_probe(P& a, P& b, std::uint32_t batch) {
    nic::Packet got[bench::kMaxBatch];
    std::uint64_t stray = 0;
    CALLGRIND_TOGGLE_COLLECT;
    for (std::uint32_t i = 0; i < kIdlePolls; ++i) {
        stray += b.rx_burst(0, std::span(got, batch));
        a.tx_burst(0, std::span<const nic::Packet>());
    }
    CALLGRIND_TOGGLE_COLLECT;
    return stray;
}

template <class P>
int measure(P& a, P& b, dma::BufferPool& pool, std::uint64_t count, std::uint32_t len, std::uint32_t batch,
            const char* mode) {
    CALLGRIND_ZERO_STATS;
    bench::FrameRun c = bench::a_to_b(a, b, pool, len, batch, batch, count);
    CALLGRIND_DUMP_STATS_AT("traffic");
    nic::Packet got[bench::kMaxBatch];
    std::uint64_t stray = 0;
    for (std::uint32_t i = 0; i < kIdlePolls; ++i) {
        const std::uint16_t n = b.rx_burst(0, std::span(got, batch));
        stray += n;
        for (std::uint16_t k = 0; k < n; ++k) nic::Port::release(got[k]);
    }
    CALLGRIND_DUMP_STATS_AT("idle polls");
    stray += call_probe(a, b, batch);
    CALLGRIND_DUMP_STATS_AT("calls");
    std::printf(
        "igb-cost: mode %s frames %llu size %u batch %u received %llu in_order %llu rx_polls %llu empty_polls %llu "
        "tx_bursts %llu idle_polls %u idle_received %llu rx_doorbells %llu tx_doorbells %llu\n",
        mode, static_cast<unsigned long long>(count), len, batch, static_cast<unsigned long long>(c.received),
        static_cast<unsigned long long>(c.in_order), static_cast<unsigned long long>(c.rx_polls),
        static_cast<unsigned long long>(c.empty_polls), static_cast<unsigned long long>(c.tx_bursts), kIdlePolls,
        static_cast<unsigned long long>(stray), static_cast<unsigned long long>(b.rx_stats(0).doorbells),
        static_cast<unsigned long long>(a.tx_stats(0).doorbells));
    return c.in_order == count && stray == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) try {
    auto nics = bench::lab_nics();
    if (nics.size() < 2) {
        std::fprintf(stderr,
                     "igb-cost: needs two igb NICs on one wire bound to vfio-pci: run it in the lab "
                     "(lab/lab run basic --bind all -- sh bench/nic/igb-cost.sh build/bench/nic/igb-cost)\n");
        return 77;
    }
    const std::string mode = argc == 5 ? argv[4] : "direct";
    if ((argc != 4 && argc != 5) || (mode != "direct" && mode != "port")) {
        std::fprintf(stderr,
                     "usage: igb-cost FRAMES SIZE BATCH [direct|port] (SIZE 60..1514 bytes without CRC, BATCH "
                     "1..%u)\n",
                     bench::kMaxBatch);
        return 2;
    }
    std::uint64_t count = std::strtoull(argv[1], nullptr, 0);
    auto len = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 0));
    auto batch = static_cast<std::uint32_t>(std::strtoul(argv[3], nullptr, 0));
    if (count == 0 || len < nic::ETH_MIN_FRAME || len > 1514 || batch < 1 || batch > bench::kMaxBatch) {
        std::fprintf(stderr, "igb-cost: FRAMES > 0, SIZE 60..1514, BATCH 1..%u\n", bench::kMaxBatch);
        return 2;
    }
    vfio::Domain domain;
    auto a_dev = vfio::Device::open(domain, nics[0]);
    auto b_dev = vfio::Device::open(domain, nics[1]);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2048, 4096);
    if (mode == "port") {  // as a program opens them: the driver is picked at run time, the compiler cannot know it
        auto a = nic::open_port(a_dev, iovas, pool), b = nic::open_port(b_dev, iovas, pool);
        return measure<nic::Port>(*a, *b, pool, count, len, batch, "port");
    }
    nic::Igb a(a_dev, iovas, pool), b(b_dev, iovas, pool);
    return measure<nic::Igb>(a, b, pool, count, len, batch, "direct");
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "igb-cost: error: %s\n", e.what());
    return 2;
}
