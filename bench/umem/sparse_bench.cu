// bench/umem: sparse, skewed access through umem against zero-copy, device memory and CUDA UVM,
// same GPU, same data, same run. Workloads:
//  - lookups:  a table of rows in pinned host memory, one warp per lookup reads a row and sums it;
//              rows drawn from a Zipf distribution, hot rows scattered over the table by a fixed
//              bijection, a fresh batch from the same distribution each time (an embedding table).
//  - scatter:  the same stream, each lookup atomically adds a small delta to every word of its row
//              (writes through umem, flushed, then every word of the table checked).
//  - elements: single threads reading Zipf-skewed 8-byte elements with Array::get.
// umem runs with its default admission and with read-through, at several pool sizes. Every
// result is checked against the CPU. Prints times per batch, useful GB/s and ratios to zero-copy,
// the markdown table last; --detail FILE logs every batch with the pager's counters.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.cuh"
#include "core/error.hpp"
#include "core/log.hpp"
#include "umem/gpu.cuh"
#include "umem/gpu_pager.hpp"

namespace bardrive::umem {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPageWords = kPage / 8;
constexpr unsigned kPerThread = 16;  // elements: reads per thread, consecutive in the stream
using Word = unsigned long long;     // the data's 8-byte words (atomicAdd's type)
// --elem-bytes 16: elements of two words, each read with one get() of 16 bytes.
struct alignas(16) Pair {
    Word lo, hi;
};

// The scatter workload's addend for lookup number j (counted over all batches).
__host__ __device__ inline Word delta(std::uint64_t j) { return j % 7 + 1; }

// ---- index streams, made on the CPU ---------------------------------------------------------

// splitmix64. Streams are cut into chunks with a generator each, so they do not depend on the
// number of host threads.
struct SplitMix {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Zipf over ranks 1..n, P(k) proportional to k^-alpha, any alpha > 0: rejection-inversion
// (Hoermann and Derflinger 1996, as in Apache Commons RNG); O(1) per sample, a few logs and exps.
class Zipf {
public:
    Zipf(std::uint64_t n, double alpha) : n_(static_cast<double>(n)), s_(alpha) {
        h_x1_ = h_integral(1.5) - 1.0;
        h_n_ = h_integral(n_ + 0.5);
        s_div_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
    }
    std::uint64_t operator()(SplitMix& r) const {
        for (;;) {
            double u = h_n_ + r.uniform() * (h_x1_ - h_n_);  // (h_x1, h_n]
            double x = h_integral_inverse(u);
            double k = std::floor(x + 0.5);
            k = std::clamp(k, 1.0, n_);
            if (k - x <= s_div_ || u >= h_integral(k + 0.5) - h(k)) return static_cast<std::uint64_t>(k);
        }
    }

private:
    // log1p(x) / x and expm1(x) / x, exact near 0.
    static double helper1(double x) {
        return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
    }
    static double helper2(double x) {
        return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
    }
    double h(double x) const { return std::exp(-s_ * std::log(x)); }
    double h_integral(double x) const {  // (x^(1-s) - 1) / (1 - s), log(x) at s = 1
        double lx = std::log(x);
        return helper2((1.0 - s_) * lx) * lx;
    }
    double h_integral_inverse(double x) const {
        double t = std::max(x * (1.0 - s_), -1.0);
        return std::exp(helper1(t) * x);
    }

    double n_, s_, h_x1_ = 0, h_n_ = 0, s_div_ = 0;
};

// A fixed bijection of [0, n): a 4-round Feistel network on the smallest power of two with an
// even number of bits >= n, cycle-walked back into [0, n). Hot ranks 0, 1, 2... land far apart.
class Scatter {
public:
    Scatter(std::uint64_t n, std::uint64_t key) : n_(n) {
        unsigned bits = 1;
        while ((1ull << bits) < n) ++bits;
        half_ = (bits + 1) / 2;
        for (unsigned k = 0; k < 4; ++k) keys_[k] = mix(key * 4 + k);
    }
    std::uint64_t operator()(std::uint64_t x) const {
        do x = feistel(x);
        while (x >= n_);
        return x;
    }

private:
    std::uint64_t feistel(std::uint64_t x) const {
        const std::uint64_t mask = (1ull << half_) - 1;
        std::uint64_t l = x >> half_, r = x & mask;
        for (std::uint64_t key : keys_) {
            std::uint64_t t = l ^ (mix(r ^ key) & mask);
            l = r;
            r = t;
        }
        return l << half_ | r;
    }

