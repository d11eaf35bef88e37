#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "umem/gpu.cuh"
#include "umem_kernels.hpp"

namespace bardrive::umem::gputest {

namespace {

constexpr std::uint64_t kWords = 512;    // 4 KiB pages of u64
constexpr std::uint64_t kPattern = 256;  // words 0..255 hold page * 512 + word; 256..511 are warp counters

void ck(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) throw Error("umem gpu test", what, cudaGetErrorString(rc));
}

__host__ __device__ inline std::uint32_t next(std::uint32_t& s) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
}

__global__ void mixed_kernel(Array<std::uint64_t> a, std::uint64_t pages, std::uint32_t ops, unsigned long long* bad) {
    unsigned lane = threadIdx.x & 31;
    std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    std::uint32_t s = warp * 2654435761u + 1;
    for (std::uint32_t i = 0; i < ops; ++i) {
        std::uint64_t page = next(s) % pages;
        if (i % 7 < 3) page = (page + i) % pages;  // some near-sequential runs for the prefetcher
        bool write = i % 2 == 1;
        PageRef<std::uint64_t> r = a.warp_acquire(page, write);
        unsigned wrong = 0;
        for (std::uint64_t w = lane; w < kPattern; w += 32) wrong += load_cg(r.data + w) != page * kWords + w;
        if (write && lane == 0) r.data[kPattern + warp] = load_cg(r.data + kPattern + warp) + 1;
        a.warp_release(r);
        for (int o = 16; o > 0; o >>= 1) wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
        if (lane == 0 && wrong) atomicAdd(bad, static_cast<unsigned long long>(wrong));
    }
}

__global__ void lone_kernel(Array<std::uint64_t> a, std::uint32_t ops, unsigned long long* bad) {
    std::uint32_t s = (blockIdx.x * blockDim.x + threadIdx.x) * 747796405u + 7;
    for (std::uint32_t i = 0; i < ops; ++i) {
        std::uint64_t page = next(s) % (a.size() / kWords), w = next(s) % kWords;  // read-only: all words hold i
        if (a.get(page * kWords + w) != page * kWords + w) atomicAdd(bad, 1ull);
    }
}

// get() out of line: one copy of its code, which a warp's lanes can reach from two call sites at different times.
__device__ __noinline__ std::uint64_t get_out_of_line(Array<std::uint64_t> a, std::uint64_t i) { return a.get(i); }

// Random elements through get(), each thread on its own. With `apart`, some lanes of each warp are held back before
// each read (1: the odd lanes, 2: lane 0) and call get() from a call site of their own: the lanes that went on are in
// get()'s miss loop with a mask of their own when the others come to the same code with theirs, and the GPU may run
// the two groups converged there.
__global__ void apart_kernel(Array<std::uint64_t> a, unsigned apart, std::uint32_t ops, unsigned long long* bad) {
    const unsigned lane = threadIdx.x & 31u;
    const bool held = (apart == 1 && (lane & 1u) != 0) || (apart == 2 && lane == 0);
    std::uint32_t s = (blockIdx.x * blockDim.x + threadIdx.x) * 2654435761u + 99;
    unsigned long long wrong_held = 0, wrong = 0;
    for (std::uint32_t i = 0; i < ops; ++i) {
        const std::uint64_t page = next(s) % (a.size() / kWords), w = next(s) % kWords, e = page * kWords + w;
        if (held) {  // the tallies differ, so that the two calls are not merged into one after the branch
            __nanosleep(200 + 300 * (i % 8));
            wrong_held += get_out_of_line(a, e) != e;
        } else {
            wrong += get_out_of_line(a, e) != e;
        }
    }
    if (wrong + wrong_held != 0) atomicAdd(bad, wrong + wrong_held);
}

// Thread t reads word `word` of page t (of odd pages only, with odd_only) through get(): element i holds i, or ~i
// where page_write_kernel wrote it (written).
__global__ void page_word_kernel(Array<std::uint64_t> a, std::uint64_t pages, unsigned word, bool odd_only,
                                 unsigned long long* bad, bool written = false) {
    const std::uint64_t t = blockIdx.x * blockDim.x + threadIdx.x, i = t * kWords + word;
    if (t >= pages || (odd_only && (t & 1) == 0)) return;
    if (a.get(i) != (written ? ~i : i)) atomicAdd(bad, 1ull);
}

// Warp w writes ~i into element i, word `word` of page w, through warp_acquire naming that word.
__global__ void page_write_kernel(Array<std::uint64_t> a, std::uint64_t pages, unsigned word) {
    const std::uint64_t w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= pages) return;
    const std::uint64_t i = w * kWords + word;
    PageRef<std::uint64_t> r = a.warp_acquire(w, true, i, 1);
    if ((threadIdx.x & 31) == 0) r.data[word] = ~i;
    a.warp_release(r);
}

// One thread reads element i through get().
__global__ void one_word_kernel(Array<std::uint64_t> a, std::uint64_t i, unsigned long long* bad) {
    if (a.get(i) != i) atomicAdd(bad, 1ull);
}

