// HostPager: the paging protocol on CPU threads, with host memory standing in for the GPU frame
// pool. It runs the same code as the GPU (pager.hpp) and is what the unit tests (threads as
// warps, also under ThreadSanitizer) and the eviction-policy simulation use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "config.hpp"
#include "pager.hpp"

namespace bardrive::umem {

class HostPager {
public:
    // `data` is the backing store (cfg.bytes long), owned by the caller and outliving the pager.
    HostPager(const Config& cfg, std::byte* data);
    HostPager(const HostPager&) = delete;
    HostPager& operator=(const HostPager&) = delete;

    // One pinned page: its data stays where `data()` points until the Access ends.
    class Access {
    public:
        Access(Access&& o) noexcept
            : view_(o.view_), page_(o.page_), data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
        Access& operator=(Access&&) = delete;
        Access(const Access&) = delete;
        ~Access();

        std::byte* data() const noexcept { return data_; }
        std::uint32_t bytes() const noexcept { return bytes_; }

    private:
        friend class HostPager;
        Access(const PagerView* v, std::uint64_t page, std::byte* data, std::uint32_t bytes) noexcept
            : view_(v), page_(page), data_(data), bytes_(bytes) {}
        const PagerView* view_;
        std::uint64_t page_;
        std::byte* data_;
        std::uint32_t bytes_;
    };

    // Data path: never throws, never allocates. An out-of-range page aborts in debug builds.
    Access access(std::uint64_t page, bool write) noexcept;

    // Writes every dirty frame back to host memory. Call with no access in flight.
    void flush() noexcept;

    Stats stats() const noexcept;
    PageState state(std::uint64_t page) const noexcept;
    const PagerView& view() const noexcept { return view_; }

private:
    std::vector<std::uint64_t> pte_;
    std::vector<std::uint32_t> owner_;
    std::vector<std::uint64_t> ctl_;
    std::vector<std::uint64_t> counters_;
    std::unique_ptr<std::byte[]> frames_;
    PagerView view_{};
};

}  // namespace bardrive::umem
