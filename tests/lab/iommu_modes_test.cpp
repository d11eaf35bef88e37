// One IOMMU mode per run (lab/each-iommu-mode sets BARDRIVE_IOMMU): the domain runs in the mode asked
// for, real NIC DMA lands in host memory through that mode's translation (type1, iommufd, the compat
// container) or at physical addresses (no-IOMMU), and a peer window either works (type1) or is refused
// with the explanation (iommufd, compat, no-IOMMU). Registered for both lab kernels in meson.build.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
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
#include "dma/peer_window.hpp"
#include "lab_env.hpp"
#include "nic/igb.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

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

TEST_CASE("a mapping that overlaps another is refused in every mode, and the domain stays usable", "[lab]") {
    Bed bed;
    auto mem = dma::Memory::allocate(dma::page_2m);
    const auto& held = bed.pool->mapping();
    CHECK_THROWS_WITH(bed.domain->map(mem.data(), held.iova(), dma::page_2m),
                      ContainsSubstring("overlap") || ContainsSubstring("physical"));
    auto m = dma::Mapping::map(*bed.domain, *bed.iovas, mem);
    CHECK(m.size() == dma::page_2m);
}

TEST_CASE("a peer window works where the mode allows it and is refused with the reason where not", "[lab]") {
    Bed bed;
    auto win = vfio::Device::open(*bed.domain, bed.lab.windows[0]);
    auto backend = bed.domain->backend();
    if (backend == vfio::Backend::iommufd || backend == vfio::Backend::iommufd_compat) {
        CHECK_THROWS_WITH(dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2),
                          ContainsSubstring("by design") && ContainsSubstring("dma-buf") &&
                              ContainsSubstring("BARDRIVE_IOMMU=type1"));
        // Refused cleanly: the NICs still DMA into host memory afterwards.
        nic::Igb a(*bed.a, *bed.iovas, *bed.pool, small_rings());
        nic::Igb b(*bed.b, *bed.iovas, *bed.pool, small_rings());
        auto got = send(a, b, *bed.pool, 10, 200);
        CHECK(got.size() == 10);
        for (auto& p : got) nic::Igb::release(p);
        return;
    }
    if (backend == vfio::Backend::noiommu) {
        CHECK_THROWS_WITH(dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2),
                          ContainsSubstring("not supported in VFIO no-IOMMU mode"));
        return;
    }
    auto window = dma::PeerWindow::map(*bed.domain, *bed.iovas, win, 2);
    dma::BufferPool win_pool(window, 2048, 32);
    nic::IgbOptions o = small_rings();
    o.rx_ring = 16;
    nic::Igb a(*bed.a, *bed.iovas, *bed.pool, small_rings());
    nic::Igb b(*bed.b, *bed.iovas, win_pool, o);
    auto got = send(a, b, *bed.pool, 8, 300);
    REQUIRE(got.size() == 8);
    for (std::uint32_t i = 0; i < got.size(); ++i) {
        INFO("frame " << i);
        CHECK(got[i].pool == &win_pool);
        CHECK(nic::check_test_frame(got[i].data, got[i].len) == i);  // read through the CPU's view of the BAR
        nic::Igb::release(got[i]);
    }
}
