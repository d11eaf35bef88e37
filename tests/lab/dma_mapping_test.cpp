// The dma mapping scenarios of Linux's VFIO selftests (vfio_dma_mapping_test.c and its limit and mmio
// fixtures), under their names, in the IOMMU mode lab/each-iommu-mode chose (docs/vfio-selftests.md).
//
// The selftest reads each mapping back from the IOMMU's page tables (intel-iommu debugfs). Neither lab
// kernel has IOMMU_DEBUGFS, so every mapping is checked through the device instead: NIC A as a
// nic::MemcpyDriver copies from and to the start, the middle and the end of the region, every byte
// compared on the CPU side, and after unmap a copy to the old IOVA must not land.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "dma/peer_window.hpp"
#include "memcpy_bed.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;
using labenv::MemcpyBed;

namespace {

constexpr std::size_t kProbe = 256;  // bytes per DMA probe: even and above every driver's minimum
constexpr std::size_t kGuard = 64;   // bytes around a probe that must not change

std::size_t free_1g_hugepages() {
    std::ifstream f("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages");
    std::size_t n = 0;
    f >> n;
    return n;
}

std::size_t region_offsets(std::size_t size, int i) { return i == 0 ? 0 : i == 1 ? size / 2 : size - kProbe; }

// The device reads and writes `size` bytes at `iova`, which the CPU sees at `cpu`: three probes, each
// a copy out (compared with what the CPU wrote) and a copy in (compared, the bytes around it unchanged).
void check_by_dma(MemcpyBed& bed, std::uint8_t* cpu, std::uint64_t iova, std::size_t size) {
    for (int i = 0; i < 3; ++i) {
        const std::size_t off = region_offsets(size, i);
        INFO(bed.driver->name() << " " << bed.mode() << ": probe at +0x" << std::hex << off << " of 0x" << size
                                << " bytes at IOVA 0x" << iova);
        labenv::fill_pattern(cpu + off, kProbe, 10 + i);
        std::memset(bed.at(MemcpyBed::kDst), MemcpyBed::kPoison, kProbe);
        REQUIRE(bed.copy(bed.iova(MemcpyBed::kDst), iova + off, kProbe));
        CHECK(std::memcmp(bed.at(MemcpyBed::kDst), cpu + off, kProbe) == 0);

        const std::size_t lo = off >= kGuard ? off - kGuard : off, hi = std::min(size, off + kProbe + kGuard);
        std::memset(cpu + lo, MemcpyBed::kPoison, hi - lo);
        labenv::fill_pattern(bed.at(MemcpyBed::kSrc), kProbe, 20 + i);
        REQUIRE(bed.copy(iova + off, bed.iova(MemcpyBed::kSrc), kProbe));
        CHECK(std::memcmp(cpu + off, bed.at(MemcpyBed::kSrc), kProbe) == 0);
        std::size_t changed = 0;
        for (std::size_t b = lo; b < hi; ++b) changed += (b < off || b >= off + kProbe) && cpu[b] != MemcpyBed::kPoison;
        CHECK(changed == 0);
    }
}

// After unmap: copies to the old IOVA do not land (the IOMMU refuses them), and the device still copies.
void check_unmapped_by_dma(MemcpyBed& bed, std::uint8_t* cpu, std::uint64_t iova, std::size_t size) {
    if (bed.domain->iova_is_physical()) {
        std::printf("no-IOMMU mode: after unmap the IOVA is still the memory's physical address; not checked\n");
        return;
    }
    for (int i = 0; i < 3; ++i) {
        const std::size_t off = region_offsets(size, i);
        INFO("copy to the unmapped IOVA 0x" << std::hex << iova + off);
        std::memset(cpu + off, MemcpyBed::kPoison, kProbe);
        labenv::fill_pattern(bed.at(MemcpyBed::kSrc), kProbe, 30 + i);
        bed.copy(iova + off, bed.iova(MemcpyBed::kSrc), kProbe);  // QEMU's models report it done; it is not
        std::size_t landed = 0;
        for (std::size_t b = 0; b < kProbe; ++b) landed += cpu[off + b] != MemcpyBed::kPoison;
        CHECK(landed == 0);
    }
    labenv::fill_pattern(bed.at(MemcpyBed::kSrc), kProbe, 40);
    REQUIRE(bed.copy(bed.iova(MemcpyBed::kDst), bed.iova(MemcpyBed::kSrc), kProbe));
    CHECK(std::memcmp(bed.at(MemcpyBed::kDst), bed.at(MemcpyBed::kSrc), kProbe) == 0);
}

// vfio_dma_mapping_test.dma_map_unmap for one kind of anonymous memory: one page of `page` bytes,
// mapped at an IOVA aligned to its size (so the IOMMU may use a page as large), checked, unmapped.
void dma_map_unmap(std::size_t page) {
    MemcpyBed bed;
    if (page == dma::page_1g && free_1g_hugepages() == 0) {
        std::ifstream cpuinfo("/proc/cpuinfo");
        const bool pdpe1gb =
            std::string(std::istreambuf_iterator<char>(cpuinfo), {}).find(" pdpe1gb") != std::string::npos;
        SKIP("no free 1 GiB hugepage: " << (pdpe1gb ? "boot the guest with lab/lab run ... --hugepages-1g 1"
                                                    : "this CPU does not offer pdpe1gb (1 GiB pages)"));
    }
    dma::MemoryOptions o;
    o.page_size = page;
    auto mem = dma::Memory::allocate(page, o);
    REQUIRE(mem.page_size() == page);
    auto* cpu = reinterpret_cast<std::uint8_t*>(mem.data());
    std::uint64_t iova = 0;
    {
        auto map = dma::Mapping::map(*bed.domain, *bed.iovas, mem.data(), mem.size(), page);
        iova = map.iova();
        std::printf("%s: %zu KiB page mapped at IOVA 0x%llx (%s)\n", bed.mode(), page >> 10,
                    static_cast<unsigned long long>(iova), bed.driver->name());
        CHECK(iova % page == 0);
        check_by_dma(bed, cpu, iova, mem.size());
    }
    check_unmapped_by_dma(bed, cpu, iova, mem.size());
}

}  // namespace

