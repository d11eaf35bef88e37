// Synthetic graphs for bench/umem: an RMAT (Kronecker) graph in CSR, and the CPU BFS that
// every GPU BFS result is checked against.
#pragma once

#include <cstdint>
#include <vector>

namespace bardrive::bench {

struct Csr {
    std::uint32_t vertices = 0;
    std::vector<std::uint64_t> row;  // vertices + 1 offsets into col
    std::vector<std::uint32_t> col;  // neighbours
};

// 2^scale vertices, edge_factor * 2^scale RMAT edges (a=.57 b=.19 c=.19), stored in both
// directions, vertex ids scrambled by a bijection so degree does not follow the id.
// Uses `threads` host threads; deterministic for a given seed and thread count.
Csr rmat(unsigned scale, unsigned edge_factor, std::uint64_t seed, unsigned threads);

// BFS levels from `source` (-1 = unreached).
std::vector<std::int32_t> bfs_levels(const Csr& g, std::uint32_t source);

// A vertex with many neighbours, so the BFS reaches the giant component.
std::uint32_t busy_vertex(const Csr& g);

}  // namespace bardrive::bench
