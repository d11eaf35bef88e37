// Device side of umem: the accessor kernels use (Array<T>), the warp as a protocol group, and the
// two migration engines: GPU threads copying from pinned mapped host memory with 16-byte loads,
// or a copy-engine worker (a host thread serving a request ring in pinned memory with
// cudaMemcpyAsync). The engine is a run-time choice: the ring pointer is null for GPU threads.
// Include from .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "copy_ring.hpp"
#include "pager.hpp"

namespace bardrive::umem {

// A converged, full warp: lane 0 runs the protocol and broadcasts its decisions.
struct WarpGroup {
    unsigned lane;
    unsigned shard_;
    __device__ static WarpGroup self() {
        unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
        return {threadIdx.x & 31u, warp};
    }
    __device__ bool leader() const { return lane == 0; }
    __device__ void sync() const { __syncwarp(); }
    __device__ std::uint32_t broadcast(std::uint32_t x) const { return __shfl_sync(0xffffffffu, x, 0); }
    __device__ unsigned shard() const { return shard_; }
    __device__ unsigned size() const { return 32; }
    static constexpr unsigned loads_in_flight = 8;  // a lane's 16-byte loads per round of a fill
};

// A warp whose fills keep two loads in flight a lane: warp_acquire_each's misses, inlined into kernels that hold
// many rows' pointers. With eight, umem-sparse-bench's lane-rows kernel spilled 112 bytes at 128 registers and its
// resident hits took 0.13-0.14 ms; with two it spills none and takes 0.12-0.13 (H100, 256-byte rows of 8 GiB, GPU
// memory read the same way 0.08), and its first batches were not slower (bench/results/umem-h100-2026-11-26d.md).
struct SlimWarpGroup : WarpGroup {
    __device__ static SlimWarpGroup self() { return {WarpGroup::self()}; }
    static constexpr unsigned loads_in_flight = 2;
};

// Threads of a warp as a group that copies together (get()'s misses: the whole warp, or one thread); lane is the
// rank in the mask.
struct MaskGroup {
    unsigned mask;
    unsigned lane;
    unsigned size_;
    __device__ static MaskGroup of(unsigned mask) {
        unsigned me = threadIdx.x & 31u;
        return {mask, static_cast<unsigned>(__popc(mask & ((1u << me) - 1u))), static_cast<unsigned>(__popc(mask))};
    }
    __device__ bool leader() const { return lane == 0; }
    __device__ void sync() const { __syncwarp(mask); }
    __device__ unsigned size() const { return size_; }
    __device__ unsigned shard() const { return WarpGroup::self().shard(); }
    // A quarter of a warp's: get()'s fills are inlined at every call of a kernel, where the loads in flight
    // raise the register pressure of the hits around them. Eight held umem-sparse-bench's 16-get() kernel at
    // 255 registers with spills (H100: resident get() 2.56 ms against 2.42 with four). With partial pages'
    // code four made the 128-register kernels spill 1-2 KB and resident get() 2.29-2.31 ms, two 2.09-2.10
    // (GPU memory 1.42), and get()'s first kernels were not slower (1 GiB elements 21.24 against 21.34 ms,
    // runs of 4 at a 25% pool 5.74 against 6.01; bench/results/umem-h100-2026-11-26b.md). warp_acquire's fills
    // keep eight: with four, gather reuse fell 5-7% (-h100-2026-11-26.md).
    static constexpr unsigned loads_in_flight = 2;
};

// Array::warp_acquire's reads in place of this many bytes or more are staged (Array::stage): 256-byte rows, which 32
// lanes read in one load each, are not.
inline constexpr std::uint64_t staging_min_bytes = 1024;

// Frames are reused for other pages within one kernel, so data is read at L2 (ld.global.cg):
// an SM's L1 could otherwise still hold the frame's previous page.
__device__ inline uint4 load16(const std::byte* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }

// An element read the same way (4, 8 or 16 bytes).
template <class T>
__device__ inline T load_cg(const T* p) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "umem: elements of 4, 8 or 16 bytes");
    T x;
    if constexpr (sizeof(T) == 4) {
        unsigned v = __ldcg(reinterpret_cast<const unsigned*>(p));
        memcpy(&x, &v, 4);
    } else if constexpr (sizeof(T) == 8) {
        unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
        memcpy(&x, &v, 8);
    } else {
        uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
        memcpy(&x, &v, 16);
    }
    return x;
}

