// dma::IovaAllocator: hands out I/O virtual addresses inside an IOMMU domain's usable ranges.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "../vfio/domain.hpp"

namespace bardrive::dma {

// First-fit allocator over a set of inclusive ranges (vfio::Domain::iova_ranges()), with
// power-of-two alignment, no overlap, and free + coalesce so freed space is reused.
// IOVA 0 is never handed out (a zero IOVA in a descriptor is almost always a bug). Sizes and reserved
// IOVAs are whole 4 KiB pages (what the IOMMU maps); every IOVA handed out is page-aligned.
// allocate()/reserve()/free() throw bardrive::Error on bad input (not whole pages, outside the ranges,
// double free, a size other than the one handed out); try_allocate() returns nullopt when nothing fits. Set-up path (it
// allocates); not thread-safe.
class IovaAllocator {
public:
    IovaAllocator() = default;
    explicit IovaAllocator(const std::vector<vfio::IovaRange>& ranges);
    explicit IovaAllocator(const vfio::Domain& domain) : IovaAllocator(domain.iova_ranges()) {}

    std::uint64_t allocate(std::uint64_t size, std::uint64_t align = 4096);
    std::optional<std::uint64_t> try_allocate(std::uint64_t size, std::uint64_t align = 4096);
    void reserve(std::uint64_t iova, std::uint64_t size);  // take a fixed range; must be free
    void free(std::uint64_t iova, std::uint64_t size);     // exactly a range allocate/reserve gave

    std::uint64_t free_bytes() const noexcept;
    bool in_ranges(std::uint64_t iova, std::uint64_t size) const noexcept;  // inside one usable range

private:
    std::vector<vfio::IovaRange> ranges_;
    std::map<std::uint64_t, std::uint64_t> free_;  // start -> last (inclusive), disjoint, coalesced
    std::map<std::uint64_t, std::uint64_t> used_;  // start -> size
};

}  // namespace bardrive::dma