// Warp w reads words [word, word + n) of page first + w through warp_acquire, naming only those, lane k word + k.
__global__ void warp_word_kernel(Array<std::uint64_t> a, std::uint64_t first, std::uint64_t pages, unsigned word,
                                 unsigned n, unsigned long long* bad) {
    const std::uint64_t w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, i = (first + w) * kWords + word;
    const unsigned lane = threadIdx.x & 31;
    if (w >= pages) return;
    PageRef<std::uint64_t> r = a.warp_acquire(first + w, false, i, n);
    if (lane < n && load_cg(r.data + (i + lane) % a.per_page()) != i + lane) atomicAdd(bad, 1ull);
    a.warp_release(r);
}

// umem-sparse-bench's element kernel, its shape kept (16 reads a thread, summed, unrolled, indices loaded four
// at a time; with run > 1, runs of adjacent elements), over a skewed stream: a warp's reads mix hits, misses
// and pages other warps are filling. sums[t] is thread t's sum (every word holds its own index). run 0: single
// elements read four at a time.
__global__ void stream_kernel(Array<std::uint64_t> a, const std::uint32_t* idx, std::uint64_t threads, unsigned run,
                              std::uint64_t* sums) {
    const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    if (t >= threads) return;
    std::uint64_t s = 0;
    if (run == 0) {  // four at a time: Array::get of four
        const auto* q = reinterpret_cast<const uint4*>(idx + t * 16);
#pragma unroll
        for (unsigned k = 0; k < 4; ++k) {
            const uint4 v = q[k];
            const std::uint64_t i[4] = {v.x, v.y, v.z, v.w};
            std::uint64_t y[4];
            a.get(i, y);
            s += y[0] + y[1] + y[2] + y[3];
        }
    } else if (run == 1) {
        const auto* q = reinterpret_cast<const uint4*>(idx + t * 16);
#pragma unroll
        for (unsigned k = 0; k < 4; ++k) {
            const uint4 v = q[k];
            s += a.get(v.x) + a.get(v.y) + a.get(v.z) + a.get(v.w);
        }
    } else {
#pragma unroll 4
        for (unsigned k = 0; k < 16; ++k) s += a.get(std::uint64_t{idx[t * 16 + k - k % run]} + k % run);
    }
    sums[t] = s;
}

// Elements of 16 bytes, each read with one get() (the same pager's Array as pairs of words): thread t reads pair
// idx[k] / 2, or runs of `run` adjacent pairs from there. Pair j holds words 2j and 2j + 1.
struct alignas(16) WordPair {
    std::uint64_t lo, hi;
};
__global__ void pair_stream_kernel(Array<std::uint64_t> words, const std::uint32_t* idx, std::uint64_t threads,
                                   unsigned run, std::uint64_t* sums) {
    const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    if (t >= threads) return;
    const Array<WordPair> a(words);
    std::uint64_t s = 0;
#pragma unroll 4
    for (unsigned k = 0; k < 16; ++k) {
        const WordPair x = a.get(std::uint64_t{idx[t * 16 + k - k % run]} / 2 + k % run);
        s += x.lo + x.hi;
    }
    sums[t] = s;
}

// The same reads where only odd indices are read, so that get() runs with part of a warp.
__global__ void stream_divergent_kernel(Array<std::uint64_t> a, const std::uint32_t* idx, std::uint64_t threads,
                                        std::uint64_t* sums) {
    const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    if (t >= threads) return;
    std::uint64_t s = 0;
    const auto* q = reinterpret_cast<const uint4*>(idx + t * 16);
#pragma unroll
    for (unsigned k = 0; k < 4; ++k) {
        const uint4 v = q[k];
        if (v.x & 1) s += a.get(v.x);
        if (v.y & 1) s += a.get(v.y);
        if (v.z & 1) s += a.get(v.z);
        if (v.w & 1) s += a.get(v.w);
    }
    sums[t] = s;
}

// Rows of 256 B paged as 256-byte pages: a read of a row in the first half of a 4 KiB block (its
// pattern checked) and, every other op, atomic adds of 1 to every word of a row in the second half.
constexpr std::uint32_t kRowWords = 32;
__host__ __device__ inline void row_op(std::uint32_t& s, std::uint64_t blocks, std::uint64_t& block,
                                       std::uint32_t& read_row, std::uint32_t& write_row) {
    block = next(s) % blocks;
    read_row = next(s) % (kPattern / kRowWords);
    write_row = next(s) % (kPattern / kRowWords) + kPattern / kRowWords;
}