// For DeviceMover's copies: the 16 bytes at offset i where i's block (of 1 << block_shift bytes) is in `blocks`.
__device__ inline auto in_blocks(std::uint32_t blocks, std::uint32_t block_shift) {
    return [=](std::uint32_t i) { return ((blocks >> (i >> block_shift)) & 1u) != 0; };
}

struct DeviceMover {
    CopyRingView ring;  // slots == nullptr: GPU threads copy

    template <class G>
    __device__ void to_frame(G& g, std::byte* dst, const std::byte* src, std::uint32_t n) const {
        if (ring.slots != nullptr) return post(g, dst, src, n);
        copy<G::loads_in_flight>(g, dst, src, n, [](std::uint32_t) { return true; });
    }
    // The blocks of a partial page's rest: to_frame's loads in flight, each 16 bytes loaded and stored where their
    // block is in `blocks`, so that the blocks in the frame between them stay as they are.
    template <class G>
    __device__ void to_frame_blocks(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                                    std::uint32_t block_shift) const {
        if (ring.slots != nullptr) return post_blocks(g, dst, src, n, blocks, block_shift);
        copy<G::loads_in_flight>(g, dst, src, n, in_blocks(blocks, block_shift));
    }
    template <class G>
    __device__ void to_host(G& g, std::byte* dst, const std::byte* src, std::uint32_t n) const {
        if (ring.slots != nullptr) return post(g, dst, src, n);
        copy<G::loads_in_flight>(g, dst, src, n, [](std::uint32_t) { return true; });
        __threadfence_system();  // the host copy must be complete before the page turns host again
    }
    // A partial page's blocks: one 16-byte load a lane at a time. Slow and light: with runs of to_host's
    // eight loads in flight this rare path, inlined into every access, made kernels spill where their hits
    // run (H100: get() hits 9-17% slower).
    template <class G>
    __device__ void to_host_blocks(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                                   std::uint32_t block_shift) const {
        if (ring.slots != nullptr) return post_blocks(g, dst, src, n, blocks, block_shift);
        copy<1>(g, dst, src, n, in_blocks(blocks, block_shift));
        __threadfence_system();
    }

private:
    // 16-byte loads, `batch` a lane before the stores: with eight, a warp copies a 4 KiB page in one round.
    // Only the 16 bytes at offsets that `want` takes.
    template <unsigned batch, class G, class Want>
    __device__ static void copy(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, Want want) {
        const std::uint32_t stride = g.size() * 16;
        for (std::uint32_t base = g.lane * 16; base < n; base += stride * batch) {
            uint4 x[batch];
#pragma unroll
            for (unsigned k = 0; k < batch; ++k)
                if (base + k * stride < n && want(base + k * stride)) x[k] = load16(src + base + k * stride);
#pragma unroll
            for (unsigned k = 0; k < batch; ++k)
                if (base + k * stride < n && want(base + k * stride))
                    __stcg(reinterpret_cast<uint4*>(dst + base + k * stride), x[k]);
        }
    }

    template <class G>
    __device__ void post_blocks(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                                std::uint32_t block_shift) const {
        for_block_runs(blocks, block_shift, n,
                       [&](std::uint32_t off, std::uint32_t len) { post(g, dst + off, src + off, len); });
    }
    template <class G>
    __device__ void post(G& g, std::byte* dst, const std::byte* src, std::uint32_t n) const {
        if (g.leader()) ring_copy(ring, dst, src, n);
        g.sync();
    }
};

template <class T>
struct PageRef {
    T* data;              // the page's elements (in a frame or in host memory)
    std::uint32_t count;  // elements in the page
    std::uint64_t page;
    bool write;  // taken for writing
};

// The accessor: a typed view of a paged array. Fast path of an access is one PTE atomic (the
// lookup that also pins); a miss runs the protocol in pager.hpp with this run's engine.
template <class T>
class Array {
public:
    Array(const PagerView& v, const CopyRingView& ring) : view_(v), mover_{ring} {}
    // The same pager's array read as elements of another size (4, 8 or 16 bytes): pairs of words, say.
    template <class U>
    __host__ __device__ explicit Array(const Array<U>& o) : view_(o.view_), mover_(o.mover_) {}

