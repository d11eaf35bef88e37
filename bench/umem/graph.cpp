#include "graph.hpp"

#include <atomic>
#include <thread>

namespace bardrive::bench {

namespace {

std::uint64_t splitmix(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <class F>
void parallel(unsigned threads, F f) {
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back(f, t);
    for (auto& t : ts) t.join();
}

}  // namespace

Csr rmat(unsigned scale, unsigned edge_factor, std::uint64_t seed, unsigned threads) {
    const std::uint64_t n = 1ull << scale;
    const std::uint64_t edges = n * edge_factor;
    const std::uint64_t mask = n - 1;
    std::vector<std::uint32_t> src(edges), dst(edges);
    parallel(threads, [&](unsigned t) {
        std::uint64_t s = seed * 1000003 + t;
        for (std::uint64_t e = edges * t / threads; e < edges * (t + 1) / threads; ++e) {
            std::uint64_t u = 0, v = 0;
            for (unsigned bit = 0; bit < scale; ++bit) {
                std::uint64_t r = splitmix(s) >> 11;  // 53 random bits
                double x = static_cast<double>(r) * 0x1.0p-53;
                // quadrants a | b / c | d
                bool down = x >= 0.57 + 0.19, right = (x >= 0.57 && x < 0.76) || x >= 0.95;
                u = (u << 1) | (down ? 1 : 0);
                v = (v << 1) | (right ? 1 : 0);
            }
            // odd multiplier mod 2^scale: a bijection that scatters hubs over the id space
            src[e] = static_cast<std::uint32_t>((u * 0x9e3779b1ull + 12345) & mask);
            dst[e] = static_cast<std::uint32_t>((v * 0x9e3779b1ull + 12345) & mask);
        }
    });
    Csr g;
    g.vertices = static_cast<std::uint32_t>(n);
    std::vector<std::atomic<std::uint64_t>> degree(n);
    parallel(threads, [&](unsigned t) {
        for (std::uint64_t e = edges * t / threads; e < edges * (t + 1) / threads; ++e) {
            degree[src[e]].fetch_add(1, std::memory_order_relaxed);
            degree[dst[e]].fetch_add(1, std::memory_order_relaxed);
        }
    });
    g.row.assign(n + 1, 0);
    for (std::uint64_t v = 0; v < n; ++v) g.row[v + 1] = g.row[v] + degree[v].load(std::memory_order_relaxed);
    for (std::uint64_t v = 0; v < n; ++v) degree[v].store(g.row[v], std::memory_order_relaxed);
    g.col.resize(g.row[n]);
    parallel(threads, [&](unsigned t) {
        for (std::uint64_t e = edges * t / threads; e < edges * (t + 1) / threads; ++e) {
            g.col[degree[src[e]].fetch_add(1, std::memory_order_relaxed)] = dst[e];
            g.col[degree[dst[e]].fetch_add(1, std::memory_order_relaxed)] = src[e];
        }
    });
    return g;
}

std::vector<std::int32_t> bfs_levels(const Csr& g, std::uint32_t source) {
    std::vector<std::int32_t> level(g.vertices, -1);
    std::vector<std::uint32_t> frontier{source}, next;
    level[source] = 0;
    for (std::int32_t depth = 1; !frontier.empty(); ++depth) {
        next.clear();
        for (std::uint32_t v : frontier)
            for (std::uint64_t e = g.row[v]; e < g.row[v + 1]; ++e)
                if (level[g.col[e]] < 0) {
                    level[g.col[e]] = depth;
                    next.push_back(g.col[e]);
                }
        frontier.swap(next);
    }
    return level;
}

std::uint32_t busy_vertex(const Csr& g) {
    std::uint32_t best = 0;
    for (std::uint32_t v = 0; v < g.vertices && v < 4096; ++v)
        if (g.row[v + 1] - g.row[v] > g.row[best + 1] - g.row[best]) best = v;
    return best;
}

}  // namespace bardrive::bench