TEST_CASE("vfio_dma_mapping_test.anonymous.dma_map_unmap", "[lab][dma_mapping]") { dma_map_unmap(dma::page_4k); }

TEST_CASE("vfio_dma_mapping_test.anonymous_hugetlb_2mb.dma_map_unmap", "[lab][dma_mapping]") {
    dma_map_unmap(dma::page_2m);
}

TEST_CASE("vfio_dma_mapping_test.anonymous_hugetlb_1gb.dma_map_unmap", "[lab][dma_mapping]") {
    dma_map_unmap(dma::page_1g);
}

// Not in the selftest (the kernel refuses overlaps too; lab-iommufd-setup asserts its errnos for
// iommufd): bardrive refuses them first, naming the mapping in the way, and the domain stays usable.
TEST_CASE("vfio_dma_mapping_test.overlap_refused", "[lab][dma_mapping]") {
    MemcpyBed bed;
    auto mem = dma::Memory::allocate(dma::page_2m);
    const auto& held = bed.scratch_map;
    const char* why = bed.domain->iova_is_physical() ? "physical" : "overlaps";
    CHECK_THROWS_WITH(bed.domain->map(mem.data(), held.iova(), dma::page_2m), ContainsSubstring(why));
    CHECK_THROWS_WITH(bed.domain->map(mem.data(), held.iova() + dma::page_2m - 4096, dma::page_2m),
                      ContainsSubstring(why));  // over its tail
    if (held.iova() >= dma::page_2m)
        CHECK_THROWS_WITH(bed.domain->map(mem.data(), held.iova() - dma::page_2m + 4096, dma::page_2m),
                          ContainsSubstring(why));  // over its head
    auto m = dma::Mapping::map(*bed.domain, *bed.iovas, mem);
    check_by_dma(bed, reinterpret_cast<std::uint8_t*>(mem.data()), m.iova(), m.size());
}

// The last 2 MiB below the top of the IOVA space the kernel reported: mapped, reached by the device,
// unmapped (vfio_dma_map_limit_test maps at the end of the address space the same way).
TEST_CASE("vfio_dma_map_limit_test.unmap_range", "[lab][dma_mapping]") {
    MemcpyBed bed;
    if (bed.domain->iova_is_physical()) SKIP("no-IOMMU mode: an IOVA is the memory's physical address");
    auto mem = dma::Memory::allocate(dma::page_2m);
    const vfio::IovaRange top = bed.domain->iova_ranges().back();
    const std::uint64_t iova = top.last + 1 - dma::page_2m;
    std::printf("%s: the IOVA space ends at 0x%llx; mapping 2 MiB at 0x%llx\n", bed.mode(),
                static_cast<unsigned long long>(top.last), static_cast<unsigned long long>(iova));
    bed.iovas->reserve(iova, dma::page_2m);
    {
        auto m = dma::Mapping::map(*bed.domain, mem.data(), dma::page_2m, iova);
        check_by_dma(bed, reinterpret_cast<std::uint8_t*>(mem.data()), iova, dma::page_2m);
    }
    check_unmapped_by_dma(bed, reinterpret_cast<std::uint8_t*>(mem.data()), iova, dma::page_2m);
    bed.iovas->free(iova, dma::page_2m);
}