    __host__ __device__ std::uint64_t size() const { return view_.bytes / sizeof(T); }
    __host__ __device__ std::uint64_t per_page() const { return view_.page_size() / sizeof(T); }
    // Shifts, not divisions: a 64-bit division costs a kernel dozens of instructions per access.
    __host__ __device__ std::uint64_t page_of(std::uint64_t i) const { return (i * sizeof(T)) >> view_.page_shift; }

    // Warp-collective: all 32 lanes, converged, same page. The data stays where r.data points
    // until warp_release(r); every lane may read (and, with write, write) its elements.
    // The whole page is noted as read (automatic page size); the overload below says what is.
    __device__ PageRef<T> warp_acquire(std::uint64_t page, bool write = false) const {
        return warp_acquire(page, write, page * per_page(), per_page());
    }
    // Same, noting that the warp reads elements [first, first + n) of the page: with the page size
    // left out, this is what the pager learns the granularity from.
    __device__ PageRef<T> warp_acquire(std::uint64_t page, bool write, std::uint64_t first, std::uint64_t n) const {
        const WarpGroup g = WarpGroup::self();
        Looked looked{};
        std::byte* p = write ? nullptr : read_hit(g, page, looked);
        if (p == nullptr) {
            p = acquire_out_of_line(view_.shared, view_.profile_decided, mover_, page, write, first, n, looked);
            if (!write && n * sizeof(T) >= staging_min_bytes && p == view_.host_page(page))
                p = stage(view_.shared, mover_, page, first, n, p);
        }
        if (g.leader()) profile_note(view_, first * sizeof(T), n * sizeof(T));  // after the look (get() says why)
        return {reinterpret_cast<T*>(p), view_.page_bytes(page) / static_cast<std::uint32_t>(sizeof(T)), page, write};
    }
    // A write access's stores are fenced before the unpin. Read-only accesses skip the fence:
    // __syncwarp orders every lane's loads before the leader's release of the pin, and a
    // device-wide fence would also wait for the counter atomics.
    __device__ void warp_release(const PageRef<T>& r) const {
        WarpGroup g = WarpGroup::self();
        if (r.write) __threadfence();
        const std::byte* d = reinterpret_cast<const std::byte*>(r.data);
        if (view_.staging != nullptr && d >= view_.staging &&
            d < view_.staging +
                    (std::uint64_t{view_.staging_slots} << staging_shift)) {  // staged: the buffer is all it holds
            g.sync();
            if (g.leader()) atom::store(&view_.staging_owner[(d - view_.staging) >> staging_shift], 0u);
            return;
        }
        release(view_, r.page, g, d, r.write);
    }

    // Warp-collective reads, every lane its own page: lanes [0, lanes) each name one, of which the warp reads
    // elements [first, first + n) (a page may come more than once); the other lanes name none. Returns this lane's
    // page; any lane may read any lane's page through its data (shuffled). All pages' page-table words are looked
    // up at once, one a lane (try_hit), where one warp_acquire after another waits for each in turn; the pages that
    // were not hits are then acquired one by one, holding the hits. Release with warp_release_each(r, lanes).
    // Reads only: a write in host memory may wait for a free writer slot (Pte::max_writers), and warps that held
    // some while waiting for others could wait for each other for ever; write with warp_acquire, a page at a time.
    __device__ PageRef<T> warp_acquire_each(std::uint64_t page, std::uint64_t first, std::uint64_t n,
                                            unsigned lanes = 32) const {
        constexpr unsigned full = 0xffffffffu;
        const unsigned lane = threadIdx.x & 31u, named = lanes >= 32 ? full : (1u << lanes) - 1;
        const bool mine = lane < lanes;
        std::uint32_t frame = 0;
        bool hit = false;
        if (mine) {
            hit = try_hit(view_, page, frame);
            profile_note(view_, first * sizeof(T), n * sizeof(T));  // after the look (get() says why)
        }
        const unsigned hits = __ballot_sync(full, hit);
        if (lane == 0 && hits != 0)
            view_.count(WarpGroup::self().shard(), c_hits, static_cast<std::uint64_t>(__popc(hits)));
        std::byte* data = hit ? view_.frame_data(frame) : nullptr;
        for (unsigned misses = named & ~hits; misses != 0; misses &= misses - 1) {
            const int k = __ffs(static_cast<int>(misses)) - 1;
            std::byte* d = acquire_noted<SlimWarpGroup>(view_, mover_, __shfl_sync(full, page, k), false,
                                                        __shfl_sync(full, first, k), __shfl_sync(full, n, k));
            if (lane == static_cast<unsigned>(k)) data = d;
        }
        return {reinterpret_cast<T*>(data), mine ? view_.page_bytes(page) / static_cast<std::uint32_t>(sizeof(T)) : 0,
                page, false};
    }
    // Ends warp_acquire_each(.., lanes): every lane's reads of every page happen before each lane drops what its
    // page holds.
    __device__ void warp_release_each(const PageRef<T>& r, unsigned lanes = 32) const {
        __syncwarp();
        if ((threadIdx.x & 31u) < lanes) end_access(view_, r.page, reinterpret_cast<const std::byte*>(r.data), false);
    }

