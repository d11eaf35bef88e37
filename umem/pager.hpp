// The paging protocol: translation, fault, fill, eviction, write-back and prefetch over the
// page table (pte.hpp). Everything here is header-only and __host__ __device__: CPU threads run
// it in unit tests (standing in for warps) and GPU warps run the very same code in kernels.
// Who copies the bytes (a memcpy, a warp's 16-byte loads, a copy-engine worker) and who takes
// part (one thread or a whole warp) are template parameters; the decisions are made by one
// leader and broadcast.
//
// Rules that make it safe without locks:
//  - An accessor pins the page (pin count in the PTE) for as long as it touches the data; a pin
//    keeps a resident page's frame from being evicted. A writer in host memory counts as a writer
//    instead, which keeps the page from migrating (so host writes are not lost).
//  - Only a page with no writers changes host -> migrating (readers' pins move with it), and only
//    a page with no pins changes resident -> evicting (one CAS each).
//  - A filler never waits: when no frame can be evicted (all pinned or in flight) it gives the
//    page back and the access reads through host memory. So frame exhaustion cannot deadlock.
//  - With at least as many frames as pages nothing is ever evicted, so hits take no pin.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "hd.hpp"
#include "pte.hpp"

namespace bardrive::umem {

// When a miss migrates the page into a frame (measured choice in umem/README.md).
enum class Admission : std::uint32_t {
    migrate = 0,       // every miss migrates: best when pages are reused
    second_touch = 1,  // first miss reads through in place, the next one migrates
    read_through = 2,  // never migrate: zero-copy through the page table
    adaptive = 3,      // migrate; while the pool thrashes (most evicted pages were not hit often
                       // enough to pay for their fill), read through and admit a 1-in-64 sample
};

// Which resident page gives its frame up.
enum class Eviction : std::uint32_t {
    clock = 0,   // second chance: a hit sets `referenced`, the hand clears it once
    fifo = 1,    // the hand takes the next unpinned frame regardless of use
    random = 2,  // the hand jumps pseudo-randomly
};

// Counters, summed over shards (shards keep GPU warps from contending on one address).
enum Counter : unsigned {
    c_hits,          // accesses that found the page resident
    c_faults,        // accesses that found it not resident (fill, read-through or wait)
    c_fills,         // pages copied into a frame on a fault
    c_prefetches,    // pages copied in ahead of an access: of a sequential stream, or read in place (fill_displaced)
    c_read_through,  // accesses served from host memory in place
    c_waits,         // accesses that waited for another filler/evictor (coalesced faults)
    c_evictions,     // frames taken from a resident page
    c_writebacks,    // dirty frames copied back to host memory
    c_exhausted,     // fills abandoned because the sweep found no frame to evict (claim_frame)
    c_bytes_in,      // bytes copied host -> frames
    c_bytes_out,     // bytes copied frames -> host
    c_hand_steps,    // frames the eviction hand looked at (per eviction: the cost of finding a victim)
    c_count_,
};
inline constexpr unsigned counter_stride = 16;  // one 128-byte line per shard
inline constexpr unsigned counter_shards = 64;
static_assert(c_count_ <= counter_stride);

inline constexpr std::uint32_t no_page = 0xffffffffu;
// A frame's owner after a change to smaller pages left it empty (a partial page's blocks nobody read):
// the eviction hand hands it out as it finds it (claim_frame).
inline constexpr std::uint32_t free_frame = 0xfffffffeu;
// The owner of a frame that partial pages share (PagerView::shared_slots): the eviction hand passes it.
inline constexpr std::uint32_t shared_frame = 0xfffffffdu;
// PagerView::second_frames of a page that has no second frame and will not get one, and of one getting it.
inline constexpr std::uint64_t no_second = ~0ull, placing_second = ~1ull;

// Control words, each group on its own 128-byte line.
inline constexpr unsigned ctl_fresh = 0;       // next never-used frame
inline constexpr unsigned ctl_free_first = 1;  // a change to smaller pages left frames free: take those first
inline constexpr unsigned ctl_shared = 2;      // a frame was opened for pages to share (place_shared, any_shared)
inline constexpr unsigned ctl_displaced = 3;   // a block was read in place for want of a slot (note_displaced)
inline constexpr unsigned ctl_hand = 16;       // CLOCK hand
inline constexpr unsigned ctl_evicted = 32;    // evictions in the current window (adaptive admission)
inline constexpr unsigned ctl_unused = 33;     // of those, pages whose hits did not pay for their fill
inline constexpr unsigned ctl_words = 48;
inline constexpr std::uint64_t thrash_window = 4096;  // evictions per measurement window
// claim_frame: how far the hand looks for a free frame first. At 64, once fill_displaced had filled frames' free
// sub-frames up (runs of 32 taken ones) and left an eighth of the pool free, some claim soon met 64 taken ones, CLOCK
// took over and evicted 1.8M blocks the kernel read again (H200, Zipf u64 over 4 GiB at a 25% pool, second pass
// 106-110 ms; at 256, 75 ms and 0.5M; bench/results/umem-h200-2026-11-28c.md).
inline constexpr std::uint64_t free_first_steps = 256;
inline constexpr std::uint64_t sweep_steps = 256;   // claim_frame: the most frames one claim looks at (below)
inline constexpr std::uint32_t share_walk = 4;      // place_shared: frames one placement looks at
inline constexpr std::uint32_t staging_shift = 12;  // a staging buffer's bytes, log2 (PagerView::staging)

// Plain pointers and sizes: trivially copyable, passed by value to kernels. The owner (HostPager,
// GpuPager) allocates what it points to.
struct PagerView {
    std::uint64_t* pte;          // [pages]
    std::uint32_t* frame_owner;  // [frames]: page held by the frame, no_page before first use
    std::uint64_t* ctl;          // [ctl_words]: see ctl_fresh, ctl_hand, ctl_evicted, ctl_unused
    std::uint64_t* counters;     // [counter_shards * counter_stride]
    std::byte* host;             // backing store: the data, `bytes` long
    std::byte* frames;           // frame pool: frames << page_shift bytes
    std::uint64_t bytes;
    std::uint64_t pages;
    std::uint32_t frames_n;
    std::uint32_t page_shift;
    Admission admission;
    Eviction eviction;
    std::uint32_t prefetch_depth;  // pages fetched ahead when the previous page is in use; 0 = off
    // Automatic page size (Config::page_size left out): where accesses note what they read
    // (profile_note); null when the page size is fixed.
    std::uint64_t* profile = nullptr;  // [profile_words]: the slots, then the tally
    std::uint32_t profile_bits = 0;    // a 4 KiB region is sampled when the top profile_bits of its hash are 0
    // The page shift the tally proposes, stored by an access that marked something new (a plain store:
    // the word is in host memory, where a GPU's atomics are not atomic); 0 = nothing new. The owner
    // looks at the tally only when it proposes another page size than the one in use.
    std::uint32_t* profile_choice = nullptr;
    // 0 until the automatic page size made its first choice: until then a small access (a quarter of a
    // page or less) fills only its own blocks (need_blocks).
    std::uint32_t profile_decided = 0;
    // Log2 of the bytes a lone thread's element fills first where the pool holds the array, before the first
    // choice (need_blocks, lone_fill_shift_for); 0: half the page.
    std::uint32_t lone_fill_shift = 0;
    // Blocks of its page in the frame or claimed from which such an element's miss takes the rest of the page
    // (missing_blocks, lone_rest_blocks_for); 0: never.
    std::uint32_t lone_rest_blocks = 0;
    // [pages], automatic page size at its 4 KiB start only: one bit per 128-byte block written while
    // resident (note_write), so that smaller pages re-laid in place are dirty only where written
    // (relay_page); null otherwise.
    std::uint32_t* dirty_blocks = nullptr;
    // [pages], at the same 4 KiB start only: which 1/32-page blocks a partial page (Pte::partial) has in
    // its frame (bits 0-31) and which some access claimed to copy in (bits 32-63); null otherwise.
    // Before the first choice a small access fills only its own blocks (fill_blocks), so the pool holds
    // what was read, as pages of the size to come would, and a change to it keeps exactly that.
    std::uint64_t* sectors = nullptr;
    // [frames], at the same 4 KiB start where the pool is smaller than the array (null otherwise): the slots (1/32
    // of the frame) of a frame that partial pages share, bit k set where one of them has its block k in slot k; 0 for
    // a frame that is not shared. Before the first choice, while the tally says 128-byte pages, a lone thread's read
    // fills its block into a shared frame (place_shared), so a 4 KiB frame holds up to 32 pages' blocks, as 128-byte
    // frames would, and a hit's address is still the frame's plus the offset in the page. Shared frames are not
    // evicted; the change to 128-byte pages makes each slot a frame of its own (relay_page), any other choice settles
    // them first (settle_shared).
    std::uint32_t* shared_slots = nullptr;
    // [pages], with shared_slots (null otherwise): the blocks of a page in a shared frame that a lone read read in
    // place because another page's block held their slot (note_displaced); the change to 128-byte pages fills them
    // into free sub-frames of the page's frame (fill_displaced).
    std::uint32_t* displaced_blocks = nullptr;
    // [pages], with shared_slots (null otherwise): a partial page's second frame, for lone reads of its blocks whose
    // slot in its frame is another page's (claim_second): bits 0-31 its blocks there (block k in slot k, as in the
    // first), bits 32-63 the frame + 1; 0 none yet, placing_second being placed, no_second none to be had. Pages held
    // 32 blocks each in one frame of 32 slots, so a pool that p128 would fill was read largely in place (H200, Zipf u64
    // over 1 GiB at a 25% pool: 460K reads in place in the first kernel, filled again at the change;
    // bench/results/umem-h200-2026-11-28e.md).
    std::uint64_t* second_frames = nullptr;
    // [pages / 64 rounded up], set by the owner exactly where nothing is ever evicted (null elsewhere): bit p
    // set once page p is resident whole. There a page's frame is its own number (claim_frame), so a read hit
    // needs this bit and not the page's word: a bit a page stays in L2 where 8 bytes a page do not (H100,
    // resident u64 over 8 GiB at 128-byte pages: the word first cost 1.89x GPU memory, the bit 1.12x;
    // bench/results/umem-h100-2026-11-26d.md).
    std::uint64_t* whole = nullptr;
    // The same view in GPU memory (GpuPager; null elsewhere), which the protocol reads out of line
    // (Array::warp_acquire's misses): one copy for all threads of a kernel, where one through `this` would
    // be every thread's own, in local memory. Written with each new table (GpuPager::layout) only: the
    // first choice changes profile_decided, which the launch passes (Array::acquire_out_of_line), and
    // shared_slots, which are not read after it (slots_in_use), so deciding launches no copy.
    const PagerView* shared = nullptr;
    // GPU pager where the pool is smaller than the array (null otherwise): staging_slots buffers of 4 KiB
    // (staging_shift) and an owner word each, where a warp's long read in place is copied first (Array::stage).
    std::byte* staging = nullptr;
    std::uint32_t* staging_owner = nullptr;
    std::uint32_t staging_slots = 0;

    // Nothing is ever evicted: every page can have a frame of its own.
    UMEM_HD bool never_evicts() const { return frames_n >= pages; }
    // Hits that pay for a fill. Measured on an H200: a page fill costs about 80 ns per 4 KiB
    // amortised (51 GB/s), a read in place of a small object about 16 ns (a 256-byte row at 16 GB/s,
    // an 8-byte element alike), so a 4 KiB page pays after 5 hits that would each have read host
    // memory. Never fewer than 2: the first hit after a fill is often the filler's own next read
    // of the same small page (BFS reads row[v] and row[v + 1] from one 128 B page), which reading
    // in place would have served from the same PCIe read, so one hit does not show reuse (H200,
    // BFS 8 GiB at a 25% pool: 128 B row pages that "paid" after one hit were all filled).
    // At most Pte::max_hits.
    UMEM_HD std::uint32_t paid_hits() const {
        std::uint64_t h = (5 * page_size() + 4095) / 4096;
        return h < 2 ? 2u : h > Pte::max_hits ? Pte::max_hits : static_cast<std::uint32_t>(h);
    }

