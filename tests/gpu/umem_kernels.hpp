// Host entry points of the umem GPU tests' kernels (umem_kernels.cu), callable from Catch2 code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "umem/config.hpp"
#include "umem/gpu_pager.hpp"

namespace bardrive::umem::gputest {

// Empty when a CUDA device is usable; otherwise why not (for SKIP).
std::string device_missing();

struct MixedResult {
    std::uint64_t bad_reads = 0;  // words that did not hold their pattern when read on the GPU
    std::uint64_t bad_words = 0;  // words wrong in host memory after flush()
    std::uint64_t held = 0;       // after the kernel: pages still pinned or written, staging buffers still taken
    Stats stats;
};

// `warps` warps (<= 256) each make `ops` accesses to random pages of a 4 KiB-paged array of
// `pages` pages; every other access writes: the warp increments its own word in that page.
// Afterwards the pager is flushed and host memory is checked word by word.
MixedResult run_mixed(std::uint64_t pages, std::uint64_t frames, Admission admission, Engine engine,
                      std::uint32_t warps, std::uint32_t ops, std::uint32_t prefetch);

// Warps read 256-byte rows and add 1 atomically to every word of other rows, the array paged in
// 256-byte pages (`frames` of them); host memory is checked word by word after flush(). at_once 4 or 16:
// that many rows read at once, a lane each (Array::warp_acquire_each), else one by one.
MixedResult run_rows(std::uint64_t blocks, std::uint64_t frames, std::uint32_t warps, std::uint32_t ops,
                     unsigned at_once = 1);

// The automatic page size (Config::page_size left out): three kernels, each with a fresh view().
// Rows: warps read 256-byte rows and add 1 to every word of others (with a pool smaller than the array
// the pager should move to 256 B pages after the first kernel, writing the first kernel's dirty 4 KiB
// frames back first; with one that holds it, mostly filled already, stay at 4 KiB); gathers:
// warps read whole 4 KiB blocks (the pager should stay at 4 KiB). Reads checked on the GPU, host
// memory word by word after flush().
struct AutoResult {
    std::uint64_t bad_reads = 0, bad_words = 0, relayouts = 0;
    std::vector<std::uint64_t> page_sizes;  // the page size each kernel ran with
    Stats stats;
};
// own_stream: every kernel on a stream that does not synchronize with the legacy default stream
// (cudaStreamNonBlocking), its views taken with view(stream), that stream (not the device) waited for after each,
// while a kernel keeps the legacy stream busy.
AutoResult run_auto(std::uint64_t blocks, std::uint64_t frames, std::uint32_t warps, std::uint32_t ops, bool gathers,
                    bool own_stream = false);

// A kernel on a cudaStreamNonBlocking stream spins 20 ms, then each of `pages` warps (a multiple of 8) writes word 0
// of its page; flush() and stats() are called at once, nothing waiting for the stream (`stats`). The kernel again,
// and stats() at once (`again`). Host memory checked word by word.
struct FlushResult {
    std::uint64_t bad_words = 0;
    Stats stats, again;
};
FlushResult run_flush_unwaited(std::uint64_t pages);

// The automatic page size's first kernel at a pool smaller than the array: lone threads read random words (get())
// while warps write 256-byte rows of even pages (warp_acquire), then a second kernel reads every word, then flush().
// The words read wrong in each, and in host memory after the flush.
struct WritesIntoShared {
    std::uint64_t bad_first = 0, bad_read = 0, bad_host = 0, page_size = 0;
    Stats first_kernel;
};
WritesIntoShared run_writes_into_shared(std::uint64_t pages, std::uint64_t frames);

// The automatic page size's first kernel at a pool smaller than the array: lone threads read three blocks of every
// page (an even page's row among them), then warps read the rows. Words read wrong (lone and rows), pages that got a
// second frame.
struct RowsAcrossFrames {
    std::uint64_t bad = 0, second_frames = 0;
    Stats stats;
};
RowsAcrossFrames run_rows_across_frames(std::uint64_t pages, std::uint64_t frames);

// Every thread reads random elements one by one (Array<T>::get, divergent, no warp protocol).
std::uint64_t run_lone_reads(std::uint64_t pages, std::uint64_t frames, std::uint32_t threads, std::uint32_t ops);
// The same with some lanes of each warp held back before every read, calling get() from a call site of their own
// (apart 1: the odd lanes; 2: lane 0; 0: none), so that groups of a warp's lanes, each with a mask of its own, run
// get()'s misses at once. Returns the elements read wrong.
std::uint64_t run_apart_reads(std::uint64_t pages, std::uint64_t frames, unsigned apart, std::uint32_t threads,
                              std::uint32_t ops);

// Lone threads' chunks at a pool that holds the array (automatic page size, one view): thread t reads word 3 of page
// t, then word 5 (the same chunk), word 375 of odd pages (another chunk), word 376 of every page (that chunk), then a
// word in every chunk of every page. Per kernel, the hits, faults and bytes copied in; the words read wrong.
struct PartialHits {
    std::uint64_t bad = 0, chunk = 0;  // chunk: the pager's lone_fill_bytes()
    std::uint64_t lost_writes = 0;     // of a word written in a chunk that fills of the rest went around
    std::vector<std::uint64_t> hits, faults, bytes_in;
};
PartialHits run_partial_page_hits(std::uint64_t pages);

// Lone reads that straddle two chunks: automatic page size, a pool that holds `pages` pages, before the first choice;
// a warp a page reads two u64 words around the end of its page's 512-byte, 1 KiB and 2 KiB chunk in turn (as a
// BFS reading u32 neighbours through u64 words does). The words read wrong.
std::uint64_t run_straddling_reads(std::uint64_t pages);

// The first choice reaches warp_acquire's misses (Array::acquire_out_of_line passes profile_decided): automatic page
// size, a pool that holds `pages` pages; a kernel of warps reading whole 4 KiB pages of the first half (the choice
// keeps 4 KiB, nothing re-laid), then one of a warp a page of the second half reading one word through warp_acquire.
// The page size and counters' change of the second kernel; the words read wrong.
struct DecidedFills {
    std::uint64_t bad = 0, page_size = 0;
    Stats second;
};
DecidedFills run_decided_fills(std::uint64_t pages);

// The eviction hand's bound on the GPU: 4 KiB pages, `frames` frames filled by pages [0, frames) and then all hit
// (every reference bit set); then one thread at a time reads page frames + k, k = 0..claims. Per lone read, the
// counters' change; the words read wrong.
struct SweepSteps {
    std::uint64_t bad = 0;
    std::vector<Stats> reads;  // counters' change across each lone read
};
SweepSteps run_bounded_sweep(std::uint64_t frames, std::uint64_t claims);

// Each kernel's page size and the pager's counters after it (cumulative): run_element_stream's `seen`.
struct KernelSeen {
    std::vector<std::uint64_t> page_size;
    std::vector<Stats> stats;
    // Frames that pages shared when the kernel ended (PagerView::shared_slots).
    std::vector<std::uint64_t> shared_frames;
};

// umem-sparse-bench's element reads (Array<T>::get, 16 a thread, unrolled; runs of `run` adjacent elements,
// or with run 0 single elements four at a time through get of four)
// over a skewed stream, `kernels` times (automatic page size: the first kernel at 4 KiB, then what it chose);
// with `divergent`, only odd indices are read, so that get() runs with part of a warp. Returns the threads
// whose sum was wrong, over all kernels. With `pairs`, elements of 16 bytes (the same pager's Array as pairs of
// words, one get() each) in runs of `run`. `seen`, where given, gets what each kernel saw. With `busy`, a kernel
// spinning 5 ms goes on the stream before each view(): the pager decides while the kernels before have not run.
std::uint64_t run_element_stream(std::uint64_t pages, std::uint64_t frames, std::uint64_t threads, unsigned run,
                                 bool divergent, int kernels, bool pairs = false, KernelSeen* seen = nullptr,
                                 bool busy = false);

// Warps page an array through umem's NIC engine (NicMover, nic::LoopbackQueue) with `queues` queue pairs
// served by software ports on a CPU thread (tests/support/fake_loopback_port.hpp): the GPU side of the
// engine on a real GPU, no NIC. Reads checked on the GPU, host memory after a flush on the CPU.
struct NicWarpResult {
    std::uint64_t bad_reads = 0, bad_words = 0;
    std::uint64_t moves = 0, frames = 0, fallbacks = 0, broken = 0;
    Stats stats;
};
NicWarpResult run_nic_warps(std::uint64_t pages, std::uint64_t frames, std::uint32_t queues, std::uint32_t warps,
                            std::uint32_t ops);

}  // namespace bardrive::umem::gputest
