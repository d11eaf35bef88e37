// vfio_pci_device_init_perf_test (Linux's VFIO selftests): every device the lab preset binds opened and
// set up one after another and then all at once in parallel threads, timed. A benchmark: it prints
// `benchmark:` lines and asserts only that every open and every driver init worked. The unit of work is
// an IOMMU group (its devices can only join one container or IOAS together: the e1000e preset's NIC B and
// window share one), with its own vfio::Domain (a Domain is not thread-safe); "open" is Domain +
// Device::open of the group's devices + every mmap-able BAR mapped, "driver init" is
// nic::MemcpyDriver::init() on each NIC (reset, rings, link up) in a Domain of its own group.
#include <algorithm>
#include <atomic>
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
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

std::string iommu_group(const pci::Bdf& bdf) {
    return std::filesystem::read_symlink("/sys/bus/pci/devices/" + bdf.str() + "/iommu_group").filename();
}

// The devices of one IOMMU group, opened in a domain of their own, every BAR that can be mmapped mapped.
struct Opened {
    std::unique_ptr<vfio::Domain> domain = std::make_unique<vfio::Domain>();
    std::vector<vfio::Device> devices;
    std::vector<vfio::Mmio> bars;
    explicit Opened(const std::vector<pci::Bdf>& group) {
        for (const auto& bdf : group) {
            devices.push_back(vfio::Device::open(*domain, bdf));
            for (unsigned b = 0; b < 6; ++b) {
                auto r = devices.back().region_info(b);
                if (r.size != 0 && r.mmappable && r.sparse.empty()) bars.push_back(devices.back().map_bar(b));
            }
        }
    }
};

// `devices` by IOMMU group.
std::vector<std::vector<pci::Bdf>> by_group(const std::vector<pci::Bdf>& devices) {
    std::map<std::string, std::vector<pci::Bdf>> groups;
    for (const auto& d : devices) groups[iommu_group(d)].push_back(d);
    std::vector<std::vector<pci::Bdf>> out;
    for (auto& [g, members] : groups) out.push_back(members);
    return out;
}

// Runs work(i) for i in [0, n) one by one, then in n threads; returns {sequential ms, parallel ms}. An
// exception in a thread is a failed CHECK naming it, not std::terminate.
std::pair<double, double> time_both(std::size_t n, const std::function<void(std::size_t)>& work) {
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) work(i);
    const double seq = ms_since(t0);
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            try {
                work(i);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    const double par = ms_since(t0);
    for (const auto& e : errors) CHECK(e == "");
    return {seq, par};
}

}  // namespace

TEST_CASE("vfio_pci_device_init_perf_test.init", "[lab][init_perf]") {
    const labenv::Lab lab = labenv::lab_or_skip();
    if (!std::getenv("BARDRIVE_IOMMU")) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
    std::vector<pci::Bdf> all = lab.nics;
    all.insert(all.end(), lab.windows.begin(), lab.windows.end());
    const auto groups = by_group(all);
    constexpr int kRounds = 5;

    std::atomic<int> opened{0}, bars{0};
    std::string backend = vfio::to_string(Opened(groups[0]).domain->backend());  // iommufd-compat where it is
    std::vector<double> seq, par;
    for (int r = 0; r < kRounds; ++r) {
        auto [s, p] = time_both(groups.size(), [&](std::size_t i) {
            Opened o(groups[i]);
            opened += static_cast<int>(o.devices.size());
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
            Opened o(std::vector<pci::Bdf>{lab.nics[i]});
            dma::IovaAllocator iovas(*o.domain);
            auto driver = nic::probe_memcpy_driver(o.devices[0], iovas);
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
        "benchmark: init_perf %s: open %zu devices (NICs and windows) in %zu IOMMU groups: one by one %.1f ms, "
        "one thread per group %.1f ms (median of %d)\n",
        backend.c_str(), all.size(), groups.size(), median(seq), median(par), kRounds);
    std::printf(
        "benchmark: init_perf %s: open + MemcpyDriver::init of %zu NICs: one by one %.1f ms, %zu threads %.1f ms "
        "(median of %d)\n",
        backend.c_str(), lab.nics.size(), median(dseq), lab.nics.size(), median(dpar), kRounds);
}