// N > 1 (at most 16): each op takes N draws of row_op and reads their N read rows and N write rows at once,
// lane k naming read row k and lane N + k write row k (Array::warp_acquire_each), then, every other op, writes
// the N write rows a page at a time: writes then find their pages resident and clean. Two draws may name the
// same page.
template <unsigned N>
__global__ void rows_kernel(Array<std::uint64_t> a, std::uint64_t blocks, std::uint32_t ops, unsigned long long* bad) {
    static_assert(N == 1 || 2 * N <= 32, "a lane for each read and each written row");
    unsigned lane = threadIdx.x & 31;
    std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    std::uint32_t s = warp * 2246822519u + 3;
    constexpr std::uint64_t rows_per_block = kWords / kRowWords;
    for (std::uint32_t i = 0; i < ops; ++i) {
        std::uint64_t read[N], written[N];
        for (unsigned k = 0; k < N; ++k) {
            std::uint64_t block;
            std::uint32_t rr, wr;
            row_op(s, blocks, block, rr, wr);
            read[k] = block * rows_per_block + rr;
            written[k] = block * rows_per_block + wr;
        }
        unsigned wrong = 0;
        if constexpr (N == 1) {
            PageRef<std::uint64_t> r = a.warp_acquire(read[0], false);
            wrong += load_cg(r.data + lane) != read[0] * kRowWords + lane;
            a.warp_release(r);
        } else {  // lane k names read row k, lane N + k written row k (read first, as a read-modify-write would)
            std::uint64_t mine = 0;
            for (unsigned k = 0; k < N; ++k) {
                if (lane == k) mine = read[k];
                if (lane == N + k) mine = written[k];
            }
            PageRef<std::uint64_t> r = a.warp_acquire_each(mine, mine * kRowWords, kRowWords, 2 * N);
            for (unsigned k = 0; k < N; ++k) {
                const auto* p = reinterpret_cast<const std::uint64_t*>(
                    __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(r.data), k));
                wrong += load_cg(p + lane) != read[k] * kRowWords + lane;
            }
            a.warp_release_each(r, 2 * N);
        }
        if (i % 2 == 1)
            for (unsigned k = 0; k < N; ++k) {  // writes a page at a time
                PageRef<std::uint64_t> w = a.warp_acquire(written[k], true);
                atomicAdd(reinterpret_cast<unsigned long long*>(w.data + lane), 1ull);
                a.warp_release(w);
            }
        for (int o = 16; o > 0; o >>= 1) wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
        if (lane == 0 && wrong) atomicAdd(bad, static_cast<unsigned long long>(wrong));
    }
}

// Page-size-agnostic rows: a warp reads 256-byte row `rr` of a 4 KiB block (pattern checked) and, every
// other op, adds 1 atomically to every word of row `wr`, page by page at whatever page size the
// Array's view has, telling warp_acquire which words it reads (the automatic page size learns from it).
__device__ inline unsigned row_pages(const Array<std::uint64_t>& a, std::uint64_t first, bool write) {
    const unsigned lane = threadIdx.x & 31;
    const std::uint64_t per = a.per_page(), mine = first + lane;
    unsigned wrong = 0;
    for (std::uint64_t w = first; w < first + kRowWords;) {
        const std::uint64_t page = w / per, stop = min(first + kRowWords, (page + 1) * per);
        PageRef<std::uint64_t> r = a.warp_acquire(page, write, w, stop - w);
        if (mine >= w && mine < stop) {
            if (write)
                atomicAdd(reinterpret_cast<unsigned long long*>(r.data + mine % per), 1ull);
            else
                wrong += load_cg(r.data + mine % per) != mine;
        }
        a.warp_release(r);
        w = stop;
    }
    return wrong;
}

// Spins on the GPU's global timer for about `ns`.
__device__ inline void spin_ns(std::uint64_t ns) {
    for (const std::uint64_t t0 = io::now_ns(); io::now_ns() - t0 < ns;) {
    }
}

// Keeps the legacy default stream busy for about `ns` (one thread spinning).
__global__ void busy_kernel(std::uint64_t ns) { spin_ns(ns); }

// Warp w spins for about `ns`, then writes ~w into word 0 of page w.
__global__ void late_writes_kernel(Array<std::uint64_t> a, std::uint64_t ns) {
    const std::uint64_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    spin_ns(ns);
    PageRef<std::uint64_t> r = a.warp_acquire(warp, true, warp * kWords, 1);
    if ((threadIdx.x & 31) == 0) r.data[0] = ~warp;
    a.warp_release(r);
}

__global__ void auto_rows_kernel(Array<std::uint64_t> a, std::uint64_t blocks, std::uint32_t ops, std::uint32_t seed,
                                 unsigned long long* bad) {
    unsigned lane = threadIdx.x & 31;
    std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    std::uint32_t s = warp * 2246822519u + seed;
    for (std::uint32_t i = 0; i < ops; ++i) {
        std::uint64_t block;
        std::uint32_t rr, wr;
        row_op(s, blocks, block, rr, wr);
        unsigned wrong = row_pages(a, block * kWords + rr * kRowWords, false);
        if (i % 2 == 1) row_pages(a, block * kWords + wr * kRowWords, true);
        for (int o = 16; o > 0; o >>= 1) wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
        if (lane == 0 && wrong) atomicAdd(bad, static_cast<unsigned long long>(wrong));
    }
}

// Warps reading whole 4 KiB blocks (gathers): the automatic page size must stay at 4 KiB.
__global__ void auto_gather_kernel(Array<std::uint64_t> a, std::uint64_t blocks, std::uint32_t ops,
                                   unsigned long long* bad) {
    unsigned lane = threadIdx.x & 31;
    std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    std::uint32_t s = warp * 747796405u + 11;
    const std::uint64_t per = a.per_page();
    for (std::uint32_t i = 0; i < ops; ++i) {
        const std::uint64_t first = (next(s) % blocks) * kWords;
        unsigned wrong = 0;
        for (std::uint64_t w = first; w < first + kWords;) {
            const std::uint64_t page = w / per, stop = min(first + kWords, (page + 1) * per);
            PageRef<std::uint64_t> r = a.warp_acquire(page, false, w, stop - w);
            for (std::uint64_t k = w + lane; k < stop; k += 32)
                if (k % kWords < kPattern) wrong += load_cg(r.data + k % per) != k;
            a.warp_release(r);
            w = stop;
        }
        for (int o = 16; o > 0; o >>= 1) wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
        if (lane == 0 && wrong) atomicAdd(bad, static_cast<unsigned long long>(wrong));
    }
}

