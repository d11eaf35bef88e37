#include "dma/iova_allocator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::dma {

namespace {
constexpr std::uint64_t page = 4096;          // the IOMMU maps whole pages
constexpr std::uint64_t first_usable = page;  // IOVA page 0 is never handed out

std::string range_text(std::uint64_t iova, std::uint64_t size) {
    return log::concat("IOVA 0x", std::hex, iova, " size 0x", size);
}
}  // namespace

IovaAllocator::IovaAllocator(const std::vector<vfio::IovaRange>& ranges) {
    std::vector<vfio::IovaRange> sorted = ranges;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& r : sorted) {
        if (r.last < r.first)
            throw Error("set up IOVA allocator", "",
                        log::concat("range 0x", std::hex, r.first, "-0x", r.last, " is empty"));
        if (!ranges_.empty() && r.first <= ranges_.back().last)
            throw Error("set up IOVA allocator", "", log::concat("ranges overlap at 0x", std::hex, r.first));
        ranges_.push_back(r);
        std::uint64_t first = std::max(r.first, first_usable);
        if (first <= r.last) free_.emplace(first, r.last);
    }
}

std::optional<std::uint64_t> IovaAllocator::try_allocate(std::uint64_t size, std::uint64_t align) {
    if (size == 0 || size % page != 0 || align == 0 || (align & (align - 1)) != 0)
        throw Error("allocate IOVA", log::concat("size 0x", std::hex, size, " align 0x", align),
                    "size must be a non-zero multiple of 4 KiB (the IOMMU maps whole pages) and align a power of two",
                    "round the buffer up to whole pages (dma::Memory does)");
    align = std::max(align, page);  // every IOVA is page-aligned; a finer alignment is met by that
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const auto [first, last] = *it;
        std::uint64_t start = (first + align - 1) & ~(align - 1);
        if (start < first) continue;  // aligning wrapped past 2^64
        if (start > last || last - start < size - 1) continue;
        const std::uint64_t end = start + size - 1;  // inclusive; no overflow: end <= last
        free_.erase(it);
        if (start > first) free_.emplace(first, start - 1);
        if (end < last) free_.emplace(end + 1, last);
        used_.emplace(start, size);
        return start;
    }
    return std::nullopt;
}

std::uint64_t IovaAllocator::allocate(std::uint64_t size, std::uint64_t align) {
    if (auto iova = try_allocate(size, align)) return *iova;
    throw Error("allocate IOVA", log::concat("size 0x", std::hex, size, " align 0x", align),
                log::concat("no free range fits (0x", std::hex, free_bytes(),
                            " bytes free in total, fragmented or too little)"),
                "free mappings you no longer need, or map fewer, larger buffers");
}

void IovaAllocator::reserve(std::uint64_t iova, std::uint64_t size) {
    if (size == 0 || iova + size - 1 < iova) throw Error("reserve", range_text(iova, size), "empty or wrapping range");
    if (iova % page != 0 || size % page != 0)
        throw Error("reserve", range_text(iova, size), "not whole 4 KiB pages (the IOMMU maps whole pages)",
                    "give a page-aligned IOVA and a multiple of 4 KiB");
    if (!in_ranges(iova, size) || iova < first_usable)
        throw Error("reserve", range_text(iova, size), "outside the domain's usable IOVA ranges");
    auto it = free_.upper_bound(iova);
    if (it == free_.begin()) throw Error("reserve", range_text(iova, size), "overlaps an allocated range");
    --it;
    const auto [first, last] = *it;
    const std::uint64_t end = iova + size - 1;
    if (end > last) throw Error("reserve", range_text(iova, size), "overlaps an allocated range");
    free_.erase(it);
    if (iova > first) free_.emplace(first, iova - 1);
    if (end < last) free_.emplace(end + 1, last);
    used_.emplace(iova, size);
}

void IovaAllocator::free(std::uint64_t iova, std::uint64_t size) {
    auto u = used_.find(iova);
    if (u == used_.end())
        throw Error("free", range_text(iova, size), "not a range this allocator handed out (double free?)");
    if (u->second != size)
        throw Error("free", range_text(iova, size), log::concat("it was handed out with size 0x", std::hex, u->second),
                    "free exactly the size allocate() or reserve() took");
    used_.erase(u);
    std::uint64_t first = iova, last = iova + size - 1;
    // Coalesce with the neighbours when they touch (and lie in the same usable range: they always
    // do, since free space never spans a gap between ranges).
    auto next = free_.upper_bound(iova);
    if (next != free_.end() && next->first == last + 1) {
        last = next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->second + 1 == first) {
            first = prev->first;
            free_.erase(prev);
        }
    }
    free_.emplace(first, last);
}

std::uint64_t IovaAllocator::free_bytes() const noexcept {
    std::uint64_t total = 0;
    for (const auto& [first, last] : free_) total += last - first + 1;
    return total;
}

bool IovaAllocator::in_ranges(std::uint64_t iova, std::uint64_t size) const noexcept {
    if (size == 0 || iova + size - 1 < iova) return false;
    for (const auto& r : ranges_)
        if (iova >= r.first && iova + size - 1 <= r.last) return true;
    return false;
}

}  // namespace bardrive::dma
