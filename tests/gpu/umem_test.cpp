// umem on a real GPU: warps run the paging protocol against each other with both engines, every
// admission policy and pools from ample to nearly empty; host memory is checked word by word.
#include <catch2/catch_test_macros.hpp>
#include <tuple>
#include <vector>

#include "umem_kernels.hpp"

using namespace bardrive::umem;
using namespace bardrive::umem::gputest;

namespace {
void need_gpu() {
    std::string why = device_missing();
    if (!why.empty()) SKIP(why);
}
}  // namespace

TEST_CASE("warps read and write through umem exactly, pool ample to oversubscribed") {
    need_gpu();
    const std::uint64_t pages = 2048;  // 8 MiB
    for (Engine engine : {Engine::gpu_threads, Engine::copy_engine})
        for (Admission adm :
             {Admission::adaptive, Admission::migrate, Admission::second_touch, Admission::read_through})
            for (std::uint64_t frames : {pages, pages / 4, std::uint64_t{16}}) {
                INFO(name(engine) << " " << name(adm) << " frames " << frames);
                MixedResult r = run_mixed(pages, frames, adm, engine, 256, 200, adm == Admission::migrate ? 4 : 0);
                CHECK(r.bad_reads == 0);
                CHECK(r.bad_words == 0);
                CHECK(r.held == 0);
                CHECK(r.stats[c_hits] + r.stats[c_faults] >= 256u * 200u);
                if (adm == Admission::read_through) CHECK(r.stats[c_fills] == 0);
                if (adm == Admission::migrate && frames < pages) CHECK(r.stats[c_evictions] > 0);
                CHECK(r.stats.frames_used <= frames);
            }
}

TEST_CASE("frame exhaustion on the GPU: 256 warps, 2 frames, the kernel completes") {
    need_gpu();
    for (Engine engine : {Engine::gpu_threads, Engine::copy_engine}) {
        MixedResult r = run_mixed(512, 2, Admission::migrate, engine, 256, 100, 0);
        CHECK(r.bad_reads == 0);
        CHECK(r.bad_words == 0);
        CHECK(r.held == 0);
        CHECK(r.stats[c_read_through] > 0);  // the warps that found no frame read through
    }
}

TEST_CASE("single threads in divergent code read through Array::get") {
    need_gpu();
    CHECK(run_lone_reads(1024, 64, 4096, 64) == 0);
    CHECK(run_lone_reads(1024, 1024, 4096, 64) == 0);  // every page has a frame: hits take no pin
    CHECK(run_lone_reads(16384, 16384, 262144, 64) == 0);
    CHECK(run_lone_reads(16384, 4096, 262144, 64) == 0);
}

TEST_CASE("get() from lanes of a warp that reach it apart: each group's misses with no other's in them") {
    need_gpu();
    // Lanes held back before get() reach its miss loop while the others of their warp are in it. When each group of
    // lanes that got there together ran the loop with its own mask (__activemask()), its shuffles returned garbage
    // (frame numbers, pages) and fills copied to and from addresses terabytes off: an illegal memory access ends the
    // run with a CUDA error (red on the H200 every time, also with the ballots masked, also with the masks kept in
    // memory; bench/results/umem-h200-2026-11-29b.md).
    for (unsigned apart : {2u, 1u, 0u})
        for (std::uint64_t frames : {16384ull, 4096ull}) {
            INFO("apart " << apart << ", " << frames << " frames");
            CHECK(run_apart_reads(16384, frames, apart, 65536, 32) == 0);
        }
}

TEST_CASE(
    "element reads of whole and partial warps through Array::get, one and four at a time, hits and fills mixed in a "
    "warp") {
    need_gpu();
    // 64 MiB, 4M reads: a full pool (hits take no pin, the threads that hit copy the others' pages) and a
    // quarter. A wrong shuffle's out-of-bounds read ends the run with a CUDA error.
    for (std::uint64_t frames : {16384, 4096}) {
        CHECK(run_element_stream(16384, frames, 262144, 1, false, 3) == 0);
        CHECK(run_element_stream(16384, frames, 262144, 4, false, 2) == 0);
        CHECK(run_element_stream(16384, frames, 262144, 0, false, 3) == 0);  // Array::get of four
        CHECK(run_element_stream(16384, frames, 262144, 1, true, 2) == 0);
    }
}