    // One thread, any control flow: reads element i. With at least as many frames as pages a hit is
    // one load and the element's (find_resident), and one warp-aggregated hit count. Otherwise, where the
    // whole warp got here together, its threads each run the protocol for their own page and copy together
    // every page one of them must fill, the threads whose element was resident too (alone, a thread needs 32
    // round trips for 4 KiB; H200, 1 GiB of u64 at a full pool: with only the missing threads copying, 5.7 of
    // them a fill on average, the first kernel's 4 KiB fills ran at 14 GB/s, 77 against 21 ms). Where only part
    // of the warp got here, each missing thread runs it alone (miss() says why).
    __device__ T get(std::uint64_t i) const {
        assert(i < size() && "umem: element index beyond the array");
        constexpr unsigned full = 0xffffffffu;
        const bool warp = __activemask() == full;
        const std::uint64_t page = page_of(i), at = i & (per_page() - 1);
        const unsigned shard = WarpGroup::self().shard();
        const std::byte* resident = find_resident(view_, page, at * sizeof(T), sizeof(T));
        T x{};
        if (resident != nullptr) x = load_cg(reinterpret_cast<const T*>(resident) + at);
        // Noted after the loads: before them its branch held the page's bit load back (H200, Zipf u64 over 4 GiB
        // read again at a full pool, automatic page size: 0.97-1.03 ms, now 0.85-0.86; p4096 0.80-0.83).
        profile_note(view_, i * sizeof(T), sizeof(T));
        unsigned mask;
        if (warp) {
            const unsigned hits = __ballot_sync(full, resident != nullptr);
            if (hits != 0 && (threadIdx.x & 31u) == static_cast<unsigned>(__ffs(static_cast<int>(hits)) - 1))
                view_.count(shard, c_hits, static_cast<std::uint64_t>(__popc(hits)));
            if (hits == full) return x;
            mask = full;
        } else {
            if (resident != nullptr) {
                unsigned together = __activemask();
                if ((threadIdx.x & 31) == static_cast<unsigned>(__ffs(static_cast<int>(together)) - 1))
                    view_.count(shard, c_hits, static_cast<std::uint64_t>(__popc(together)));
                return x;
            }
            mask = 1u << (threadIdx.x & 31u);
        }
        return miss(mask, page, at, shard, resident != nullptr, x);
    }