// The row that lone_and_row_writes_kernel writes in even page p: its first element, of 32, word 64 r + 8 of the page,
// r = p / 2 % 8 (256 bytes across three 128-byte blocks).
__host__ __device__ inline std::uint64_t row_first(std::uint64_t page) {
    return page * kWords + 64 * (page / 2 % 8) + 8;
}

// Whether element i is in such a row.
__host__ __device__ inline bool written_word(std::uint64_t i) {
    const std::uint64_t page = i / kWords;
    return page % 2 == 0 && i >= row_first(page) && i < row_first(page) + 32;
}

// What element i holds once every even page's row was written: ~i there, i elsewhere.
__host__ __device__ inline std::uint64_t after_row_writes(std::uint64_t i) { return written_word(i) ? ~i : i; }

// Each thread reads 16 random words through get() (none that a warp writes: those are raced), then its warp writes ~i
// into every word of the row of an even page (written_word). Odd pages are read in every block, so in the frames that
// pages share the slots a row needs are often another page's, while its page has some of the row's blocks in.
__global__ void lone_and_row_writes_kernel(Array<std::uint64_t> a, std::uint64_t pages, unsigned long long* bad) {
    const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x, warp = t >> 5;
    std::uint32_t s = static_cast<std::uint32_t>(t) * 2654435761u + 3;
    for (int k = 0; k < 16; ++k) {
        std::uint64_t i = (next(s) % pages) * kWords + next(s) % kWords;
        if (written_word(i)) i += 32;  // past the row: never written
        if (a.get(i) != i) atomicAdd(bad, 1ull);
    }
    const std::uint64_t page = 2 * (warp * 40503u % (pages / 2)), first = row_first(page);
    PageRef<std::uint64_t> r = a.warp_acquire(page, true, first, 32);
    r.data[first % a.per_page() + (threadIdx.x & 31)] = ~(first + (threadIdx.x & 31));
    a.warp_release(r);
}

// Rows across a page's two frames. Threads read single words (get()) of three blocks of every page: an even page's are
// those of its row (row_first: blocks 4 r .. 4 r + 2), an odd page's three others; few blocks a page, so the tally
// proposes 128-byte pages and lone reads share frames, and where a block's slot in its page's frame is another page's
// it goes into the page's second frame. Once every block of the grid is past that (a grid barrier: the grid is
// resident), each warp reads rows of even pages (warp_acquire) and checks every word.
__global__ void lone_reads_then_rows_kernel(Array<std::uint64_t> a, std::uint64_t pages, unsigned long long* arrived,
                                            unsigned long long* bad) {
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x,
                        t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    for (std::uint64_t j = t; j < pages * 3 * 2; j += threads) {  // each block read twice
        const std::uint64_t page = j / 3 % pages, k = j % 3;
        const std::uint64_t block = page % 2 == 0 ? row_first(page) % kWords / 16 + k : (page * 7 + k * 11) % 32;
        const std::uint64_t i = page * kWords + block * 16 + j % 16;
        if (a.get(i) != i) atomicAdd(bad, 1ull);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(arrived, 1ull);
        while (atomicAdd(arrived, 0ull) < gridDim.x) __nanosleep(1000);
    }
    __syncthreads();
    const std::uint64_t warps = threads / 32, lane = threadIdx.x & 31;
    for (std::uint64_t page = 2 * (t / 32); page < pages; page += 2 * warps) {
        const std::uint64_t first = row_first(page);
        PageRef<std::uint64_t> r = a.warp_acquire(page, false, first, 32);
        const unsigned wrong = load_cg(&r.data[(first + lane) % a.per_page()]) != first + lane;
        a.warp_release(r);
        const unsigned rows_wrong = __popc(__ballot_sync(0xffffffffu, wrong));
        if (lane == 0 && rows_wrong != 0) atomicAdd(bad, static_cast<unsigned long long>(rows_wrong));
    }
}

// Thread t reads element t through get(), which holds after_row_writes(t).
__global__ void check_written_kernel(Array<std::uint64_t> a, std::uint64_t n, unsigned long long* bad) {
    const std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
    if (i < n && a.get(i) != after_row_writes(i)) atomicAdd(bad, 1ull);
}

// What rows_kernel and auto_rows_kernel (seed) write: each warp's every other op adds 1 to every word
// of a row, the same random walk on the host.
void expect_row_writes(std::vector<std::uint64_t>& expect, std::uint64_t blocks, std::uint32_t warps, std::uint32_t ops,
                       std::uint32_t seed, unsigned at_once = 1) {
    for (std::uint32_t warp = 0; warp < warps; ++warp) {
        std::uint32_t s = warp * 2246822519u + seed;
        for (std::uint32_t i = 0; i < ops * at_once; ++i) {
            std::uint64_t block;
            std::uint32_t rr, wr;
            row_op(s, blocks, block, rr, wr);
            if (i / at_once % 2 == 1)
                for (std::uint32_t w = 0; w < kRowWords; ++w) ++expect[block * kWords + wr * kRowWords + w];
        }
    }
}

