// vfio-bench: what owning a device through VFIO costs.
//  1. DMA map + unmap of 1 GiB of IOVA space in 2 MiB pages (the baseline) and in 4 KiB pages.
//     The lab guest has 1 GiB of RAM, so 1 GiB of IOVA is made of one 128 MiB buffer mapped 8 times
//     at 8 IOVAs: the kernel pins and writes IOMMU entries for every mapping as if they were distinct.
//  2. MMIO register read and write latency on the igb's BAR0 against the same loop on DRAM (baseline).
// Usage (in a lab guest): vfio-bench [BDF] [repetitions]; BDF defaults to the lab's first NIC.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t buffer_bytes = std::size_t{128} << 20;
constexpr unsigned copies = 8;                // 8 x 128 MiB = 1 GiB of IOVA
constexpr std::uint32_t reg_status = 0x0008;  // 82576 8.2.2 STATUS, read-only
constexpr std::uint32_t reg_eitr9 = 0x16a4;   // 82576 8.8.14 EITR[9]: throttling of an unused vector, read/write

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct MapResult {
    double map_ms;
    double unmap_ms;
};

MapResult map_unmap_gib(vfio::Domain& domain, dma::IovaAllocator& iovas, const dma::Memory& mem) {
    std::vector<dma::Mapping> maps;
    maps.reserve(copies);
    auto t0 = Clock::now();
    for (unsigned i = 0; i < copies; ++i) maps.push_back(dma::Mapping::map(domain, iovas, mem));
    double map_ms = ms_since(t0);
    auto t1 = Clock::now();
    maps.clear();
    return {map_ms, ms_since(t1)};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// ns per access over n accesses; the loop is what both MMIO and DRAM pay.
template <class F>
double ns_per(unsigned n, F&& f) {
    auto t0 = Clock::now();
    for (unsigned i = 0; i < n; ++i) f(i);
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) try {
    std::string bdf_text = argc > 1 ? argv[1] : "";
    if (bdf_text.empty()) {
        std::istringstream nics(std::getenv("BARDRIVE_LAB_NICS") ? std::getenv("BARDRIVE_LAB_NICS") : "");
        nics >> bdf_text;
    }
    if (bdf_text.empty()) {
        std::fprintf(stderr,
                     "usage: vfio-bench BDF [repetitions]   (an igb bound to vfio-pci; in the lab it is found)\n");
        return 2;
    }
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, pci::Bdf::parse(bdf_text));
    dma::IovaAllocator iovas(domain);
    std::printf("device %s, IOMMU backend %s, IOMMU page sizes 0x%llx\n", nic.bdf().str().c_str(),
                vfio::to_string(domain.backend()), static_cast<unsigned long long>(domain.page_sizes()));

    // 1. DMA map + unmap.
    struct Row {
        const char* name;
        std::size_t page;
        double map_ms, unmap_ms;
    };
    std::vector<Row> rows;
    for (std::size_t page : {dma::page_2m, dma::page_4k}) {
        dma::MemoryOptions opt;
        opt.page_size = page;
        dma::Memory mem = dma::Memory::allocate(buffer_bytes, opt);
        std::memset(mem.data(), 0, mem.size());
        map_unmap_gib(domain, iovas, mem);  // warm-up: first-touch costs stay out of the numbers
        std::vector<double> m, u;
        for (int r = 0; r < reps; ++r) {
            MapResult res = map_unmap_gib(domain, iovas, mem);
            m.push_back(res.map_ms);
            u.push_back(res.unmap_ms);
        }
        rows.push_back({page == dma::page_2m ? "2 MiB" : "4 KiB", page, median(m), median(u)});
    }
    std::printf("\nDMA map + unmap of 1 GiB of IOVA (%u x 128 MiB), median of %d\n", copies, reps);
    std::printf(
        "| pages | map ms | unmap ms | map+unmap ms | per page us | vs 2 MiB |\n|---|---:|---:|---:|---:|---:|\n");
    const double base = rows[0].map_ms + rows[0].unmap_ms;
    for (const auto& r : rows) {
        double total = r.map_ms + r.unmap_ms;
        double pages = double(copies) * double(buffer_bytes) / double(r.page);
        std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.1fx |\n", r.name, r.map_ms, r.unmap_ms, total,
                    total * 1000.0 / pages, total / base);
    }

    // 2. MMIO latency against DRAM.
    nic.enable_bus_master();
    vfio::Mmio bar = nic.map_bar(0);
    bar.require(reg_eitr9, 4);
    dma::Memory dram = dma::Memory::allocate(dma::page_2m);
    auto* cell = reinterpret_cast<volatile std::uint32_t*>(dram.data());
    constexpr unsigned n = 20000;
    std::uint32_t sink = 0;
    std::vector<double> dr, dw, mr, mw;
    for (int r = 0; r < reps; ++r) {
        dr.push_back(ns_per(n, [&](unsigned) { sink += *cell; }));
        dw.push_back(ns_per(n, [&](unsigned i) { *cell = i; }));
        mr.push_back(ns_per(n, [&](unsigned) { sink += bar.read32(reg_status); }));
        // Posted writes: the read after the loop waits until they reached the device.
        mw.push_back(ns_per(n, [&](unsigned i) {
            bar.write32(reg_eitr9, (i & 0xff) << 2);
            if (i + 1 == n) sink += bar.read32(reg_eitr9);
        }));
    }
    bar.write32(reg_eitr9, 0);
    std::printf("\nregister access latency, %u accesses, median of %d (sink %u)\n", n, reps, sink & 1);
    std::printf("| access | DRAM ns (baseline) | MMIO ns | ratio |\n|---|---:|---:|---:|\n");
    std::printf("| read32 | %.1f | %.1f | %.0fx |\n", median(dr), median(mr), median(mr) / median(dr));
    std::printf("| write32 | %.1f | %.1f | %.0fx |\n", median(dw), median(mw), median(mw) / median(dw));
    return 0;
} catch (const Error& e) {
    std::fprintf(stderr, "vfio-bench: error: %s\n", e.what());
    return 1;
}
