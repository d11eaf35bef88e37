#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "umem/gpu.cuh"
#include "umem/gpu_pager.hpp"
#include "umem/hd.hpp"

namespace bardrive::umem {

namespace {

constexpr std::uint64_t ring_slots = 4096;  // more than the warps that can wait at once on an H100
constexpr unsigned ring_batch = 256;        // copies issued per stream synchronisation

void cuda_check(cudaError_t rc, const char* op, const std::string& object, const char* hint = "") {
    if (rc != cudaSuccess) throw Error(op, object, cudaGetErrorString(rc), hint);
}

// `ordered`: from the stream-ordered allocator, on `stream`, for the page tables that a change of page size frees
// and allocates (cudaFreeAsync does not wait for the device as cudaFree does).
template <class T>
T* device_alloc(std::uint64_t count, const char* what, bool ordered = false, cudaStream_t stream = 0) {
    void* p = nullptr;
    cuda_check(ordered ? cudaMallocAsync(&p, count * sizeof(T), stream) : cudaMalloc(&p, count * sizeof(T)),
               ordered ? "umem: cudaMallocAsync" : "umem: cudaMalloc",
               log::concat(what, ", ", count * sizeof(T), " bytes"), "make the frame pool smaller (Config::frames)");
    return static_cast<T*>(p);
}

__global__ void flush_kernel(PagerView v) {
    WarpGroup g = WarpGroup::self();
    std::uint64_t warps = (static_cast<std::uint64_t>(gridDim.x) * blockDim.x) >> 5;
    for (std::uint64_t page = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; page < v.pages; page += warps) {
        Pte e{atom::load(&v.pte[page])};
        if (e.state() != PageState::resident || !e.is(Pte::dirty)) continue;
        DeviceMover{}.to_host_blocks(g, v.host_page(page), v.frame_data(e.frame()), v.page_bytes(page),
                                     data_blocks(v, page, e), v.block_shift());
        g.sync();
        if (g.leader()) {
            if (v.dirty_blocks != nullptr) atom::store(&v.dirty_blocks[page], 0u);
            atom::fetch_and(&v.pte[page], ~Pte::dirty);
            v.count(g.shard(), c_writebacks);
            v.count(g.shard(), c_bytes_out, v.page_bytes(page));
        }
    }
}

// A table as relay_page and a first layout start from: every page in host memory, no page's bit, no frame's
// owner. Its page table and bits are one run (GpuPager::layout), the owners after them. Streaming stores
// (evict first): a memset of the 48 MiB table of 1 GiB of 256-byte pages, made while the first kernel ran,
// pushed the rows it read out of L2, and the next batch of lookups took 0.44-0.45 ms against 0.37-0.39 with
// these stores and p256's 0.32-0.33 (H200).
__global__ void clear_kernel(PagerView t) {
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x,
                        first = blockIdx.x * blockDim.x + threadIdx.x, words = t.pages + whole_words(t.pages);
    for (std::uint64_t i = first; i < words; i += threads)
        __stcs(reinterpret_cast<unsigned long long*>(t.pte + i), 0ull);
    for (std::uint64_t i = first; i < t.frames_n; i += threads) __stcs(t.frame_owner + i, no_page);
}

// Where the table's parts lie in its one allocation at `base`, for t.pages pages and t.frames_n frames: the page
// table, the pages' bits (used where nothing is ever evicted), the frame owners (GpuPager::table_bytes).
void place_table(PagerView& t, std::uint64_t* base) {
    t.pte = base;
    t.whole = t.never_evicts() ? base + t.pages : nullptr;
    t.frame_owner = reinterpret_cast<std::uint32_t*>(base + t.pages + whole_words(t.pages));
}

cudaError_t clear_table(const PagerView& t, cudaStream_t s) {
    clear_kernel<<<1024, 256, 0, s>>>(t);
    return cudaGetLastError();
}

__global__ void relay_kernel(PagerView from, PagerView to) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // no thread of the relay reads them
        relay_ctl(from, to);
        *const_cast<PagerView*>(to.shared) = to;  // as publish() would, one launch fewer
    }
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    if (to.profile != nullptr)  // the profile starts again at the new size (GpuPager::view)
        for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < profile_words; i += threads)
            to.profile[i] = 0;
    // relay_page for the sub-pages of pages with work (relay_has_work). A warp reads 32 pages' words at once, then its
    // lanes take the sub-pages of those with work, 32 at a time. A thread a sub-page read each page's word 2^d times:
    // 4M threads for 1 GiB of 256-byte pages, where a change to 256 B after a batch of lookups left 31K pages resident.
    const WarpGroup g = WarpGroup::self();
    const std::uint32_t d = from.page_shift - to.page_shift;
    for (std::uint64_t base = (blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < from.pages; base += threads) {
        const std::uint64_t p = base + g.lane;
        const unsigned pages = __ballot_sync(0xffffffffu, p < from.pages && relay_has_work(from, p)),
                       n = static_cast<unsigned>(__popc(pages)) << d;
        for (unsigned i = g.lane; i < n; i += 32) {
            const std::uint64_t q =
                ((base + __fns(pages, 0, static_cast<int>(i >> d) + 1)) << d) | (i & ((1u << d) - 1));
            if (q < to.pages) relay_page(from, to, q);
        }
    }
}