    UMEM_HD std::uint64_t page_size() const { return 1ull << page_shift; }
    // The chunk a lone thread's element fills first (need_blocks) in pages of 1 << shift bytes: lone_fill_shift within
    // [a block, half the page].
    UMEM_HD std::uint32_t lone_chunk_shift(std::uint32_t shift) const {
        if (lone_fill_shift == 0 || lone_fill_shift >= shift) return shift - 1;
        return lone_fill_shift < shift - 5 ? shift - 5 : lone_fill_shift;
    }
    UMEM_HD std::uint32_t page_bytes(std::uint64_t page) const {
        std::uint64_t off = page << page_shift;
        std::uint64_t left = bytes - off;
        return static_cast<std::uint32_t>(left < page_size() ? left : page_size());
    }
    UMEM_HD std::byte* host_page(std::uint64_t page) const { return host + (page << page_shift); }
    // Blocks of 1/32 page: those of bytes [offset, offset + n) of a page (n >= 1), those the page has.
    UMEM_HD std::uint32_t block_shift() const { return page_shift - 5; }
    UMEM_HD std::uint32_t blocks_of(std::uint64_t offset, std::uint64_t n) const {
        const std::uint64_t first = offset >> block_shift(), last = (offset + n - 1) >> block_shift();
        if (first > 31) return 0;
        return ((last >= 31 ? 0xffffffffu : (2u << last) - 1) >> first) << first;
    }
    UMEM_HD std::uint32_t page_blocks(std::uint64_t page) const { return blocks_of(0, page_bytes(page)); }
    // The blocks of sub-page j of 2^d (d <= 5: whole blocks) that a change to smaller pages makes.
    UMEM_HD std::uint32_t sub_page_blocks(std::uint32_t j, std::uint32_t d) const {
        return blocks_of(std::uint64_t{j} << (page_shift - d), std::uint64_t{1} << (page_shift - d));
    }
    UMEM_HD std::byte* frame_data(std::uint32_t frame) const {
        return frames + (static_cast<std::uint64_t>(frame) << page_shift);
    }
    UMEM_HD void count(unsigned shard, Counter c, std::uint64_t v = 1) const {
        atom::count(&counters[(shard % counter_shards) * counter_stride + c], v);
    }
};

// Words of PagerView::whole for `pages` pages.
UMEM_HD inline std::uint64_t whole_words(std::uint64_t pages) { return (pages + 63) / 64; }
// Whether page p is resident whole by its bit (PagerView::whole, not null): one load, ordered as a page-table
// word before its frame's data (on the GPU the data's address is chosen by the bit's value). The bits only turn on
// while a table lives (atom::load_growing: through L1 on the GPU).
UMEM_HD inline bool whole_bit(const PagerView& v, std::uint64_t page) {
    assert(v.whole != nullptr && "umem: a pool that holds every page needs its pages' bits (PagerView::whole)");
    return ((atom::load_growing(&v.whole[page >> 6]) >> (page & 63)) & 1) != 0;
}
// Page p became resident whole: its bit set after its data (a release), where there are bits.
UMEM_HD inline void mark_whole(const PagerView& v, std::uint64_t page) {
    if (v.whole != nullptr) atom::fetch_or(&v.whole[page >> 6], std::uint64_t{1} << (page & 63), atom::release);
}

// ---- automatic page size ------------------------------------------------------------------------
// With Config::page_size left out the pager learns per array which granularity pays from what the
// accesses read (umem/README.md: how it was chosen). Accesses note the bytes they read in a sample of
// 4 KiB regions: one 64-bit slot per sampled region, the region's number + 1 in the high half and one
// bit per 128-byte block read in the low half. The access that marks new blocks also adds what they
// change to a running tally of footprints (bytes of the pages those reads touch, at each page size)
// and proposes the largest page whose footprint stays under 3/2 of the footprint at 128 B
// (choose_page_shift), so a fill moves little that nobody reads, and pages are as large as that
// allows (fewer translations, a smaller page table). The owner reads two words, and only when the
// proposal differs from the page size in use.
inline constexpr unsigned profile_slots = 4096;
inline constexpr unsigned profile_tally = profile_slots;  // two words: footprints at 128 B..512 B, 1 KiB..4 KiB
inline constexpr unsigned profile_words = profile_slots + 2;
inline constexpr std::uint32_t profile_min_regions = 16;  // fewer sampled regions seen: no decision
inline constexpr std::uint32_t auto_min_shift = 7;        // 128 B
inline constexpr std::uint32_t auto_max_shift = 12;    // 4 KiB: the largest an access profile of 4 KiB regions can show
inline constexpr std::uint32_t auto_start_shift = 12;  // before anything was seen: 4 KiB (the old default)

// Sampling for an array of `bytes`: about profile_slots / 2 regions sampled, at least 1 in 64.
UMEM_HD inline std::uint32_t profile_bits_for(std::uint64_t bytes) {
    std::uint64_t regions = (bytes + 4095) >> 12;
    std::uint32_t bits = 6;
    while (bits < 40 && (regions >> bits) > profile_slots / 2) ++bits;
    return bits;
}

UMEM_HD inline std::uint32_t popcount32(std::uint32_t m) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(__popc(m));
#else
    return static_cast<std::uint32_t>(__builtin_popcount(m));
#endif
}

// Bits up to the highest set one of m (0 for 0).
UMEM_HD inline std::uint32_t bit_width32(std::uint32_t m) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(32 - __clz(static_cast<int>(m)));
#else
    return m == 0 ? 0u : static_cast<std::uint32_t>(32 - __builtin_clz(m));
#endif
}

// Trailing zeros of m != 0.
UMEM_HD inline std::uint32_t ctz64(std::uint64_t m) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(__ffsll(static_cast<long long>(m)) - 1);
#else
    return static_cast<std::uint32_t>(__builtin_ctzll(m));
#endif
}

// f(offset, bytes) for each run of adjacent blocks of `mask` (1 << shift bytes each), clipped to `bytes`
// (a page's): a fill or write-back of a partial page copies only its blocks, a whole page in one run.
template <class F>
UMEM_HD inline void for_block_runs(std::uint32_t mask, std::uint32_t shift, std::uint32_t bytes, F&& f) {
    std::uint64_t m = mask;
    while (m != 0) {
        const std::uint32_t first = ctz64(m), run = ctz64(~(m >> first));
        const std::uint64_t off = std::uint64_t{first} << shift, len = std::uint64_t{run} << shift;
        if (off >= bytes) return;
        f(static_cast<std::uint32_t>(off), static_cast<std::uint32_t>(len < bytes - off ? len : bytes - off));
        m &= ~(((1ull << run) - 1) << first);
    }
}

// The tally: footprint at pages of 128 << k bytes, in 128-byte blocks, summed over the sampled
// regions, field k of 21 bits (at most 32 x profile_slots = 2^17 each): k = 0..2 in word 0, 3..5 in
// word 1. A footprint only grows with the blocks read, so fields add and subtract without carries.
inline constexpr unsigned tally_bits = 21;
UMEM_HD inline std::uint64_t tally_field(const std::uint64_t (&t)[2], unsigned k) {
    return (t[k / 3] >> (tally_bits * (k % 3))) & ((1ull << tally_bits) - 1);
}

// One region's footprints for the blocks in mask m, as tally words. Folding: after step k bit j*2^k
// of m says whether any block of page j (of 2^k blocks) was read.
UMEM_HD inline void region_tally(std::uint32_t m, std::uint64_t (&t)[2]) {
    constexpr std::uint32_t keep[5] = {0x55555555u, 0x11111111u, 0x01010101u, 0x00010001u, 0x00000001u};
    t[0] = popcount32(m);
    t[1] = 0;
    for (unsigned k = 1; k < 6; ++k) {
        m = (m | (m >> (1u << (k - 1)))) & keep[k - 1];
        t[k / 3] += static_cast<std::uint64_t>(popcount32(m) << k) << (tally_bits * (k % 3));
    }
}

// The page shift (auto_min_shift .. auto_max_shift) the tally says pays: the largest page whose
// footprint is under 3/2 of the 128-byte footprint. `current` is kept when too few regions were
// seen, and while it is itself within the bound and the choice is at most twice as large (a change
// costs a flush or re-lay of the page table).
UMEM_HD inline std::uint32_t choose_page_shift(const std::uint64_t (&t)[2], std::uint32_t current) {
    const std::uint64_t w0 = tally_field(t, 0);
    if (tally_field(t, 5) < 32ull * profile_min_regions) return current;  // 32 blocks a region at 4 KiB
    std::uint32_t k = 0;
    for (std::uint32_t j = 0; j < 6; ++j)
        if (tally_field(t, j) * 2 < w0 * 3) k = j;
    const std::uint32_t chosen = auto_min_shift + k;
    if (current >= auto_min_shift && current <= auto_max_shift &&
        tally_field(t, current - auto_min_shift) * 2 < w0 * 3 && chosen < current + 2)
        return current;
    return chosen;
}

// An access read bytes [offset, offset + n) (n >= 1); the part inside offset's 4 KiB region is noted.
// A multiply and a compare for an unsampled region; a read of the slot for a sampled one; atomics and
// a proposal only the first time a block of a sampled region is read.
UMEM_HD inline void profile_note(const PagerView& v, std::uint64_t offset, std::uint64_t n) {
    if (v.profile == nullptr) return;
    const std::uint64_t region = offset >> 12;
    const std::uint64_t h = region * 0x9e3779b97f4a7c15ull;
    if ((h >> (64 - v.profile_bits)) != 0) return;
    std::uint64_t* slot = &v.profile[(h >> 24) & (profile_slots - 1)];
    const std::uint64_t in = offset & 4095, last = in + n - 1 < 4095 ? in + n - 1 : 4095;
    const std::uint32_t first_block = static_cast<std::uint32_t>(in >> 7),
                        last_block = static_cast<std::uint32_t>(last >> 7);
    const std::uint64_t bits = ((last_block == 31 ? 0xffffffffull : (2ull << last_block) - 1) >> first_block)
                               << first_block;
    const std::uint64_t tag = (region + 1) << 32;
    std::uint64_t e = atom::peek(slot), before = 0;
    if (e == 0) {
        std::uint64_t expected = 0;
        if (!atom::cas(slot, expected, tag | bits)) e = expected;
    }
    if (e != 0) {
        if ((e & ~0xffffffffull) != tag || (e & bits) == bits) return;  // another region's slot, or nothing new
        before = atom::fetch_or(slot, bits);
        if ((before & bits) == bits) return;  // another access marked them first
    }
    std::uint64_t was[2], now[2], t[2];
    region_tally(static_cast<std::uint32_t>(before), was);
    region_tally(static_cast<std::uint32_t>(before | bits), now);
    for (unsigned i = 0; i < 2; ++i) {
        const std::uint64_t d = now[i] - was[i];
        t[i] =
            d != 0 ? atom::fetch_add(&v.profile[profile_tally + i], d) + d : atom::peek(&v.profile[profile_tally + i]);
    }
    if (v.profile_choice != nullptr && tally_field(t, 5) >= 32ull * profile_min_regions)
        atom::store(v.profile_choice, choose_page_shift(t, v.page_shift));
}

