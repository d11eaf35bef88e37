// The NIC as umem's migration engine: the protocol's Mover (pager.hpp) whose page moves are DMA done by
// an igb in MAC loopback (nic::LoopbackQueue), straight between host memory and the frame pool in a
// peer BAR window. The faulting thread itself writes the descriptors, rings the doorbells and polls its
// own completions: no driver thread, no kernel, no CPU copy. Header-only and __host__ __device__ like
// the protocol: CPU threads run it in the lab (umem::NicPager), GPU warps could run it where the GPU
// can reach the NIC's BAR and the rings (umem/README.md says what ran where).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../nic/e1000/loopback_queue.hpp"
#include "hd.hpp"
#include "pager.hpp"

namespace bardrive::umem {

// Engine counters, per queue (counter_stride words apart).
enum NicCounter : unsigned {
    nc_moves,       // page moves the engine did (fills and write-backs)
    nc_lock_waits,  // moves that found their queue taken by another thread
    nc_failures,    // moves the NIC failed (a write-back check, a timeout): the queue stopped
    nc_fallbacks,   // moves done by the fallback copy because the queue had stopped
    nc_count_,
};

// Test-only: a fault the engine introduces into one fill, to show that checks by content catch what
// the device's completions cannot (a lost page, a page one frame off).
enum class NicFault : std::uint32_t { none, lose_fill, misplace_fill };

// Everything the movers share, as plain pointers: the queues (one per worker), a lock word per queue,
// the counters, and where the two sides of a move are in CPU and device (IOVA) addresses.
struct NicEngineView {
    nic::LoopbackQueue* queues;  // [n]
    std::uint32_t* locks;        // [n * counter_stride]: 0 free, 1 taken
    std::uint64_t* counters;     // [n * counter_stride]
    std::uint32_t n;
    std::byte* host;  // backing store, pages of the array
    std::uint64_t host_iova;
    std::byte* frames;  // frame pool, in the peer window
    std::uint64_t frames_iova;
    std::uint64_t frames_bytes;
    std::uint64_t timeout_ns;
    std::uint64_t* fill_count;  // fills so far, for fault injection
    std::uint64_t fault_at;
    NicFault fault;
};

// The protocol's mover for one worker: `queue` is the caller's own queue pair. The group's leader moves
// the bytes (take the queue's lock, uncontended while every thread has its own queue; queue the copy;
// ring; poll its completion); the other lanes wait at the group's sync. When the NIC fails a move, its
// queue stops (no DMA into anything posted) and this and every later move on it is done by `Fallback`
// (the thread's own copy), counted, so data stays right even with a broken device.
template <class Fallback>
struct NicMover {
    const NicEngineView* e;
    unsigned queue;
    Fallback fallback;

    template <class G>
    UMEM_HD void to_frame(G& g, std::byte* dst, const std::byte* src, std::uint32_t n) {
        move(g, dst, src, n, e->frames_iova + static_cast<std::uint64_t>(dst - e->frames),
             e->host_iova + static_cast<std::uint64_t>(src - e->host), true);
    }
    template <class G>
    UMEM_HD void to_host(G& g, std::byte* dst, const std::byte* src, std::uint32_t n) {
        move(g, dst, src, n, e->host_iova + static_cast<std::uint64_t>(dst - e->host),
             e->frames_iova + static_cast<std::uint64_t>(src - e->frames), false);
    }
    template <class G>
    UMEM_HD void to_frame_blocks(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                                 std::uint32_t block_shift) {
        for_block_runs(blocks, block_shift, n,
                       [&](std::uint32_t off, std::uint32_t len) { to_frame(g, dst + off, src + off, len); });
    }
    template <class G>
    UMEM_HD void to_host_blocks(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint32_t blocks,
                                std::uint32_t block_shift) {
        for_block_runs(blocks, block_shift, n,
                       [&](std::uint32_t off, std::uint32_t len) { to_host(g, dst + off, src + off, len); });
    }

private:
    UMEM_HD std::uint64_t* counter(NicCounter c) const { return &e->counters[queue * counter_stride + c]; }

    template <class G>
    UMEM_HD void move(G& g, std::byte* dst, const std::byte* src, std::uint32_t n, std::uint64_t dst_iova,
                      std::uint64_t src_iova, bool fill) {
        std::uint32_t ok = 1;
        if (g.leader()) {
            std::uint32_t* lock = &e->locks[queue * counter_stride];
            for (bool waited = false;;) {
                std::uint32_t free = 0;
                if (atom::cas(lock, free, std::uint32_t{1})) break;
                if (!waited) atom::count(counter(nc_lock_waits), std::uint64_t{1});
                waited = true;
                atom::backoff();
            }
            nic::LoopbackQueue& q = e->queues[queue];
            ok = 0;
            if (q.status == nic::LoopbackQueue::Status::ok) {
                NicFault f = fill ? injected() : NicFault::none;
                if (f == NicFault::misplace_fill) {  // one page off: the next frame, or the one before the last
                    std::uint64_t off = dst_iova - e->frames_iova;
                    dst_iova = off + 2 * std::uint64_t{n} <= e->frames_bytes ? dst_iova + n : dst_iova - n;
                }
                // The backing store and the frames are whole pages, so a short last page may move as
                // min_data bytes: the device never pads, and the extra bytes stay inside the page's slot.
                std::uint64_t bytes = n < nic::LoopbackQueue::min_data ? nic::LoopbackQueue::min_data : n;
                ok = f == NicFault::lose_fill || (q.start(dst_iova, src_iova, bytes) && q.wait(e->timeout_ns));
                if (ok) atom::count(counter(nc_moves), std::uint64_t{1});
                if (!ok) atom::count(counter(nc_failures), std::uint64_t{1});
            }
            atom::store(lock, std::uint32_t{0});
        }
        ok = g.broadcast(ok);
        if (ok) return;
        if (g.leader()) atom::count(counter(nc_fallbacks), std::uint64_t{1});
        if (fill)
            fallback.to_frame(g, dst, src, n);
        else
            fallback.to_host(g, dst, src, n);
    }

    UMEM_HD NicFault injected() const {
        if (e->fault == NicFault::none) return NicFault::none;
        return atom::fetch_add(e->fill_count, std::uint64_t{1}) == e->fault_at ? e->fault : NicFault::none;
    }
};

}  // namespace bardrive::umem
