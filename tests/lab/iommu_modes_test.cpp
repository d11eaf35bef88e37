// One IOMMU mode per run (lab/each-iommu-mode sets BARDRIVE_IOMMU): the domain runs in the mode asked
// for, and real NIC DMA lands in host memory through that mode's translation (type1, iommufd, the compat
// container) or at physical addresses (no-IOMMU). Registered for both lab kernels in meson.build.
// Overlapping maps and a peer device's BAR as a DMA target (type1 maps it; iommufd, compat and no-IOMMU
// refuse with the reason) are vfio_dma_mapping_test.overlap_refused and vfio_dma_mapping_mmio_test.* in
// dma_mapping_test.cpp.
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/pagemap.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "nic/igb/igb.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

namespace {

// The backend BARDRIVE_IOMMU asks for, as this kernel provides it.
vfio::Backend expected_backend() {
    const char* env = std::getenv("BARDRIVE_IOMMU");
    std::string mode = env ? env : "";
    if (mode == "iommufd") return vfio::Backend::iommufd;
    if (mode == "noiommu") return vfio::Backend::noiommu;
    // The full kernel has no native container: /dev/vfio/vfio is iommufd's.
    const char* kernel = std::getenv("BARDRIVE_LAB_KERNEL");
    return kernel && std::string(kernel) == "full" ? vfio::Backend::iommufd_compat : vfio::Backend::type1;
}

// Rings small enough that both NICs' RX rings fit the one-hugepage pool.
nic::IgbOptions small_rings() {
    nic::IgbOptions o;
    o.rx_ring = 256;
    o.tx_ring = 256;
    return o;
}

struct Bed {
    Bed() : lab(labenv::lab_or_skip()) {
        if (!std::getenv("BARDRIVE_IOMMU")) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
        domain = std::make_unique<vfio::Domain>();
        a = std::make_unique<vfio::Device>(vfio::Device::open(*domain, lab.nics[0]));
        b = std::make_unique<vfio::Device>(vfio::Device::open(*domain, lab.nics[1]));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        // One 2 MiB hugepage: without an IOMMU a mapping must be physically contiguous.
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, 1024);
    }
    labenv::Lab lab;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a, b;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
};

// NIC A sends `n` test frames to NIC B, whose RX buffers come from `rx_pool`; returns them, in order.
std::vector<nic::Packet> send(nic::Igb& a, nic::Igb& b, dma::BufferPool& tx_pool, std::uint32_t n, std::uint32_t len) {
    std::vector<nic::Packet> got;
    std::uint32_t sent = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
        dma::BufferPool::Buffer buf;
        if (sent < n && tx_pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, len, b.mac(), a.mac(), sent);
            nic::Packet p{d, buf.iova, len, buf.index, &tx_pool};
            if (a.tx_burst(0, std::span(&p, 1)) == 1)
                ++sent;
            else
                tx_pool.free(buf.index);
        }
        nic::Packet rx[16];
        std::uint16_t k = b.rx_burst(0, rx);
        got.insert(got.end(), rx, rx + k);
        a.tx_reclaim(0);
    }
    return got;
}

}  // namespace

TEST_CASE("the domain runs in the IOMMU mode BARDRIVE_IOMMU asked for", "[lab]") {
    Bed bed;
    INFO("BARDRIVE_IOMMU=" << std::getenv("BARDRIVE_IOMMU") << ", domain backend "
                           << vfio::to_string(bed.domain->backend()));
    CHECK(bed.domain->backend() == expected_backend());
    CHECK(bed.domain->device_count() == 2);
    CHECK(bed.domain->iova_is_physical() == (expected_backend() == vfio::Backend::noiommu));
    REQUIRE_FALSE(bed.domain->iova_ranges().empty());
    // Every IOVA the pool got lies inside what the kernel reported.
    std::uint64_t iova = bed.pool->mapping().iova(), size = bed.pool->mapping().size();
    bool inside = false;
    for (const auto& r : bed.domain->iova_ranges()) inside |= iova >= r.first && iova + size - 1 <= r.last;
    CHECK(inside);
    if (bed.domain->iova_is_physical()) CHECK(iova == pagemap::physical_address(bed.pool->mapping().vaddr()));
}

TEST_CASE("NIC DMA lands in host memory through this mode's translation, byte-exact", "[lab]") {
    Bed bed;
    nic::Igb a(*bed.a, *bed.iovas, *bed.pool, small_rings());
    nic::Igb b(*bed.b, *bed.iovas, *bed.pool, small_rings());
    const std::uint32_t n = 200, len = 700;
    auto got = send(a, b, *bed.pool, n, len);
    REQUIRE(got.size() == n);
    for (std::uint32_t i = 0; i < n; ++i) {
        INFO("frame " << i);
        CHECK(got[i].len == len);
        CHECK(nic::check_test_frame(got[i].data, got[i].len) == i);
        nic::Igb::release(got[i]);
    }
}
