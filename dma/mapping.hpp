// dma::Mapping: one RAII IOMMU mapping {vaddr, iova, size} in a vfio::Domain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../vfio/domain.hpp"
#include "iova_allocator.hpp"
#include "memory.hpp"

namespace bardrive::dma {

// map(domain, vaddr, size, iova) maps at a fixed IOVA; map(domain, allocator, ...) takes the IOVA
// from the allocator (aligned to `align`, default: the largest of 2 MiB / 4 KiB that divides the
// size, so the IOMMU can use large pages) and gives it back on destruction.
// Unmapped on destruction (errors there are logged, never thrown). Move-only. Must not outlive the
// domain or the allocator; the memory must stay mapped in the process as long as the Mapping lives.
class Mapping {
public:
    Mapping() noexcept = default;
    static Mapping map(vfio::Domain& domain, const void* vaddr, std::size_t size, std::uint64_t iova,
                       vfio::Access access = vfio::Access::read_write);
    static Mapping map(vfio::Domain& domain, IovaAllocator& iovas, const void* vaddr, std::size_t size,
                       std::uint64_t align = 0, vfio::Access access = vfio::Access::read_write);
    static Mapping map(vfio::Domain& domain, IovaAllocator& iovas, const Memory& memory,
                       vfio::Access access = vfio::Access::read_write) {
        return map(domain, iovas, memory.data(), memory.size(), 0, access);
    }

    Mapping(Mapping&& o) noexcept;
    Mapping& operator=(Mapping&& o) noexcept;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();

    void* vaddr() const noexcept { return vaddr_; }
    std::uint64_t iova() const noexcept { return iova_; }
    std::size_t size() const noexcept { return size_; }
    // The IOVA of a byte inside the mapping (data path: no check beyond a debug assert).
    std::uint64_t iova_of(const void* p) const noexcept;
    explicit operator bool() const noexcept { return size_ != 0; }

private:
    void release() noexcept;
    vfio::Domain* domain_ = nullptr;
    IovaAllocator* iovas_ = nullptr;  // null: fixed IOVA, nothing to give back
    void* vaddr_ = nullptr;
    std::uint64_t iova_ = 0;
    std::size_t size_ = 0;
};

}  // namespace bardrive::dma
