#include "umem/host_pager.hpp"

#include <unistd.h>

#include <cstring>
#include <functional>
#include <new>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::umem {

namespace {

// The frames live in this process's memory: a pool larger than the machine is refused naming the fields, not
// answered with std::bad_alloc (or, under a sanitizer, an abort).
std::unique_ptr<std::byte[]> frame_pool(const Config& cfg) {
    const std::uint64_t bytes = cfg.frames << check(cfg);
    const std::string what = log::concat(cfg.frames, " frames of ", fixed_page_size(cfg), " B");
    const char* fix = "give fewer frames: the pool is frames x page_size bytes of host memory";
    const auto ram =
        static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    if (bytes > ram)
        throw Error(
            "umem: configure pager", what,
            log::concat("a frame pool of ", bytes, " bytes is more than this machine's memory (", ram, " bytes)"), fix);
    try {
        return std::make_unique<std::byte[]>(bytes);
    } catch (const std::bad_alloc&) {
        throw Error("umem: configure pager", what, log::concat("a frame pool of ", bytes, " bytes cannot be allocated"),
                    fix);
    }
}

// The blocks of `blocks` (bit k: the k-th block from dst), a memcpy a run: both directions of CpuMover.
void copy_blocks(std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                 std::uint32_t block_shift) {
    for_block_runs(blocks, block_shift, n,
                   [&](std::uint32_t off, std::uint32_t len) { std::memcpy(dst + off, src + off, len); });
}

}  // namespace

void CpuMover::to_frame(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
    std::memcpy(dst, src, n);
}
void CpuMover::to_host(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n) const {
    std::memcpy(dst, src, n);
}
void CpuMover::to_frame_blocks(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n,
                               std::uint32_t blocks, std::uint32_t block_shift) const {
    copy_blocks(dst, src, n, blocks, block_shift);
}
void CpuMover::to_host_blocks(ThreadGroup&, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                              std::uint32_t block_shift) const {
    copy_blocks(dst, src, n, blocks, block_shift);
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
    if (view_.never_evicts()) {
        whole_.assign(whole_words(pages), 0);
        view_.whole = whole_.data();
    }
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