// fill_displaced over every page of `from`, a warp a page: lane k places block k (displaced_slot), then the warp
// copies the blocks placed four at a time, eight lanes a block, every load in flight before the stores. A thread a
// page, each copying its blocks 16 bytes at a time, made 16- and 32-byte requests over PCIe: 300K blocks took about
// 4.5 ms (H200, Zipf u64 over 1 GiB at a 25% pool; bench/results/umem-h200-2026-11-28c.md).
__global__ void fill_displaced_kernel(PagerView from, PagerView to) {
    const WarpGroup g = WarpGroup::self();
    const std::uint64_t warps = (static_cast<std::uint64_t>(gridDim.x) * blockDim.x) >> 5;
    const std::uint32_t d = from.page_shift - to.page_shift;
    for (std::uint64_t page = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; page < from.pages; page += warps) {
        std::uint32_t frame = 0;
        const std::uint32_t want = displaced_want(from, page, frame);
        if (want == 0) continue;
        // Warps of pages that share the frame race for its free sub-frames: a block that lost looks again.
        std::uint32_t placed = 0, s = 32;
        for (int attempt = 0; attempt < 4 && (want & ~placed) != 0; ++attempt) {
            const std::uint32_t left = want & ~placed,
                                free = __ballot_sync(0xffffffffu,
                                                     atom::peek(&to.frame_owner[(frame << d) | g.lane]) == free_frame);
            if (free == 0) break;
            if ((left >> g.lane) & 1u) s = displaced_slot(left, free, g.lane);
            placed |= __ballot_sync(0xffffffffu, ((left >> g.lane) & 1u) && s != 32 &&
                                                     claim_displaced(to, (frame << d) | s, (page << d) | g.lane));
        }
        const std::uint32_t n = popcount32(placed), part = (g.lane & 7u) * 16;
        if (from.page_bytes(page) != from.page_size()) {  // the array's last page, short: a lane its own block
            if ((placed >> g.lane) & 1u)
                copy_words(to.frame_data((frame << d) | s), to.host_page((page << d) | g.lane),
                           to.page_bytes((page << d) | g.lane));
        } else {
            uint4 x[8];  // the i-th block placed: lanes 8 (i % 4) .. 8 (i % 4) + 7, round i / 4
#pragma unroll
            for (std::uint32_t r = 0; r < 8; ++r) {
                const std::uint32_t i = 4 * r + g.lane / 8, k = __fns(placed, 0, static_cast<int>(i) + 1);
                if (i < n) x[r] = load16(from.host_page(page) + (k << to.page_shift) + part);
            }
#pragma unroll
            for (std::uint32_t r = 0; r < 8; ++r) {
                const std::uint32_t i = 4 * r + g.lane / 8, k = __fns(placed, 0, static_cast<int>(i) + 1);
                const std::uint32_t at = __shfl_sync(0xffffffffu, s, k & 31u);  // block k's sub-frame
                if (i < n) __stcg(reinterpret_cast<uint4*>(to.frame_data((frame << d) | at) + part), x[r]);
            }
        }
        if (g.leader() && n != 0) {
            to.count(g.shard(), c_prefetches, n);
            to.count(g.shard(), c_bytes_in, std::uint64_t{n} << to.page_shift);
        }
    }
}

