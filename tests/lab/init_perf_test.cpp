// vfio_pci_device_init_perf_test (Linux's VFIO selftests): every device the lab preset binds opened and
// set up one after another and then all at once in parallel threads, timed. A benchmark: it prints
// `benchmark:` lines and asserts only that every open and every driver init worked. Each device gets its
// own vfio::Domain (a Domain is not thread-safe); "open" is Domain + Device::open + every mmap-able BAR
// mapped, "driver init" is nic::MemcpyDriver::init() on each NIC (reset, rings, link up).
#include <algorithm>
#include <atomic>
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dma/iova_allocator.hpp"
#include "lab_env.hpp"
#include "nic/memcpy_driver.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// One device, opened in its own domain, every BAR that can be mmapped mapped.
struct Opened {
    std::unique_ptr<vfio::Domain> domain = std::make_unique<vfio::Domain>();
    std::unique_ptr<vfio::Device> device;
    std::vector<vfio::Mmio> bars;
    explicit Opened(const pci::Bdf& bdf) {
        device = std::make_unique<vfio::Device>(vfio::Device::open(*domain, bdf));
        for (unsigned b = 0; b < 6; ++b) {
            auto r = device->region_info(b);
            if (r.size != 0 && r.mmappable && r.sparse.empty()) bars.push_back(device->map_bar(b));
        }
    }
};

// Runs work(i) for i in [0, n) one by one, then in n threads; returns {sequential ms, parallel ms}.
std::pair<double, double> time_both(std::size_t n, const std::function<void(std::size_t)>& work) {
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) work(i);
    const double seq = ms_since(t0);
    std::vector<std::thread> threads;
    t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) threads.emplace_back(work, i);
    for (auto& t : threads) t.join();
    return {seq, ms_since(t0)};
}

}  // namespace

TEST_CASE("vfio_pci_device_init_perf_test.init", "[lab][init_perf]") {
    const labenv::Lab lab = labenv::lab_or_skip();
    if (!std::getenv("BARDRIVE_IOMMU")) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
    std::vector<pci::Bdf> all = lab.nics;
    all.insert(all.end(), lab.windows.begin(), lab.windows.end());
    constexpr int kRounds = 5;

    std::atomic<int> opened{0}, bars{0};
    std::string backend = vfio::to_string(Opened(all[0]).domain->backend());  // iommufd-compat where it is
    std::vector<double> seq, par;
    for (int r = 0; r < kRounds; ++r) {
        auto [s, p] = time_both(all.size(), [&](std::size_t i) {
            Opened o(all[i]);
            ++opened;
            bars += static_cast<int>(o.bars.size());
        });
        seq.push_back(s);
        par.push_back(p);
    }
    CHECK(opened == 2 * kRounds * static_cast<int>(all.size()));
    CHECK(bars > 0);

    std::atomic<int> copied{0};
    std::vector<double> dseq, dpar;
    for (int r = 0; r < kRounds; ++r) {
        auto [s, p] = time_both(lab.nics.size(), [&](std::size_t i) {
            Opened o(lab.nics[i]);
            dma::IovaAllocator iovas(*o.domain);
            auto driver = nic::probe_memcpy_driver(*o.device, iovas);
            driver->init();
            copied += driver->initialized();
        });
        dseq.push_back(s);
        dpar.push_back(p);
    }
    CHECK(copied == 2 * kRounds * static_cast<int>(lab.nics.size()));

    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf(
        "benchmark: init_perf %s: open %zu devices (NICs and windows): one by one %.1f ms, %zu threads %.1f ms "
        "(median of %d)\n",
        backend.c_str(), all.size(), median(seq), all.size(), median(par), kRounds);
    std::printf(
        "benchmark: init_perf %s: open + MemcpyDriver::init of %zu NICs: one by one %.1f ms, %zu threads %.1f ms "
        "(median of %d)\n",
        backend.c_str(), lab.nics.size(), median(dseq), lab.nics.size(), median(dpar), kRounds);
}
