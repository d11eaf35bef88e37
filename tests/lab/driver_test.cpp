// The driver scenarios of Linux's VFIO selftests (vfio_pci_driver_test.c), under their names, against
// whichever device the lab preset gives as NIC A, or BARDRIVE_DRIVER_BDF: nic::probe_memcpy_driver() picks
// igb, e1000e or ivshmem-doorbell (send_msi only: the copy scenarios SKIP). One IOMMU mode per run
// (lab/each-iommu-mode sets BARDRIVE_IOMMU); tests/lab/meson.build runs it for every driver in every mode
// each lab kernel offers. docs/vfio-selftests.md maps scenario -> test -> runs.
//
// Every copy is checked byte for byte, and so is everything around it: the buffers are filled with a
// poison byte first, and after each scenario every byte outside the destinations must still hold it.
// BARDRIVE_STORM_SECONDS sets memcpy_storm's duration (default 60 s, as the selftest's issue asks).
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "memcpy_bed.hpp"
#include "nic/memcpy_driver.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

namespace {

constexpr std::uint8_t kPoison = labenv::MemcpyBed::kPoison;
constexpr int kTimeoutMs = labenv::MemcpyBed::kTimeoutMs;
// MemcpyBed's one 2 MiB hugepage (physically contiguous, as no-IOMMU mode needs), laid out for these
// scenarios: the source at 0, single-copy destinations at 256 KiB, the storm's destinations from
// 512 KiB, 8 KiB apart.
constexpr std::size_t kSrc = 0, kDst = 256 << 10, kStorm = 512 << 10, kStormGap = 8 << 10;

struct Fixture : labenv::MemcpyBed {
    Fixture() : mem(scratch), map(scratch_map) {
        std::mt19937 rng(1);
        for (std::size_t i = 0; i < driver->limits().max_size; ++i) at(kSrc)[i] = static_cast<std::uint8_t>(rng());
        std::printf("driver %s on %s, IOMMU mode %s\n", driver->name(), device->bdf().str().c_str(), mode());
    }

    // A copy that must land: the destination equals the source afterwards.
    void memcpy_checked(std::size_t dst, std::size_t src, std::size_t size) {
        INFO(driver->name() << ": copy of " << size << " bytes to +" << dst << " from +" << src);
        REQUIRE(driver->memcpy_start(iova(dst), iova(src), size));
        bool ok = driver->memcpy_wait(kTimeoutMs);
        INFO(driver->failure());
        REQUIRE(ok);
        CHECK(std::memcmp(at(dst), at(src), size) == 0);
    }

    // Every byte outside the source and the destinations still holds the poison; then the destinations
    // are poisoned again for what comes next.
    void check_untouched_except(const std::vector<std::pair<std::size_t, std::size_t>>& dsts) {
        const std::size_t src_end = kSrc + driver->limits().max_size;
        std::size_t bad = 0, first = 0;
        for (std::size_t i = src_end; i < mem.size(); ++i) {
            bool inside = false;
            for (auto [d, n] : dsts) inside = inside || (i >= d && i < d + n);
            if (!inside && at(0)[i] != kPoison && bad++ == 0) first = i;
        }
        INFO("first changed byte at +" << first);
        CHECK(bad == 0);
        for (auto [d, n] : dsts) std::memset(at(d), kPoison, n);
    }
    void check_untouched_except(std::size_t dst, std::size_t size) { check_untouched_except({{dst, size}}); }

    bool msi_pending() const { return device->wait_irq(0, 0) != 0; }

    // Raises one MSI: the eventfd must read 1, as in the selftest, or for a device that may repeat it
    // (QEMU's e1000e: MemcpyLimits::max_msis_per_send) up to that many; then nothing more. A repeat
    // comes within milliseconds; one later than the settling wait would fail the next no-MSI check.
    void send_msi_checked() {
        const std::uint32_t most = driver->limits().max_msis_per_send;
        driver->send_msi();
        std::uint64_t n = device->wait_irq(0, kTimeoutMs);
        CHECK(n >= 1);
        if (most > 1) {
            for (std::uint64_t more; n < most && (more = device->wait_irq(0, 500)) != 0;) n += more;
        }
        CHECK(n <= most);
        CHECK_FALSE(msi_pending());
    }