// What a look reads, into `out` (pinned, mapped host memory; plain stores, as a GPU's atomics on host memory are not
// atomic): the tally's two words, the bytes filled so far, which where nothing is ever evicted are the bytes in
// frames (change_pays), and whether a lone read was displaced from a shared frame (fill_displaced). One launch instead
// of a copy and a launch (each API call of a change costs 3-10 us).
__global__ void look_kernel(PagerView v, std::uint64_t* out) {
    const unsigned i = threadIdx.x;  // a thread a counter shard
    std::uint64_t n = v.counters[i * counter_stride + c_bytes_in];
    for (int d = 16; d > 0; d /= 2) n += __shfl_down_sync(0xffffffffu, n, d);
    __shared__ std::uint64_t part[counter_shards / 32];
    if ((i & 31) == 0) part[i / 32] = n;
    __syncthreads();
    if (i == 0) {
        out[0] = v.profile[profile_tally];
        out[1] = v.profile[profile_tally + 1];
        std::uint64_t total = 0;
        for (unsigned w = 0; w < counter_shards / 32; ++w) total += part[w];
        out[2] = total;
        out[3] = any_displaced(v);
        out[4] = any_shared(v);
    }
}

// Blocks of 256 threads for a kernel with a thread a page (grid-stride beyond 8192 blocks).
unsigned per_page_grid(std::uint64_t pages) {
    return static_cast<unsigned>(std::min<std::uint64_t>((pages + 255) / 256, 8192));
}

// Where no frame was shared it reads no page: the sweep of every page's word took 17-26 us of the GPU's time at the
// first choice of 4 KiB gathers (0.1-0.2 ms passes; H200, bench/results/umem-h200-2026-11-28.md).
__global__ void settle_kernel(PagerView v) {
    if (!any_shared(v)) return;
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t p = blockIdx.x * blockDim.x + threadIdx.x; p < v.pages; p += threads) settle_shared(v, p);
}

// PagerView::shared, in stream order with the kernels around it.
__global__ void publish_kernel(PagerView v, PagerView* to) { *to = v; }

}  // namespace

const char* name(Engine e) { return e == Engine::gpu_threads ? "gpu-threads" : "copy-engine"; }

GpuPager::GpuPager(const Config& cfg, std::byte* host, Engine engine) : engine_(engine) {
    try {
        set_up(cfg, host);
    } catch (...) {
        release_all();  // a failed set-up leaves no GPU memory or thread behind
        throw;
    }
}

