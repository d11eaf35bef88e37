#include "umem/host_pager.hpp"

#include <cstring>
#include <functional>
#include <thread>

namespace bardrive::umem {

namespace {

std::unique_ptr<std::byte[]> frame_pool(const Config& cfg) {
    return std::make_unique<std::byte[]>(cfg.frames << check(cfg));
}

}  // namespace

void CpuMover::to_frame(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
    std::memcpy(dst, src, n);
}
void CpuMover::to_host(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
    std::memcpy(dst, src, n);
}

HostTables::HostTables(const Config& cfg, std::byte* data, std::byte* frames) {
    std::uint32_t shift = check(cfg);
    std::uint64_t pages = page_count(cfg);
    pte_.assign(pages, 0);
    owner_.assign(cfg.frames, no_page);
    ctl_.assign(ctl_words, 0);
    counters_.assign(counter_shards * counter_stride, 0);
    view_ = PagerView{pte_.data(),
                      owner_.data(),
                      ctl_.data(),
                      counters_.data(),
                      data,
                      frames,
                      cfg.bytes,
                      pages,
                      static_cast<std::uint32_t>(cfg.frames),
                      shift,
                      cfg.admission,
                      cfg.eviction,
                      cfg.prefetch_depth};
}

ThreadGroup ThreadGroup::current() {
    thread_local const unsigned shard = static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    return ThreadGroup{shard};
}

HostPager::HostPager(const Config& cfg, std::byte* data)
    : frames_(frame_pool(cfg)), tables_(cfg, data, frames_.get()) {}

HostPager::Access HostPager::access(std::uint64_t page, bool write) noexcept {
    ThreadGroup g = ThreadGroup::current();
    CpuMover m;
    return Access(&tables_.view(), page, acquire(tables_.view(), page, write, g, m), write);
}

void HostPager::flush() noexcept {
    ThreadGroup g{0};
    CpuMover m;
    flush_all(tables_.view(), g, m);
}

}  // namespace bardrive::umem
