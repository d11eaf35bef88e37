// Set-up of a pager (host or GPU): the configuration, its checks, and the counter snapshot.
#pragma once

#include <cstdint>
#include <string>

#include "pager.hpp"

namespace bardrive::umem {

inline constexpr std::uint64_t auto_page_size = 0;

struct Config {
    std::uint64_t bytes = 0;  // size of the paged array
    // 0 (left out): automatic on the GPU pager, which picks per array from the accesses it sees and
    // starts at 4 KiB; the host pagers page at 4 KiB. Else a power of two, 128 B .. 2 MiB (umem/README.md).
    std::uint64_t page_size = auto_page_size;
    std::uint64_t frames =
        0;  // frame pool capacity in pages (automatic: in 4 KiB frames); below the array's pages = oversubscribed
    Admission admission = Admission::adaptive;  // chosen by measurement: umem/README.md
    Eviction eviction = Eviction::clock;
    std::uint32_t prefetch_depth = 0;
};

inline constexpr std::uint64_t min_page_size = 128;

// The page size check() and page_count() use: page_size, or 4 KiB where it was left out (automatic).
inline std::uint64_t fixed_page_size(const Config& cfg) {
    return cfg.page_size == auto_page_size ? std::uint64_t{1} << auto_start_shift : cfg.page_size;
}

// Throws bardrive::Error saying which field is wrong and what would work. Returns log2(page_size).
std::uint32_t check(const Config& cfg);

std::uint64_t page_count(const Config& cfg);

struct Stats {
    std::uint64_t value[c_count_] = {};
    std::uint64_t frames_used = 0;  // frames that ever held a page (never-used frames excluded)
    std::uint64_t bytes_used = 0;   // frames_used * page size: GPU memory taken by pages

    std::uint64_t operator[](Counter c) const { return value[c]; }
};

// Sums the sharded counters; `ctl` is the view's control words (for frames in use).
Stats sum_stats(const std::uint64_t* counters, const std::uint64_t* ctl, const PagerView& v);

const char* name(Admission a);
const char* name(Eviction e);
const char* name(Counter c);

}  // namespace bardrive::umem