void GpuPager::set_up(const Config& cfg, std::byte* host) {
    std::uint32_t shift = check(cfg);
    if (cfg.bytes % 16 != 0)
        throw Error("umem: configure GPU pager", log::concat("bytes ", cfg.bytes), "not a multiple of 16",
                    "pad the array to 16 bytes: pages move in 16-byte loads");
    void* dev_host = nullptr;
    cuda_check(cudaHostGetDevicePointer(&dev_host, host, 0), "umem: cudaHostGetDevicePointer", "backing store",
               "allocate it with cudaHostAlloc(..., cudaHostAllocMapped)");
    std::size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "umem: cudaMemGetInfo", "device 0");
    pool_bytes_ = cfg.frames << shift;
    if (pool_bytes_ + (64ull << 20) > free_b)
        throw Error("umem: configure GPU pager", log::concat("frame pool ", pool_bytes_ >> 20, " MiB"),
                    log::concat("only ", free_b >> 20, " MiB of GPU memory free"), "make Config::frames smaller");
    auto_ = cfg.page_size == auto_page_size;
    view_ = PagerView{nullptr,
                      nullptr,
                      device_alloc<std::uint64_t>(ctl_words, "control words"),
                      device_alloc<std::uint64_t>(counter_shards * counter_stride, "counters"),
                      static_cast<std::byte*>(dev_host),
                      device_alloc<std::byte>(pool_bytes_, "frame pool"),
                      cfg.bytes,
                      0,
                      0,
                      shift,
                      cfg.admission,
                      cfg.eviction,
                      cfg.prefetch_depth};
    view_.shared = device_alloc<PagerView>(1, "pager view");
    int device = 0;
    cuda_check(cudaGetDevice(&device), "umem: cudaGetDevice", "pager");
    if (pool_bytes_ < cfg.bytes) {  // a buffer for each warp an SM can hold (Array::warp_acquire's staged reads)
        int sms = 0, threads = 0;
        cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "umem: cudaDeviceGetAttribute",
                   "SM count");
        cuda_check(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device),
                   "umem: cudaDeviceGetAttribute", "threads an SM");
        view_.staging_slots = static_cast<std::uint32_t>(sms) * static_cast<std::uint32_t>(threads / 32);
        view_.staging = device_alloc<std::byte>(std::uint64_t{view_.staging_slots} << staging_shift, "staging buffers");
        view_.staging_owner = device_alloc<std::uint32_t>(view_.staging_slots, "staging buffers' owners");
        cuda_check(cudaMemset(view_.staging_owner, 0, view_.staging_slots * 4ull), "umem: cudaMemset",
                   "staging buffers' owners");
    }
    if (auto_) {
        view_.profile = device_alloc<std::uint64_t>(profile_words, "page-size profile");
        view_.profile_bits = profile_bits_for(cfg.bytes);
        cuda_check(cudaMemset(view_.profile, 0, profile_words * 8), "umem: cudaMemset", "page-size profile");
        void* choice = nullptr;
        cuda_check(cudaHostAlloc(&choice, 48, cudaHostAllocMapped), "umem: cudaHostAlloc", "page-size proposal");
        choice_ = static_cast<std::uint32_t*>(choice);
        *choice_ = 0;
        looked_ = static_cast<std::uint64_t*>(choice) + 1;
        void* dev_choice = nullptr;
        cuda_check(cudaHostGetDevicePointer(&dev_choice, choice, 0), "umem: cudaHostGetDevicePointer",
                   "page-size proposal");
        view_.profile_choice = static_cast<std::uint32_t*>(dev_choice);
        looked_dev_ = static_cast<std::uint64_t*>(dev_choice) + 1;
    }
    if (auto_) {  // used where the pool holds the array
        view_.lone_fill_shift = lone_fill_shift_for(cfg.bytes);
        view_.lone_rest_blocks = lone_rest_blocks_for(cfg.bytes);
    }
    layout(shift, nullptr);
    if (auto_) {
        cudaStream_t side = nullptr;
        cuda_check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "umem: cudaStreamCreate", "table maker");
        maker_stream_ = side;
        cudaEvent_t cleared = nullptr;
        cuda_check(cudaEventCreateWithFlags(&cleared, cudaEventDisableTiming), "umem: cudaEventCreate", "table maker");
        maker_cleared_ = cleared;
        table_maker_ = std::thread([this, device] { make_table_ahead(device); });
    }
    cuda_check(cudaMemset(view_.counters, 0, counter_shards * counter_stride * 8), "umem: cudaMemset", "counters");
    // Touch the whole pool now: the driver backs fresh allocations lazily, and that cost belongs
    // to set-up, not to the first fills (measured: 5x slower first gathers without it).
    cuda_check(cudaMemset(view_.frames, 0, pool_bytes_), "umem: cudaMemset", "frame pool");
    if (engine_ == Engine::copy_engine) {
        void* slots = nullptr;
        cuda_check(cudaHostAlloc(&slots, ring_slots * sizeof(CopyRequest), cudaHostAllocMapped), "umem: cudaHostAlloc",
                   "copy ring");
        std::memset(slots, 0, ring_slots * sizeof(CopyRequest));
        void* dev_slots = nullptr;
        cuda_check(cudaHostGetDevicePointer(&dev_slots, slots, 0), "umem: cudaHostGetDevicePointer", "copy ring");
        ring_ =
            CopyRingView{static_cast<CopyRequest*>(dev_slots), device_alloc<std::uint64_t>(1, "ring tail"), ring_slots};
        cuda_check(cudaMemset(ring_.tail, 0, 8), "umem: cudaMemset", "ring tail");
        cudaStream_t s = nullptr;
        cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "umem: cudaStreamCreate", "copy worker");
        stream_ = s;
        worker_ = std::thread([this] { serve(); });
    }
    cuda_check(cudaDeviceSynchronize(), "umem: cudaDeviceSynchronize", "pager set-up");
}