// Whether moving from pages of 1 << current to 1 << chosen bytes pays. Larger pages: fewer
// translations and a smaller table. Smaller pages save bytes only on pages not filled yet and make
// nothing fit that did not, while a hit through the larger table costs more (its 8 bytes a page stop
// fitting L2): with a pool that holds the whole array and half its bytes already in frames (`resident`: pages'
// worth, partial pages' blocks counted), they do not pay (H200: 4 GiB of u64 read three times at a full pool, 576 ms
// changing to 128 B after the first pass against 340 ms staying at 4 KiB; bench/results/umem-h200-2026-11-25.md).
// Counting only pages resident whole, lone threads' 1 KiB chunks (lone_fill_shift_for) sent Zipf reads over 1 GiB
// to 128 B pages with 70% of the array in, where a later pass took 0.27-0.29 ms against 0.15-0.16 staying at 4 KiB
// (bench/results/umem-h200-2026-11-27c.md). A warp's rows fill only themselves and leave little in: smaller pages
// pay there.
// Nor, at such a pool, does a page half as large, however little is resident: 4 KiB fills move more
// bytes a second and hits through half the table cost less (H200, BFS over 2 GiB at a full pool: its
// column array moved to 2 KiB, second pass 5.43 ms against 5.23 staying at 4 KiB; kept, 5.40 against 5.35).
inline bool change_pays(std::uint32_t current, std::uint32_t chosen, bool never_evicts, std::uint64_t resident,
                        std::uint64_t pages) {
    if (chosen == current) return false;
    return chosen > current || !never_evicts || (resident * 2 < pages && chosen + 1 < current);
}

// What a look between kernels (GpuPager::view) answers for pages of `v` and the tally `t`: the page shift that pays
// (choose_page_shift, then change_pays with the `filled` bytes, which where nothing is ever evicted are the bytes in
// frames), and whether to change to it now. The first choice is made at once; a later change only when the look
// before wanted the same (`wanted`): one kernel's pattern must not flip an array's layout back and forth.
struct LookAnswer {
    std::uint32_t shift;
    bool change;
};
inline LookAnswer look_answer(const std::uint64_t (&t)[2], const PagerView& v, std::uint64_t filled, bool first,
                              std::uint32_t wanted) {
    std::uint32_t shift = choose_page_shift(t, v.page_shift);
    if (shift < v.page_shift && !change_pays(v.page_shift, shift, v.never_evicts(), filled >> v.page_shift, v.pages))
        shift = v.page_shift;
    return {shift, shift != v.page_shift && (first || shift == wanted)};
}

// A write of bytes [offset, offset + n) of resident page `page` (n >= 1): marks its blocks of 1/32 page
// in dirty_blocks where there are marks. One atomic, by the group's leader.
UMEM_HD inline void note_write(const PagerView& v, std::uint64_t page, std::uint64_t offset, std::uint64_t n) {
    if (v.dirty_blocks == nullptr) return;
    atom::fetch_or(&v.dirty_blocks[page], v.blocks_of(offset, n));
}

// Whether sub-page j (of 2^d) of a dirty page was written: its blocks marked, or no marks to say
// (no dirty_blocks, or none set: a write that marked nothing counts as everywhere).
UMEM_HD inline bool written(const PagerView& v, std::uint64_t page, std::uint32_t j, std::uint32_t d) {
    if (v.dirty_blocks == nullptr || d > 5) return true;
    const std::uint32_t m = atom::peek(&v.dirty_blocks[page]);
    return m == 0 || (m & v.sub_page_blocks(j, d)) != 0;
}

// n bytes (a multiple of 8) copied word by word, between kernels (relay_page, settle_shared).
UMEM_HD inline void copy_words(std::byte* dst, const std::byte* src, std::uint32_t n) {
    auto* d = reinterpret_cast<std::uint64_t*>(dst);
    const auto* s = reinterpret_cast<const std::uint64_t*>(src);
    for (std::uint32_t i = 0; i < n / 8; ++i) d[i] = s[i];
}

// Of the pages that share a frame whose taken slots are `slots`, whether the one whose blocks in it are `have` is the
// one that speaks for the frame: the page with its lowest slot.
UMEM_HD inline bool holds_lowest_slot(std::uint32_t slots, std::uint32_t have) {
    return ((have >> ctz64(slots)) & 1u) != 0;
}

// Whether frame f is one that pages share, in any view with the slots (a change reads its `from`'s, after the choice).
UMEM_HD inline bool shared_frame_at(const PagerView& v, std::uint32_t f) {
    return v.shared_slots != nullptr && atom::peek(&v.shared_slots[f]) != 0;
}

// The blocks in a page's second frame, from its PagerView::second_frames word: none while it has no frame there.
UMEM_HD inline std::uint32_t second_frame_blocks(std::uint64_t w) {
    return w >= placing_second ? 0u : static_cast<std::uint32_t>(w);
}

// Where a read of `blocks` of a partial page finds them in its second frame (PagerView::second_frames): the frame
// where it holds them all, split_frames where it holds some (the others are in the first frame or nowhere; a frame is
// one address for the whole read, so it reads in place), max_frames where it holds none.
inline constexpr std::uint32_t split_frames = Pte::max_frames + 2;
UMEM_HD inline std::uint32_t second_frame_with(const PagerView& v, std::uint64_t page, std::uint32_t blocks) {
    if (v.second_frames == nullptr) return Pte::max_frames;
    const std::uint64_t w = atom::load(&v.second_frames[page]);  // the blocks' bytes before their bits (finish_sector)
    const std::uint32_t there = blocks & second_frame_blocks(w);
    if (there == 0) return Pte::max_frames;
    return there == blocks ? static_cast<std::uint32_t>(w >> 32) - 1 : split_frames;
}

// The owner of a frame that pages shared, as a change lays it out: free where no page's block stays there, written
// only while it is still `untaken` (no page wrote itself there first). Pages write their own frames in any order, and a
// slot can hold no page's block (a page that a write took out of the frame left its slots: write_out_of_shared), so no
// page can say which frames are empty. Called once per frame, from the same loops as the pages (relay_page,
// settle_shared).
UMEM_HD inline void free_unless_taken(std::uint32_t* owner, std::uint32_t untaken) {
    atom::cas(owner, untaken, free_frame);
}

// Whether settling has work (ctl_shared): only a frame opened for sharing is shared.
UMEM_HD inline bool any_shared(const PagerView& v) {
    return v.shared_slots != nullptr && atom::peek(&v.ctl[ctl_shared]) != 0;
}

// Where the first choice is not 128-byte pages (between kernels, no access in flight): of the pages that share a
// frame (PagerView::shared_slots), the one whose block is in the frame's lowest slot keeps it as its own frame; the
// others go back to host memory (their blocks there are never written: write_out_of_shared), and a frame that no page
// keeps is free. The view after it has no shared_slots (the keeper is found through them, so they are dropped only
// after every page was settled). Call it for every page: `page` also names a frame, freed unless a keeper took it.
UMEM_HD inline void settle_shared(const PagerView& v, std::uint64_t page) {
    if (page < v.frames_n && shared_frame_at(v, static_cast<std::uint32_t>(page)))
        free_unless_taken(&v.frame_owner[page], shared_frame);
    const Pte e{atom::peek(&v.pte[page])};
    if (e.state() != PageState::resident) return;
    const std::uint32_t s = atom::peek(&v.shared_slots[e.frame()]);
    if (s == 0) return;
    // A page that came to have every slot is whole, and alone there.
    const std::uint32_t have =
        e.is(Pte::partial) ? static_cast<std::uint32_t>(atom::peek(&v.sectors[page])) : v.page_blocks(page);
    if (holds_lowest_slot(s, have)) {
        atom::store(&v.frame_owner[e.frame()], static_cast<std::uint32_t>(page));
        return;
    }
    assert(!e.is(Pte::dirty) && "umem: a page that shares a frame is never written there");
    atom::store(&v.sectors[page], std::uint64_t{0});
    atom::store(&v.pte[page], e.word & Pte::touched);  // host, nothing held between kernels
}

// The hits a sub-page that a change to smaller pages keeps starts with; `shared`: its block was in a frame that pages
// shared. A sub-page of a page's own frame counts as paid: no fill at this size, and its eviction must not look like
// thrashing (counted unpaid, elements over 4 GiB at a 25% pool took 733-746 against 558-564 ms, before frames were
// shared). A block of a shared frame was filled alone, as a 128-byte page is, and no hit of it was counted (its page's
// were): it starts at one hit, the read that filled it, so that evicting a block nobody read again since counts as
// thrashing, and adaptive admission reads in place instead of trading the blocks the first kernel read once for
// others (H200, auto / p128 in total: Zipf u64 over 4 GiB at 25% 1.19-1.20 -> 1.14-1.15, runs of 8 u64 at 6.25%
// 1.15 -> 0.88-0.89). At no hits, runs of 4 u64 over 1 GiB at a 64 MiB pool, which gain from that trading, took
// 1.01-1.27 (0.78-1.04 before, 0.96-1.07 at one hit; bench/results/umem-h200-2026-11-28f.md).
UMEM_HD inline std::uint64_t relaid_hits(bool shared) { return shared ? Pte{}.next_hit() : Pte::hits_mask; }

// Smaller pages without moving a byte (between kernels, no access in flight): frame f of pages of
// 1 << from.page_shift bytes is frames f << d .. (f << d) + 2^d - 1 of pages of 1 << to.page_shift
// (d the difference; the same bytes), so sub-page j of a resident page stays resident in frame
// (f << d) + j, dirty when the page was. Its hits are relaid_hits', and it is not referenced (CLOCK takes first the
// sub-pages nobody reads again). Of a partial page only the sub-pages with blocks in the frame stay (their other blocks
// copied in here: a write may have made the frame's the only good copy); the others are host, their frames free. Where
// nothing is ever evicted f is the page's number, so q's frame is q (claim_frame). `to` starts clear (every page host,
// no bits, owners no_page): only the sub-pages of resident pages are written (their PTE, bit and frame's owner), so a
// table cleared ahead is not swept whole, which would push the frames the last kernel read out of L2
// (GpuPager::make_table_ahead).
UMEM_HD inline void relay_page(const PagerView& from, const PagerView& to, std::uint64_t q) {
    const std::uint32_t d = from.page_shift - to.page_shift;
    if (q < (std::uint64_t{from.frames_n} << d) && shared_frame_at(from, static_cast<std::uint32_t>(q >> d))) {
        assert(d == 5 && "umem: frames that pages share are settled before a change to pages other than 128 B");
        free_unless_taken(&to.frame_owner[q], no_page);  // q as a sub-frame: that of a shared frame
    }
    const Pte e{atom::peek(&from.pte[q >> d])};
    if (e.state() != PageState::resident) return;  // host, as `to` starts
    const std::uint32_t j = static_cast<std::uint32_t>(q & ((1u << d) - 1));
    std::uint32_t frame = e.frame(), missing = 0, valid = 1;
    if (e.is(Pte::partial)) {
        const std::uint32_t sub = from.sub_page_blocks(j, d);
        valid = static_cast<std::uint32_t>(atom::peek(&from.sectors[q >> d])) & sub;
        missing = sub & ~valid;
        if (valid == 0)
            if (const std::uint32_t second = second_frame_with(from, q >> d, sub); second < Pte::max_frames) {
                frame = second;  // its block in the page's second frame, in the same slot
                valid = sub;
                missing = 0;
            }
    }
    const std::uint32_t f = (frame << d) | j;
    if (valid == 0) {  // host too, its frame free (that of a shared frame: above, as a sub-frame)
        if (!shared_frame_at(from, frame)) to.frame_owner[f] = free_frame;
        return;
    }
    for_block_runs(missing, from.block_shift(), from.page_bytes(q >> d), [&](std::uint32_t off, std::uint32_t n) {
        copy_words(from.frame_data(frame) + off, from.host_page(q >> d) + off, n);
    });
    std::uint64_t w = static_cast<std::uint64_t>(PageState::resident) | relaid_hits(shared_frame_at(from, frame)) |
                      (static_cast<std::uint64_t>(f) << Pte::frame_shift);
    if (e.is(Pte::dirty) && written(from, q >> d, j, d)) w |= Pte::dirty;
    atom::store(&to.frame_owner[f], static_cast<std::uint32_t>(q));  // freeing shared frames' sub-frames CASes it
    to.pte[q] = w;
    mark_whole(to, q);  // every sub-page that stays is whole
}