// Maps that run past the top of the IOVA space or wrap around 2^64 are refused with the reason, before
// the kernel sees them; then a good map still works.
TEST_CASE("vfio_dma_map_limit_test.overflow", "[lab][dma_mapping]") {
    MemcpyBed bed;
    auto mem = dma::Memory::allocate(dma::page_2m);
    CHECK_THROWS_WITH(bed.domain->map(mem.data(), ~std::uint64_t{0} - dma::page_2m + 1 + 4096, dma::page_2m),
                      ContainsSubstring("wraps"));
    if (!bed.domain->iova_is_physical()) {
        const vfio::IovaRange top = bed.domain->iova_ranges().back();
        if (top.last != ~std::uint64_t{0}) {
            CHECK_THROWS_WITH(bed.domain->map(mem.data(), top.last + 1, dma::page_2m),
                              ContainsSubstring("outside the IOMMU's usable IOVA ranges"));
            CHECK_THROWS_WITH(bed.domain->map(mem.data(), top.last + 1 - dma::page_2m / 2, dma::page_2m),
                              ContainsSubstring("outside the IOMMU's usable IOVA ranges"));
        }
    }
    auto m = dma::Mapping::map(*bed.domain, *bed.iovas, mem);
    check_by_dma(bed, reinterpret_cast<std::uint8_t*>(mem.data()), m.iova(), m.size());
}

namespace {

// vfio_dma_mapping_mmio_test: the ivshmem window's BAR 2 (`size` bytes of it; 0: all) as a DMA target.
// type1 maps it (VM_PFNMAP) and the device's copies land in the BAR, read back through the CPU's view;
// iommufd and its compat container refuse (no user-address mapping of MMIO, by design), and so does
// no-IOMMU mode; either way the device still copies afterwards.
void map_bar(std::uint64_t size) {
    MemcpyBed bed;
    auto win = vfio::Device::open(*bed.domain, bed.lab.windows.at(0));
    const auto backend = bed.domain->backend();
    if (backend == vfio::Backend::iommufd || backend == vfio::Backend::iommufd_compat) {
        CHECK_THROWS_WITH(dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2, 0, size),
                          ContainsSubstring("by design") && ContainsSubstring("dma-buf") &&
                              ContainsSubstring("BARDRIVE_IOMMU=type1"));
    } else if (backend == vfio::Backend::noiommu) {
        CHECK_THROWS_WITH(dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2, 0, size),
                          ContainsSubstring("not supported in VFIO no-IOMMU mode"));
    } else {
        auto w = dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2, 0, size);
        CHECK(w.size() == (size ? size : win.region_info(2).size));
        std::printf("%s: BAR 2 of %s, 0x%zx bytes at IOVA 0x%llx\n", bed.mode(), win.bdf().str().c_str(), w.size(),
                    static_cast<unsigned long long>(w.iova()));
        const vfio::Mmio& bar = w.cpu();
        for (int i = 0; i < 3; ++i) {
            const std::size_t off = region_offsets(w.size(), i);
            INFO("probe at +0x" << std::hex << off << " of the BAR");
            labenv::fill_pattern(bed.at(MemcpyBed::kSrc), kProbe, 50 + i);
            REQUIRE(bed.copy(w.iova() + off, bed.iova(MemcpyBed::kSrc), kProbe));  // device -> BAR
            std::size_t differ = 0;
            for (std::size_t b = 0; b < kProbe; ++b) differ += bar.read8(off + b) != bed.at(MemcpyBed::kSrc)[b];
            CHECK(differ == 0);
            for (std::size_t b = 0; b < kProbe; b += 4) bar.write32(off + b, 0x5a5a0000u + static_cast<unsigned>(b));
            std::memset(bed.at(MemcpyBed::kDst), MemcpyBed::kPoison, kProbe);
            REQUIRE(bed.copy(bed.iova(MemcpyBed::kDst), w.iova() + off, kProbe));  // BAR -> device
            differ = 0;
            for (std::size_t b = 0; b < kProbe; b += 4) {
                std::uint32_t v;
                std::memcpy(&v, bed.at(MemcpyBed::kDst) + b, 4);
                differ += v != 0x5a5a0000u + b;
            }
            CHECK(differ == 0);
        }
        return;
    }
    labenv::fill_pattern(bed.at(MemcpyBed::kSrc), kProbe, 60);
    REQUIRE(bed.copy(bed.iova(MemcpyBed::kDst), bed.iova(MemcpyBed::kSrc), kProbe));
    CHECK(std::memcmp(bed.at(MemcpyBed::kDst), bed.at(MemcpyBed::kSrc), kProbe) == 0);
}

}  // namespace

TEST_CASE("vfio_dma_mapping_mmio_test.map_full_bar", "[lab][mmio_mapping]") { map_bar(0); }

TEST_CASE("vfio_dma_mapping_mmio_test.map_partial_bar", "[lab][mmio_mapping]") { map_bar(4096); }