    const dma::Memory& mem;
    const dma::Mapping& map;
};

// A device without a DMA engine (ivshmem-doorbell: send_msi only) has no copy to check.
bool copies(const Fixture& f) { return f.driver->limits().max_in_flight > 0; }
void skip_without_memcpy(const Fixture& f) {
    if (!copies(f)) SKIP(f.driver->name() << " copies nothing (MemcpyLimits all 0): send_msi only");
}

// An IOVA range nothing is mapped at: taken from the allocator and never mapped.
struct Unmapped {
    explicit Unmapped(Fixture& f) : f(f), iova(f.iovas->allocate(1 << 20)) {}
    ~Unmapped() { f.iovas->free(iova, 1 << 20); }
    Fixture& f;
    std::uint64_t iova;
};

void skip_without_iommu(const Fixture& f) {
    // Without an IOMMU an IOVA is a physical address: "unmapped" would be someone's memory.
    if (f.domain->iova_is_physical()) SKIP("no-IOMMU mode: no unmapped IOVA exists, DMA reaches any address");
}

// After DMA from or to nowhere the device must still copy; an engine that broke is initialised again.
void still_works(Fixture& f, bool waited_ok) {
    if (!waited_ok) {
        std::printf("%s: the engine stopped after the fault; init() again\n", f.driver->name());
        f.driver->init();
    }
    f.memcpy_checked(kDst, kSrc, 4096);
    f.check_untouched_except(kDst, 4096);
    CHECK_FALSE(f.msi_pending());
}

}  // namespace

TEST_CASE("vfio_pci_driver_test.init_remove", "[lab][driver]") {
    Fixture f;
    for (int i = 0; i < 10; ++i) {
        INFO("round " << i);
        f.driver->remove();
        CHECK_FALSE(f.driver->initialized());
        CHECK_FALSE(f.driver->memcpy_start(f.iova(kDst), f.iova(kSrc), 4096));  // refused while removed
        f.driver->init();
        REQUIRE(f.driver->initialized());
    }
    if (!copies(f)) return;
    f.memcpy_checked(kDst, kSrc, 4096);
    f.check_untouched_except(kDst, 4096);
}

TEST_CASE("vfio_pci_driver_test.memcpy_success", "[lab][driver]") {
    Fixture f;
    skip_without_memcpy(f);
    const nic::MemcpyLimits& l = f.driver->limits();
    const std::size_t align = l.dst_alignment;
    for (std::size_t size : {l.min_size, std::size_t{1000}, std::size_t{4095}, std::size_t{4096}, std::size_t{4097},
                             std::size_t{12345}, l.max_size}) {
        for (std::size_t shift : {std::size_t{0}, align * 3, std::size_t{2048}}) {
            f.memcpy_checked(kDst + shift, kSrc + 1, size);  // an odd source too
            f.check_untouched_except(kDst + shift, size);
        }
    }
    CHECK_FALSE(f.msi_pending());
    // Outside the limits: refused, nothing queued.
    CHECK_FALSE(f.driver->memcpy_start(f.iova(kDst), f.iova(kSrc), l.min_size - 1));
    CHECK_FALSE(f.driver->memcpy_start(f.iova(kDst), f.iova(kSrc), l.max_size + 1));
    if (align > 1) CHECK_FALSE(f.driver->memcpy_start(f.iova(kDst + 1), f.iova(kSrc), 4096));
    CHECK(f.driver->memcpy_wait(kTimeoutMs));  // nothing in flight
    f.check_untouched_except(kDst, 0);
}

TEST_CASE("vfio_pci_driver_test.memcpy_from_unmapped_region", "[lab][driver]") {
    Fixture f;
    skip_without_memcpy(f);
    skip_without_iommu(f);
    Unmapped nowhere(f);
    REQUIRE(f.driver->memcpy_start(f.iova(kDst), nowhere.iova, 4096));
    bool ok = f.driver->memcpy_wait(kTimeoutMs);  // QEMU's models report the frames done
    // What the destination holds is undefined (the device read nothing); nothing else may change.
    f.check_untouched_except(kDst, 4096);
    CHECK_FALSE(f.msi_pending());
    still_works(f, ok);
}