// Whether relay_page has anything to do for the sub-pages of page p of `from`: p resident, or p a frame that pages
// shared (its sub-frames freed where no page keeps them). For the others it writes nothing, so the relay kernel skips
// them.
UMEM_HD inline bool relay_has_work(const PagerView& from, std::uint64_t p) {
    return Pte{atom::peek(&from.pte[p])}.state() == PageState::resident ||
           (p < from.frames_n && shared_frame_at(from, static_cast<std::uint32_t>(p)));
}

// Whether a pool of `to_frames` frames of 1 << to_shift bytes has a frame for every byte of `from`'s
// frames (a pool capped at Pte::max_frames may not): else the change flushes and starts over.
inline bool relay_fits(const PagerView& from, std::uint32_t to_shift, std::uint64_t to_frames) {
    return to_shift < from.page_shift && (std::uint64_t{from.frames_n} << (from.page_shift - to_shift)) <= to_frames;
}

// The next never-used frame after relay_page: the sub-frames of every frame taken before.
UMEM_HD inline std::uint64_t relaid_fresh(const PagerView& from, std::uint32_t to_shift, std::uint64_t fresh) {
    return (fresh < from.frames_n ? fresh : from.frames_n) << (from.page_shift - to_shift);
}

// The control words for the re-laid table, by one thread where they live (`from` and `to` share
// them): the CLOCK hand and the admission window start again, the next never-used frame follows
// the frames taken before (relaid_fresh). On the GPU this runs in the relay kernel, so a change to
// smaller pages copies nothing between host and device.
UMEM_HD inline void relay_ctl(const PagerView& from, const PagerView& to) {
    const std::uint64_t fresh = from.ctl[ctl_fresh];
    for (unsigned i = 0; i < ctl_words; ++i) to.ctl[i] = 0;
    to.ctl[ctl_fresh] = relaid_fresh(from, to.page_shift, fresh);
    to.ctl[ctl_free_first] = 1;
}

// Control word `w` set to 1 (ctl_shared, ctl_displaced), by a load first: many threads say the same, once is enough.
UMEM_HD inline void raise_ctl(const PagerView& v, unsigned w) {
    if (atom::peek(&v.ctl[w]) == 0) atom::store(&v.ctl[w], std::uint64_t{1});
}

// A lone read of a page in a shared frame that found its blocks' slots held by another page's blocks read them in
// place (after_pin): marked here, so that the change to 128-byte pages fills them (fill_displaced). A load first: a
// hot block read in place again and again sets its bit once.
UMEM_HD inline void note_displaced(const PagerView& v, std::uint64_t page, std::uint32_t blocks) {
    if (v.displaced_blocks == nullptr || (atom::peek(&v.displaced_blocks[page]) & blocks) == blocks) return;
    atom::fetch_or(&v.displaced_blocks[page], blocks);
    raise_ctl(v, ctl_displaced);
}

// Whether fill_displaced has work: a block was displaced (ctl_displaced). GpuPager's look reads it after the kernels,
// so that a change where none was (warps' rows, or a pool with room) launches no kernel for it.
UMEM_HD inline bool any_displaced(const PagerView& v) {
    return v.displaced_blocks != nullptr && atom::peek(&v.ctl[ctl_displaced]) != 0;
}

// fill_displaced's work for page `page` of `from` (4 KiB pages about to be 128-byte pages): the blocks it read in
// place for want of a slot (note_displaced) and still lacks, and its frame; 0 where there are none, or no frame to
// fill them near (place_shared found none: the next kernel fills them on demand).
UMEM_HD inline std::uint32_t displaced_want(const PagerView& from, std::uint64_t page, std::uint32_t& frame) {
    if (from.displaced_blocks == nullptr) return 0;
    const std::uint32_t marked = atom::peek(&from.displaced_blocks[page]);
    const Pte e{atom::peek(&from.pte[page])};
    if (marked == 0 || e.state() != PageState::resident || !e.is(Pte::partial)) return 0;
    frame = e.frame();
    const std::uint32_t in_second =
        from.second_frames == nullptr ? 0u : second_frame_blocks(atom::peek(&from.second_frames[page]));
    // since in a slot of its own, or of its second frame
    return marked & ~static_cast<std::uint32_t>(atom::peek(&from.sectors[page])) & ~in_second;
}

// Of a frame's sub-frames free as `free` says (bit j: sub-frame j), the one that block k of `want` takes: the n-th
// free one for the n-th block wanted; 32 where there are fewer.
UMEM_HD inline std::uint32_t displaced_slot(std::uint32_t want, std::uint32_t free, std::uint32_t k) {
    for (std::uint32_t n = popcount32(want & ((1u << k) - 1u)); n > 0 && free != 0; --n) free &= free - 1;
    return free == 0 ? 32u : ctz64(free);
}

// Sub-frame s of `to` for 128-byte page q, if nobody took it first: q resident there (its bytes copied before the next
// kernel), as relay_page's sub-pages of shared frames are: not referenced, one hit (relaid_hits).
UMEM_HD inline bool claim_displaced(const PagerView& to, std::uint32_t s, std::uint64_t q) {
    std::uint32_t owner = atom::peek(&to.frame_owner[s]);
    if (owner != free_frame || !atom::cas(&to.frame_owner[s], owner, static_cast<std::uint32_t>(q))) return false;
    atom::store(&to.pte[q], static_cast<std::uint64_t>(PageState::resident) | relaid_hits(true) |
                                (static_cast<std::uint64_t>(s) << Pte::frame_shift));
    return true;
}

// After relay_page of every page of `from` into 128-byte pages `to` (between kernels, no access in flight): page
// `page`'s displaced blocks (displaced_want), each copied into a free sub-frame of its frame while there is one
// (copy(dst, src, bytes)). Returns how many. Without it the next kernel filled those blocks on demand, a miss each,
// after the first had read them in place: Zipf u64 over 1 GiB at a 25% pool, 356K fills made its second pass 5.8 ms
// against p128's 1.3 (H200, bench/results/umem-h200-2026-11-28c.md). The GPU runs this a warp a page, the blocks'
// copies coalesced (fill_displaced_kernel).
template <class Copy>
UMEM_HD inline std::uint32_t fill_displaced(const PagerView& from, const PagerView& to, std::uint64_t page,
                                            unsigned shard, Copy&& copy) {
    std::uint32_t frame = 0;
    const std::uint32_t want = displaced_want(from, page, frame), d = from.page_shift - to.page_shift;
    if (want == 0) return 0;
    std::uint32_t free = 0, filled = 0;
    for (std::uint32_t j = 0; j < (1u << d); ++j)
        free |= static_cast<std::uint32_t>(atom::peek(&to.frame_owner[(frame << d) | j]) == free_frame) << j;
    for (std::uint32_t w = want; w != 0; w &= w - 1) {
        const std::uint32_t k = ctz64(w), s = displaced_slot(want, free, k);
        const std::uint64_t q = (page << d) | k;
        if (s == 32) break;  // the frame is full
        if (!claim_displaced(to, (frame << d) | s, q)) continue;
        copy(to.frame_data((frame << d) | s), to.host_page(q), to.page_bytes(q));
        ++filled;
    }
    if (filled != 0) {
        to.count(shard, c_prefetches, filled);
        to.count(shard, c_bytes_in, std::uint64_t{filled} << to.page_shift);
    }
    return filled;
}

// What the leader decided for one access.
struct Step {
    // sector: the page is resident but partial, without blocks this access needs; the group copies
    // `blocks` in (claimed, pinned: fill_frame) and looks again.
    enum Kind : std::uint32_t { hit, host, fill, wait, sector };
    Kind kind;
    std::uint32_t frame;          // hit, fill, sector: the frame
    std::uint32_t victim;         // fill: page evicted from `frame`, or no_page
    std::uint32_t victim_blocks;  // fill: the victim's blocks to write back first (dirty), 0 = none
    std::uint32_t blocks;         // fill, sector: the blocks to copy in (page_blocks: the whole page)
};

// Adaptive admission's measurement: how many evicted pages were hit too few times since their fill
// to pay for it (PagerView::paid_hits). The window restarts every thrash_window evictions (a racy
// reset only blurs one window).
UMEM_HD inline void note_eviction(const PagerView& v, Pte e) {
    if (v.admission != Admission::adaptive) return;
    if (e.hits() < v.paid_hits()) atom::count(&v.ctl[ctl_unused], std::uint64_t{1});
    if (atom::fetch_add(&v.ctl[ctl_evicted], std::uint64_t{1}) + 1 >= thrash_window) {
        atom::store(&v.ctl[ctl_evicted], std::uint64_t{0});
        atom::store(&v.ctl[ctl_unused], std::uint64_t{0});
    }
}

// Thrashing: at least 64 evictions seen in this window and half of them did not pay for their fill.
UMEM_HD inline bool thrashing(const PagerView& v) {
    std::uint64_t evicted = atom::peek(&v.ctl[ctl_evicted]), unused = atom::peek(&v.ctl[ctl_unused]);
    return evicted >= 64 && unused * 2 > evicted;
}

// While thrashing, a miss is admitted with probability 1/64 (hash of the page and the window), divided by `ratio`
// (admit: the bytes its fill would move against those it reads).
UMEM_HD inline bool sampled(const PagerView& v, std::uint64_t page, std::uint64_t ratio) {
    std::uint64_t h = (page ^ (atom::peek(&v.ctl[ctl_evicted]) << 32)) * 0x9e3779b97f4a7c15ull;
    return (h >> 32) * ratio < (std::uint64_t{1} << 26);
}

// A lone thread's element (under 32 bytes: get(), or a warp_acquire of one element) where the pool holds the array,
// before the first choice: it fills the chunk around it (lone_fill_shift), and each other chunk once it reads there.
UMEM_HD inline bool lone_at_full_pool(const PagerView& v, std::uint64_t bytes) {
    return v.sectors != nullptr && v.profile_decided == 0 && bytes < 32 && v.never_evicts();
}

// The chunk of its 4 KiB page that a lone thread's element fills first where the pool holds an array of `bytes`
// (PagerView::lone_fill_shift), and how much of the page must be in before a miss takes the rest of it
// (lone_rest_blocks_for). A fill costs what a random read of host memory costs or its bytes at about 51 GB/s,
// whichever is more, and the first grows with the array (H200, fills at a full pool: 512 B 12 ns over 1 GiB, 1 KiB 21
// over 1 GiB, 23 over 2 GiB, 29 over 4 GiB, 2 KiB 40-42, 4 KiB 80-84; bench/results/umem-h200-2026-11-27c.md). Small
// chunks serve sparse elements and short runs; a page read densely in them costs more fills than whole pages, so once
// part of it is in the next miss takes the rest. Measured over 1, 2, 4 and 8 GiB with sparse and dense, Zipf and
// near-uniform streams (bench/results/umem-h200-2026-11-28b.md): 512 B chunks up to 1 GiB, 1 KiB up to 4 GiB, half
// pages above (over 8 GiB 1 KiB chunks took dense reads' first pass from 1.00 to 1.07x p4096, 0.93x zero-copy); the
// rest once half the page is in up to 2 GiB, a quarter above.
inline constexpr std::uint32_t lone_fill_shift_for(std::uint64_t bytes) {
    return bytes <= (1ull << 30) ? 9 : bytes <= (4ull << 30) ? 10 : 11;
}
inline constexpr std::uint32_t lone_rest_blocks_for(std::uint64_t bytes) { return bytes <= (2ull << 30) ? 16 : 8; }