    std::uint64_t n_;
    unsigned half_;
    std::uint64_t keys_[4];
};

// `count` draws of Zipf ranks mapped through the scatter: item indices in [0, n).
std::vector<std::uint32_t> zipf_stream(const Zipf& z, const Scatter& s, std::uint64_t count, std::uint64_t seed) {
    std::vector<std::uint32_t> out(count);
    constexpr std::uint64_t chunk = 1 << 16;
    parallel_for((count + chunk - 1) / chunk, [&](std::uint64_t c) {
        SplitMix r{mix(seed) ^ mix(~c)};
        for (std::uint64_t i = c * chunk; i < std::min(count, (c + 1) * chunk); ++i)
            out[i] = static_cast<std::uint32_t>(s(z(r) - 1));
    });
    return out;
}

// Sum of f(i) over [0, n), a partial sum per host thread.
template <class F>
std::uint64_t parallel_sum(std::uint64_t n, F f) {
    unsigned t = host_threads();
    std::vector<std::uint64_t> part(t);
    std::vector<std::thread> ts;
    for (unsigned k = 0; k < t; ++k)
        ts.emplace_back([&, k] {
            std::uint64_t s = 0;
            for (std::uint64_t i = n * k / t; i < n * (k + 1) / t; ++i) s += f(i);
            part[k] = s;
        });
    for (auto& x : ts) x.join();
    std::uint64_t s = 0;
    for (auto p : part) s += p;
    return s;
}

// ---- where a kernel's words come from -------------------------------------------------------

// Memory the GPU reads in place: zero-copy host memory, UVM or device memory.
struct Direct {
    Word* base;
    __host__ __device__ std::uint64_t page_words() const { return kPageWords; }
    __device__ Word* acquire(std::uint64_t page, bool, std::uint64_t, std::uint32_t) const {
        return base + page * kPageWords;
    }
    __device__ void release(std::uint64_t, Word*, bool) const {}
    __device__ Word* acquire_each(std::uint64_t page, std::uint64_t, std::uint32_t, unsigned) const {
        return base + page * kPageWords;
    }
    __device__ void release_each(std::uint64_t, Word*, unsigned) const {}
    __device__ Word get(std::uint64_t i) const { return load_cg(base + i); }
    template <class E>
    __device__ E get_as(std::uint64_t i) const {
        return load_cg(reinterpret_cast<const E*>(base) + i);
    }
    __device__ void get4(const std::uint64_t (&i)[4], Word (&x)[4]) const {
        for (int k = 0; k < 4; ++k) x[k] = load_cg(base + i[k]);
    }
};

// Through umem's page table: warp_acquire of the page (saying which words the warp reads), or get().
// `pager` is the host's: current() builds the Array from its view() for every launch, as a kernel
// must with the page size left out.
struct Paged {
    Array<Word> a;
    GpuPager* pager = nullptr;
    __host__ __device__ std::uint64_t page_words() const { return a.per_page(); }
    __device__ Word* acquire(std::uint64_t page, bool write, std::uint64_t first, std::uint32_t n) const {
        return a.warp_acquire(page, write, first, n).data;
    }
    __device__ void release(std::uint64_t page, Word* p, bool write) const { a.warp_release({p, 0, page, write}); }
    __device__ Word* acquire_each(std::uint64_t page, std::uint64_t first, std::uint32_t n, unsigned lanes) const {
        return a.warp_acquire_each(page, first, n, lanes).data;
    }
    __device__ void release_each(std::uint64_t page, Word* p, unsigned lanes) const {
        a.warp_release_each({p, 0, page, false}, lanes);
    }
    __device__ Word get(std::uint64_t i) const { return a.get(i); }
    template <class E>
    __device__ E get_as(std::uint64_t i) const {
        return Array<E>(a).get(i);
    }
    __device__ void get4(const std::uint64_t (&i)[4], Word (&x)[4]) const { a.get(i, x); }
};

inline Direct current(const Direct& d) { return d; }
inline Paged current(const Paged& p) { return Paged{Array<Word>(p.pager->view(), p.pager->ring()), p.pager}; }

// Words [w, w + n) of the table, page by page (a row may straddle pages): each lane calls f on
// every 32nd word.
template <class Src, class F>
__device__ inline void for_row(const Src& src, std::uint64_t w, std::uint32_t n, bool write, F f) {
    const unsigned lane = threadIdx.x & 31;
    // Pages are powers of two: shifts, not 64-bit divisions (dozens of instructions and registers each).
    const std::uint64_t per = src.page_words();
    const unsigned shift = static_cast<unsigned>(__ffsll(static_cast<long long>(per)) - 1);
    for (const std::uint64_t end = w + n; w < end;) {
        std::uint64_t page = w >> shift;
        std::uint64_t stop = end < (page + 1) << shift ? end : (page + 1) << shift;
        auto first = static_cast<std::uint32_t>(w & (per - 1)), count = static_cast<std::uint32_t>(stop - w);
        Word* p = src.acquire(page, write, w, count);
#pragma unroll 4
        for (std::uint32_t k = first + lane; k < first + count; k += 32) f(p + k);
        src.release(page, p, write);
        w = stop;
    }
}

// Every kernel is capped at 128 registers (__launch_bounds__(256, 2)), as umem/README.md advises for
// kernels that read through umem: the protocol inlined takes 136 (warp kernels) to 213 (16 get() calls)
// uncapped, so one block of 256 threads an SM, and hits are latency-bound. H100, 1M resident 256-byte rows
// of 8 GiB: 0.68 ms at 128 registers (no spills, two blocks), 0.86-0.87 at 64, GPU memory 0.15 (H200: 1.43
// ms uncapped, 0.75 at 64, 0.81 at 40, 0.79 at 32); 64M resident u64 of 8 GiB through get(): 2.03 ms at 128
// (960 bytes spilled), 2.42 uncapped, GPU memory 1.36-1.38, but first kernels at 128-256 B pages 5-20%
// slower (bench/results/umem-h100-2026-11-26.md).
// One warp per lookup: the row's words summed, sums[j] for lookup j.
template <class Src>
__global__ void __launch_bounds__(256, 2)
    lookup_kernel(Src src, const std::uint32_t* rows, std::uint64_t n, std::uint32_t row_words, Word* sums) {
    for (std::uint64_t j = warp_id(); j < n; j += warp_count()) {
        Word s = 0;
        for_row(src, std::uint64_t{rows[j]} * row_words, row_words, false, [&](const Word* p) { s += load_cg(p); });
        s = warp_sum(s);
        if ((threadIdx.x & 31) == 0) sums[j] = s;
    }
}

// --lane-rows: a warp takes 32 lookups at once, lane l naming lookup j + l's row, and acquires their pages
// together (Array::warp_acquire_each), then reads the rows kInFlight at a time with all their loads in flight:
// one row after another waits for each row's page-table word and words in turn. Only where no row straddles
// pages (launch_lookups).
constexpr unsigned kInFlight = 8;
template <class Src>
__global__ void __launch_bounds__(256, 2)
    lane_rows_kernel(Src src, const std::uint32_t* rows, std::uint64_t n, std::uint32_t row_words, Word* sums) {
    const unsigned lane = threadIdx.x & 31;
    const std::uint64_t per = src.page_words();
    const unsigned shift = static_cast<unsigned>(__ffsll(static_cast<long long>(per)) - 1);
    for (std::uint64_t j = warp_id() * 32; j < n; j += warp_count() * 32) {
        const unsigned lanes = n - j < 32 ? static_cast<unsigned>(n - j) : 32;
        const std::uint64_t first = lane < lanes ? std::uint64_t{rows[j + lane]} * row_words : 0;
        Word* page_data = src.acquire_each(first >> shift, first, row_words, lanes);
        const Word* row = page_data + (first & (per - 1));
        Word mine = 0;
        for (unsigned k0 = 0; k0 < lanes; k0 += kInFlight) {
            const Word* r[kInFlight];  // shuffled here, where every lane is: not in the loop below
#pragma unroll
            for (unsigned i = 0; i < kInFlight; ++i)
                r[i] = reinterpret_cast<const Word*>(
                    __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(row), (k0 + i) & 31));
            Word s[kInFlight] = {};
            for (std::uint32_t w = lane; w < row_words; w += 32) {
                Word x[kInFlight];
#pragma unroll
                for (unsigned i = 0; i < kInFlight; ++i) x[i] = k0 + i < lanes ? load_cg(r[i] + w) : 0;
#pragma unroll
                for (unsigned i = 0; i < kInFlight; ++i) s[i] += x[i];
            }
#pragma unroll
            for (unsigned i = 0; i < kInFlight; ++i) {
                const Word t = warp_sum(s[i]);
                if (lane == k0 + i) mine = t;
            }
        }
        src.release_each(first >> shift, page_data, lanes);
        if (lane < lanes) sums[j + lane] = mine;
    }
}

// The lookup kernel: lane rows where asked and every row sits inside a page (its words divide a page's).
template <class Src>
void launch_lookups(bool lane_rows, unsigned blocks, const Src& src, const std::uint32_t* rows, std::uint64_t n,
                    std::uint32_t row_words, Word* sums) {
    if (lane_rows && src.page_words() % row_words == 0)
        lane_rows_kernel<<<blocks, 256>>>(src, rows, n, row_words, sums);
    else
        lookup_kernel<<<blocks, 256>>>(src, rows, n, row_words, sums);
}

// One warp per lookup: delta(j0 + j) atomically added to every word of the row.
template <class Src>
__global__ void __launch_bounds__(256, 2)
    scatter_kernel(Src src, const std::uint32_t* rows, std::uint64_t n, std::uint64_t j0, std::uint32_t row_words) {
    for (std::uint64_t j = warp_id(); j < n; j += warp_count()) {
        const Word d = delta(j0 + j);
        for_row(src, std::uint64_t{rows[j]} * row_words, row_words, true, [&](Word* p) { atomicAdd(p, d); });
    }
}

// One thread per kPerThread consecutive indices of the stream, each read alone (get). With run > 1
// the thread reads runs of `run` adjacent elements instead: element k is the stream's entry at the
// start of its run plus k % run (elem_at).
__host__ __device__ inline std::uint64_t elem_at(const std::uint32_t* idx, std::uint64_t k, unsigned run,
                                                 std::uint64_t elems) {
    std::uint64_t i = std::uint64_t{idx[k - k % run]} + k % run;
    return i < elems ? i : i - elems;
}

// Element i's words summed: one get() of E (a word, or --elem-bytes 16's pair).
template <class E, class Src>
__device__ inline Word read_element(const Src& src, std::uint64_t i) {
    if constexpr (sizeof(E) == sizeof(Word)) {
        return src.get(i);
    } else {
        const E x = src.template get_as<E>(i);
        return x.lo + x.hi;
    }
}

// Batched: single elements read four at a time (Array::get of an array of four), --get4. E: the element's type.
template <class Src, bool Batched = false, class E = Word>
__global__ void __launch_bounds__(256, 2) elements_kernel(Src src, const std::uint32_t* idx, std::uint64_t threads,
                                                          Word* sums, unsigned run, std::uint64_t elems) {
    std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    if (t >= threads) return;
    Word s = 0;
    if (run == 1) {
        const auto* q = reinterpret_cast<const uint4*>(idx + t * kPerThread);
#pragma unroll
        for (unsigned k = 0; k < kPerThread / 4; ++k) {
            uint4 v = q[k];
            if constexpr (Batched) {
                const std::uint64_t i[4] = {v.x, v.y, v.z, v.w};
                Word y[4];
                src.get4(i, y);
                s += y[0] + y[1] + y[2] + y[3];
            } else {
                s += read_element<E>(src, v.x) + read_element<E>(src, v.y) + read_element<E>(src, v.z) +
                     read_element<E>(src, v.w);
            }
        }
    } else {
#pragma unroll 4
        for (unsigned k = 0; k < kPerThread; ++k)
            s += read_element<E>(src, elem_at(idx, t * kPerThread + k, run, elems));
    }
    sums[t] = s;
}

// ---- results ---------------------------------------------------------------------------------

// The row of a pager's frames read directly (each_method), for its umem row's method.
std::string same_frames_method(const std::string& umem_method) { return "GPU memory: frames of " + umem_method; }

struct Row {
    std::string workload, method, pool;
    std::vector<double> ms;  // per batch (lookups, scatter) or pass (elements)
    double useful = 0;       // bytes the kernel needed, per batch or pass
    double extra_ms = -1;    // device memory: the copy before; umem scatter: the flush after; -1: none
    bool ok = true;
    bool counts = true;  // false: a baseline that may be wrong on this machine (reported, not a failure)
    std::string note;

