#include "dma/buffer_pool.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::dma {

namespace {
constexpr std::size_t cache_line = 64;  // buffers never share a line: no false sharing with the device
constexpr std::size_t stride_for(std::size_t buffer_size) {
    return (buffer_size + cache_line - 1) / cache_line * cache_line;
}
}  // namespace

BufferPool::BufferPool(vfio::Domain& domain, IovaAllocator& iovas, std::size_t buffer_size, std::uint32_t count,
                       const MemoryOptions& options)
    : buffer_size_(buffer_size), stride_(stride_for(buffer_size)), count_(count) {
    if (buffer_size == 0 || count == 0)
        throw Error("create buffer pool", log::concat(count, " x ", buffer_size, " bytes"),
                    "buffer size and count must be non-zero");
    if (stride_ > (std::size_t{1} << 40) / count)
        throw Error("create buffer pool", log::concat(count, " x ", buffer_size, " bytes"), "larger than 1 TiB");
    memory_ = Memory::allocate(stride_ * count, options);
    mapping_ = Mapping::map(domain, iovas, memory_);
    base_ = memory_.data();
    base_iova_ = mapping_.iova();
    free_.resize(count);
    for (std::uint32_t i = 0; i < count; ++i) free_[i] = count - 1 - i;  // hands out index 0 first
    top_ = count;
}

BufferPool::BufferPool(const PeerWindow& window, std::size_t buffer_size, std::uint32_t count)
    : buffer_size_(buffer_size), stride_(stride_for(buffer_size)), count_(count) {
    carve(window.cpu().name(),
          const_cast<std::byte*>(reinterpret_cast<volatile std::byte*>(window.cpu().data() + window.bar_offset())),
          window.size(), window.iova());
}

BufferPool::BufferPool(std::span<std::byte> memory, std::uint64_t iova, std::size_t buffer_size, std::uint32_t count)
    : buffer_size_(buffer_size), stride_(stride_for(buffer_size)), count_(count) {
    carve("caller's memory", memory.data(), memory.size(), iova);
}

void BufferPool::carve(const std::string& what, std::byte* base, std::size_t size, std::uint64_t iova) {
    const std::size_t fit = buffer_size_ == 0 ? 0 : size / stride_;
    const std::uint32_t asked = count_;
    if (count_ == 0) count_ = static_cast<std::uint32_t>(std::min<std::size_t>(fit, UINT32_MAX));
    if (buffer_size_ == 0 || count_ == 0 || count_ > fit)
        throw Error("create buffer pool", what,
                    log::concat(asked, " x ", buffer_size_, " bytes do not fit in ", size, " bytes"),
                    "give it more memory (a larger window) or fewer/smaller buffers");
    base_ = base;
    base_iova_ = iova;
    free_.resize(count_);
    for (std::uint32_t i = 0; i < count_; ++i) free_[i] = count_ - 1 - i;
    top_ = count_;
}

}  // namespace bardrive::dma
