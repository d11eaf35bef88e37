// umem-policy-sim: replays the access patterns of bench/umem (random gathers, hot set, scans,
// BFS, hot set under a scan) on the CPU through HostPager -- the same protocol code the GPU
// runs -- and reports hit rates and bytes moved for each eviction policy and admission policy,
// with the frame pool at 50% and 25% of the data. This is how umem's defaults were chosen.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "graph.hpp"
#include "umem/host_pager.hpp"

using namespace bardrive;
using namespace bardrive::umem;

namespace {

constexpr std::uint64_t kPage = 4096;

struct Trace {
    std::string name;
    std::uint64_t pages;
    std::vector<std::uint32_t> seq;
};

Trace gathers(std::uint64_t pages, std::uint64_t n) {
    std::mt19937_64 rng(42);
    Trace t{"gather x2", pages, {}};
    std::vector<std::uint32_t> one(n);
    for (auto& x : one) x = static_cast<std::uint32_t>(rng() % pages);
    t.seq = one;
    t.seq.insert(t.seq.end(), one.begin(), one.end());
    return t;
}

Trace hotset(std::uint64_t pages, std::uint64_t n) {
    std::mt19937_64 rng(7);
    Trace t{"hotset x3", pages, {}};
    for (std::uint64_t i = 0; i < 3 * n; ++i)
        t.seq.push_back(static_cast<std::uint32_t>(rng() % 10 < 9 ? (rng() % (pages / 32)) * 32 : rng() % pages));
    return t;
}

Trace scans(std::uint64_t pages) {
    Trace t{"scan x2", pages, {}};
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint64_t p = 0; p < pages; ++p) t.seq.push_back(static_cast<std::uint32_t>(p));
    return t;
}

// A hot set (1/16 of the data) hit between the pages of a full scan: scan resistance.
Trace hot_under_scan(std::uint64_t pages) {
    std::mt19937_64 rng(3);
    Trace t{"hot+scan", pages, {}};
    for (std::uint64_t p = 0; p < pages; ++p) {
        t.seq.push_back(static_cast<std::uint32_t>(p));
        t.seq.push_back(static_cast<std::uint32_t>(rng() % (pages / 16)));
    }
    return t;
}

// The pages a top-down BFS touches, in order: row offsets, then neighbour lists (row pages
// first in the address space, column pages after them).
Trace bfs(unsigned scale) {
    bench::Csr g = bench::rmat(scale, 16, 1, 2);
    std::uint64_t row_pages = (g.row.size() * 8 + kPage - 1) / kPage;
    std::uint64_t col_pages = (g.col.size() * 4 + kPage - 1) / kPage;
    Trace t{"bfs", row_pages + col_pages, {}};
    std::vector<std::int32_t> level(g.vertices, -1);
    std::uint32_t src = bench::busy_vertex(g);
    std::vector<std::uint32_t> frontier{src}, next;
    level[src] = 0;
    for (int d = 1; !frontier.empty(); ++d) {
        next.clear();
        for (std::uint32_t v : frontier) {
            t.seq.push_back(static_cast<std::uint32_t>(v * 8 / kPage));
            std::uint64_t last = ~0ull;
            for (std::uint64_t e = g.row[v]; e < g.row[v + 1]; ++e) {
                std::uint64_t cp = row_pages + e * 4 / kPage;
                if (cp != last) t.seq.push_back(static_cast<std::uint32_t>(cp));
                last = cp;
                if (level[g.col[e]] < 0) {
                    level[g.col[e]] = d;
                    next.push_back(g.col[e]);
                }
            }
        }
        frontier.swap(next);
    }
    return t;
}

}  // namespace

int main() {
    const std::uint64_t pages = 1u << 15;  // 128 MiB of 4 KiB pages
    std::vector<Trace> traces{gathers(pages, pages), hotset(pages, pages), scans(pages), hot_under_scan(pages),
                              bfs(16)};
    std::printf(
        "| trace | pool | admission | eviction | hit rate | MiB moved in | read through "
        "|\n|---|---|---|---|---|---|---|\n");
    for (const Trace& t : traces) {
        std::vector<std::byte> data(t.pages * kPage);
        for (unsigned pct : {50u, 25u})
            for (Admission a : {Admission::migrate, Admission::second_touch, Admission::adaptive})
                for (Eviction e : {Eviction::clock, Eviction::fifo, Eviction::random}) {
                    Config c;
                    c.bytes = t.pages * kPage;
                    c.frames = t.pages * pct / 100;
                    c.admission = a;
                    c.eviction = e;
                    HostPager p(c, data.data());
                    for (std::uint32_t page : t.seq) p.access(page, false);
                    Stats s = p.stats();
                    std::printf("| %s | %u%% | %s | %s | %.3f | %llu | %.3f |\n", t.name.c_str(), pct, name(a), name(e),
                                double(s[c_hits]) / double(t.seq.size()),
                                static_cast<unsigned long long>(s[c_bytes_in] >> 20),
                                double(s[c_read_through]) / double(t.seq.size()));
                }
    }
    return 0;
}