TEST_CASE("lone threads' first kernel at a quarter pool shares frames, a block a slot; then 128 B or settled, exact") {
    need_gpu();
    // Lone elements at a quarter pool: the tally soon proposes 128 B, and from then on each miss fills its block
    // into a frame that pages share. So the first kernel fills more blocks than the pool has frames.
    // - Sparse reads (256 MiB, 1M reads) then change to 128 B, each slot a frame of its own (relay_page).
    // - Dense ones (64 MiB, 4M reads: most blocks read) keep 4 KiB, each shared frame given to one page
    //   (settle_shared).
    // Every sum of the three kernels is checked. Busy: the stream has a kernel still to run at each view(), so the
    // choice and the settling wait on the GPU for the kernels before (settle_kernel sees ctl_shared after them).
    for (const auto& [pages, threads, after] : {std::tuple{65536ull, 65536ull, 128ull}, {16384ull, 262144ull, 4096ull}})
        for (bool busy : {false, true}) {
            INFO(pages << " pages, " << threads * 16 << " reads" << (busy ? ", busy stream" : ""));
            const std::uint64_t frames = pages / 4;
            KernelSeen seen;
            CHECK(run_element_stream(pages, frames, threads, 1, false, 3, false, &seen, busy) == 0);
            REQUIRE(seen.stats.size() == 3);
            const Stats& first = seen.stats[0];
            INFO("first kernel: fills " << first[c_fills] << ", evictions " << first[c_evictions] << ", bytes in "
                                        << first[c_bytes_in]);
            CHECK(seen.page_size[0] == 4096);
            // An eighth of the frames or more shared by the kernel's end (H200: 14037-14938 of 16384 sparse, 935-2548
            // of 4096 dense), none after the change to 128 B or the settling. Sparse: nothing evicted. Dense: the tally
            // proposes 4 KiB before the kernel ends, and the misses after that take frames of their own (claim_frame),
            // evicting once the pool is full.
            INFO("shared frames after each kernel: " << seen.shared_frames[0] << ", " << seen.shared_frames[1]);
            CHECK(seen.shared_frames[0] >= frames / 8);
            CHECK(seen.shared_frames[1] == 0);
            if (after == 128) CHECK(first[c_evictions] == 0);
            CHECK(first[c_fills] > 4 * frames);
            CHECK(first[c_bytes_in] == first[c_fills] * 128);  // a block each
            CHECK(seen.page_size[1] == after);
            // Sparse: blocks the first kernel read in place because another page's block held their slot are filled
            // at the change to 128 B (fill_displaced), and the next kernels read them there (their sums are checked).
            const std::uint64_t displaced = seen.stats[1][c_prefetches] - first[c_prefetches];
            INFO("blocks filled at the change: " << displaced << "; second kernel's fills "
                                                 << seen.stats[1][c_fills] - first[c_fills]);
            if (after == 128) CHECK(displaced > 0);
            if (after != 128) CHECK(displaced == 0);
        }
}

TEST_CASE("warps' row writes into pages that lone reads put in shared frames land, read back and flushed, exact") {
    need_gpu();
    // A row across a block in its page's shared frame and a block whose slot is another page's: before, the write went
    // to host memory and the block in the frame kept its old bytes, which the next kernel read (write_out_of_shared).
    // 64 MiB at a quarter pool; every even page's row written, every word read back after the change and the flush.
    for (int run = 0; run < 3; ++run) {
        const WritesIntoShared r = run_writes_into_shared(16384, 4096);
        INFO("run " << run << ": page size after " << r.page_size << "; first kernel: fills " << r.first_kernel[c_fills]
                    << ", read in place " << r.first_kernel[c_read_through]);
        CHECK(r.bad_first == 0);
        CHECK(r.bad_read == 0);
        CHECK(r.bad_host == 0);
    }
}

TEST_CASE("warps' rows across blocks in a page's shared frame and its second frame read the page's words") {
    need_gpu();
    // A row whose blocks lie in both of its page's frames read the first frame's blocks from the second frame's
    // slots, another page's bytes (split_frames; a CPU test shows it alone). 64 MiB at a quarter pool.
    for (int run = 0; run < 3; ++run) {
        const RowsAcrossFrames r = run_rows_across_frames(16384, 4096);
        INFO("run " << run << ": second frames " << r.second_frames << "; fills " << r.stats[c_fills]
                    << ", read in place " << r.stats[c_read_through]);
        CHECK(r.second_frames > 0);
        CHECK(r.bad == 0);
    }
}

