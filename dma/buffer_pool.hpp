// dma::BufferPool: fixed-size DMA buffers (packet buffers, rings) with O(1) alloc/free.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mapping.hpp"
#include "memory.hpp"
#include "peer_window.hpp"

namespace bardrive::dma {

// `count` buffers of `buffer_size` bytes (stride rounded up to 64 bytes) carved from one
// dma::Memory mapped once into the domain. Construction throws; alloc()/free()/at() never throw or
// allocate (a preallocated free stack). Buffer::index identifies a buffer for free() and lets
// completion paths find a buffer from a descriptor slot. One owner at a time (not thread-safe).
class BufferPool {
public:
    struct Buffer {
        std::byte* data = nullptr;
        std::uint64_t iova = 0;
        std::uint32_t index = 0;
    };

    BufferPool(vfio::Domain& domain, IovaAllocator& iovas, std::size_t buffer_size, std::uint32_t count,
               const MemoryOptions& options = {});
    // Buffers carved from a peer window instead (a NIC receiving straight into another device's BAR);
    // count 0: as many as fit. Buffer::data points into the window's CPU mapping (uncached on real BARs).
    // Nothing of its own is mapped (mapping() is empty); the window must outlive the pool.
    BufferPool(const PeerWindow& window, std::size_t buffer_size, std::uint32_t count = 0);
    // Buffers carved from memory the caller owns and has made visible to the device at `iova` (or plain
    // memory for tests of ring logic); count 0: as many as fit. The memory must outlive the pool.
    BufferPool(std::span<std::byte> memory, std::uint64_t iova, std::size_t buffer_size, std::uint32_t count = 0);

    // Inline: the NIC data paths call these per packet.
    bool alloc(Buffer& out) noexcept {  // false when the pool is empty
        if (top_ == 0) return false;
        out = at(free_.data()[--top_]);
        return true;
    }
    // Takes up to n buffers at once: returns how many and points `indices` at theirs (valid until the
    // next free()); at() gives their addresses.
    std::uint32_t alloc_bulk(std::uint32_t n, const std::uint32_t*& indices) noexcept {
        if (n > top_) n = static_cast<std::uint32_t>(top_);
        top_ -= n;
        indices = free_.data() + top_;
        return n;
    }
    void free(std::uint32_t index) noexcept { Returns(*this).free(index); }  // index from a Buffer it gave out
    // Gives back many buffers in a row (a TX ring's completions) with free()'s checks, the stack's top in a
    // register instead of reloaded per buffer; written back when it goes out of scope. Touch the pool
    // no other way while one lives.
    class Returns {
    public:
        explicit Returns(BufferPool& pool) noexcept
            : pool_(pool), stack_(pool.free_.data()), top_(pool.top_), count_(pool.count_) {}
        ~Returns() { pool_.top_ = top_; }
        Returns(const Returns&) = delete;
        Returns& operator=(const Returns&) = delete;
        // A double free would hand one buffer out twice: ignored, and caught in debug builds.
        void free(std::uint32_t index) noexcept {
            if (top_ >= count_) [[unlikely]] {
                assert(!"BufferPool::free: double free");
                return;
            }
            free_in_room(index);
        }
        // How many more frees fit: a caller that counted them calls free_in_room(), which skips that check.
        std::size_t room() const noexcept { return count_ - top_; }
        void free_in_room(std::uint32_t index) noexcept {
            if (index >= count_) [[unlikely]] {
                assert(!"BufferPool::free of a foreign index");
                return;
            }
            stack_[top_++] = index;
        }
        // Room for n frees (n <= room()) whose indices, each checked below pool().count(), the caller
        // writes there itself: for a caller that checks many at once.
        std::uint32_t* take_room(std::size_t n) noexcept {
            std::uint32_t* const at = stack_ + top_;
            top_ += n;
            return at;
        }
        BufferPool& pool() const noexcept { return pool_; }

    private:
        BufferPool& pool_;
        std::uint32_t* stack_;
        std::size_t top_;
        std::uint32_t count_;
    };

    Buffer at(std::uint32_t index) const noexcept {
        const std::size_t off = std::size_t{index} * stride_;
        return {base_ + off, base_iova_ + off, index};
    }

    std::size_t buffer_size() const noexcept { return buffer_size_; }
    std::size_t stride() const noexcept { return stride_; }
    std::uint32_t count() const noexcept { return count_; }
    std::uint32_t available() const noexcept { return static_cast<std::uint32_t>(top_); }
    const Mapping& mapping() const noexcept { return mapping_; }

private:
    // Carves count_ (0: as many as fit) buffers of stride_ from `size` bytes at `base`, the device's `iova`.
    void carve(const std::string& what, std::byte* base, std::size_t size, std::uint64_t iova);

    Memory memory_;
    Mapping mapping_;  // declared after memory_: unmapped from the IOMMU before the memory goes
    std::size_t buffer_size_;
    std::size_t stride_;
    std::uint32_t count_;
    std::byte* base_ = nullptr;  // buffer 0, in memory_ or in a peer window
    std::uint64_t base_iova_ = 0;
    std::vector<std::uint32_t> free_;  // stack of free indices; capacity fixed at construction
    std::size_t top_ = 0;
};

}  // namespace bardrive::dma