    double first() const { return ms.empty() ? NAN : ms.front(); }
    double later() const {
        if (ms.size() < 2) return NAN;
        double s = 0;
        for (std::size_t i = 1; i < ms.size(); ++i) s += ms[i];
        return s / static_cast<double>(ms.size() - 1);
    }
    double last() const { return ms.empty() ? NAN : ms.back(); }
    double total() const {
        double s = 0;
        for (double x : ms) s += x;
        return s;
    }
    double gbps(double t) const { return useful / (t * 1e6); }
};

Row new_row(std::string workload, std::string method, std::string pool, double useful) {
    Row r;
    r.workload = std::move(workload);
    r.method = std::move(method);
    r.pool = std::move(pool);
    r.useful = useful;
    return r;
}

std::vector<Row> results;
std::vector<std::string> notes;  // skipped methods and why, printed before the table
FILE* detail = nullptr;          // full log: every batch with the pager's counters

std::string num(double x, const char* fmt = "%.2f") {
    if (std::isnan(x)) return "-";
    char b[64];
    std::snprintf(b, sizeof b, fmt, x);
    return b;
}

void detail_line(const std::string& s) {
    if (!detail) return;
    std::fprintf(detail, "%s\n", s.c_str());
    std::fflush(detail);
}

void note(const std::string& s) {
    std::printf("  note: %s\n", s.c_str());
    std::fflush(stdout);
    detail_line("\nnote: " + s);
    notes.push_back(s);
}

void record(Row r) {
    std::printf("  %-8s %-24s %-6s first %9.2f ms  later %9s ms  total %9.2f ms  %8.2f / %8s GB/s  %s %s\n",
                r.workload.c_str(), r.method.c_str(), r.pool.c_str(), r.first(), num(r.later()).c_str(), r.total(),
                r.gbps(r.first()), num(r.gbps(r.later())).c_str(), r.ok ? "ok" : "WRONG", r.note.c_str());
    std::fflush(stdout);
    detail_line(log::concat("\ntotal ", num(r.total()), " ms; first ", num(r.first()), " ms, later ", num(r.later()),
                            " ms (mean); extra ", r.extra_ms < 0 ? "-" : num(r.extra_ms), " ms; ",
                            r.ok ? "ok" : "WRONG", r.note.empty() ? "" : "; ", r.note));
    results.push_back(std::move(r));
}

std::string stats_note(const Stats& s) {
    std::string out;
    for (unsigned c = 0; c < c_count_; ++c) out += log::concat(name(static_cast<Counter>(c)), " ", s.value[c], " ");
    return out + log::concat("used_MiB ", s.bytes_used >> 20);
}

// The counters the brief table wants: hits, faults, fills, read-throughs, evictions, bytes in.
std::string short_stats(const Stats& s) {
    return log::concat("hits ", s[c_hits], " faults ", s[c_faults], " fills ", s[c_fills], " read_through ",
                       s[c_read_through], " evictions ", s[c_evictions], " in_MiB ", s[c_bytes_in] >> 20);
}

// ---- the bench -------------------------------------------------------------------------------

struct Options {
    double table_gib = 16;
    std::uint32_t row = 256;
    std::uint64_t batch = 1 << 20;
    unsigned batches = 6;
    double alpha = 0.99;
    std::vector<double> pools{100, 25, 6.25};
    double scatter_pool = 6.25;
    double elem_gib = 8;
    std::uint64_t elem_n = 64ull << 20;
    std::uint64_t seed = 1;
    std::uint64_t small_page = 0;  // kept for old command lines: adds this size to fixed_pages
    std::vector<std::uint64_t> fixed_pages{128, 256, 512, 1024, 2048, 4096};  // umem with these fixed page sizes too
    std::vector<unsigned> runs{1, 4, 8};  // elements: runs of this many adjacent u64 per read (1: single elements)
    unsigned passes = 3;                  // elements: passes (2.. replay pass 1)
    bool read_through = false;            // also umem read-through (4 KiB pages)
    bool replay = false;                  // lookups: every batch replays batch 1 (later batches: hits only)
    bool get4 = false;                    // elements: single elements read four at a time (Array::get of four)
    unsigned elem_size = 8;               // elements: 8 (u64) or 16 bytes (pairs of u64, one get() of 16 bytes)
    bool lane_rows = false;               // lookups: a warp takes 32 at once, a row a lane (Array::warp_acquire_each)
    Workloads only;                       // --only: those workloads, or all
    bool uvm = true;
    std::string detail_path;
};

std::uint64_t gib_bytes(double gib) { return static_cast<std::uint64_t>(gib * double(1ull << 30)) / kPage * kPage; }

std::string pool_name(double pct) { return num(pct, "%g") + "%"; }

// A umem configuration under test: the admission policy and the page size (0: automatic, the default).
struct Variant {
    Admission adm;
    std::uint64_t page = auto_page_size;
};

// The pool is pct of the array at every page size (automatic: counted in 4 KiB frames).
Config pager_config(std::uint64_t bytes, double pct, Variant var) {
    Config c;
    c.bytes = bytes;
    c.page_size = var.page;
    Admission adm = var.adm;
    const std::uint64_t unit = var.page == auto_page_size ? kPage : var.page;
    std::uint64_t pages = (bytes + unit - 1) / unit;
    c.frames = std::clamp<std::uint64_t>(std::llround(double(pages) * pct / 100.0), 1, pages);
    c.admission = adm;
    return c;
}

std::uint64_t free_gpu_bytes() {
    std::size_t free_b = 0, total_b = 0;
    ck(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return free_b;
}

// CUDA managed memory, only within free GPU memory minus 4 GiB: the shared GPU must never be
// oversubscribed with managed memory (it can hang it).
struct Managed {
    Word* p = nullptr;
    static constexpr std::uint64_t margin = 4ull << 30;
    static bool fits(std::uint64_t n, std::string& why) {
        std::uint64_t f = free_gpu_bytes();
        if (n + margin <= f) return true;
        why = log::concat(n >> 20, " MiB managed does not fit in ", f >> 20, " MiB free on the GPU minus 4 GiB");
        return false;
    }
    explicit Managed(std::uint64_t n) { ck(cudaMallocManaged(reinterpret_cast<void**>(&p), n), "cudaMallocManaged"); }
    ~Managed() { cudaFree(p); }
    Managed(const Managed&) = delete;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Bench {
public:
    explicit Bench(const Options& o) : opt_(o) {
        cudaDeviceProp prop{};
        ck(cudaGetDeviceProperties(&prop, 0), "device properties");
        blocks_ = prop.multiProcessorCount * 8;  // 64 warps per SM
        int drv = 0, host_atomics = 0;
        cudaDriverGetVersion(&drv);
        cudaDeviceGetAttribute(&host_atomics, cudaDevAttrHostNativeAtomicSupported, 0);
        host_native_atomics_ = host_atomics != 0;

        table_bytes_ = gib_bytes(o.table_gib);
        row_words_ = o.row / 8;
        rows_ = table_bytes_ / o.row;
        elem_bytes_ = gib_bytes(o.elem_gib);
        elems_ = elem_bytes_ / 8;
        elem_n_ = o.elem_n / kPerThread * kPerThread;
        std::uint64_t bytes = 0;
        if (want("lookups") || want("scatter")) bytes = std::max(bytes, table_bytes_);
        if (want("elements")) bytes = std::max(bytes, elem_bytes_);

        std::string head = log::concat(
            "GPU ", prop.name, ", ", prop.multiProcessorCount, " SMs, driver API ", drv, ", ", free_gpu_bytes() >> 20,
            " MiB free, host-native atomics ", host_atomics, "; ", host_threads(), " host threads\n", "table ",
            num(double(table_bytes_) / double(1ull << 30), "%g"), " GiB: ", rows_, " rows of ", o.row, " B; ",
            o.batches, " batches of ", o.batch, " lookups; Zipf alpha ", o.alpha, "; pools ", pools_text(),
            " of each array, scatter pool ", pool_name(o.scatter_pool), "\n", "elements ",
            num(double(elem_bytes_) / double(1ull << 30), "%g"), " GiB: ", elems_ * 8 / o.elem_size,
            o.elem_size == 8 ? " u64, " : " elements of 16 bytes, ", elem_n_, " reads per pass, ", kPerThread,
            " per thread; seed ", o.seed);
        std::printf("%s\n", head.c_str());
        if (detail) std::fprintf(detail, "# umem-sparse-bench detail\n\n%s\n", head.c_str());

        auto t0 = std::chrono::steady_clock::now();
        data_ = std::make_unique<HostPinned>(bytes);
        double pin_s = seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        Word* w = words();
        parallel_for(bytes / kPage, [&](std::uint64_t pg) {
            for (std::uint64_t k = pg * kPageWords; k < (pg + 1) * kPageWords; ++k) w[k] = mix(k);
        });
        std::printf("data: %llu MiB pinned+mapped in %.1f s, written in %.1f s\n",
                    static_cast<unsigned long long>(bytes >> 20), pin_s, seconds_since(t0));
        std::fflush(stdout);
        warm_up(bytes);
    }

    void run() {
        if (want("lookups") || want("scatter")) make_lookup_stream();
        if (want("lookups")) lookups();
        if (want("elements")) elements();
        if (want("scatter")) scatter();  // last: it writes the data (and restores it while checking)
    }

private:
    bool want(const char* w) const { return opt_.only.want(w); }
    Word* words() const { return reinterpret_cast<Word*>(data_->p); }
    std::uint64_t stream_seed(std::uint64_t kind, std::uint64_t number) const {
        return mix(opt_.seed * 0x100000001b3ull + (kind << 32) + number);
    }
    std::string pools_text() const {
        std::string s;
        for (double p : opt_.pools) s += (s.empty() ? "" : ",") + num(p, "%g");
        return s + "%";
    }
    // The default admission (the policy under test) and read-through as the comparison.
    // With --small-page, the default admission over pages of that size too.
    std::vector<Variant> admissions() const {
        std::vector<Variant> v{{Config{}.admission, Config{}.page_size}};
        if (opt_.read_through) v.push_back({Admission::read_through, kPage});
        for (std::uint64_t p : opt_.fixed_pages) v.push_back({Config{}.admission, p});
        if (opt_.small_page != 0 &&
            std::find(opt_.fixed_pages.begin(), opt_.fixed_pages.end(), opt_.small_page) == opt_.fixed_pages.end())
            v.push_back({Config{}.admission, opt_.small_page});
        return v;
    }
    static std::string umem_label(Variant a) {
        if (a.page == auto_page_size) return log::concat("umem default (auto)");
        return log::concat("umem ", name(a.adm), " p", a.page);
    }

    // The first paged kernel of a process is slower than every later one (umem-bench): pay it
    // here, untimed, on a pager over the first 64 MiB, with every kernel the bench times.
    void warm_up(std::uint64_t bytes) {
        std::uint64_t pb = std::min<std::uint64_t>(bytes, 64ull << 20);
        std::uint64_t n = 4096;
        std::uint32_t rows = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, pb / 8 / row_words_));
        std::uint64_t words_n = pb / 8;
        std::vector<std::uint32_t> r(n), e(n * kPerThread);
        for (std::uint64_t i = 0; i < n; ++i) r[i] = static_cast<std::uint32_t>(i % rows);
        for (std::uint64_t i = 0; i < e.size(); ++i) e[i] = static_cast<std::uint32_t>((i * 4099) % words_n);
        DeviceBuf<std::uint32_t> dr(n), de(e.size());
        DeviceBuf<Word> sums(n);
        ck(cudaMemcpy(dr.p, r.data(), n * 4, cudaMemcpyHostToDevice), "copy indices");
        ck(cudaMemcpy(de.p, e.data(), e.size() * 4, cudaMemcpyHostToDevice), "copy indices");
        Direct d{words()};
        for (Variant adm : admissions()) {
            GpuPager pager(pager_config(pb, 100, adm), data_->p, Engine::gpu_threads);
            Paged p{Array<Word>(pager.view(), pager.ring()), &pager};
            ev_.time_ms([&] {
                if (pb >= opt_.row) launch_lookups(opt_.lane_rows, blocks_, current(p), dr.p, n, row_words_, sums.p);
                elements_kernel<<<(n + 255) / 256, 256>>>(current(p), de.p, n, sums.p, 1, words_n);
                if (opt_.elem_size == 16)
                    elements_kernel<Paged, false, Pair>  // runs of 2: indices past the pairs wrap (elem_at)
                        <<<(n + 255) / 256, 256>>>(current(p), de.p, n, sums.p, 2, words_n / 2);
                if (opt_.get4)
                    elements_kernel<Paged, true><<<(n + 255) / 256, 256>>>(current(p), de.p, n, sums.p, 1, words_n);
            });
        }
        ev_.time_ms([&] {
            if (pb >= opt_.row) launch_lookups(opt_.lane_rows, blocks_, d, dr.p, n, row_words_, sums.p);
            elements_kernel<<<(n + 255) / 256, 256>>>(d, de.p, n, sums.p, 1, words_n);
            if (opt_.elem_size == 16)
                elements_kernel<Direct, false, Pair><<<(n + 255) / 256, 256>>>(d, de.p, n, sums.p, 2, words_n / 2);
            if (opt_.get4) elements_kernel<Direct, true><<<(n + 255) / 256, 256>>>(d, de.p, n, sums.p, 1, words_n);
        });
    }

    // Runs n timed kernels (launch(b) enqueues batch b), each checked (check(b): results wrong),
    // then after(b) untimed (the pager's counters). Records the row.
    template <class L, class C, class A>
    void timed(Row r, unsigned n, L launch, C check, A after) {
        detail_line(log::concat("\n### ", r.workload, ", ", r.method, ", pool ", r.pool, "\n\n| ",
                                r.workload.starts_with("elements") || r.workload.starts_with("runs") ? "pass" : "batch",
                                " | ms | GB/s | wrong | pager counters (cumulative) |\n|---|---|---|---|---|"));
        for (unsigned b = 0; b < n; ++b) {
            double ms = ev_.time_ms([&] { launch(b); });
            r.ms.push_back(ms);
            std::int64_t bad = check(b);  // -1: checked after the last batch
            if (bad > 0) {
                r.ok = false;
                r.note += log::concat("batch ", b + 1, ": ", bad, " wrong; ");
            }
            detail_line(log::concat("| ", b + 1, " | ", num(ms, "%.3f"), " | ", num(r.gbps(ms)), " | ",
                                    bad < 0 ? "-" : std::to_string(bad), " | ", after(b), " |"));
        }
        record(std::move(r));
    }

    // -- lookups and scatter: one index stream

    void make_lookup_stream() {
        auto t0 = std::chrono::steady_clock::now();
        Zipf z(rows_, opt_.alpha);
        Scatter s(rows_, stream_seed(0, 1));
        idx_.resize(opt_.batches);
        for (unsigned b = 0; b < opt_.batches; ++b)
            idx_[b] = opt_.replay && b > 0 ? idx_[0] : zipf_stream(z, s, opt_.batch, stream_seed(1, b));
        // How skewed the stream is: distinct rows and pages, the hottest row's share, and the rows
        // that no earlier lookup read (compulsory misses: no cache avoids them, each costs a read
        // from host memory).
        std::vector<bool> row_seen(rows_), page_seen(table_bytes_ / kPage);
        std::uint64_t rows1 = 0, pages1 = 0, pages_all = 0, new_later = 0;
        for (unsigned b = 0; b < opt_.batches; ++b)
            for (std::uint32_t r : idx_[b]) {
                if (!row_seen[r]) {
                    row_seen[r] = true;
                    ++(b == 0 ? rows1 : new_later);
                }
                std::uint64_t w0 = std::uint64_t{r} * row_words_;
                for (std::uint64_t pg = w0 / kPageWords; pg <= (w0 + row_words_ - 1) / kPageWords; ++pg)
                    if (!page_seen[pg]) {
                        page_seen[pg] = true;
                        ++pages_all;
                        if (b == 0) ++pages1;
                    }
            }
        std::uint32_t hot = static_cast<std::uint32_t>(s(0));
        std::uint64_t hot_n = std::count(idx_[0].begin(), idx_[0].end(), hot);
        std::string info = log::concat(
            "lookup stream: batch 1 reads ", rows1, " distinct rows (", num(100.0 * double(rows1) / double(opt_.batch)),
            "% of its lookups) on ", pages1, " pages; all batches touch ", pages_all, " of ", page_seen.size(),
            " pages (", num(100.0 * double(pages_all) / double(page_seen.size())), "%); batches 2.. read ",
            num(opt_.batches > 1 ? 100.0 * double(new_later) / double(std::uint64_t{opt_.batches - 1} * opt_.batch)
                                 : 0.0),
            "% rows never read before; the hottest row has ", num(100.0 * double(hot_n) / double(opt_.batch)),
            "% of batch 1; made in ", num(seconds_since(t0), "%.1f"), " s",
            opt_.lane_rows ? "; a warp takes 32 lookups at once, a row a lane (--lane-rows)" : "");
        std::printf("%s\n", info.c_str());
        detail_line("\n" + info);
        didx_ = std::make_unique<DeviceBuf<std::uint32_t>>(std::uint64_t{opt_.batches} * opt_.batch);
        for (unsigned b = 0; b < opt_.batches; ++b)
            ck(cudaMemcpy(didx_->p + std::uint64_t{b} * opt_.batch, idx_[b].data(), opt_.batch * 4,
                          cudaMemcpyHostToDevice),
               "copy indices");
    }

    const std::uint32_t* batch_idx(unsigned b) const { return didx_->p + std::uint64_t{b} * opt_.batch; }

    void lookups() {
        const std::uint64_t n = opt_.batch;
        std::vector<std::vector<Word>> want(opt_.batches, std::vector<Word>(n));
        for (unsigned b = 0; b < opt_.batches; ++b)
            parallel_for(n, [&](std::uint64_t j) {
                Word s = 0;
                std::uint64_t w0 = std::uint64_t{idx_[b][j]} * row_words_;
                for (std::uint64_t w = w0; w < w0 + row_words_; ++w) s += mix(w);
                want[b][j] = s;
            });
        DeviceBuf<Word> sums(n);
        std::vector<Word> got(n);
        const double useful = double(n) * opt_.row;
        auto check = [&](unsigned b) {
            ck(cudaMemcpy(got.data(), sums.p, n * 8, cudaMemcpyDeviceToHost), "read sums");
            std::int64_t bad = 0;
            for (std::uint64_t j = 0; j < n; ++j) bad += got[j] != want[b][j];
            ck(cudaMemset(sums.p, 0, n * 8), "memset");
            return bad;
        };
        auto none = [](unsigned) { return std::string(); };
        auto run = [&](Row r, auto src, auto after) {
            ck(cudaMemset(sums.p, 0, n * 8), "memset");
            timed(
                std::move(r), opt_.batches,
                [&](unsigned b) {
                    launch_lookups(opt_.lane_rows, blocks_, current(src), batch_idx(b), n, row_words_, sums.p);
                },
                check, after);
        };
        run(new_row("lookups", "zero-copy", "-", useful), Direct{words()}, none);
        each_method("lookups", "table", table_bytes_, useful, opt_.replay, run);
    }

    // Every word of the table against mix(i) plus the deltas its row received; each word is put
    // back to mix(i) on the way, for the next method. Returns the words that were wrong.
    std::uint64_t check_and_restore(const std::vector<Word>& adds) {
        Word* w = words();
        const std::uint64_t rw = row_words_, rows = rows_;
        return parallel_sum(table_bytes_ / kPage, [&](std::uint64_t pg) {
            std::uint64_t bad = 0;
            for (std::uint64_t i = pg * kPageWords; i < (pg + 1) * kPageWords; ++i) {
                const Word m = mix(i), r = i / rw;
                const Word x = w[i];
                bad += x != m + (r < rows ? adds[r] : 0);
                if (x != m) w[i] = m;
            }
            return bad;
        });
    }

    void scatter() {
        const std::uint64_t n = opt_.batch;
        std::vector<Word> adds(rows_);
        for (unsigned b = 0; b < opt_.batches; ++b)
            for (std::uint64_t j = 0; j < n; ++j) adds[idx_[b][j]] += delta(std::uint64_t{b} * n + j);
        const double useful = double(n) * opt_.row;
        auto launch = [&](auto src) {
            return [&, src](unsigned b) {
                scatter_kernel<<<blocks_, 256>>>(current(src), batch_idx(b), n, std::uint64_t{b} * n, row_words_);
            };
        };
        auto unchecked = [](unsigned) { return std::int64_t{-1}; };  // checked once, after all batches
        auto finish = [&](std::uint64_t wrong) {
            Row& r = results.back();
            r.ok = wrong == 0;
            r.note += log::concat(wrong == 0 ? "every word of the table ok; "
                                             : log::concat(wrong, " of ", table_bytes_ / 8, " words WRONG; "));
            std::printf("  %-8s %-24s %-6s checked: %s\n", r.workload.c_str(), r.method.c_str(), r.pool.c_str(),
                        r.note.c_str());
            detail_line("check: " + r.note);
        };
        for (Variant adm : admissions()) {
            std::unique_ptr<GpuPager> pager;
            try {
                pager = std::make_unique<GpuPager>(pager_config(table_bytes_, opt_.scatter_pool, adm), data_->p,
                                                   Engine::gpu_threads);
            } catch (const Error& e) {
                note(log::concat("scatter, ", umem_label(adm), ": skipped, ", e.what()));
                continue;
            }
            Paged src{Array<Word>(pager->view(), pager->ring()), pager.get()};
            timed(new_row("scatter", umem_label(adm), pool_name(opt_.scatter_pool), useful), opt_.batches, launch(src),
                  unchecked, [&](unsigned) { return stats_note(pager->stats()); });
            auto t0 = std::chrono::steady_clock::now();
            pager->flush();
            Row& r = results.back();
            r.extra_ms = seconds_since(t0) * 1e3;
            r.note +=
                log::concat("flush ", num(r.extra_ms), " ms, not in the batch times; ", short_stats(pager->stats()),
                            " page ", pager->page_size(), " relayouts ", pager->relayouts(), "; ");
            pager.reset();
            finish(check_and_restore(adds));
        }
        // The baseline: atomics straight on mapped pinned host memory, over PCIe. CUDA does not
        // promise them atomic there: a wrong result is reported, not counted as a failure.
        timed(new_row("scatter", "zero-copy atomics", "-", useful), opt_.batches, launch(Direct{words()}), unchecked,
              [](unsigned) { return std::string(); });
        finish(check_and_restore(adds));
        Row& z = results.back();
        z.counts = false;
        z.note += log::concat("host-native atomics attribute ", host_native_atomics_ ? 1 : 0,
                              z.ok ? "" : "; atomics on host memory are not atomic here");
    }

    // -- elements: single-thread reads

    void elements() {
        for (unsigned run : opt_.runs) {
            if (opt_.elem_size == 16)
                elements<Pair>(run);
            else
                elements<Word>(run);
        }
    }

    // Single-thread reads of E elements (u64, or pairs of them with --elem-bytes 16), or runs of `run` adjacent
    // ones (a few 8- or 16-byte elements next to each other, then elsewhere): "elements", "runsN" (and "-16B").
    template <class E>
    void elements(unsigned run) {
        constexpr unsigned per_elem = sizeof(E) / sizeof(Word);  // words an element
        const unsigned passes = opt_.passes;
        const std::string workload = (run == 1 ? std::string("elements") : log::concat("runs", run)) +
                                     (per_elem == 1 ? "" : log::concat("-", sizeof(E), "B"));
        auto t0 = std::chrono::steady_clock::now();
        const std::uint64_t elems = elems_ / per_elem;
        Zipf z(elems, opt_.alpha);
        Scatter s(elems, stream_seed(0, 2));
        const std::uint64_t n = elem_n_, threads = n / kPerThread;
        std::vector<std::uint32_t> idx = zipf_stream(z, s, n, stream_seed(2, 0));
        // Every pass replays pass 1: what it read is resident then (where the pool holds it).
        std::vector<Word> want(threads);
        parallel_for(threads, [&](std::uint64_t t) {
            Word sum = 0;
            for (std::uint64_t k = t * kPerThread; k < (t + 1) * kPerThread; ++k)
                for (unsigned w = 0; w < per_elem; ++w) sum += mix(elem_at(idx.data(), k, run, elems) * per_elem + w);
            want[t] = sum;
        });
        DeviceBuf<std::uint32_t> didx(n);
        ck(cudaMemcpy(didx.p, idx.data(), n * 4, cudaMemcpyHostToDevice), "copy indices");
        {
            std::vector<bool> seen(elem_bytes_ / kPage);
            std::uint64_t pages1 = 0;
            for (std::uint64_t k = 0; k < n; ++k) {
                std::uint64_t pg = elem_at(idx.data(), k, run, elems) * per_elem / kPageWords;
                if (!seen[pg]) {
                    seen[pg] = true;
                    ++pages1;
                }
            }
            std::string info = log::concat(workload, " stream: pass 1 touches ", pages1, " of ", seen.size(),
                                           " pages (", num(100.0 * double(pages1) / double(seen.size())),
                                           "%); made in ", num(seconds_since(t0), "%.1f"), " s",
                                           opt_.get4 && run == 1 ? "; read four at a time (--get4)" : "");
            std::printf("%s\n", info.c_str());
            detail_line("\n" + info);
        }
        DeviceBuf<Word> sums(threads);
        std::vector<Word> got(threads);
        const double useful = double(n) * sizeof(E);
        const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
        auto check = [&](unsigned) {
            ck(cudaMemcpy(got.data(), sums.p, threads * 8, cudaMemcpyDeviceToHost), "read sums");
            std::int64_t bad = 0;
            for (std::uint64_t t = 0; t < threads; ++t) bad += got[t] != want[t];
            ck(cudaMemset(sums.p, 0, threads * 8), "memset");
            return bad;
        };
        auto none = [](unsigned) { return std::string(); };
        auto go = [&](Row r, auto src, auto after) {
            ck(cudaMemset(sums.p, 0, threads * 8), "memset");
            timed(
                std::move(r), passes,
                [&](unsigned) {
                    if (opt_.get4)
                        elements_kernel<decltype(src), true>
                            <<<blocks, 256>>>(current(src), didx.p, threads, sums.p, run, elems);
                    else
                        elements_kernel<decltype(src), false, E>
                            <<<blocks, 256>>>(current(src), didx.p, threads, sums.p, run, elems);
                },
                check, after);
        };
        go(new_row(workload, "zero-copy", "-", useful), Direct{words()}, none);
        each_method(workload.c_str(), "array", elem_bytes_, useful, true, go);
    }

    // The methods every read workload compares after zero-copy: device memory (the data copied
    // first), UVM, and umem at each pool and variant. `run(row, source, after)` times one.
    template <class Run>
    // `replayed`: every batch or pass reads what the first did, so that umem's last one finds it all resident.
    void each_method(const char* workload, const char* data, std::uint64_t bytes, double useful, bool replayed,
                     Run run) {
        auto none = [](unsigned) { return std::string(); };
        if (bytes + (256ull << 20) <= free_gpu_bytes()) {
            DeviceBuf<Word> dev(bytes / 8);
            double copy =
                ev_.time_ms([&] { ck(cudaMemcpy(dev.p, data_->p, bytes, cudaMemcpyHostToDevice), "cudaMemcpy"); });
            Row r = new_row(workload, "device memory", "-", useful);
            r.extra_ms = copy;
            r.note = log::concat("cudaMemcpy of the ", data, " first: ", num(copy), " ms (",
                                 num(double(bytes) / (copy * 1e6)), " GB/s), not in the timed passes; ");
            run(std::move(r), Direct{dev.p}, none);
        } else {
            note(log::concat(workload, ", device memory: skipped, the ", data, " (", bytes >> 20,
                             " MiB) does not fit in free GPU memory (", free_gpu_bytes() >> 20, " MiB)"));
        }
        std::string why;
        if (!opt_.uvm) {
            note(log::concat(workload, ", UVM: skipped (--no-uvm)"));
        } else if (!Managed::fits(bytes, why)) {
            note(log::concat(workload, ", UVM: skipped, ", why));
        } else {
            Managed m(bytes);
            auto t0 = std::chrono::steady_clock::now();
            parallel_for(bytes / kPage, [&](std::uint64_t pg) {
                for (std::uint64_t k = pg * kPageWords; k < (pg + 1) * kPageWords; ++k) m.p[k] = mix(k);
            });
            Row r = new_row(workload, "UVM", "-", useful);
            r.note = log::concat("managed memory written on the host in ", num(seconds_since(t0), "%.1f"), " s; ");
            run(std::move(r), Direct{m.p}, none);
        }
        for (double pct : opt_.pools)
            for (Variant adm : admissions()) {
                std::unique_ptr<GpuPager> pager;
                try {
                    pager = std::make_unique<GpuPager>(pager_config(bytes, pct, adm), data_->p, Engine::gpu_threads);
                } catch (const Error& e) {
                    note(log::concat(workload, ", ", umem_label(adm), " at ", pool_name(pct), ": skipped, ", e.what()));
                    continue;
                }
                const PagerView& first_view = pager->view();
                Word* const frames = reinterpret_cast<Word*>(first_view.frames);  // the pool keeps its bytes
                const bool holds_all = first_view.never_evicts();
                Paged src{Array<Word>(first_view, pager->ring()), pager.get()};
                run(new_row(workload, umem_label(adm), pool_name(pct), useful), src,
                    [&](unsigned) { return stats_note(pager->stats()) + log::concat(" page ", pager->page_size()); });
                results.back().note += short_stats(pager->stats()) +
                                       log::concat(" page ", pager->page_size(), " relayouts ", pager->relayouts());
                if (holds_all) results.back().note += log::concat(" lone fills ", pager->lone_fill_bytes());
                // Where the pool holds the array a page's frame is its own number, so the pool is the array laid out
                // as device memory, at the same addresses: the same kernel reading it directly is the plain read of
                // the same data that hits are measured against. A separate copy lands elsewhere, and where it lands
                // moves skewed reads' time by up to 25% (H200: the same pager's hits 0.85-1.10 ms by its place in the
                // process's allocations; bench/results/umem-h200-2026-11-27.md). Only where the last pass read
                // nothing that was not resident (replayed streams; a read in place is not filled), and a baseline:
                // a word it reads that umem never filled is reported, not failed.
                if (holds_all && replayed) {
                    Row own = new_row(workload, same_frames_method(umem_label(adm)), pool_name(pct), useful);
                    own.counts = false;
                    run(std::move(own), Direct{frames}, none);
                }
            }
    }

    Options opt_;
    unsigned blocks_ = 0;
    bool host_native_atomics_ = false;
    std::uint64_t table_bytes_ = 0, row_words_ = 0, rows_ = 0;
    std::uint64_t elem_bytes_ = 0, elems_ = 0, elem_n_ = 0;
    std::unique_ptr<HostPinned> data_;
    std::vector<std::vector<std::uint32_t>> idx_;  // lookup stream, per batch
    std::unique_ptr<DeviceBuf<std::uint32_t>> didx_;
    Events ev_;
};

// The table: every row, with ratios to the zero-copy row of the same workload (its time divided by
// this row's: > 1 is faster than zero-copy), for batch 1, the mean of the later ones, and the total.
void summary() {
    std::string out;
    out +=
        "\n| workload | method | pool | first ms | later ms | last ms | total ms | copy/flush ms | first GB/s | later "
        "GB/s "
        "| x zero-copy first | x zero-copy later | x zero-copy total | ok |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : results) {
        const Row* z = nullptr;
        for (const Row& c : results)
            if (c.workload == r.workload && c.method.rfind("zero-copy", 0) == 0) z = &c;
        auto ratio = [&](double zt, double t) { return z ? num(zt / t, "%.3g") : std::string("-"); };
        out += log::concat("| ", r.workload, " | ", r.method, " | ", r.pool, " | ", num(r.first()), " | ",
                           num(r.later()), " | ", num(r.last()), " | ", num(r.total()), " | ",
                           r.extra_ms < 0 ? "-" : num(r.extra_ms), " | ", num(r.gbps(r.first())), " | ",
                           num(r.gbps(r.later())), " | ", ratio(z ? z->first() : NAN, r.first()), " | ",
                           ratio(z ? z->later() : NAN, r.later()), " | ", ratio(z ? z->total() : NAN, r.total()), " | ",
                           r.ok ? "ok" : (r.counts ? "WRONG" : "WRONG (baseline)"), " |\n");
    }
    // The automatic page size against every fixed one of the same workload and pool: time over the
    // best fixed size's (first batch, later batches, total; 1.00 = as fast as the best), and hits: the
    // last pass against device memory's last pass (pool 100%).
    out +=
        "\n| workload | pool | auto first / later / total ms | best fixed first / later / total | auto / best "
        "first, later, total | today's default (p4096) / auto, total | auto last / device memory last | auto last / "
        "its frames read directly | auto chose |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
    auto chose = [](const Row& a) {
        std::size_t at = a.note.rfind("page ");
        return at == std::string::npos ? std::string("-") : a.note.substr(at, a.note.find(';', at) - at);
    };
    for (const Row& a : results) {
        if (a.method != "umem default (auto)") continue;
        const Row *bf = nullptr, *bl = nullptr, *bt = nullptr, *p4 = nullptr, *dev = nullptr, *own = nullptr;
        for (const Row& c : results) {
            if (c.workload == a.workload && c.method == "device memory") dev = &c;
            if (c.workload == a.workload && c.pool == a.pool && c.method == same_frames_method(a.method)) own = &c;
            if (c.workload != a.workload || c.pool != a.pool || c.method.rfind("umem adaptive p", 0) != 0) continue;
            if (c.method == "umem adaptive p4096") p4 = &c;
            if (!bf || c.first() < bf->first()) bf = &c;
            if (!bl || c.later() < bl->later()) bl = &c;
            if (!bt || c.total() < bt->total()) bt = &c;
        }
        auto nm = [](const Row* r) { return r ? r->method.substr(std::string("umem adaptive ").size()) : "-"; };
        out += log::concat(
            "| ", a.workload, " | ", a.pool, " | ", num(a.first()), " / ", num(a.later()), " / ", num(a.total()), " | ",
            bf ? num(bf->first()) : "-", " (", nm(bf), ") / ", bl ? num(bl->later()) : "-", " (", nm(bl), ") / ",
            bt ? num(bt->total()) : "-", " (", nm(bt), ") | ", bf ? num(a.first() / bf->first()) : "-", ", ",
            bl ? num(a.later() / bl->later()) : "-", ", ", bt ? num(a.total() / bt->total()) : "-", " | ",
            p4 ? num(p4->total() / a.total()) : "-", " | ", dev && a.pool == "100%" ? num(a.last() / dev->last()) : "-",
            " | ", own && own->ok ? num(a.last() / own->last()) : "-", " | ", chose(a), " |\n");
    }
    bool all_ok = std::all_of(results.begin(), results.end(), [](const Row& r) { return r.ok || !r.counts; });
    out += log::concat(results.size(), " results, ",
                       all_ok ? "all checked against the CPU: ok" : "SOME WRONG (see the notes in the detail)", "\n");
    if (detail) std::fprintf(detail, "\n## Summary\n%s", out.c_str());
    if (!notes.empty()) {
        std::printf("\nnotes:\n");
        for (const std::string& n : notes) std::printf("- %s\n", n.c_str());
    }
    std::printf("%s", out.c_str());
}

