// HostPager: the paging protocol on CPU threads, with host memory standing in for the GPU frame
// pool. It runs the same code as the GPU (pager.hpp) and is what the unit tests (threads as
// warps, also under ThreadSanitizer) and the eviction-policy simulation use. HostTables and
// PinnedPage are what every pager whose protocol runs on CPU threads shares (NicPager too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "config.hpp"
#include "pager.hpp"

namespace bardrive::umem {

// The page table, resident pages' bits, frame owners, control words and counters in host memory, and the view over them
// for a backing store `data` (cfg.bytes long) and a frame pool `frames` (cfg.frames pages), both
// owned by the caller. Throws bardrive::Error for a bad Config.
class HostTables {
public:
    HostTables(const Config& cfg, std::byte* data, std::byte* frames);
    HostTables(const HostTables&) = delete;
    HostTables& operator=(const HostTables&) = delete;

    const PagerView& view() const noexcept { return view_; }
    Stats stats() const noexcept { return sum_stats(counters_.data(), ctl_.data(), view_); }
    PageState state(std::uint64_t page) const noexcept { return Pte{atom::load(&view_.pte[page])}.state(); }

private:
    std::vector<std::uint64_t> pte_;
    std::vector<std::uint64_t> whole_;  // where nothing is ever evicted (PagerView::whole)
    std::vector<std::uint32_t> owner_;
    std::vector<std::uint64_t> ctl_;
    std::vector<std::uint64_t> counters_;
    PagerView view_{};
};

// The calling CPU thread as a protocol group: its own leader, nothing to broadcast.
struct ThreadGroup {
    unsigned shard_;
    bool leader() const { return true; }
    void sync() const {}
    std::uint32_t broadcast(std::uint32_t x) const { return x; }
    unsigned shard() const { return shard_; }
    static ThreadGroup current();  // the calling thread, with its counter shard
};

// Moves pages with the CPU (memcpy): HostPager's mover, and the NIC pager's fallback.
struct CpuMover {
    void to_frame(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const;
    void to_host(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const;
    void to_frame_blocks(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                         std::uint32_t block_shift) const;
    void to_host_blocks(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                        std::uint32_t block_shift) const;
};

// One pinned page: its data stays where `data()` points until the PinnedPage ends (RAII).
class PinnedPage {
public:
    PinnedPage(const PagerView* v, std::uint64_t page, std::byte* data, bool write) noexcept
        : view_(v), page_(page), data_(data), bytes_(v->page_bytes(page)), write_(write) {}
    PinnedPage(PinnedPage&& o) noexcept
        : view_(o.view_), page_(o.page_), data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_), write_(o.write_) {}
    PinnedPage& operator=(PinnedPage&&) = delete;
    PinnedPage(const PinnedPage&) = delete;
    ~PinnedPage() {
        if (data_ == nullptr) return;
        ThreadGroup g{0};
        release(*view_, page_, g, data_, write_);
    }

    std::byte* data() const noexcept { return data_; }
    std::uint32_t bytes() const noexcept { return bytes_; }

private:
    const PagerView* view_;
    std::uint64_t page_;
    std::byte* data_;
    std::uint32_t bytes_;
    bool write_;
};

class HostPager {
public:
    using Access = PinnedPage;

    // `data` is the backing store (cfg.bytes long), owned by the caller and outliving the pager.
    HostPager(const Config& cfg, std::byte* data);

    // Data path: never throws, never allocates. An out-of-range page aborts in debug builds.
    Access access(std::uint64_t page, bool write) noexcept;

    // Writes every dirty frame back to host memory. Call with no access in flight.
    void flush() noexcept;

    Stats stats() const noexcept { return tables_.stats(); }
    PageState state(std::uint64_t page) const noexcept { return tables_.state(page); }
    const PagerView& view() const noexcept { return tables_.view(); }

private:
    std::unique_ptr<std::byte[]> frames_;
    HostTables tables_;
};

}  // namespace bardrive::umem