// The blocks of `page` that bytes [offset, offset + bytes) lie in (~0ull bytes: the whole page).
UMEM_HD inline std::uint32_t read_blocks(const PagerView& v, std::uint64_t page, std::uint64_t offset,
                                         std::uint64_t bytes) {
    return bytes >= v.page_size() ? v.page_blocks(page) : v.blocks_of(offset, bytes) & v.page_blocks(page);
}

// The blocks of `page` an access needs in the frame: with sectors (the automatic page size's 4 KiB
// start), before the first choice, only those of a small access (a quarter of the page or less), so that
// a row's fill moves the row, not 4 KiB. A lone thread's element where the pool holds the array takes the aligned
// chunk around it (lone_fill_shift_for), or both chunks where it straddles two: a page read densely costs what one
// whole fill does, in a few fills, and sparse elements and short runs move a chunk a page. Else the whole page.
// (The chunk of the element's first byte alone left a straddling element's last bytes out of the frame, and the
// access read them there: 16 bytes at 504 of a page, two u64 words around a 512-byte chunk's end, as a BFS reading
// u32 neighbours through u64 words does; H200, umem-bench's BFS over RMAT 22 at a full pool read wrong levels.)
UMEM_HD inline std::uint32_t need_blocks(const PagerView& v, std::uint64_t page, std::uint64_t offset,
                                         std::uint64_t bytes) {
    if (v.sectors == nullptr || v.profile_decided != 0 || bytes > v.page_size() / 4) return v.page_blocks(page);
    if (lone_at_full_pool(v, bytes)) {
        const std::uint64_t chunk = std::uint64_t{1} << v.lone_chunk_shift(v.page_shift), first = offset & ~(chunk - 1),
                            end = (offset + bytes + chunk - 1) & ~(chunk - 1);
        return v.blocks_of(first, end - first) & v.page_blocks(page);
    }
    return read_blocks(v, page, offset, bytes);
}

// What an access to a partial page must still copy in, of the blocks it needs, the frame lacking `have` (0: it has
// what it reads) while others copy `claimed`. A lone element where the pool holds the array whose own block is
// missing takes what its chunk lacks, or what the page lacks once lone_rest_blocks of it are in or claimed (claims
// count: a page that many threads read at once is read densely).
UMEM_HD inline std::uint32_t missing_blocks(const PagerView& v, std::uint64_t page, std::uint64_t offset,
                                            std::uint64_t bytes, std::uint32_t have, std::uint32_t claimed) {
    if (lone_at_full_pool(v, bytes)) {
        if ((v.blocks_of(offset, bytes) & ~have) == 0) return 0;
        if (v.lone_rest_blocks != 0 && popcount32(have | claimed) >= v.lone_rest_blocks)
            return v.page_blocks(page) & ~have;
    }
    return need_blocks(v, page, offset, bytes) & ~have;
}

// A never-used frame (ctl_fresh), or max_frames once every frame was taken.
UMEM_HD inline std::uint32_t take_fresh(const PagerView& v) {
    std::uint64_t* fresh = &v.ctl[ctl_fresh];
    if (atom::peek(fresh) < v.frames_n) {
        const std::uint64_t f = atom::fetch_add(fresh, std::uint64_t{1});
        if (f < v.frames_n) return static_cast<std::uint32_t>(f);
    }
    return Pte::max_frames;
}

// The slots of frames that pages share where the protocol reads them: before the first choice only. After it the
// owner's views have none, but PagerView::shared keeps the start's, as settling left them (not cleared: a sweep).
UMEM_HD inline std::uint32_t* slots_in_use(const PagerView& v) {
    return v.profile_decided == 0 ? v.shared_slots : nullptr;
}

// Whether a read of `bytes` fills its blocks into a frame that pages share (PagerView::shared_slots): a lone
// thread's element, before the first choice, in a pool smaller than the array, while the tally proposes 128-byte
// pages. There a 4 KiB frame a block held 1/32 of what p128's pool holds: it thrashed, adaptive admission read the
// misses in place, which left nothing in the pool, and the kernel after the change to 128 B filled it all again
// (H100, Zipf u64 over 4 GiB at a 25% pool: second pass 204 ms against p128's 51).
// Also while the tally has seen too little to propose anything, up to half the pool: the first kernel's first misses
// otherwise took frames as pages' own, and in a pool of few frames left little to share (H200, runs of 4 u64 over
// 1 GiB at a 64 MiB pool: first pass 5.4-9.4 against 15-18 ms, auto / p128 in total 0.78-1.11 against 1.64-2.12;
// bench/results/umem-h200-2026-11-28d.md). The other half stays for pages of their own where the tally then proposes
// larger pages (near-uniform reads at a 25% pool: 1.17-1.28 against 1.15-1.22).
UMEM_HD inline bool shares(const PagerView& v, std::uint64_t bytes, bool write) {
    if (slots_in_use(v) == nullptr || write || bytes >= 32) return false;
    const std::uint64_t t[2] = {atom::peek(&v.profile[profile_tally]), atom::peek(&v.profile[profile_tally + 1])};
    if (tally_field(t, 5) < 32ull * profile_min_regions) return atom::peek(&v.ctl[ctl_fresh]) < v.frames_n / 2;
    return choose_page_shift(t, v.page_shift) == auto_min_shift;
}

// A frame for a lone read's `blocks` (adjacent) of `page` that pages share: a never-used frame while any is left, so
// the pages read first (under skew the hot ones) have room to grow in a frame of their own; then one of the frames
// taken so far whose slots for them are free, looked for from a place the page and block choose; max_frames where
// neither is found (the access reads in place). Tried (H100, Zipf u64 over 4 GiB at a 25% pool, auto / p128 in
// total, bench/results/umem-h100-2026-11-28.md):
// - the frames taken so far looked at first, a never-used one opened only where none had the slot free: the first
//   pages filled frames densely, and the hot ones among them then found their slots taken (10.4M of the first
//   pass's 32M reads read in place; 1.66-1.68, now 1.28-1.30);
// - one cursor a slot: thousands of lanes placing at once all looked at the same frames, found them taken and opened
//   new ones, and the pool filled at 11 blocks a frame;
// - where none is found, a frame the eviction hand frees opened for sharing: its evictions turned adaptive admission
//   on, and runs of 4 read again ran 2x slower; with lone placements past admission, runs of 8 over 1 GiB at a 6.25%
//   pool got slower and runs at 25% past 1.1x (umem-h100-2026-11-28-evict-to-share.patch).
UMEM_HD inline std::uint32_t place_shared(const PagerView& v, std::uint64_t page, std::uint32_t blocks) {
    const std::uint32_t n = take_fresh(v);
    if (n != Pte::max_frames) {
        atom::store(&v.shared_slots[n], blocks);
        atom::store(&v.frame_owner[n], shared_frame);
        raise_ctl(v, ctl_shared);
        return n;
    }
    const std::uint64_t h = ((page << 5) + ctz64(blocks)) * 0x9e3779b97f4a7c15ull;
    std::uint64_t f = ((h >> 32) * v.frames_n) >> 32;
    for (std::uint32_t i = 0; i < share_walk; ++i, f = f + 1 == v.frames_n ? 0 : f + 1) {
        std::uint32_t s = atom::peek(&v.shared_slots[f]);  // 0: a frame of its page's own
        while (s != 0 && (s & blocks) == 0)
            if (atom::cas(&v.shared_slots[f], s, s | blocks)) return static_cast<std::uint32_t>(f);
    }
    return Pte::max_frames;
}

// Whether frame f is shared by pages while that is in use (before the first choice; shared_frame_at reads any view).
UMEM_HD inline bool in_shared_frame(const PagerView& v, std::uint32_t f) {
    return v.profile_decided == 0 && shared_frame_at(v, f);
}

// A partial page's frame that pages share: claims the slots of `blocks` there (the page claimed them in its sectors
// already). False where one is another page's: the access reads in place.
UMEM_HD inline bool claim_slots(const PagerView& v, std::uint32_t frame, std::uint32_t blocks) {
    std::uint32_t* const slots = slots_in_use(v);
    if (slots == nullptr) return true;
    std::uint32_t s = atom::peek(&slots[frame]);
    if (s == 0) return true;  // the page's own frame
    while ((s & blocks) == 0)
        if (atom::cas(&slots[frame], s, s | blocks)) return true;
    return false;
}

// claim_second's answer where another access is getting the page its second frame: look again.
inline constexpr std::uint32_t second_busy = Pte::max_frames + 1;

// A second frame for a lone read's `blocks` of a partial page whose slots in its frame are other pages' (the access
// claimed them in the page's sectors): the page's second frame where their slots there are free; where it has none
// yet, one that place_shared finds (a never-used frame, or one of the frames taken so far with the slots free);
// max_frames where neither (the read goes in place), second_busy while another access places it. One second frame a
// page: a page's blocks are then in at most two frames, and the change to 128 B finds each in its slot of one of them
// (relay_page). Reading in place while another access placed the frame would have marked those blocks displaced for
// the rest of the kernel (known_displaced), and a hot page's accesses mostly arrive together: runs of 8 u64 over 1 GiB
// at a 25% pool took 1.21x the best fixed size in their first pass, against 1.11 without second frames (H200,
// bench/results/umem-h200-2026-11-28e.md).
UMEM_HD inline std::uint32_t claim_second(const PagerView& v, std::uint64_t page, std::uint32_t blocks) {
    if (v.second_frames == nullptr) return Pte::max_frames;
    std::uint64_t* const word = &v.second_frames[page];
    std::uint64_t w = atom::load(word);
    if (w == 0) {
        if (!atom::cas(word, w, placing_second)) return second_busy;
        const std::uint32_t f = place_shared(v, page, blocks);
        atom::store(word,
                    f == Pte::max_frames ? no_second : (std::uint64_t{f} + 1) << 32);  // its blocks: finish_sector
        return f;
    }
    if (w == placing_second) return second_busy;
    if (w == no_second) return Pte::max_frames;
    const std::uint32_t f = static_cast<std::uint32_t>(w >> 32) - 1;
    return claim_slots(v, f, blocks) ? f : Pte::max_frames;
}

// A miss that fills `fill_bytes` to read `read_bytes` (at least 128 counted: what a read of host memory costs at
// least). While the pool thrashes it admits a page's fill for about 64 times its bytes read in place, not one fill in
// 64 misses: a 4 KiB page filled for a 64-byte read moved 32 times as many bytes as a read in place of the same miss,
// so 1 miss in 64 turned a pool of 4 KiB frames over several times a pass, and replaced what the next pass read first
// (H200, BFS over RMAT 22 at a 25% pool, pass 2 at 4 KiB 47-55 against 33 ms; bench/results/umem-h200-2026-11-29d.md).
UMEM_HD inline bool admit(const PagerView& v, std::uint64_t page, Pte e, std::uint64_t fill_bytes,
                          std::uint64_t read_bytes) {
    switch (v.admission) {
        case Admission::migrate:
            return true;
        case Admission::second_touch:
            return e.is(Pte::touched);
        case Admission::read_through:
            return false;
        case Admission::adaptive:
            return !thrashing(v) || sampled(v, page, fill_bytes / (read_bytes > 128 ? read_bytes : 128));
    }
    return true;
}