// A page table for pages of 1 << shift bytes over the same pool, the CLOCK hand and the admission
// window reset. Smaller pages than the ones in use, where the pool's frames all map (relay_fits): every
// resident page's sub-pages stay resident in its frame's bytes (relay_page), dirty where it was. Else
// (the first table, larger pages) dirty frames are written back and every page starts in host memory.
// No kernel may use the pager.
void GpuPager::layout(std::uint32_t shift, cudaStream_t stream) {
    const PagerView old = view_;
    const std::uint64_t frames = frames_at(shift);
    const bool relay = old.pte != nullptr && relay_fits(old, shift, frames);
    if (old.pte != nullptr && !relay) flush();
    view_.pte = nullptr;
    view_.frame_owner = nullptr;
    view_.page_shift = shift;
    view_.pages = pages_at(shift);
    view_.frames_n = static_cast<std::uint32_t>(frames);
    // Marks only at the 4 KiB start, for the first choice: partial pages' blocks and dirty blocks; where pages can
    // share frames, their second frames, the frames' slots and the displaced blocks. 0.3-0.7% of the array.
    const bool start = auto_ && shift == auto_start_shift, sharing = start && !view_.never_evicts();
    const bool cleared = spare_table_ != nullptr && spare_shift_ == shift;  // mapped and cleared by table_maker_
    const std::uint64_t marks = start ? view_.pages * 12 + (sharing ? view_.frames_n * 4ull + view_.pages * 12 : 0) : 0;
    std::uint64_t* table = nullptr;
    if (cleared) {  // the kernels after this wait for the clearing on the GPU, the host does not
        cuda_check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(maker_cleared_), 0),
                   "umem: cudaStreamWaitEvent", "page table");
        table = static_cast<std::uint64_t*>(std::exchange(spare_table_, nullptr));
    } else {
        table = device_alloc<std::uint64_t>((table_bytes(shift) + marks + 7) / 8, "page table", true, stream);
    }
    // One allocation, one free (each API call of a change costs 5-10 us, H200): the table (place_table); at the
    // start the marks after it.
    place_table(view_, table);
    view_.sectors = start ? view_.pte + table_bytes(shift) / 8 : nullptr;
    view_.second_frames = sharing ? view_.sectors + view_.pages : nullptr;
    view_.dirty_blocks =
        start ? reinterpret_cast<std::uint32_t*>(view_.sectors + view_.pages * (sharing ? 2 : 1)) : nullptr;
    view_.shared_slots = sharing ? view_.dirty_blocks + view_.pages : nullptr;
    view_.displaced_blocks = sharing ? view_.shared_slots + view_.frames_n : nullptr;
    if (start)
        cuda_check(cudaMemsetAsync(view_.sectors, 0, marks, stream), "umem: cudaMemset",
                   "partial pages' blocks, second frames, dirty blocks, shared frames' slots and displaced blocks");
    if (!cleared) cuda_check(clear_table(view_, stream), "umem: clearing the table", "page table");
    if (relay) {  // the kernel also sets the control words (relay_ctl), clears the profile and publishes the view:
                  // no copy, no wait
        relay_kernel<<<per_page_grid(old.pages), 256, 0, stream>>>(old, view_);
        // Only to 128 B (any other choice settled them, view), and only where the look saw a block displaced: no
        // launch where none was (warps' rows, a pool with room). Measured, that made no difference to 64-byte rows
        // over 1 GiB at a 25% pool (1.09-1.11x p128 either way; H200, bench/results/umem-h200-2026-11-28c.md).
        if (old.shared_slots != nullptr && looked_[3] != 0)
            fill_displaced_kernel<<<per_page_grid(old.pages * 32), 256, 0, stream>>>(old, view_);
    } else {
        cuda_check(cudaMemsetAsync(view_.ctl, 0, ctl_words * 8, stream), "umem: cudaMemset", "control words");
        if (view_.profile != nullptr)
            cuda_check(cudaMemsetAsync(view_.profile, 0, profile_words * 8, stream), "umem: cudaMemset",
                       "page-size profile");
        publish(stream);
    }
    cuda_check(cudaGetLastError(), "umem: page table", "pager");
    if (old.pte != nullptr) cudaFreeAsync(old.pte, stream);  // after the relay kernel, in stream order
}