TEST_CASE("16-byte elements through Array::get, one or a run of four a thread, at a full and a quarter pool") {
    need_gpu();
    // The same pager's words read as pairs (Array's converting constructor): a lone thread's read is 16 bytes.
    for (std::uint64_t frames : {16384, 4096}) {
        CHECK(run_element_stream(16384, frames, 262144, 1, false, 3, true) == 0);
        CHECK(run_element_stream(16384, frames, 262144, 4, false, 3, true) == 0);
    }
}

TEST_CASE(
    "lone threads' chunks at a full pool: the chunk in the frame hits, another fills, half the page in the rest") {
    need_gpu();
    const std::uint64_t pages = 4096;  // 16 MiB: chunks of 512 B, the rest once 16 blocks are in (lone_*_for)
    const PartialHits r = run_partial_page_hits(pages);
    CHECK(r.bad == 0);
    REQUIRE(r.chunk == 512);
    REQUIRE(r.hits.size() == 4 + 4096 / r.chunk);
    CHECK(r.faults[0] == pages);  // a chunk a page
    CHECK(r.bytes_in[0] == pages * r.chunk);
    CHECK(r.hits[1] == pages);  // the same chunks: hits, nothing copied
    CHECK(r.faults[1] == 0);
    CHECK(r.bytes_in[1] == 0);
    CHECK(r.faults[2] == pages / 2);  // another chunk of odd pages
    CHECK(r.bytes_in[2] == pages / 2 * r.chunk);
    CHECK(r.faults[3] == pages / 2);  // even pages'; the copy of their chunk serves the read (sector_serves): no hit
    CHECK(r.hits[3] == pages / 2);
    // Then a read a chunk from byte 0 on. Chunks 0 and 5 are in: 1 and 2 come in, and with them half the page, so
    // the read at 1536 takes the rest in one copy, [1536, 2560) and [3072, 4096).
    const std::vector<std::uint64_t> sweep(r.bytes_in.begin() + 4, r.bytes_in.end());
    CHECK(sweep == std::vector<std::uint64_t>{0, pages * 512, pages * 512, pages * 2048, 0, 0, 0, 0});
    CHECK(r.lost_writes == 0);  // a word of chunk 5, written before: the copy of the rest went around it
    CHECK(r.faults[7] == pages);
    std::uint64_t in = 0;
    for (std::uint64_t b : r.bytes_in) in += b;
    CHECK(in == pages * 4096);  // every byte once
}

TEST_CASE("a lone read that straddles two chunks of a page at a full pool fills both, and reads both words there") {
    need_gpu();
    // Filling only the chunk of the read's first byte left the second word out of the frame, and the read took it
    // from there: umem-bench's BFS over RMAT 22 read wrong levels (H200).
    CHECK(run_straddling_reads(4096) == 0);
}

TEST_CASE("after a first choice that keeps 4 KiB, a warp's one-word miss fills its page whole") {
    need_gpu();
    // Before the choice such a miss fills a chunk (the test above). The choice is not written into the view that
    // warp_acquire's misses read (PagerView::shared): the launch passes it.
    const DecidedFills r = run_decided_fills(4096);
    CHECK(r.bad == 0);
    CHECK(r.page_size == 4096);
    CHECK(r.second[c_faults] == 2048);
    CHECK(r.second[c_fills] == 2048);
    CHECK(r.second[c_bytes_in] == 2048 * 4096);
}