// Frame for a fill: a never-used one, else one taken from a resident page by the eviction hand.
// The sweep is bounded (two turns of the clock, at most sweep_steps frames), so a filler never waits for a frame:
// where it finds none the access reads in place (c_exhausted), and the bits it cleared on the way stay cleared for
// the next claim. Two turns of a large pool were one thread's serial walk: where a kernel's reads hit nearly every
// resident page, the claim that came to a run of them cleared them one by one, and a pass of 0.13 s took up to 3.3 s
// (H100, 4 GiB of u64 read ten times at a 25% pool, one pass in ten: 4M steps in it). At most 256 frames a claim,
// every pass of p128 and auto there takes 37 ms (39-73 before, with 1-3 passes in 10 of 0.08-0.48 s); at 1024, 2 in 10
// still took 0.17-0.22 s (bench/results/umem-h100-2026-11-27d.md).
struct Claim {
    std::uint32_t frame;  // max_frames = none
    std::uint32_t victim;
    std::uint32_t victim_blocks;  // the victim's blocks to write back (dirty), 0 = none
};

// The blocks of a dirty resident page that hold data: a partial page's own, else the whole page.
UMEM_HD inline std::uint32_t data_blocks(const PagerView& v, std::uint64_t page, Pte e) {
    return e.is(Pte::partial) ? static_cast<std::uint32_t>(atom::peek(&v.sectors[page])) : v.page_blocks(page);
}

// Where nothing is ever evicted the frame is the page's own number: a hit then finds the data without the
// page's word (PagerView::whole), and a change to smaller pages keeps it so (relay_page). ctl_fresh still
// counts the frames taken.
UMEM_HD inline Claim claim_frame(const PagerView& v, std::uint64_t page, unsigned shard) {
    if (v.never_evicts()) {
        atom::count(&v.ctl[ctl_fresh], std::uint64_t{1});
        return {static_cast<std::uint32_t>(page), no_page, 0};
    }
    if (const std::uint32_t f = take_fresh(v); f != Pte::max_frames) return {f, no_page, 0};
    // The owner and PTE are read relaxed (on a GPU an acquire load costs more, and a sweep makes
    // many): the CAS below checks what they said.
    std::uint64_t* hand = &v.ctl[ctl_hand];
    // After a change to smaller pages most frames can be free (a partial page's unread sub-pages, free_frame)
    // while the sub-pages kept sit among them unreferenced: the hand takes free frames and passes the rest until a
    // claim finds none within free_first_steps, and only then evicts (H100, scatter over 1 GiB at a 6.25% pool: the
    // batches after the change evicted and wrote back 1.1-1.4K kept sub-pages each while most frames were free, and
    // took 0.30-0.33 ms against p256's 0.24-0.26; now none, 0.27-0.29 against 0.25-0.27).
    bool free_first = atom::peek(&v.ctl[ctl_free_first]) != 0;
    const std::uint64_t turns = 2ull * v.frames_n + 1;
    const std::uint64_t steps = (turns < sweep_steps ? turns : sweep_steps) + (free_first ? free_first_steps : 0);
    for (std::uint64_t i = 0; i < steps; ++i) {
        std::uint64_t tick = atom::fetch_add(hand, std::uint64_t{1});
        if (v.eviction == Eviction::random) tick = (tick * 0x9e3779b97f4a7c15ull) >> 17;
        std::uint32_t f = static_cast<std::uint32_t>(tick % v.frames_n);
        std::uint32_t page = atom::peek(&v.frame_owner[f]);
        if (page == free_frame) {  // left empty by a change to smaller pages: ours if nobody took it first
            if (atom::cas(&v.frame_owner[f], page, no_page)) {
                v.count(shard, c_hand_steps, i + 1);
                return {f, no_page, 0};
            }
            continue;
        }
        if (free_first) {
            // Sooner where another claim found none: each step is an atomic on the hand, for every claim in flight.
            const bool ended = i % 32 == 31 && atom::peek(&v.ctl[ctl_free_first]) == 0;
            if (!ended && i + 1 < free_first_steps) continue;
            free_first = false;  // free frames are rare now: CLOCK from here on, for every claim
            if (!ended) atom::store(&v.ctl[ctl_free_first], std::uint64_t{0});
        }
        if (page >= v.pages) continue;  // never used, or shared (place_shared)
        std::uint64_t* slot = &v.pte[page];
        Pte e{atom::peek(slot)};
        // The PTE is the truth: frame_owner may be stale, the PTE says whether f holds `page`.
        if (e.state() != PageState::resident || e.frame() != f || e.pins() != 0) continue;
        if (v.eviction == Eviction::clock && e.is(Pte::referenced)) {
            atom::fetch_and(slot, ~Pte::referenced);
            continue;
        }
        std::uint64_t expected = e.word;
        // resident (2) -> evicting (3): +1 in the state field; pins stay 0 or the CAS fails.
        if (atom::cas(slot, expected, e.word + 1)) {
            v.count(shard, c_evictions);
            v.count(shard, c_hand_steps, i + 1);
            note_eviction(v, e);
            return {f, page, e.is(Pte::dirty) ? data_blocks(v, page, e) : 0u};
        }
    }
    v.count(shard, c_hand_steps, steps);
    v.count(shard, c_exhausted);
    return {Pte::max_frames, no_page, 0};
}

// A writer in place counts itself in the writers field while the page is in host memory, which
// keeps it from migrating under the write. False: the page is no longer in host memory (or already
// has Pte::max_writers writers); wait and look again.
UMEM_HD inline bool begin_write_in_place(std::uint64_t* slot) {
    Pte e{atom::load(slot)};
    while (e.state() == PageState::host && e.writers() < Pte::max_writers)
        if (atom::cas(slot, e.word, e.word + Pte::writer_one)) return true;
    return false;
}

// A page in host memory migrates when no writer writes it in place; readers in place keep their
// pins through the migration (their pins then keep the frame from being evicted and written back
// while they still read host memory), so a hot page that threads keep reading in place still
// migrates. A few CAS attempts: other readers pinning change the word under us.
UMEM_HD inline bool begin_migration(std::uint64_t* slot, Pte e) {
    for (int attempt = 0; attempt < 4 && e.state() == PageState::host && e.writers() == 0; ++attempt) {
        // Our own pin (in e) is dropped: finish_fill gives the filler the pin it needs.
        std::uint64_t next = ((e.word & (Pte::touched | Pte::pin_mask)) - Pte::pin_one) |
                             static_cast<std::uint64_t>(PageState::migrating);
        if (atom::cas(slot, e.word, next)) return true;
    }
    return false;
}

// Whether a page-table word is resident with the whole page in its frame.
UMEM_HD inline bool whole_resident(Pte e) {
    return (e.word & (Pte::state_mask | Pte::partial)) == static_cast<std::uint64_t>(PageState::resident);
}

// A hit on a pinned page (`e`: its word before the pin): the bits the access owes it. At most one more
// atomic (a fetch_or, which needs no answer), and only until the bits are set and the hits counted pay
// for the fill.
UMEM_HD inline void mark_hit(const PagerView& v, std::uint64_t* slot, Pte e, bool write) {
    std::uint64_t set = (write && !e.is(Pte::dirty) ? Pte::dirty : 0) |
                        (v.eviction == Eviction::clock && !e.is(Pte::referenced) ? Pte::referenced : 0) |
                        (e.hits() < v.paid_hits() ? e.next_hit() : 0);
    if (set != 0) atom::fetch_or(slot, set, atom::relaxed);  // an evictor's CAS sees them in the word
}

// A hit where nothing is ever evicted: a resident page stays where it is, so no pin and no eviction bits.
UMEM_HD inline bool unpinned_hit(std::uint64_t* slot, bool write, std::uint32_t& frame) {
    Pte e{atom::load_dep(slot)};  // see find_resident
    if (!whole_resident(e)) return false;
    if (write && !e.is(Pte::dirty)) atom::fetch_or(slot, Pte::dirty);
    frame = e.frame();
    return true;
}

// A caller's own first look at a page, before acquire(): nothing, the page's bit (clear), or a pin (`word`: the
// page's word before it, the pin still held).
struct Looked {
    enum Kind : std::uint8_t { nothing, bit_clear, pinned } kind = nothing;
    Pte word{};
};

// The pin that an access to a pool that evicts starts with; returns the page's word before it.
UMEM_HD inline Pte pin(const PagerView& v, std::uint64_t page) {
    return Pte{atom::fetch_add(&v.pte[page], Pte::pin_one, atom::acquire)};  // the pin orders nothing before it
}

// A look that pins a page of a pool that evicts (`looked`: the word before the pin, the pin held): true, with the hit
// marked, when the page is resident whole.
UMEM_HD inline bool pinned_hit(const PagerView& v, std::uint64_t page, Looked& looked) {
    looked = {Looked::pinned, pin(v, page)};
    if (!whole_resident(looked.word)) return false;
    mark_hit(v, &v.pte[page], looked.word, false);
    return true;
}

// A read that is a hit and nothing else: the page resident whole, held as held() says (pinned unless nothing
// is ever evicted), its bits set, `frame` its frame. Otherwise false with nothing held: take begin_access.
// Counts nothing, so that lanes looking up pages of their own at once (Array::warp_acquire_each) count together.
UMEM_HD inline bool try_hit(const PagerView& v, std::uint64_t page, std::uint32_t& frame) {
    assert(page < v.pages && "umem: access beyond the end of the array");
    std::uint64_t* slot = &v.pte[page];
    if (v.never_evicts()) {
        if (!whole_bit(v, page)) return false;
        frame = static_cast<std::uint32_t>(page);
        return true;
    }
    Looked looked;
    if (!pinned_hit(v, page, looked)) {
        atom::fetch_sub(slot, Pte::pin_one);  // as begin_access drops a pin it cannot use
        return false;
    }
    frame = looked.word.frame();
    return true;
}

// Whether every block of `blocks` of a partial page was displaced (note_displaced) while frames are shared: its slot
// in the page's frame is another page's for as long as the frame is shared (shared frames are neither evicted nor
// emptied before the first choice), so the access reads in place without claiming it. Claimed only to fail, a hot
// page's displaced block was a token that one access at a time held while the others waited: under Zipf a few warps
// waited thousands of rounds and the first kernel took 3-6x as long (H200, runs of 8 u64 over 1 GiB at a 64 MiB
// pool: 1% of warps ran 10-22 ms, the median under 1 ms; bench/results/umem-h200-2026-11-28d.md).
UMEM_HD inline bool known_displaced(const PagerView& v, std::uint64_t page, std::uint32_t blocks) {
    return slots_in_use(v) != nullptr && v.displaced_blocks != nullptr &&
           (blocks & ~atom::peek(&v.displaced_blocks[page])) == 0;
}

// A partial page's read that reads in place, its pin held: what it would have done had the page not been resident.
// Host memory holds the blocks the frame lacks, and the frame's are never written where this happens (a frame that
// pages share: write_out_of_shared).
UMEM_HD inline Step partial_in_place(const PagerView& v, unsigned shard) {
    v.count(shard, c_read_through);
    return {Step::host, 0, no_page, 0, 0};
}