// The first choice is made (need_blocks: after it an access needs its page whole). Nothing is published: the
// launches pass profile_decided (PagerView::shared). A GPU with nothing else to do waits for each launch here: with a
// publish kernel, 4 KiB gathers' 0.1 ms reuse pass over 2 GiB at a full pool took 1.02-1.13x p4096's time, without it
// 0.98-1.05 (H200, bench/results/umem-h200-2026-11-28.md).
void GpuPager::decide(cudaStream_t stream) {
    if (view_.profile_decided != 0) return;
    view_.profile_decided = 1;
    settle(stream);
}

// Frames that pages share (PagerView::shared_slots) given each to one page, where the first choice is not 128-byte
// pages (settle_shared); the views after it have no shared_slots. In stream order.
void GpuPager::settle(cudaStream_t stream, bool any) {
    if (view_.shared_slots == nullptr) return;
    if (any) {
        settle_kernel<<<std::min(per_page_grid(view_.pages), 1024u), 256, 0, stream>>>(view_);
        cuda_check(cudaGetLastError(), "umem: settle shared frames", "pager");
    }
    view_.shared_slots = nullptr;
    view_.second_frames = nullptr;  // their blocks dropped with the frames (a change after it must not re-lay them)
}

void GpuPager::publish(cudaStream_t stream) {
    publish_kernel<<<1, 1, 0, stream>>>(view_, const_cast<PagerView*>(view_.shared));
    cuda_check(cudaGetLastError(), "umem: publish the pager's view", "pager");
}

// Costs a read of one word in host memory while the accesses propose the page size in use (or mark
// nothing new); else it waits for the kernels before it, reads the tally (two words) and decides
// (look_answer). The tally accumulates until the page size changes: the choice is about what the
// array's accesses read over its life (a graph search reads sparse parts of its arrays level by level,
// and all of them in the end). A look that changes nothing doubles the number of proposals until the
// next (up to 64).
const PagerView& GpuPager::view(cudaStream_t stream) {
    if (!auto_) return view_;
    const std::uint32_t proposed = atom::load(choice_);
    if (proposed == 0) return view_;
    if (proposed == view_.page_shift) {  // settled: small reads need not wait for a choice any more
        atom::store(choice_, 0u);
        decide(stream);
        park_table_maker();
        return view_;
    }
    if (++since_look_ < look_every_) return view_;
    since_look_ = 0;
    stop_table_maker();
    atom::store(choice_, 0u);
    // One launch and one wait for the kernels before it, the tally and the bytes filled written into pinned memory
    // (look_kernel): two blocking copies into pageable memory took 54 and 15 us (H200), a fifth of a short batch.
    look_kernel<<<1, counter_shards, 0, stream>>>(view_, looked_dev_);
    cuda_check(cudaGetLastError(), "umem: read the page-size tally", "pager");
    cuda_check(cudaStreamSynchronize(stream), "umem: wait for the kernels", "pager");
    const std::uint64_t t[2] = {looked_[0], looked_[1]};
    const auto [shift, change] = look_answer(t, view_, looked_[2], decisions_++ == 0, wanted_);
    if (spare_table_ != nullptr && (!change || spare_shift_ != shift))  // after its clearing, on that stream
        cudaFreeAsync(std::exchange(spare_table_, nullptr), static_cast<cudaStream_t>(maker_stream_));
    if (!change) {
        decide(stream);
        if (shift == view_.page_shift) look_every_ = std::min<std::uint32_t>(look_every_ * 2, 64);
        wanted_ = shift;
        return view_;
    }
    view_.profile_decided = 1;  // published with the new table (layout)
    // To 128 B each shared slot becomes a frame (relay_page). No launch where the look saw no frame opened for sharing.
    if (shift != auto_min_shift) settle(stream, looked_[4] != 0);
    wanted_ = 0;
    look_every_ = 1;
    const std::uint64_t was = view_.page_size();
    const auto t0 = std::chrono::steady_clock::now();
    layout(shift, stream);
    ++relayouts_;
    log::debug("umem: automatic page size ", was, " -> ", view_.page_size(), " B in ",
               std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count(),
               " us (footprints at 128 B..4 KiB: ", tally_field(t, 0), " ", tally_field(t, 1), " ", tally_field(t, 2),
               " ", tally_field(t, 3), " ", tally_field(t, 4), " ", tally_field(t, 5), " blocks)");
    return view_;
}