struct Host {
    std::uint64_t* p = nullptr;
    explicit Host(std::uint64_t bytes) {
        ck(cudaHostAlloc(reinterpret_cast<void**>(&p), bytes, cudaHostAllocMapped), "cudaHostAlloc");
    }
    ~Host() { cudaFreeHost(p); }
};

struct Counter {
    unsigned long long* p = nullptr;
    Counter() {
        ck(cudaMalloc(&p, 8), "cudaMalloc");
        ck(cudaMemset(p, 0, 8), "cudaMemset");
    }
    ~Counter() { cudaFree(p); }
    std::uint64_t get() const {
        unsigned long long v = 0;
        ck(cudaMemcpy(&v, p, 8, cudaMemcpyDeviceToHost), "read counter");
        return v;
    }
};

// The counters' change from `before` to `after` (pager.stats() around a kernel).
Stats counters_change(const Stats& before, const Stats& after) {
    Stats d;
    for (unsigned c = 0; c < c_count_; ++c) d.value[c] = after.value[c] - before.value[c];
    return d;
}

void fill(std::uint64_t* d, std::uint64_t pages) {
    for (std::uint64_t i = 0; i < pages * kWords; ++i) d[i] = i;
}

}  // namespace

std::string device_missing() {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    if (n == 0) return "no CUDA device";
    return {};
}

// What accesses still hold once every kernel is done (none should): pins and writers in the page table, and the
// staging buffers' owners (Array::warp_acquire's staged reads).
std::uint64_t still_held(const PagerView& v) {
    std::vector<std::uint64_t> pte(v.pages);
    ck(cudaMemcpy(pte.data(), v.pte, v.pages * 8, cudaMemcpyDeviceToHost), "page table");
    std::uint64_t held = 0;
    for (std::uint64_t w : pte) held += Pte{w}.pins() != 0 || Pte{w}.writers() != 0;
    std::vector<std::uint32_t> owners(v.staging_slots);
    if (v.staging_slots != 0)
        ck(cudaMemcpy(owners.data(), v.staging_owner, v.staging_slots * 4ull, cudaMemcpyDeviceToHost), "staging");
    for (std::uint32_t o : owners) held += o != 0;
    return held;
}

MixedResult run_mixed(std::uint64_t pages, std::uint64_t frames, Admission admission, Engine engine,
                      std::uint32_t warps, std::uint32_t ops, std::uint32_t prefetch) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    Config c;
    c.bytes = pages * kWords * 8;
    c.frames = frames;
    c.admission = admission;
    c.prefetch_depth = prefetch;
    MixedResult r;
    {
        GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), engine);
        Counter bad;
        const PagerView v = pager.view();  // the kernel's, looked at again after it (another view() could relay it)
        mixed_kernel<<<(warps + 7) / 8, 256>>>(Array<std::uint64_t>(v, pager.ring()), pages, ops, bad.p);
        ck(cudaDeviceSynchronize(), "mixed kernel");
        r.held = still_held(v);
        pager.flush();
        r.bad_reads = bad.get();
        r.stats = pager.stats();
    }
    // The same random walk on the host says how often each warp wrote each page.
    std::vector<std::uint64_t> expect(pages * kWords);
    fill(expect.data(), pages);
    for (std::uint32_t warp = 0; warp < (warps + 7) / 8 * 8; ++warp) {
        std::uint32_t s = warp * 2654435761u + 1;
        for (std::uint32_t i = 0; i < ops; ++i) {
            std::uint64_t page = next(s) % pages;
            if (i % 7 < 3) page = (page + i) % pages;
            if (i % 2 == 1) ++expect[page * kWords + kPattern + warp];
        }
    }
    for (std::uint64_t i = 0; i < expect.size(); ++i) r.bad_words += expect[i] != data.p[i];
    return r;
}

MixedResult run_rows(std::uint64_t blocks, std::uint64_t frames, std::uint32_t warps, std::uint32_t ops,
                     unsigned at_once) {
    if (at_once != 4 && at_once != 16) at_once = 1;  // the kernels there are
    Host data(blocks * kWords * 8);
    fill(data.p, blocks);
    Config c;
    c.bytes = blocks * kWords * 8;
    c.page_size = kRowWords * 8;
    c.frames = frames;
    MixedResult r;
    {
        GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
        Counter bad;
        Array<std::uint64_t> a(pager.view(), pager.ring());
        if (at_once == 16)
            rows_kernel<16><<<(warps + 7) / 8, 256>>>(a, blocks, ops, bad.p);
        else if (at_once == 4)
            rows_kernel<4><<<(warps + 7) / 8, 256>>>(a, blocks, ops, bad.p);
        else
            rows_kernel<1><<<(warps + 7) / 8, 256>>>(a, blocks, ops, bad.p);
        ck(cudaDeviceSynchronize(), "rows kernel");
        pager.flush();
        r.bad_reads = bad.get();
        r.stats = pager.stats();
    }
    std::vector<std::uint64_t> expect(blocks * kWords);
    fill(expect.data(), blocks);
    expect_row_writes(expect, blocks, (warps + 7) / 8 * 8, ops, 3, at_once);
    for (std::uint64_t i = 0; i < expect.size(); ++i) r.bad_words += expect[i] != data.p[i];
    return r;
}