TEST_CASE("vfio_pci_driver_test.memcpy_to_unmapped_region", "[lab][driver]") {
    Fixture f;
    skip_without_memcpy(f);
    skip_without_iommu(f);
    Unmapped nowhere(f);
    REQUIRE(f.driver->memcpy_start(nowhere.iova, f.iova(kSrc), 4096));
    bool ok = f.driver->memcpy_wait(kTimeoutMs);
    f.check_untouched_except(kDst, 0);  // not a byte of ours changed
    CHECK_FALSE(f.msi_pending());
    still_works(f, ok);
}

TEST_CASE("vfio_pci_driver_test.send_msi", "[lab][driver]") {
    Fixture f;
    CHECK_FALSE(f.msi_pending());
    f.send_msi_checked();
}

TEST_CASE("vfio_pci_driver_test.mix_and_match", "[lab][driver]") {
    Fixture f;
    const std::size_t sizes[] = {f.driver->limits().min_size, 4096, 9000, f.driver->limits().max_size};
    for (int i = 0; i < 10; ++i) {
        INFO("round " << i);
        std::size_t size = sizes[i % 4];
        if (copies(f)) {
            f.memcpy_checked(kDst, kSrc, size);
            f.check_untouched_except(kDst, size);
        } else {
            CHECK_FALSE(f.driver->memcpy_start(f.iova(kDst), f.iova(kSrc), 4096));  // refused, as documented
        }
        CHECK_FALSE(f.msi_pending());
        f.send_msi_checked();
    }
}

TEST_CASE("vfio_pci_driver_test.memcpy_storm", "[lab][driver]") {
    Fixture f;
    skip_without_memcpy(f);
    const nic::MemcpyLimits& l = f.driver->limits();
    const char* env = std::getenv("BARDRIVE_STORM_SECONDS");
    const double seconds = env ? std::atof(env) : 60.0;
    REQUIRE(seconds > 0);
    const std::size_t size = l.max_size, stride = size + kStormGap;
    REQUIRE(kStorm + l.max_in_flight * stride <= f.mem.size());
    std::uint64_t copies = 0, rounds = 0;
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    while (elapsed() < seconds) {
        // A new source each round, so a copy that did not happen cannot pass for one.
        std::mt19937 rng(static_cast<unsigned>(rounds + 100));
        for (std::size_t i = 0; i < size; ++i) f.at(kSrc)[i] = static_cast<std::uint8_t>(rng());
        for (std::uint32_t c = 0; c < l.max_in_flight; ++c) {
            REQUIRE(f.driver->memcpy_start(f.iova(kStorm + c * stride), f.iova(kSrc), size));
        }
        bool ok = f.driver->memcpy_wait(kTimeoutMs);
        INFO(f.driver->failure());
        REQUIRE(ok);
        for (std::uint32_t c = 0; c < l.max_in_flight; ++c) {
            INFO("round " << rounds << " copy " << c);
            REQUIRE(std::memcmp(f.at(kStorm + c * stride), f.at(kSrc), size) == 0);
        }
        copies += l.max_in_flight;
        ++rounds;
    }
    const double took = elapsed();
    CHECK_FALSE(f.msi_pending());
    std::vector<std::pair<std::size_t, std::size_t>> dsts;
    for (std::uint32_t c = 0; c < l.max_in_flight; ++c) dsts.emplace_back(kStorm + c * stride, size);
    f.check_untouched_except(dsts);
    std::printf("benchmark: memcpy_storm %s %s: %llu copies of %zu bytes (%u in flight) in %.1f s, %.1f MiB/s\n",
                f.driver->name(), f.mode(), static_cast<unsigned long long>(copies), size, l.max_in_flight, took,
                static_cast<double>(copies * size) / took / (1 << 20));
}