std::uint64_t GpuPager::pages_at(std::uint32_t shift) const {
    return (view_.bytes >> shift) + ((view_.bytes & ((1ull << shift) - 1)) != 0);
}

std::uint64_t GpuPager::frames_at(std::uint32_t shift) const {
    return std::max<std::uint64_t>(std::min<std::uint64_t>(pool_bytes_ >> shift, Pte::max_frames - 1), 1);
}

std::uint64_t GpuPager::table_bytes(std::uint32_t shift) const {
    return (pages_at(shift) + whole_words(pages_at(shift))) * 8 + (frames_at(shift) * 4 + 7) / 8 * 8;
}

// Polls the proposal word (pinned host memory the kernels write) every 100 us until the kernels propose
// pages smaller than the start, maps that size's table, and ends; or ends when told to stop. It makes no
// CUDA call before it allocates (a thread's first call sets up the runtime's state for it).
void GpuPager::make_table_ahead(int device) {
    std::unique_lock<std::mutex> lock(maker_mu_);
    while (!stop_maker_) {
        if (park_maker_) {
            maker_cv_.wait(lock);
            continue;
        }
        const std::uint32_t proposed = atom::load(choice_);
        if (proposed >= auto_min_shift && proposed < auto_start_shift) {
            lock.unlock();
            cudaSetDevice(device);
            // Cleared here too, while the kernels run (clear_kernel says why it matters), so that the relay writes
            // only the resident pages' entries; the change waits for maker_cleared_ on the GPU.
            const auto side = static_cast<cudaStream_t>(maker_stream_);
            void* t = nullptr;
            if (cudaMallocAsync(&t, table_bytes(proposed), side) == cudaSuccess) {
                PagerView at{};
                at.pages = pages_at(proposed);
                at.frames_n = static_cast<std::uint32_t>(frames_at(proposed));
                place_table(at, static_cast<std::uint64_t*>(t));
                if (clear_table(at, side) == cudaSuccess &&
                    cudaEventRecord(static_cast<cudaEvent_t>(maker_cleared_), side) == cudaSuccess) {
                    spare_table_ = t;
                    spare_shift_ = proposed;
                } else {
                    cudaFreeAsync(t, side);
                }
            }
            return;  // an allocation that failed is tried again, with its error, where the table is laid out
        }
        maker_cv_.wait_for(lock, std::chrono::microseconds(100));
    }
}

// When the first choice keeps 4 KiB the thread is not needed, but ending it then made the next kernel slower
// (H100, 8 GiB gathers' 0.27 ms reuse pass: 0.93-0.95x p4096 ending it, 0.99-1.00 without the thread; a join
// also waited up to 100 us): it waits instead, polling nothing, until the pager ends.
void GpuPager::park_table_maker() noexcept {
    std::lock_guard<std::mutex> lock(maker_mu_);
    park_maker_ = true;
}