AutoResult run_auto(std::uint64_t blocks, std::uint64_t frames, std::uint32_t warps, std::uint32_t ops, bool gathers,
                    bool own_stream) {
    Host data(blocks * kWords * 8);
    fill(data.p, blocks);
    Config c;  // page size left out: automatic
    c.bytes = blocks * kWords * 8;
    c.frames = frames;
    AutoResult r;
    const unsigned grid = (warps + 7) / 8;
    cudaStream_t stream = nullptr;  // the legacy default stream, or one that does not synchronize with it
    if (own_stream) ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    {
        GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
        Counter bad;
        for (std::uint32_t k = 0; k < 3; ++k) {  // a fresh view for each kernel: it may change the page size
            // With a stream of its own the legacy default stream is kept busy meanwhile (50 ms): a change ordered
            // there would come after the kernel that needs it.
            if (own_stream) busy_kernel<<<1, 1>>>(50'000'000);
            Array<std::uint64_t> a(pager.view(stream), pager.ring());
            r.page_sizes.push_back(pager.page_size());
            if (gathers)
                auto_gather_kernel<<<grid, 256, 0, stream>>>(a, blocks, ops, bad.p);
            else
                auto_rows_kernel<<<grid, 256, 0, stream>>>(a, blocks, ops, 3 + 1000 * k, bad.p);
            // The stream, not the device: what the next view() changes must run on it, before the next kernel.
            ck(cudaStreamSynchronize(stream), "auto kernel");
        }
        pager.flush();
        r.bad_reads = bad.get();
        r.stats = pager.stats();
        r.relayouts = pager.relayouts();
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
    std::vector<std::uint64_t> expect(blocks * kWords);
    fill(expect.data(), blocks);
    if (!gathers)
        for (std::uint32_t k = 0; k < 3; ++k) expect_row_writes(expect, blocks, grid * 8, ops, 3 + 1000 * k);
    for (std::uint64_t i = 0; i < expect.size(); ++i) r.bad_words += expect[i] != data.p[i];
    return r;
}

FlushResult run_flush_unwaited(std::uint64_t pages) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    Config c;  // page size left out: automatic
    c.bytes = pages * kWords * 8;
    c.frames = pages;
    cudaStream_t stream = nullptr;
    ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    FlushResult r;
    {
        GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
        // 20 ms of spinning before the writes, and nothing here waits for the stream.
        auto late_writes = [&] {
            late_writes_kernel<<<static_cast<unsigned>(pages / 8), 256, 0, stream>>>(
                Array<std::uint64_t>(pager.view(stream), pager.ring()), 20'000'000);
            ck(cudaGetLastError(), "late writes kernel");
        };
        pager.flush();  // nothing to write back: loads the flush kernel now (a first launch's lazy loading waits)
        late_writes();
        pager.flush();  // must wait for it
        r.stats = pager.stats();
        late_writes();            // every write a hit now
        r.again = pager.stats();  // must wait for it
    }
    cudaStreamDestroy(stream);
    for (std::uint64_t w = 0; w < pages; ++w)
        for (std::uint64_t i = 0; i < kWords; ++i)
            r.bad_words += data.p[w * kWords + i] != (i == 0 ? ~w : w * kWords + i);
    return r;
}

// The automatic page size (page size left out) for `pages` pages at a pool of `frames`.
Config automatic(std::uint64_t pages, std::uint64_t frames) {
    Config c;
    c.bytes = pages * kWords * 8;
    c.frames = frames;
    return c;
}

// `pages` pages of numbered words (fill) read through a pager of `frames` frames (the page size left out) by the kernel
// that launch(array, counter of words read wrong) starts; returns that count.
template <class Launch>
std::uint64_t read_numbered(std::uint64_t pages, std::uint64_t frames, Launch launch) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    GpuPager pager(automatic(pages, frames), reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
    Counter bad;
    launch(Array<std::uint64_t>(pager.view(), pager.ring()), bad.p);
    ck(cudaDeviceSynchronize(), "read kernel");
    return bad.get();
}

std::uint64_t run_lone_reads(std::uint64_t pages, std::uint64_t frames, std::uint32_t threads, std::uint32_t ops) {
    return read_numbered(pages, frames, [&](Array<std::uint64_t> a, unsigned long long* bad) {
        lone_kernel<<<(threads + 127) / 128, 128>>>(a, ops, bad);
    });
}

std::uint64_t run_apart_reads(std::uint64_t pages, std::uint64_t frames, unsigned apart, std::uint32_t threads,
                              std::uint32_t ops) {
    return read_numbered(pages, frames, [&](Array<std::uint64_t> a, unsigned long long* bad) {
        apart_kernel<<<(threads + 255) / 256, 256>>>(a, apart, ops, bad);
    });
}

// The automatic page size over `pages` pages of numbered words (fill), with a pool that holds them.
struct FullPoolAuto {
    Host data;
    GpuPager pager;
    explicit FullPoolAuto(std::uint64_t pages)
        : data(pages * kWords * 8), pager(config(pages), reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads) {
        fill(data.p, pages);
    }
    static Config config(std::uint64_t pages) {
        Config c;  // page size left out
        c.bytes = pages * kWords * 8;
        c.frames = pages;
        return c;
    }
};

