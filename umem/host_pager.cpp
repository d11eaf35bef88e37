#include "umem/host_pager.hpp"

#include <cstring>
#include <functional>
#include <thread>

namespace bardrive::umem {

namespace {

// A CPU thread is a group of one: it is its own leader and needs no broadcast.
struct ThreadGroup {
    unsigned shard_;
    bool leader() const { return true; }
    void sync() const {}
    std::uint32_t broadcast(std::uint32_t x) const { return x; }
    unsigned shard() const { return shard_; }
};

struct MemcpyMover {
    void to_frame(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
        std::memcpy(dst, src, n);
    }
    void to_host(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
        std::memcpy(dst, src, n);
    }
};

unsigned thread_shard() {
    thread_local const unsigned shard = static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    return shard;
}

}  // namespace

HostPager::HostPager(const Config& cfg, std::byte* data) {
    std::uint32_t shift = check(cfg);
    std::uint64_t pages = page_count(cfg);
    pte_.assign(pages, 0);
    owner_.assign(cfg.frames, no_page);
    ctl_.assign(ctl_words, 0);
    counters_.assign(counter_shards * counter_stride, 0);
    frames_ = std::make_unique<std::byte[]>(cfg.frames << shift);
    view_ = PagerView{pte_.data(),
                      owner_.data(),
                      ctl_.data(),
                      counters_.data(),
                      data,
                      frames_.get(),
                      cfg.bytes,
                      pages,
                      static_cast<std::uint32_t>(cfg.frames),
                      shift,
                      cfg.admission,
                      cfg.eviction,
                      cfg.prefetch_depth};
}

HostPager::Access::~Access() {
    if (data_ == nullptr) return;
    ThreadGroup g{0};
    release(*view_, page_, g);
}

HostPager::Access HostPager::access(std::uint64_t page, bool write) noexcept {
    ThreadGroup g{thread_shard()};
    MemcpyMover m;
    std::byte* data = acquire(view_, page, write, g, m);
    return Access(&view_, page, data, view_.page_bytes(page));
}

void HostPager::flush() noexcept {
    for (std::uint64_t page = 0; page < view_.pages; ++page) {
        Pte e{atom::load(&pte_[page])};
        if (e.state() != PageState::resident || !e.is(Pte::dirty)) continue;
        std::memcpy(view_.host_page(page), view_.frame_data(e.frame()), view_.page_bytes(page));
        atom::fetch_and(&pte_[page], ~Pte::dirty);
        view_.count(0, c_writebacks);
        view_.count(0, c_bytes_out, view_.page_bytes(page));
    }
}

Stats HostPager::stats() const noexcept { return sum_stats(counters_.data(), ctl_.data(), view_); }

PageState HostPager::state(std::uint64_t page) const noexcept {
    return Pte{atom::load(const_cast<std::uint64_t*>(&pte_[page]))}.state();
}

}  // namespace bardrive::umem