std::uint64_t parse_count(const std::string& a, const std::string& v) {
    std::size_t end = 0;
    std::uint64_t x = 0;
    try {
        x = std::stoull(v, &end);
    } catch (const std::exception&) {
        throw Error("options", a + " " + v, "not a number", "see --help");
    }
    std::string suffix = v.substr(end);
    if (suffix == "K" || suffix == "k") return x << 10;
    if (suffix == "M" || suffix == "m") return x << 20;
    if (suffix == "G" || suffix == "g") return x << 30;
    if (!suffix.empty()) throw Error("options", a + " " + v, "unknown suffix", "use K, M or G (powers of 2)");
    return x;
}

double parse_double(const std::string& a, const std::string& v) {
    std::size_t end = 0;
    double x = 0;
    try {
        x = std::stod(v, &end);
    } catch (const std::exception&) {
        end = 0;
    }
    if (end != v.size() || !(x > 0)) throw Error("options", a + " " + v, "not a positive number", "see --help");
    return x;
}

void usage(FILE* f) {
    std::fprintf(
        f,
        "usage: umem-sparse-bench [--only lookups,scatter,elements] [--detail FILE] [--no-uvm] [--seed N]\n"
        "         [--table-gib 16] [--row 256] [--batch 1M] [--batches 6] [--alpha 0.99]\n"
        "         [--pools 100,25,6.25] [--scatter-pool 6.25] [--elem-gib 8] [--elem-n 64M] [--small-page 256]\n"
        "         [--pages 128,256,512,1024,2048,4096] [--runs 1,4,8] [--passes 3] [--read-through] [--replay]\n"
        "         [--get4] [--lane-rows] [--elem-bytes 8|16]\n"
        "  umem runs with its default (automatic page size) and with each fixed page size of --pages;\n"
        "  --replay: every lookup batch replays batch 1 (later batches read resident rows: hits)\n"
        "  --get4: elements (runs of 1) read four at a time, Array::get of four indices, zero-copy and device\n"
        "          memory likewise\n"
        "  --elem-bytes 16: elements of 16 bytes (two u64), each read with one get() of 16 bytes; runs are of\n"
        "          such elements (workloads elements-16B, runsN-16B)\n"
        "  --lane-rows: a warp takes 32 lookups at once, each lane naming one row, their pages acquired together\n"
        "          (Array::warp_acquire_each), the rows read 8 at a time; zero-copy and device memory likewise\n"
        "  sizes in GiB may be decimals; counts take K, M, G (powers of 2); pools are percent of each array\n");
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw Error("options", a, "missing value", "see --help");
            return argv[++i];
        };
        if (a == "--table-gib")
            o.table_gib = parse_double(a, value());
        else if (a == "--row")
            o.row = static_cast<std::uint32_t>(parse_count(a, value()));
        else if (a == "--batch")
            o.batch = parse_count(a, value());
        else if (a == "--batches")
            o.batches = static_cast<unsigned>(parse_count(a, value()));
        else if (a == "--alpha")
            o.alpha = parse_double(a, value());
        else if (a == "--small-page")
            o.small_page = std::stoull(value());
        else if (a == "--pages" || a == "--runs") {
            std::vector<std::uint64_t> xs;
            for (const std::string& x : split_list(value())) xs.push_back(parse_count(a, x));
            if (a == "--pages")
                o.fixed_pages = xs;
            else
                o.runs.assign(xs.begin(), xs.end());
        } else if (a == "--passes")
            o.passes = static_cast<unsigned>(parse_count(a, value()));
        else if (a == "--read-through")
            o.read_through = true;
        else if (a == "--replay")
            o.replay = true;
        else if (a == "--get4")
            o.get4 = true;
        else if (a == "--lane-rows")
            o.lane_rows = true;
        else if (a == "--scatter-pool")
            o.scatter_pool = parse_double(a, value());
        else if (a == "--elem-gib")
            o.elem_gib = parse_double(a, value());
        else if (a == "--elem-n")
            o.elem_n = parse_count(a, value());
        else if (a == "--elem-bytes")
            o.elem_size = static_cast<unsigned>(parse_count(a, value()));
        else if (a == "--seed")
            o.seed = parse_count(a, value());
        else if (a == "--only")
            o.only = Workloads("umem-sparse-bench", value(), {"lookups", "scatter", "elements"});
        else if (a == "--no-uvm")
            o.uvm = false;
        else if (a == "--detail")
            o.detail_path = value();
        else if (a == "--pools") {
            o.pools.clear();
            for (const std::string& x : split_list(value())) o.pools.push_back(parse_double(a, x));
        } else {
            usage(a == "--help" ? stdout : stderr);
            std::exit(a == "--help" ? 0 : 2);
        }
    }
    const char* what = "options";
    if (o.row < 8 || o.row > kPage || o.row % 8 != 0)
        throw Error(what, log::concat("--row ", o.row), "rows are 8 .. 4096 bytes, a multiple of 8", "e.g. --row 256");
    if (o.small_page != 0 && (o.small_page < 128 || o.small_page >= kPage || (o.small_page & (o.small_page - 1)) != 0))
        throw Error(what, log::concat("--small-page ", o.small_page), "a power of two from 128 to 2048",
                    "e.g. --small-page 256");
    for (std::uint64_t p : o.fixed_pages)
        if (p < 128 || p > (2u << 20) || (p & (p - 1)) != 0)
            throw Error(what, log::concat("--pages ", p), "page sizes are powers of two from 128 to 2M",
                        "e.g. --pages 128,256,4096");
    for (unsigned r : o.runs)
        if (r == 0 || r > kPerThread || kPerThread % r != 0)
            throw Error(what, log::concat("--runs ", r), "a run is 1, 2, 4, 8 or 16 elements", "e.g. --runs 1,4,8");
    if (o.passes == 0) throw Error(what, "--passes 0", "need at least one pass", "e.g. --passes 3");
    if (o.elem_size != 8 && o.elem_size != 16)
        throw Error(what, log::concat("--elem-bytes ", o.elem_size), "elements are 8 or 16 bytes",
                    "e.g. --elem-bytes 16");
    if (o.elem_size != 8 && o.get4)
        throw Error(what, "--get4 --elem-bytes 16", "--get4 reads 8-byte elements", "leave one of them out");
    if (o.batch == 0 || o.batches == 0)
        throw Error(what, "--batch/--batches", "need at least one lookup and one batch", "e.g. --batch 64K");
    if (o.alpha > 10) throw Error(what, log::concat("--alpha ", o.alpha), "too skewed", "use 0.6 .. 1.2");
    for (double p : o.pools)
        if (p > 100) throw Error(what, log::concat("--pools ", p), "a pool is at most 100%", "e.g. --pools 100,25");
    if (o.scatter_pool > 100)
        throw Error(what, log::concat("--scatter-pool ", o.scatter_pool), "a pool is at most 100%", "e.g. 6.25");
    if (o.elem_n < kPerThread)
        throw Error(what, log::concat("--elem-n ", o.elem_n), "need at least one thread's reads", "e.g. 64M");
    if (o.table_gib > 1024 || o.elem_gib > 1024)
        throw Error(what, "--table-gib/--elem-gib", "more than 1 TiB", "e.g. --table-gib 16");
    std::uint64_t rows = gib_bytes(o.table_gib) / o.row, elems = gib_bytes(o.elem_gib) / 8;
    if (rows == 0 || rows > (1ull << 32))
        throw Error(what, log::concat("--table-gib ", o.table_gib, " --row ", o.row),
                    log::concat(rows, " rows: need 1 .. 2^32 (32-bit row indices)"), "change --table-gib or --row");
    if (elems == 0 || elems > (1ull << 32))
        throw Error(what, log::concat("--elem-gib ", o.elem_gib),
                    log::concat(elems, " elements: need 1 .. 2^32 (32-bit indices)"), "change --elem-gib");
    return o;
}

int bench_main(int argc, char** argv) {
    try {
        Options o = parse(argc, argv);
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
            std::printf("umem-sparse-bench: no CUDA device here; nothing measured\n");
            return 77;
        }
        if (!o.detail_path.empty()) detail = std::fopen(o.detail_path.c_str(), "w");
        {
            Bench b(o);
            b.run();
        }
        summary();
        if (detail) std::fclose(detail);
        bool all_ok = std::all_of(results.begin(), results.end(), [](const Row& r) { return r.ok || !r.counts; });
        return all_ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "umem-sparse-bench: %s\n", e.what());
        if (detail) std::fclose(detail);
        return 1;
    }
}

}  // namespace
}  // namespace bardrive::umem

int main(int argc, char** argv) { return bardrive::umem::bench_main(argc, argv); }