void GpuPager::stop_table_maker() noexcept {
    if (!table_maker_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(maker_mu_);
        stop_maker_ = true;
    }
    maker_cv_.notify_all();
    table_maker_.join();
}

GpuPager::~GpuPager() { release_all(); }

void GpuPager::release_all() noexcept {
    if (worker_.joinable()) {
        stop_.store(true);
        worker_.join();
    }
    if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    if (ring_.slots != nullptr) {
        cudaFreeHost(ring_.slots);  // UVA: the mapped device address is the host address
        cudaFree(ring_.tail);
    }
    stop_table_maker();
    if (maker_stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(maker_stream_));
    if (maker_cleared_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(maker_cleared_));
    cudaFree(spare_table_);
    cudaFree(view_.pte);  // the frame owners, partial pages' blocks and dirty blocks with it
    cudaFree(view_.ctl);
    cudaFree(view_.counters);
    cudaFree(view_.frames);
    cudaFree(view_.profile);
    cudaFree(const_cast<PagerView*>(view_.shared));
    cudaFree(view_.staging);
    cudaFree(view_.staging_owner);
    if (choice_ != nullptr) cudaFreeHost(choice_);
}

// Serves tickets in order: takes every request already posted (up to a batch), submits them
// with one cudaMemcpyBatchAsync on the worker's stream, waits once, then marks them done.
// Pointers are UVA (mapped host memory has the same address on both sides).
void GpuPager::serve() {
    cudaSetDevice(0);
    auto stream = static_cast<cudaStream_t>(stream_);
    CopyRequest* slots = ring_.slots;
    std::vector<void*> dsts(ring_batch);
    std::vector<const void*> srcs(ring_batch);
    std::vector<std::size_t> sizes(ring_batch);
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attr_index = 0;
    bool batch_api = true;
    std::uint64_t next = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
        unsigned n = 0;
        while (n < ring_batch) {
            CopyRequest& r = slots[(next + n) % ring_slots];
            if (atom::load(&r.posted) != next + n + 1) break;
            dsts[n] = reinterpret_cast<void*>(r.dst);
            srcs[n] = reinterpret_cast<const void*>(r.src);
            sizes[n] = r.bytes;
            ++n;
        }
        if (n == 0) {
            std::this_thread::yield();
            continue;
        }
        if (batch_api && cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attr, &attr_index, 1,
                                              stream) != cudaSuccess) {
            log::warn("umem: cudaMemcpyBatchAsync refused; copying one cudaMemcpyAsync at a time");
            cudaGetLastError();
            batch_api = false;
        }
        if (!batch_api)
            for (unsigned i = 0; i < n; ++i) cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, stream);
        cudaError_t rc = cudaStreamSynchronize(stream);
        if (rc != cudaSuccess) log::warn("umem: copy worker: ", cudaGetErrorString(rc));
        for (unsigned i = 0; i < n; ++i) atom::store(&slots[(next + i) % ring_slots].done, next + i + 1);
        next += n;
    }
}

// Both wait for the device first: kernels on a stream that does not synchronize with the legacy default stream
// (view(stream)) may still be writing, and a flush under them would clear dirty marks of writes it did not copy.
void GpuPager::flush() {
    cuda_check(cudaDeviceSynchronize(), "umem: wait for the kernels", "pager");
    flush_kernel<<<264, 256>>>(view_);
    cuda_check(cudaDeviceSynchronize(), "umem: flush kernel", "pager");
}

Stats GpuPager::stats() const {
    cuda_check(cudaDeviceSynchronize(), "umem: wait for the kernels", "pager");
    std::vector<std::uint64_t> counters(counter_shards * counter_stride), ctl(ctl_words);
    cuda_check(cudaMemcpy(counters.data(), view_.counters, counters.size() * 8, cudaMemcpyDeviceToHost),
               "umem: read counters", "pager");
    cuda_check(cudaMemcpy(ctl.data(), view_.ctl, ctl.size() * 8, cudaMemcpyDeviceToHost), "umem: read counters",
               "pager");
    return sum_stats(counters.data(), ctl.data(), view_);
}

}  // namespace bardrive::umem