    // N elements at once, x[k] = element i[k], each thread alone as get() (every thread of a warp passing its
    // own N). With the whole warp here and a pool that holds the array, the N page-table words and elements are
    // loaded before anything waits on them, and one vote says whether all were resident; otherwise each is read
    // through get(). One get() after another waits for each page-table word and element in turn (the miss
    // branch between them keeps them apart): H200, resident Zipf u64 over 8 GiB, four at a time 2.09-2.10 ms,
    // one by one 2.37, GPU memory 1.36-1.37 (bench/results/umem-h200-2026-11-26b.md).
    template <unsigned N>
    __device__ void get(const std::uint64_t (&i)[N], T (&x)[N]) const {
        if (__activemask() == 0xffffffffu && view_.never_evicts()) {
            const std::byte* r[N];
#pragma unroll
            for (unsigned k = 0; k < N; ++k) {
                assert(i[k] < size() && "umem: element index beyond the array");
                r[k] = find_resident(view_, page_of(i[k]), (i[k] & (per_page() - 1)) * sizeof(T), sizeof(T));
            }
            bool all = true;
#pragma unroll
            for (unsigned k = 0; k < N; ++k) {
                if (r[k] != nullptr) x[k] = load_cg(reinterpret_cast<const T*>(r[k]) + (i[k] & (per_page() - 1)));
                all = all && r[k] != nullptr;
            }
#pragma unroll
            for (unsigned k = 0; k < N; ++k) profile_note(view_, i[k] * sizeof(T), sizeof(T));
            if (__all_sync(0xffffffffu, all)) {
                if ((threadIdx.x & 31u) == 0) view_.count(WarpGroup::self().shard(), c_hits, std::uint64_t{32} * N);
                return;
            }
        }
#pragma unroll
        for (unsigned k = 0; k < N; ++k) x[k] = get(i[k]);
    }

private:
    // A read that hits, for the whole warp, without the protocol: where nothing is ever evicted every lane
    // loads the page's bit (one request); otherwise the leader pins the page and tells the others whether it is
    // resident whole. Null if not, with what the leader's look found (`looked`: the bit clear, or its pin held).
    __device__ std::byte* read_hit(const WarpGroup& g, std::uint64_t page, Looked& looked) const {
        constexpr unsigned full = 0xffffffffu;
        if (view_.never_evicts()) {
            looked.kind = Looked::bit_clear;
            if (!__all_sync(full, whole_bit(view_, page))) return nullptr;
            if (g.leader()) view_.count(g.shard(), c_hits);
            return view_.frame_data(static_cast<std::uint32_t>(page));
        }
        bool hit = false;
        if (g.leader()) {
            hit = pinned_hit(view_, page, looked);
            if (hit) view_.count(g.shard(), c_hits);
        }
        if (!__shfl_sync(full, hit, 0)) return nullptr;
        return view_.frame_data(__shfl_sync(full, looked.word.frame(), 0));
    }
    // A warp's read in place of staging_min_bytes or more, copied into a buffer of its own first (a slot of
    // view_.staging, taken with one CAS: where another warp has it, the read stays in place) with a fill's loads in
    // flight, the page's pin dropped once the bytes are there. In place, a kernel that loads an element and then acts
    // on it (BFS: an atomic on the level array) waits a PCIe round trip for every 32 lanes' elements (umem/README.md,
    // "Staged reads"). Returns the buffer, laid out as the page; warp_release gives it back. Static, with the view all
    // threads share, as acquire_out_of_line is.
    __device__ __noinline__ static std::byte* stage(const PagerView* v, DeviceMover m, std::uint64_t page,
                                                    std::uint64_t first, std::uint64_t n, std::byte* host) {
        const PagerView view = *v;
        if (view.staging == nullptr || view.page_shift > staging_shift || m.ring.slots != nullptr) return host;
        WarpGroup g = WarpGroup::self();
        const std::uint32_t slot = g.shard() % view.staging_slots;
        std::uint32_t got = 0;
        if (g.leader()) {
            std::uint32_t expected = 0;
            got = atom::cas(&view.staging_owner[slot], expected, 1u) ? 1u : 0u;
        }
        if (__shfl_sync(0xffffffffu, got, 0) == 0) return host;
        std::byte* buffer = view.staging + (std::uint64_t{slot} << staging_shift);
        const std::uint64_t base = page << view.page_shift, begin = (first * sizeof(T) - base) & ~std::uint64_t{15};
        const std::uint64_t end = ((first + n) * sizeof(T) - base + 15) & ~std::uint64_t{15};
        const std::uint64_t stop = end < view.page_bytes(page) ? end : view.page_bytes(page);
        m.to_frame(g, buffer + begin, host + begin, static_cast<std::uint32_t>(stop - begin));
        g.sync();
        if (g.leader()) end_access(view, page, host, false);  // the read's pin: its bytes are in the buffer
        return buffer;
    }

