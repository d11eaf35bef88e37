// dma::Memory: pinned, physically contiguous-per-page host memory for DMA (hugepages by default).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bardrive::vfio {
class Device;
}

namespace bardrive::dma {

inline constexpr std::size_t page_4k = std::size_t{4} << 10;
inline constexpr std::size_t page_2m = std::size_t{2} << 20;
inline constexpr std::size_t page_1g = std::size_t{1} << 30;

struct MemoryOptions {
    std::size_t page_size = page_2m;  // page_2m or page_1g (hugetlbfs), or page_4k
    int numa_node = -1;               // bind the pages to this node; -1: no binding
    // When the hugepages asked for are not available: false (default) throws an error saying how
    // to reserve them; true falls back to mlock()ed 4 KiB pages (and logs a warning).
    bool allow_small_pages = false;
};

// Anonymous memory backed by hugepages (MAP_HUGETLB), populated and locked at allocation so that
// the data path never faults. Size is rounded up to the page size. Move-only; unmapped on destruction.
// allocate_near(device, ...) places it on the device's NUMA node (when the platform reports one).
class Memory {
public:
    Memory() noexcept = default;
    static Memory allocate(std::size_t bytes, const MemoryOptions& options = {});
    static Memory allocate_near(const vfio::Device& device, std::size_t bytes, MemoryOptions options = {});

    Memory(Memory&& o) noexcept;
    Memory& operator=(Memory&& o) noexcept;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    ~Memory();

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::size_t page_size() const noexcept { return page_size_; }  // what it actually got
    int numa_node() const noexcept { return numa_node_; }          // -1: not bound
    explicit operator bool() const noexcept { return data_ != nullptr; }

private:
    void release() noexcept;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t page_size_ = 0;
    int numa_node_ = -1;
};

}  // namespace bardrive::dma