PartialHits run_partial_page_hits(std::uint64_t pages) {
    FullPoolAuto full(pages);
    GpuPager& pager = full.pager;
    const Array<std::uint64_t> a(pager.view(), pager.ring());  // one view: no change of page size between
    PartialHits r;
    r.chunk = pager.lone_fill_bytes();
    Counter bad;
    auto step = [&](unsigned word, bool odd_only) {
        const Stats before = pager.stats();
        page_word_kernel<<<static_cast<unsigned>((pages + 255) / 256), 256>>>(a, pages, word, odd_only, bad.p);
        ck(cudaDeviceSynchronize(), "page word kernel");
        const Stats after = pager.stats();
        r.hits.push_back(after[c_hits] - before[c_hits]);
        r.faults.push_back(after[c_faults] - before[c_faults]);
        r.bytes_in.push_back(after[c_bytes_in] - before[c_bytes_in]);
    };
    step(3, false);    // the chunk around word 3 of every page: [0, chunk)
    step(5, false);    // in that chunk: hits on partial pages
    step(375, true);   // byte 3000, odd pages: its chunk, another one (chunks are at most 2 KiB)
    step(376, false);  // byte 3008, the same chunk: odd pages hit, even pages fill it
    // A word of that chunk written in every frame: the fills of the rest around it must leave it.
    page_write_kernel<<<static_cast<unsigned>((pages * 32 + 255) / 256), 256>>>(a, pages, 377);
    ck(cudaDeviceSynchronize(), "page write kernel");
    const unsigned words = static_cast<unsigned>(r.chunk / 8);
    for (unsigned w = 0; w < kWords; w += words) step(w, false);  // every chunk: the pages whole
    Counter lost;
    page_word_kernel<<<static_cast<unsigned>((pages + 255) / 256), 256>>>(a, pages, 377, false, lost.p, true);
    ck(cudaDeviceSynchronize(), "page word kernel, written");
    r.lost_writes = lost.get();
    r.bad = bad.get();
    return r;
}

std::uint64_t run_straddling_reads(std::uint64_t pages) {
    FullPoolAuto full(pages);
    GpuPager& pager = full.pager;
    const Array<std::uint64_t> a(pager.view(), pager.ring());  // one view: the 4 KiB start throughout
    Counter bad;
    for (unsigned word : {63u, 127u, 255u}) {  // bytes 504-519, 1016-1031, 2040-2055
        warp_word_kernel<<<static_cast<unsigned>((pages + 7) / 8), 256>>>(a, 0, pages, word, 2, bad.p);
        ck(cudaDeviceSynchronize(), "warp word kernel");
    }
    return bad.get();
}

DecidedFills run_decided_fills(std::uint64_t pages) {
    FullPoolAuto full(pages);
    GpuPager& pager = full.pager;
    Counter bad;
    auto_gather_kernel<<<32, 256>>>(Array<std::uint64_t>(pager.view(), pager.ring()), pages / 2, 200, bad.p);
    ck(cudaDeviceSynchronize(), "gather kernel");
    const Array<std::uint64_t> a(pager.view(), pager.ring());  // the first choice
    DecidedFills r;
    r.page_size = pager.page_size();
    const Stats before = pager.stats();
    warp_word_kernel<<<static_cast<unsigned>((pages / 2 + 7) / 8), 256>>>(a, pages / 2, pages / 2, 5, 1, bad.p);
    ck(cudaDeviceSynchronize(), "warp word kernel");
    r.second = counters_change(before, pager.stats());
    r.bad = bad.get();
    return r;
}

SweepSteps run_bounded_sweep(std::uint64_t frames, std::uint64_t claims) {
    const std::uint64_t pages = 2 * frames;
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    Config c;
    c.bytes = pages * kWords * 8;
    c.page_size = 4096;
    c.frames = frames;
    c.admission = Admission::migrate;
    GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
    const Array<std::uint64_t> a(pager.view(), pager.ring());
    Counter bad;
    const unsigned blocks = static_cast<unsigned>((frames + 255) / 256);
    for (int pass = 0; pass < 2; ++pass) {  // fills, then hits: every frame referenced
        page_word_kernel<<<blocks, 256>>>(a, frames, 7, false, bad.p);
        ck(cudaDeviceSynchronize(), "page word kernel");
    }
    SweepSteps r;
    for (std::uint64_t k = 0; k <= claims; ++k) {
        const Stats before = pager.stats();
        one_word_kernel<<<1, 1>>>(a, (frames + k) * kWords + 7, bad.p);
        ck(cudaDeviceSynchronize(), "one word kernel");
        r.reads.push_back(counters_change(before, pager.stats()));
    }
    r.bad = bad.get();
    return r;
}