    // The protocol, out of line: the kernel's hits (read_hit) then run without its registers. It reads the view
    // that all threads share (PagerView::shared), not this one, whose address would make every thread copy it; with
    // this launch's profile_decided, which that one is not rewritten for.
    __device__ __noinline__ static std::byte* acquire_out_of_line(const PagerView* v, std::uint32_t decided,
                                                                  DeviceMover m, std::uint64_t page, bool write,
                                                                  std::uint64_t first, std::uint64_t n, Looked looked) {
        assert(v != nullptr && "umem: Array needs a GpuPager's view (PagerView::shared)");
        PagerView view = *v;  // loaded once, not again after each of the protocol's atomics
        view.profile_decided = decided;
        return acquire_noted(view, m, page, write, first, n, looked);
    }

    // The protocol (pager.hpp's acquire) for warp_acquire and warp_acquire_each's misses, with the warp as G, and
    // the write's blocks marked.
    template <class G = WarpGroup>
    __device__ static std::byte* acquire_noted(const PagerView& v, DeviceMover m, std::uint64_t page, bool write,
                                               std::uint64_t first, std::uint64_t n, Looked looked = {}) {
        G g = G::self();
        const std::uint64_t offset = first * sizeof(T) - (page << v.page_shift);
        std::byte* p = acquire(v, page, write, g, m, n * sizeof(T), offset, looked);
        if (write && g.leader() && p != v.host_page(page)) note_write(v, page, offset, n * sizeof(T));
        return p;
    }

    // get()'s misses: the threads of `mask` run the protocol for their own pages until each has its element
    // (`done`: had it already), and copy every page one of them fills together. `mask` is the whole warp (it got
    // here together, checked before anything else) or one thread. Not the threads that reach the miss together
    // (__activemask()): several such groups of one warp, each in this loop with its own mask, read garbage from
    // their shuffles (frame numbers, pages: copies to and from addresses terabytes off), with masks taken once
    // and kept in memory too (H200, the GPU test "get() from lanes of a warp that reach it apart"; before it,
    // element kernels whose code shape split warps: bench/results/umem-h200-2026-11-29b.md).
    // Its ballots keep mask's bits only: a ballot sets the bit of every lane that runs it, and other threads of the
    // warp can be running this loop converged with these.
    __device__ __forceinline__ T miss(unsigned mask, std::uint64_t page, std::uint64_t at, unsigned shard, bool done,
                                      T x) const {
        const unsigned me = threadIdx.x & 31u;
        MaskGroup all = MaskGroup::of(mask);
        DeviceMover m = mover_;
        bool waited = false;
        while ((__ballot_sync(mask, !done) & mask) != 0) {
            Step s{Step::wait, 0, no_page, 0};
            if (!done) s = begin_access(view_, page, false, shard, sizeof(T), at * sizeof(T), true);
            if (!done && (s.kind == Step::hit || s.kind == Step::host)) {
                const std::byte* p = s.kind == Step::hit ? view_.frame_data(s.frame) : view_.host_page(page);
                x = load_cg(reinterpret_cast<const T*>(p) + at);
                end_access(view_, page, p, false);
                done = true;
            }
            // Fills and a partial page's blocks (Step::sector: looked up again in the next round).
            for (unsigned fillers =
                     __ballot_sync(mask, !done && (s.kind == Step::fill || s.kind == Step::sector)) & mask;
                 fillers != 0; fillers &= fillers - 1) {
                const int f = __ffs(static_cast<int>(fillers)) - 1;
                const bool mine = me == static_cast<unsigned>(f);
                const Step fs{static_cast<Step::Kind>(__shfl_sync(mask, s.kind, f)), __shfl_sync(mask, s.frame, f),
                              __shfl_sync(mask, s.victim, f), __shfl_sync(mask, s.victim_blocks, f),
                              __shfl_sync(mask, s.blocks, f)};
                const bool served = mine && sector_serves(view_, fs, page, at * sizeof(T), sizeof(T), false);
                const std::byte* frame =
                    fill_frame(view_, __shfl_sync(mask, page, f), fs, false, true, mine, all, m, served);
                if (mine && (fs.kind == Step::fill || served)) {
                    x = load_cg(reinterpret_cast<const T*>(frame) + at);
                    end_access(view_, page, frame, false);
                    done = true;
                }
            }
            if (!done && s.kind == Step::wait) {
                if (!waited) view_.count(shard, c_waits);
                waited = true;
                atom::backoff();
            }
        }
        return x;
    }

    template <class U>
    friend class Array;
    PagerView view_;
    DeviceMover mover_;
};

}  // namespace bardrive::umem
