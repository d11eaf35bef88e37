// How a sweep is run: the transfer sizes, repetitions, warm-up, and the statistics over them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bardrive::bench {

struct SweepConfig {
    std::vector<std::uint64_t> sizes;  // bytes, ascending; each a multiple of 16
    int repetitions = 5;               // timed runs per size; the median is reported
    int warmup = 1;                    // untimed runs first (page-in, clocks, first-launch costs)
    bool latency = true;               // also time single small transfers
    std::vector<std::string> methods;  // only these methods (ce, sm, ...); empty = all
    bool wants(std::string_view method) const;
};

// "4K..1G" (doubling), "4K..1G:4" (times 4 each step) or a list "4K,1M,64M"; suffixes K, M, G, T
// are binary (KiB ...). Throws bardrive::Error for anything else, for sizes below 16 bytes or not
// a multiple of 16 (the copy kernels move 16-byte words), and for an empty or descending range.
std::vector<std::uint64_t> parse_sizes(std::string_view text);

// One size with a suffix, as parse_sizes reads it; throws bardrive::Error.
std::uint64_t parse_size(std::string_view text);

// Median of the samples (mean of the middle two for an even count); 0 for none.
double median(std::vector<double> samples);

// Transfers of `bytes` issued back to back per timed repetition, so that a small transfer's
// repetition still lasts long enough for the timer (about 64 MiB, at most 1024 transfers).
int batch_for(std::uint64_t bytes);

}  // namespace bardrive::bench
