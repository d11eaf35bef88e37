#include "umem/config.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::umem {

std::uint32_t check(const Config& cfg) {
    const std::string what = "umem: configure pager";
    const std::uint64_t page_size = fixed_page_size(cfg);
    if (page_size < min_page_size || page_size > (2u << 20) || (page_size & (page_size - 1)) != 0)
        throw Error(what, log::concat("page_size ", cfg.page_size), "not a power of two between 128 B and 2 MiB",
                    "leave it out (automatic), or use the size of the objects read together (256 for 256-byte rows)");
    if (cfg.bytes == 0) throw Error(what, "bytes 0", "nothing to page", "give the array's size in bytes");
    if (cfg.frames == 0)
        throw Error(what, "frames 0", "the frame pool is empty", "give at least one frame (pool bytes / page size)");
    std::uint32_t shift = 0;
    while ((1ull << shift) < page_size) ++shift;
    // Rounded up without overflow: bytes near 2^64 would wrap (bytes + page_size - 1) to a tiny count.
    const std::uint64_t pages = (cfg.bytes >> shift) + ((cfg.bytes & (page_size - 1)) != 0);
    if (pages >= no_page)
        throw Error(what, log::concat(pages, " pages"), "more pages than a 32-bit page index holds",
                    "use a larger page size");
    if (cfg.frames >= Pte::max_frames)
        throw Error(what, log::concat(cfg.frames, " frames"), "more frames than the PTE's 28-bit frame field holds",
                    "use a larger page size or a smaller pool");
    return shift;
}

std::uint64_t page_count(const Config& cfg) {
    const std::uint64_t p = fixed_page_size(cfg);
    return cfg.bytes / p + (cfg.bytes % p != 0);  // no overflow near 2^64
}

Stats sum_stats(const std::uint64_t* counters, const std::uint64_t* ctl, const PagerView& v) {
    Stats s;
    for (unsigned shard = 0; shard < counter_shards; ++shard)
        for (unsigned c = 0; c < c_count_; ++c) s.value[c] += counters[shard * counter_stride + c];
    s.frames_used = ctl[ctl_fresh] < v.frames_n ? ctl[ctl_fresh] : v.frames_n;
    s.bytes_used = s.frames_used << v.page_shift;
    return s;
}

const char* name(Admission a) {
    switch (a) {
        case Admission::migrate:
            return "migrate";
        case Admission::second_touch:
            return "second-touch";
        case Admission::read_through:
            return "read-through";
        case Admission::adaptive:
            return "adaptive";
    }
    return "?";
}

const char* name(Eviction e) {
    switch (e) {
        case Eviction::clock:
            return "clock";
        case Eviction::fifo:
            return "fifo";
        case Eviction::random:
            return "random";
    }
    return "?";
}

const char* name(Counter c) {
    static const char* const names[c_count_] = {"hits",         "faults",   "fills",     "prefetches",
                                                "read_through", "waits",    "evictions", "writebacks",
                                                "exhausted",    "bytes_in", "bytes_out", "hand_steps"};
    return c < c_count_ ? names[c] : "?";
}

}  // namespace bardrive::umem