// A write to a partial page in a frame that pages share: the page goes back to host memory and the write goes there in
// place, as a writer (the page does not migrate under it). Its blocks in the frame are dropped, not copied: no write
// reaches a page in such a frame but this one, so they are as host memory has them. Only while no other access holds
// the page (`e`: its word before this access's pin), which could be reading the frame or filling it; else it waits.
// Its slots stay taken until the first choice, which frees them (free_unless_taken). Before, a write that needed a slot
// another page's block held wrote in place while its blocks in the frame stayed as they were, written or not: a later
// read read the old bytes, and a flush wrote them over the new ones (a CPU test: 256 bytes across a block in the frame
// and a block whose slot was taken).
UMEM_HD inline Step write_out_of_shared(const PagerView& v, std::uint64_t page, Pte e, unsigned shard) {
    std::uint64_t* const slot = &v.pte[page];
    std::uint64_t alone = e.word + Pte::pin_one;  // the word as this access's pin left it
    if (e.pins() != 0 || e.writers() != 0 ||
        !atom::cas(slot, alone, (e.word & Pte::touched) | static_cast<std::uint64_t>(PageState::migrating))) {
        atom::fetch_sub(slot, Pte::pin_one);
        return {Step::wait, 0, no_page, 0, 0};
    }
    atom::store(&v.sectors[page], std::uint64_t{0});
    if (v.displaced_blocks != nullptr) atom::store(&v.displaced_blocks[page], 0u);  // it starts again in host memory
    if (v.second_frames != nullptr) atom::store(&v.second_frames[page], std::uint64_t{0});
    // migrating (1) -> host (0), this access a writer in place; accesses that pinned it meanwhile drop their pins
    atom::fetch_add(slot, Pte::writer_one - 1);
    v.count(shard, c_faults);
    v.count(shard, c_read_through);
    return {Step::host, 0, no_page, 0, 0};
}

// begin_access once the page is pinned (`e`: its word before the pin).
UMEM_HD inline Step after_pin(const PagerView& v, std::uint64_t page, bool write, unsigned shard, Pte e,
                              std::uint64_t bytes, std::uint64_t offset) {
    std::uint64_t* slot = &v.pte[page];
    switch (e.state()) {
        case PageState::resident: {
            if (e.is(Pte::partial)) {  // the blocks it needs: in the frame, to be claimed, or claimed by another
                if (write && in_shared_frame(v, e.frame())) return write_out_of_shared(v, page, e, shard);
                const std::uint64_t w = atom::load(&v.sectors[page]);
                const std::uint32_t missing = missing_blocks(v, page, offset, bytes, static_cast<std::uint32_t>(w),
                                                             static_cast<std::uint32_t>(w >> 32));
                if (missing != 0) {  // claim those nobody claimed (one copy: fill_frame)
                    if (const std::uint32_t f = slots_in_use(v) == nullptr
                                                    ? Pte::max_frames
                                                    : second_frame_with(v, page, read_blocks(v, page, offset, bytes));
                        f < Pte::max_frames) {  // a read, in the page's second frame
                        v.count(shard, c_hits);
                        mark_hit(v, slot, e, false);
                        return {Step::hit, f, no_page, 0, 0};
                    } else if (f == split_frames) {
                        v.count(shard, c_faults);
                        return partial_in_place(v, shard);
                    }
                    if (known_displaced(v, page, missing)) {
                        v.count(shard, c_faults);
                        return partial_in_place(v, shard);
                    }
                    const std::uint32_t mine = missing & ~static_cast<std::uint32_t>(w >> 32);
                    std::uint64_t expected = w;
                    if (mine != 0 && atom::cas(&v.sectors[page], expected, w | std::uint64_t{mine} << 32)) {
                        v.count(shard, c_faults);
                        if (claim_slots(v, e.frame(), mine))
                            return {Step::sector, e.frame(), no_page, 0, mine};  // pinned until finish_sector
                        const std::uint32_t f = shares(v, bytes, write) ? claim_second(v, page, mine) : Pte::max_frames;
                        if (f < Pte::max_frames) return {Step::sector, f, no_page, 0, mine};  // its second frame
                        atom::fetch_and(&v.sectors[page], ~(std::uint64_t{mine} << 32));      // the claim given back
                        if (f == second_busy) {  // another access is placing the second frame: look again
                            atom::fetch_sub(slot, Pte::pin_one);
                            return {Step::wait, 0, no_page, 0, 0};
                        }
                        // Another page's blocks are in those slots (a shared frame, which a write never gets to
                        // here): read in place, as the access would have if the page were not resident. Nothing else
                        // can bring those blocks in while the frame is shared, so the host's bytes are the page's.
                        note_displaced(v, page, mine);
                        return partial_in_place(v, shard);
                    }
                    atom::fetch_sub(slot, Pte::pin_one);
                    return {Step::wait, 0, no_page, 0, 0};
                }
            }
            v.count(shard, c_hits);
            if (v.never_evicts()) {  // became resident just now: unpinned as above
                atom::fetch_sub(slot, Pte::pin_one);
                if (write && !e.is(Pte::dirty)) atom::fetch_or(slot, Pte::dirty);
                return {Step::hit, e.frame(), no_page, 0, 0};
            }
            mark_hit(v, slot, e, write);
            return {Step::hit, e.frame(), no_page, 0, 0};
        }
        case PageState::host: {
            v.count(shard, c_faults);
            e.word += Pte::pin_one;  // the word as our pin left it
            const std::uint32_t blocks = need_blocks(v, page, offset, bytes);
            if (admit(v, page, e, std::uint64_t{popcount32(blocks)} << v.block_shift(),
                      std::uint64_t{popcount32(read_blocks(v, page, offset, bytes))} << v.block_shift())) {
                if (begin_migration(slot, e)) {
                    if (blocks != v.page_blocks(page) && shares(v, bytes, write)) {
                        const std::uint32_t f = place_shared(v, page, blocks);
                        if (f != Pte::max_frames) return {Step::fill, f, no_page, 0, blocks};
                        v.count(shard, c_exhausted);
                        atom::fetch_add(slot, Pte::pin_one - 1);  // as below
                        v.count(shard, c_read_through);
                        return {Step::host, 0, no_page, 0, 0};
                    }
                    Claim c = claim_frame(v, page, shard);
                    if (c.frame != Pte::max_frames) return {Step::fill, c.frame, c.victim, c.victim_blocks, blocks};
                    // No frame: back to host (migrating 1 -> host 0) with our pin again; read in place.
                    atom::fetch_add(slot, Pte::pin_one - 1);
                }
            } else if (v.admission == Admission::second_touch) {
                atom::fetch_or(slot, Pte::touched);
            }
            if (write) {  // in place: counted as a writer instead of a reader
                bool in_place = begin_write_in_place(slot);
                atom::fetch_sub(slot, Pte::pin_one);
                if (!in_place) return {Step::wait, 0, no_page, 0, 0};
            }
            v.count(shard, c_read_through);
            return {Step::host, 0, no_page, 0, 0};
        }
        default:  // migrating or evicting: someone else is moving it; drop the pin and wait
            atom::fetch_sub(slot, Pte::pin_one);
            return {Step::wait, 0, no_page, 0, 0};
    }
}

// Leader: looks the page up and pins it, or wins the right to fill it, or must wait.
// The access reads `bytes` of the page from `offset` on (what a fill copies: need_blocks). Where nothing is
// ever evicted a read looks at the page's bit first, unless the caller just did (`bit_seen`: get()'s miss
// path, whose kernels spilled more with a second look inlined; H100, umem-sparse-bench's get() kernels).
// Not in acquire() before its loop: inlined there, it made umem-bench's gather kernel spill more and its reuse
// at a 25% pool 9% slower (bench/results/umem-h100-2026-11-26d.md). Array::warp_acquire looks for a read hit
// itself and runs acquire() out of line (bench/results/umem-h200-2026-11-26e.md).
UMEM_HD inline Step begin_access(const PagerView& v, std::uint64_t page, bool write, unsigned shard,
                                 std::uint64_t bytes = ~0ull, std::uint64_t offset = 0, bool bit_seen = false) {
    assert(page < v.pages && "umem: access beyond the end of the array");
    std::uint32_t frame = 0;
    if (v.never_evicts() && !write && !bit_seen && whole_bit(v, page)) {
        v.count(shard, c_hits);
        return {Step::hit, static_cast<std::uint32_t>(page), no_page, 0, 0};
    }
    if (v.never_evicts() && unpinned_hit(&v.pte[page], write, frame)) {
        v.count(shard, c_hits);
        return {Step::hit, frame, no_page, 0, 0};
    }
    return after_pin(v, page, write, shard, pin(v, page), bytes, offset);
}

// Evictor, after the victim's frame was written back (when dirty): the victim is host again.
UMEM_HD inline void finish_eviction(const PagerView& v, std::uint32_t victim, bool dirty, unsigned shard) {
    if (dirty) {
        v.count(shard, c_writebacks);
        v.count(shard, c_bytes_out, v.page_bytes(victim));
    }
    if (v.dirty_blocks != nullptr) atom::store(&v.dirty_blocks[victim], 0u);  // its next residency starts clean
    if (v.sectors != nullptr) atom::store(&v.sectors[victim], std::uint64_t{0});
    // Keep the pins of accessors that are about to see `evicting` and back off, and `touched`.
    atom::fetch_and(&v.pte[victim], Pte::pin_mask | Pte::touched);
}

// Filler, after the frame holds the page's `blocks` (page_blocks: all): publish it resident, partial
// when not all. `demand`: an access asked for it (pinned for the caller unless nothing is ever
// evicted); else a prefetch.
UMEM_HD inline void finish_fill(const PagerView& v, std::uint64_t page, std::uint32_t frame, bool write, bool demand,
                                std::uint32_t blocks, unsigned shard) {
    const bool pin = demand && !v.never_evicts(), partial = blocks != v.page_blocks(page);
    std::uint32_t* const slots = slots_in_use(v);
    if (slots == nullptr || atom::peek(&slots[frame]) == 0)  // a shared frame keeps its owner
        atom::store(&v.frame_owner[frame], static_cast<std::uint32_t>(page));
    if (partial) atom::store(&v.sectors[page], blocks | (std::uint64_t{blocks} << 32));  // before the PTE says so
    // migrating (1) -> resident (2) is +1; frame bits, dirty and referenced are 0 while migrating.
    std::uint64_t delta = 1 + (static_cast<std::uint64_t>(frame) << Pte::frame_shift) + (pin ? Pte::pin_one : 0) +
                          (write ? Pte::dirty : 0) + (partial ? Pte::partial : 0);
    atom::fetch_add(&v.pte[page], delta);
    if (!partial) mark_whole(v, page);
    v.count(shard, demand ? c_fills : c_prefetches);
    v.count(shard, c_bytes_in, partial ? popcount32(blocks) << v.block_shift() : v.page_bytes(page));
}

// Filler of a partial page's blocks (Step::sector), after they are in `frame`: marks them there, makes the page whole
// when it is (in its second frame: marks them there and gives their claims back), and drops the pin begin_access took,
// unless `keep_pin` (a read that has what it needs in `frame` and reads it before its release(): the page marked as
// its hit would have; where nothing is ever evicted no access holds a pin, so it is dropped there all the same).
UMEM_HD inline void finish_sector(const PagerView& v, std::uint64_t page, std::uint32_t frame, std::uint32_t blocks,
                                  unsigned shard, bool keep_pin = false) {
    if (frame != Pte{atom::peek(&v.pte[page])}.frame()) {  // its second frame (claim_second): there, and unclaimed
        atom::fetch_or(&v.second_frames[page], std::uint64_t{blocks});
        atom::fetch_and(&v.sectors[page], ~(std::uint64_t{blocks} << 32));
    } else if (const std::uint64_t w = atom::fetch_or(&v.sectors[page], std::uint64_t{blocks}) | blocks;
               (~static_cast<std::uint32_t>(w) & v.page_blocks(page)) == 0) {
        atom::fetch_and(&v.pte[page], ~Pte::partial);
        mark_whole(v, page);
    }
    v.count(shard, c_fills);
    v.count(shard, c_bytes_in, popcount32(blocks) << v.block_shift());
    if (!keep_pin || v.never_evicts())
        atom::fetch_sub(&v.pte[page], Pte::pin_one, atom::release);
    else  // the marks its look again would have set (CLOCK's reference, adaptive admission's hits)
        mark_hit(v, &v.pte[page], Pte{atom::peek(&v.pte[page])}, false);
}

