// MemcpyBed: NIC A of the lab preset (or BARDRIVE_DRIVER_BDF) as a nic::MemcpyDriver (igb, e1000e or
// ivshmem-doorbell, by probing) in a domain of the IOMMU mode lab/each-iommu-mode asked for, with one
// mapped 2 MiB hugepage of scratch memory filled with kPoison, initialised. The driver scenarios
// (driver_test.cpp) run on it, and the tests that check a mapping through the device (dma mapping, mmio
// mapping, faults) copy with it.
#pragma once

#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "nic/memcpy_driver.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

namespace labenv {

struct MemcpyBed {
    static constexpr int kTimeoutMs = 30000;  // a hang, not a speed limit: TCG on a loaded host is slow
    static constexpr std::uint8_t kPoison = 0xa5;
    // Scratch layout: a source at 0, a destination at 1 MiB.
    static constexpr std::size_t kSrc = 0, kDst = 1 << 20;

    MemcpyBed() : lab(lab_or_skip()) {
        using namespace bardrive;
        if (!std::getenv("BARDRIVE_IOMMU")) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
        domain = std::make_unique<vfio::Domain>();
        const char* bdf = std::getenv("BARDRIVE_DRIVER_BDF");  // another device than NIC A (the doorbell)
        device =
            std::make_unique<vfio::Device>(vfio::Device::open(*domain, bdf ? pci::Bdf::parse(bdf) : lab.nics.at(0)));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        driver = nic::probe_memcpy_driver(*device, *iovas);
        scratch = dma::Memory::allocate(dma::page_2m);  // one hugepage: contiguous, as no-IOMMU mode needs
        scratch_map = dma::Mapping::map(*domain, *iovas, scratch);
        std::memset(scratch.data(), kPoison, scratch.size());
        driver->init();
    }

    const char* mode() const { return bardrive::vfio::to_string(domain->backend()); }
    std::uint8_t* at(std::size_t off) const { return reinterpret_cast<std::uint8_t*>(scratch.data()) + off; }
    std::uint64_t iova(std::size_t off) const { return scratch_map.iova() + off; }

    // One DMA copy, waited for. False when the engine refused it or failed (the reason: driver->failure();
    // the engine is initialised again then, so the next copy has a working device).
    bool copy(std::uint64_t dst, std::uint64_t src, std::size_t size) {
        if (!driver->memcpy_start(dst, src, size)) return false;
        if (driver->memcpy_wait(kTimeoutMs)) return true;
        UNSCOPED_INFO(driver->name() << ": " << driver->failure());
        driver->init();
        return false;
    }

    Lab lab;
    std::unique_ptr<bardrive::vfio::Domain> domain;
    std::unique_ptr<bardrive::vfio::Device> device;
    std::unique_ptr<bardrive::dma::IovaAllocator> iovas;
    std::unique_ptr<bardrive::nic::MemcpyDriver> driver;
    bardrive::dma::Memory scratch;
    bardrive::dma::Mapping scratch_map;
};

// Deterministic bytes that differ per seed, so a copy that did not happen cannot pass for one.
inline void fill_pattern(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) ^ seed);
}

}  // namespace labenv
