// The bytes every bench path moves: one 64-bit word per index, different for every seed, so a
// stale, short or misplaced transfer shows up as wrong words. Shared by host code and CUDA kernels.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BARDRIVE_BENCH_HD __host__ __device__
#else
#define BARDRIVE_BENCH_HD
#endif

namespace bardrive::bench {

BARDRIVE_BENCH_HD inline std::uint64_t pattern(std::uint64_t i, std::uint64_t seed) {
    std::uint64_t x = i + seed * 0x9e3779b97f4a7c15ull;  // splitmix64's finaliser over index and seed
    x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
    x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
    return x ^ (x >> 33);
}

}  // namespace bardrive::bench