// Whether a read of bytes [offset, offset + bytes) of `page` finds all it reads in the blocks a sector step copied
// (`s.blocks`, in `s.frame`): it keeps its pin and reads there (finish_sector), instead of looking again (a pin, the
// page's words and an unpin more, for every block a partial page gets after its first).
UMEM_HD inline bool sector_serves(const PagerView& v, const Step& s, std::uint64_t page, std::uint64_t offset,
                                  std::uint64_t bytes, bool write) {
    return s.kind == Step::sector && !write && (read_blocks(v, page, offset, bytes) & ~s.blocks) == 0;
}

// What an access holds until release(): `data` is what acquire() returned. In host memory a
// reader holds a pin and a writer a writer count; in a frame a pin, unless nothing is ever evicted.
UMEM_HD inline std::uint64_t held(const PagerView& v, std::uint64_t page, const std::byte* data, bool write) {
    if (data == v.host_page(page)) return write ? Pte::writer_one : Pte::pin_one;
    return v.never_evicts() ? 0 : Pte::pin_one;
}

// With at least as many frames as pages a resident page never moves, so reading it needs no pin:
// the load of its bit (whole_bit, through L1 on the GPU: atom::load_growing). Returns the frame's data, or null
// (then take acquire()). An acquire load would also invalidate the SM's L1 at every hit and buys nothing: frames
// are written to L2 before the bit's release and read from L2 by a load the bit's value decides.
// A read of bytes [offset, offset + n) of the page also hits a partial page whose frame has their blocks
// (sectors' low half, set after the blocks' copy with a release, as the bit is; at such a pool blocks only come in,
// so it too is read through L1: H200, runs of 4 u64 read again over 4 and 8 GiB 1-2% faster, 1.43-1.44x and 1.48x
// device memory, were 1.45-1.46x and 1.50x; bench/results/umem-h200-2026-11-27c.md):
// lone threads' chunks leave pages partial when the first choice keeps 4 KiB, and their reads took the protocol, a pin
// and an unpin a read (H100, runs of 4 u64 over 4 GiB read again at a full pool: 7.3 ms a pass against p4096's 0.85).
UMEM_HD inline std::byte* find_resident(const PagerView& v, std::uint64_t page, std::uint64_t offset = 0,
                                        std::uint64_t n = ~0ull) {
    if (!v.never_evicts()) return nullptr;
    std::byte* frame = v.frame_data(static_cast<std::uint32_t>(page));
    if (whole_bit(v, page)) return frame;
    if (v.sectors == nullptr) return nullptr;
    const std::uint32_t b = n == ~0ull ? v.page_blocks(page) : v.blocks_of(offset, n);
    return (static_cast<std::uint32_t>(atom::load_growing(&v.sectors[page])) & b) == b ? frame : nullptr;
}

// Sequential prefetch: when the page before a fault is in GPU memory or on its way, the access
// stream is sequential, so the filler also claims the next pages that nobody is using.
UMEM_HD inline bool stream_detected(const PagerView& v, std::uint64_t page) {
    if (v.prefetch_depth == 0 || page == 0) return false;
    return Pte{atom::load(&v.pte[page - 1])}.state() != PageState::host;
}

UMEM_HD inline Step begin_prefetch(const PagerView& v, std::uint64_t page, unsigned shard) {
    std::uint64_t* slot = &v.pte[page];
    std::uint64_t expected = atom::load(slot);
    Pte e{expected};
    if (e.state() != PageState::host || e.pins() != 0 || e.writers() != 0) return {Step::wait, 0, no_page, 0, 0};
    if (!atom::cas(slot, expected, (e.word & Pte::touched) | static_cast<std::uint64_t>(PageState::migrating)))
        return {Step::wait, 0, no_page, 0, 0};
    Claim c = claim_frame(v, page, shard);
    if (c.frame == Pte::max_frames) {
        atom::fetch_sub(slot, std::uint64_t{1});  // migrating -> host
        return {Step::wait, 0, no_page, 0, 0};
    }
    return {Step::fill, c.frame, c.victim, c.victim_blocks, v.page_blocks(page)};
}

// A fill the whole group carries out (every lane knows `s`): the victim's frame written back when
// dirty and the victim made host, then the page's blocks copied in and published (Step::fill), or a
// partial page's blocks (Step::sector; `keep_pin`: finish_sector's); `finisher` is the one lane that updates the page
// table (the filler). Returns the frame's data.
template <class Group, class Mover>
UMEM_HD inline std::byte* fill_frame(const PagerView& v, std::uint64_t page, const Step& s, bool write, bool demand,
                                     bool finisher, Group& g, Mover& m, bool keep_pin = false) {
    std::byte* frame = v.frame_data(s.frame);
    if (s.victim != no_page) {
        if (s.victim_blocks == v.page_blocks(s.victim))
            m.to_host(g, v.host_page(s.victim), frame, v.page_bytes(s.victim));
        else if (s.victim_blocks != 0)  // a partial page: its blocks only, by the mover's lighter loop
            m.to_host_blocks(g, v.host_page(s.victim), frame, v.page_bytes(s.victim), s.victim_blocks, v.block_shift());
        g.sync();
        if (finisher) finish_eviction(v, s.victim, s.victim_blocks != 0, g.shard());
    }
    // One copy from the first of s.blocks to the last, with all its loads in flight, as for a whole page; where
    // they are not adjacent (the rest of a page around blocks already in: missing_blocks) only theirs are loaded and
    // stored. Fewer registers than a loop over runs in get()'s kernels, whose hits spilled with it (H100: get() hits
    // 5-17% slower).
    const std::uint32_t first = ctz64(s.blocks), off = first << v.block_shift(), blocks = s.blocks >> first,
                        len = bit_width32(blocks) << v.block_shift(), left = v.page_bytes(page) - off,
                        n = len < left ? len : left;
    if ((blocks & (blocks + 1)) == 0)
        m.to_frame(g, frame + off, v.host_page(page) + off, n);
    else
        m.to_frame_blocks(g, frame + off, v.host_page(page) + off, n, blocks, v.block_shift());
    g.sync();
    if (finisher) {
        if (s.kind == Step::sector)
            finish_sector(v, page, s.frame, s.blocks, g.shard(), keep_pin);
        else
            finish_fill(v, page, s.frame, write, demand, s.blocks, g.shard());
    }
    return frame;
}

// The access driver: one group (a CPU thread, a GPU warp) takes a page for reading or writing.
// Group: lane(), leader(), sync(), broadcast(uint32 from the leader), shard().
// Mover: to_frame(group, dst, src, bytes), to_host(group, dst, src, bytes), and to_frame_blocks and to_host_blocks
// (group, dst, src, bytes, blocks, block_shift) (only the blocks of the mask, bit k the k-th block from dst); all lanes
// call them.
// Returns the page's data (frame or host), held as held() says; the caller ends with release().
// `looked`: what the leader's first look found where the caller looked for a hit itself (Array::warp_acquire).
template <class Group, class Mover>
UMEM_HD inline std::byte* acquire(const PagerView& v, std::uint64_t page, bool write, Group& g, Mover& m,
                                  std::uint64_t bytes = ~0ull, std::uint64_t offset = 0, Looked looked = {}) {
    unsigned shard = g.shard();
    bool waited = false;
    for (;;) {
        Step s{};
        if (g.leader())
            s = looked.kind == Looked::pinned
                    ? after_pin(v, page, write, shard, looked.word, bytes, offset)
                    : begin_access(v, page, write, shard, bytes, offset, looked.kind == Looked::bit_clear);
        looked = {};
        s.kind = static_cast<Step::Kind>(g.broadcast(s.kind));
        if (s.kind == Step::host) return v.host_page(page);
        s.frame = g.broadcast(s.frame);
        if (s.kind == Step::hit) return v.frame_data(s.frame);
        if (s.kind == Step::wait) {
            if (g.leader() && !waited) v.count(shard, c_waits);
            waited = true;
            atom::backoff();
            continue;
        }
        s.victim = g.broadcast(s.victim);
        s.victim_blocks = g.broadcast(s.victim_blocks);
        s.blocks = g.broadcast(s.blocks);
        const bool served = sector_serves(v, s, page, offset, bytes, write);
        std::byte* frame = fill_frame(v, page, s, write, true, g.leader(), g, m, served);
        if (served) return frame;
        if (s.kind == Step::sector) continue;  // its blocks are in; look again (they are not all it needs)
        // Prefetch the next pages of a sequential stream while this one is already usable.
        std::uint32_t depth = 0;
        if (g.leader() && stream_detected(v, page)) depth = v.prefetch_depth;
        depth = g.broadcast(depth);
        for (std::uint64_t q = page + 1; q <= page + depth && q < v.pages; ++q) {
            Step p{};
            if (g.leader()) p = begin_prefetch(v, q, shard);
            p.kind = static_cast<Step::Kind>(g.broadcast(p.kind));
            if (p.kind != Step::fill) break;
            p.frame = g.broadcast(p.frame);
            p.victim = g.broadcast(p.victim);
            p.victim_blocks = g.broadcast(p.victim_blocks);
            p.blocks = g.broadcast(p.blocks);
            fill_frame(v, q, p, false, false, g.leader(), g, m);
        }
        return frame;
    }
}

// Drops what an access holds (`data` and `write` as acquire() had them; held()).
UMEM_HD inline void end_access(const PagerView& v, std::uint64_t page, const std::byte* data, bool write) {
    std::uint64_t h = held(v, page, data, write);
    if (h != 0) atom::fetch_sub(&v.pte[page], h, atom::release);  // the access's reads and writes before it
}

// Ends a group's access: every lane's reads and writes of the data happen before what it holds is
// dropped.
template <class Group>
UMEM_HD inline void release(const PagerView& v, std::uint64_t page, Group& g, const std::byte* data, bool write) {
    g.sync();
    if (g.leader()) end_access(v, page, data, write);
}

// Writes every dirty resident frame back to host memory with the group's mover and clears its dirty
// bit. Call with no access in flight (pagers' flush()).
template <class Group, class Mover>
UMEM_HD inline void flush_all(const PagerView& v, Group& g, Mover& m) {
    for (std::uint64_t page = 0; page < v.pages; ++page) {
        Pte e{atom::load(&v.pte[page])};
        if (e.state() != PageState::resident || !e.is(Pte::dirty)) continue;
        std::byte *host = v.host_page(page), *frame = v.frame_data(e.frame());
        for_block_runs(data_blocks(v, page, e), v.block_shift(), v.page_bytes(page),
                       [&](std::uint32_t off, std::uint32_t n) { m.to_host(g, host + off, frame + off, n); });
        g.sync();
        if (g.leader()) {
            if (v.dirty_blocks != nullptr) atom::store(&v.dirty_blocks[page], 0u);
            atom::fetch_and(&v.pte[page], ~Pte::dirty);
            v.count(g.shard(), c_writebacks);
            v.count(g.shard(), c_bytes_out, v.page_bytes(page));
        }
    }
}

}  // namespace bardrive::umem