TEST_CASE("the eviction hand on the GPU: a claim looks at most sweep_steps frames and the next goes on from there") {
    need_gpu();
    // 1024 frames all referenced: each lone miss clears sweep_steps bits, reads in place and gives up; once the hand
    // is round, the frame it cleared first is evicted. Before the bound one claim cleared all 1024 and evicted.
    const std::uint64_t frames = 1024, claims = frames / sweep_steps;
    const SweepSteps r = run_bounded_sweep(frames, claims);
    CHECK(r.bad == 0);
    REQUIRE(r.reads.size() == claims + 1);
    for (std::uint64_t k = 0; k < claims; ++k) {
        INFO("lone read " << k);
        CHECK(r.reads[k][c_exhausted] == 1);
        CHECK(r.reads[k][c_hand_steps] == sweep_steps);
        CHECK(r.reads[k][c_read_through] == 1);
        CHECK(r.reads[k][c_evictions] == 0);
    }
    CHECK(r.reads[claims][c_exhausted] == 0);
    CHECK(r.reads[claims][c_evictions] == 1);
    CHECK(r.reads[claims][c_fills] == 1);
    CHECK(r.reads[claims][c_hand_steps] == 1);
}

TEST_CASE("warps read and update 256-byte rows paged as 256-byte pages, 1, 4 or 16 at once, every word exact") {
    need_gpu();
    const std::uint64_t blocks = 2048, rows = blocks * 16;  // 8 MiB
    for (unsigned at_once : {1u, 4u, 16u})
        for (std::uint64_t frames : {rows, rows / 4, std::uint64_t{16}}) {
            INFO("frames " << frames << ", rows at once " << at_once);
            MixedResult r = run_rows(blocks, frames, 256, 200, at_once);
            CHECK(r.bad_reads == 0);
            CHECK(r.bad_words == 0);
            CHECK(r.stats[c_bytes_in] == r.stats[c_fills] * 256);
            CHECK(r.stats[c_hits] > 0);
        }
    // Two 4 KiB blocks (32 rows): the 32 lanes of a warp name the same rows many times while 256 warps write
    // them through 8 frames.
    for (std::uint64_t frames : {std::uint64_t{32}, std::uint64_t{8}}) {
        INFO("hot rows, frames " << frames);
        MixedResult r = run_rows(2, frames, 256, 200, 16);
        CHECK(r.bad_reads == 0);
        CHECK(r.bad_words == 0);
    }
}

TEST_CASE("flush() and stats() wait for kernels on a stream of their own before they write back and count") {
    need_gpu();
    const std::uint64_t pages = 256;
    FlushResult r = run_flush_unwaited(pages);
    CHECK(r.bad_words == 0);  // every warp's write in host memory
    CHECK(r.stats[c_writebacks] == pages);
    CHECK(r.again[c_hits] - r.stats[c_hits] == pages);  // the second kernel's writes, counted
}

TEST_CASE("the automatic page size: rows move a small pool to 256 B pages, gathers keep 4 KiB, every word exact") {
    need_gpu();
    const std::uint64_t blocks = 2048;  // 8 MiB, 4 KiB blocks
    for (std::uint64_t frames : {blocks, blocks / 4, std::uint64_t{16}}) {
        INFO("frames (4 KiB) " << frames);
        AutoResult r = run_auto(blocks, frames, 256, 20, false);  // ~4 of a block's 16 rows a kernel
        CHECK(r.bad_reads == 0);
        CHECK(r.bad_words == 0);
        REQUIRE(r.page_sizes.size() == 3);
        CHECK(r.page_sizes[0] == 4096);  // nothing seen yet: 4 KiB
        // A pool that holds the array too: the first kernel's rows are partial pages, holding only the rows
        // read or written, none whole, and the change keeps them where they are (change_pays).
        CHECK(r.page_sizes[1] == 256);
        CHECK(r.page_sizes[2] == 256);
        CHECK(r.relayouts == 1);
    }
    // The same on a stream of the caller's that does not synchronize with the legacy default stream: view(stream)
    // re-lays the table there.
    for (std::uint64_t frames : {blocks, std::uint64_t{16}}) {
        INFO("own stream, frames (4 KiB) " << frames);
        AutoResult r = run_auto(blocks, frames, 256, 20, false, true);
        CHECK(r.bad_reads == 0);
        CHECK(r.bad_words == 0);
        CHECK(r.page_sizes == std::vector<std::uint64_t>{4096, 256, 256});
        CHECK(r.relayouts == 1);
    }
    AutoResult g = run_auto(blocks, blocks / 4, 256, 200, true);
    CHECK(g.bad_reads == 0);
    CHECK(g.bad_words == 0);
    CHECK(g.page_sizes == std::vector<std::uint64_t>{4096, 4096, 4096});
    CHECK(g.relayouts == 0);
}
