#include "dma/buffer_pool.hpp"

#include <cassert>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::dma {

namespace {
constexpr std::size_t cache_line = 64;  // buffers never share a line: no false sharing with the device
}

BufferPool::BufferPool(vfio::Domain& domain, IovaAllocator& iovas, std::size_t buffer_size, std::uint32_t count,
                       const MemoryOptions& options)
    : buffer_size_(buffer_size), stride_((buffer_size + cache_line - 1) / cache_line * cache_line), count_(count) {
    if (buffer_size == 0 || count == 0)
        throw Error("create buffer pool", log::concat(count, " x ", buffer_size, " bytes"), "buffer size and count must be non-zero");
    if (stride_ > (std::size_t{1} << 40) / count)
        throw Error("create buffer pool", log::concat(count, " x ", buffer_size, " bytes"), "larger than 1 TiB");
    memory_ = Memory::allocate(stride_ * count, options);
    mapping_ = Mapping::map(domain, iovas, memory_);
    free_.resize(count);
    for (std::uint32_t i = 0; i < count; ++i) free_[i] = count - 1 - i;  // hands out index 0 first
    top_ = count;
}

bool BufferPool::alloc(Buffer& out) noexcept {
    if (top_ == 0) return false;
    out = at(free_[--top_]);
    return true;
}

void BufferPool::free(std::uint32_t index) noexcept {
    // A double free would hand one buffer out twice: catch it in debug builds.
    assert(index < count_ && top_ < count_ && "BufferPool::free of a foreign index or double free");
    if (index >= count_ || top_ >= count_) return;
    free_[top_++] = index;
}

BufferPool::Buffer BufferPool::at(std::uint32_t index) const noexcept {
    const std::size_t off = std::size_t{index} * stride_;
    return {memory_.data() + off, mapping_.iova() + off, index};
}

}  // namespace bardrive::dma