std::uint64_t run_element_stream(std::uint64_t pages, std::uint64_t frames, std::uint64_t threads, unsigned run,
                                 bool divergent, int kernels, bool pairs, KernelSeen* seen, bool busy) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    // Half the reads from 64 hot pages, half anywhere; a run's last element stays in the array.
    std::vector<std::uint32_t> idx(threads * 16);
    std::uint32_t s = 12345;
    for (auto& i : idx) {
        const std::uint64_t page = next(s) % 2 == 0 ? next(s) % 64 : next(s) % pages;
        i = static_cast<std::uint32_t>(page * kWords + next(s) % (kWords - 16));
    }
    std::vector<std::uint64_t> want(threads, 0), got(threads);
    for (std::uint64_t t = 0; t < threads; ++t)
        for (std::uint64_t k = 0; k < 16; ++k) {
            if (pairs) {  // pair j: words 2j and 2j + 1
                const std::uint64_t j = idx[t * 16 + k - k % run] / 2 + k % run;
                want[t] += 4 * j + 1;
                continue;
            }
            const std::uint64_t i = divergent || run == 0 ? idx[t * 16 + k] : idx[t * 16 + k - k % run] + k % run;
            if (!divergent || (i & 1)) want[t] += i;
        }
    std::uint32_t* didx = nullptr;
    std::uint64_t* sums = nullptr;
    ck(cudaMalloc(&didx, idx.size() * 4), "cudaMalloc");
    ck(cudaMalloc(&sums, threads * 8), "cudaMalloc");
    ck(cudaMemcpy(didx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice), "copy indices");
    Config c;
    c.bytes = pages * kWords * 8;
    c.frames = frames;
    GpuPager pager(c, reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
    std::uint64_t bad = 0;
    const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
    for (int k = 0; k < kernels; ++k) {
        ck(cudaMemset(sums, 0, threads * 8), "cudaMemset");
        if (busy) busy_kernel<<<1, 1>>>(5'000'000);
        const PagerView v = pager.view();  // its table stays until the next view()
        Array<std::uint64_t> a(v, pager.ring());
        if (pairs)
            pair_stream_kernel<<<blocks, 256>>>(a, didx, threads, run, sums);
        else if (divergent)
            stream_divergent_kernel<<<blocks, 256>>>(a, didx, threads, sums);
        else
            stream_kernel<<<blocks, 256>>>(a, didx, threads, run, sums);
        ck(cudaDeviceSynchronize(), "element stream kernel");
        ck(cudaMemcpy(got.data(), sums, threads * 8, cudaMemcpyDeviceToHost), "read sums");
        for (std::uint64_t t = 0; t < threads; ++t) bad += got[t] != want[t];
        if (seen != nullptr) {
            seen->page_size.push_back(pager.page_size());
            seen->stats.push_back(pager.stats());
            std::vector<std::uint32_t> owner(v.frames_n);
            ck(cudaMemcpy(owner.data(), v.frame_owner, owner.size() * 4, cudaMemcpyDeviceToHost), "read frame owners");
            seen->shared_frames.push_back(
                static_cast<std::uint64_t>(std::count(owner.begin(), owner.end(), shared_frame)));
        }
    }
    cudaFree(didx);
    cudaFree(sums);
    return bad;
}

WritesIntoShared run_writes_into_shared(std::uint64_t pages, std::uint64_t frames) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    GpuPager pager(automatic(pages, frames), reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
    WritesIntoShared r;
    Counter first, after;
    const std::uint64_t threads = 32 * pages;  // two warps an even page: every row written
    lone_and_row_writes_kernel<<<static_cast<unsigned>(threads / 256), 256>>>(
        Array<std::uint64_t>(pager.view(), pager.ring()), pages, first.p);
    ck(cudaDeviceSynchronize(), "lone reads and row writes");
    r.first_kernel = pager.stats();
    r.bad_first = first.get();
    const std::uint64_t n = pages * kWords;
    check_written_kernel<<<static_cast<unsigned>(n / 256), 256>>>(Array<std::uint64_t>(pager.view(), pager.ring()), n,
                                                                  after.p);
    ck(cudaDeviceSynchronize(), "read back");
    r.page_size = pager.page_size();
    r.bad_read = after.get();
    pager.flush();
    for (std::uint64_t i = 0; i < n; ++i) r.bad_host += data.p[i] != after_row_writes(i);
    return r;
}

RowsAcrossFrames run_rows_across_frames(std::uint64_t pages, std::uint64_t frames) {
    Host data(pages * kWords * 8);
    fill(data.p, pages);
    GpuPager pager(automatic(pages, frames), reinterpret_cast<std::byte*>(data.p), Engine::gpu_threads);
    RowsAcrossFrames r;
    Counter bad, arrived;  // arrived: the grid barrier's blocks
    int per_sm = 0, sms = 0;
    ck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lone_reads_then_rows_kernel, 256, 0), "occupancy");
    ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    const PagerView v = pager.view();
    lone_reads_then_rows_kernel<<<static_cast<unsigned>(per_sm * sms), 256>>>(Array<std::uint64_t>(v, pager.ring()),
                                                                              pages, arrived.p, bad.p);
    ck(cudaDeviceSynchronize(), "lone reads then rows");
    r.bad = bad.get();
    r.stats = pager.stats();
    if (v.second_frames != nullptr) {
        std::vector<std::uint64_t> second(pages);
        ck(cudaMemcpy(second.data(), v.second_frames, pages * 8, cudaMemcpyDeviceToHost), "read second frames");
        for (std::uint64_t w : second) r.second_frames += w != 0 && w < placing_second;
    }
    return r;
}

}  // namespace bardrive::umem::gputest
