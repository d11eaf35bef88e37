// GpuPager: owns a paged array's GPU side: page table, frame pool and counters in GPU memory,
// and, for the copy-engine engine, the request ring and the host worker thread serving it.
// The data itself stays in the caller's pinned, mapped host memory (cudaHostAlloc with
// cudaHostAllocMapped): GPU threads read it in place on a miss or a read-through.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "config.hpp"
#include "copy_ring.hpp"
#include "pager.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*: the CUDA runtime's header is left to the .cu files

namespace bardrive::umem {

enum class Engine { gpu_threads, copy_engine };
const char* name(Engine e);

class GpuPager {
public:
    // `host`: pinned mapped memory holding cfg.bytes (a multiple of 16), outliving the pager.
    // Throws bardrive::Error when the pool does not fit in free GPU memory or CUDA refuses.
    GpuPager(const Config& cfg, std::byte* host, Engine engine);
    GpuPager(const GpuPager&) = delete;
    GpuPager& operator=(const GpuPager&) = delete;
    ~GpuPager();

    // The view a kernel's Array is built from: take it for every launch, naming the stream the kernel runs on
    // (a cudaStream_t; the legacy default stream when left out). With the page size left out (automatic), when the
    // kernels before it propose another page size, it waits for that stream, reads what their accesses showed and,
    // when it pays, lays out a page table at that size on that stream (smaller pages: the resident ones stay where
    // they are, split; larger: dirty frames written back, every page in host memory again). An Array built from an
    // older view must not be launched after that, and kernels of the pager on other streams must be done before it.
    const PagerView& view(CUstream_st* stream = nullptr);
    // The page size in use now (automatic: what view() last chose).
    std::uint64_t page_size() const noexcept { return view_.page_size(); }
    const CopyRingView& ring() const noexcept { return ring_; }

    // Waits for the device (every stream's kernels), then writes dirty frames back to host memory (a kernel) and
    // waits; no kernel may be launched on the pager meanwhile.
    void flush();
    // Counters and frames used, copied from the GPU once every stream's kernels are done.
    Stats stats() const;
    // Page-size changes the automatic page size made so far.
    std::uint64_t relayouts() const noexcept { return relayouts_; }
    // What a lone thread's element fills first where the pool holds the array, before the first choice (automatic
    // page size): a chunk of the 4 KiB page (lone_fill_shift_for).
    std::uint64_t lone_fill_bytes() const noexcept {
        return std::uint64_t{1} << view_.lone_chunk_shift(auto_start_shift);
    }

private:
    void set_up(const Config& cfg, std::byte* host);
    // Page table and frame owners for pages of 1 << shift bytes (re-laid), in `stream`'s order.
    void layout(std::uint32_t shift, CUstream_st* stream);
    std::uint64_t pages_at(std::uint32_t shift) const;
    std::uint64_t frames_at(std::uint32_t shift) const;
    std::uint64_t table_bytes(std::uint32_t shift) const;  // page table, resident bits, frame owners: one allocation
    void make_table_ahead(int device);                     // table_maker_'s loop
    void park_table_maker() noexcept;                      // it waits, polling nothing, until it is stopped
    void stop_table_maker() noexcept;                      // and joined: its table, if any, is there to take
    void publish(CUstream_st* stream);                     // view_ into PagerView::shared, for the kernels after it
    void decide(CUstream_st* stream);                      // profile_decided set, shared frames settled
    // No frame shared any more (settle_shared); `any`: whether one may have been opened for sharing (a look's word).
    void settle(CUstream_st* stream, bool any = true);
    void release_all() noexcept;
    void serve();  // copy-engine worker loop

    PagerView view_{};
    bool auto_ = false;  // page size left out: view() picks it
    std::uint64_t pool_bytes_ = 0;
    std::uint64_t relayouts_ = 0;      // page-size changes so far
    std::uint64_t decisions_ = 0;      // looks at the profile that decided something
    std::uint32_t wanted_ = 0;         // the shift the last look chose, when it did not change it yet
    std::uint32_t* choice_ = nullptr;  // pinned, mapped: view_.profile_choice
    // Pinned, after *choice_, written by a look: the tally's two words, the bytes filled, whether a block was
    // displaced, whether a frame was opened for sharing.
    std::uint64_t* looked_ = nullptr;
    std::uint64_t* looked_dev_ = nullptr;  // the same, mapped for the GPU
    std::uint32_t look_every_ = 1;         // proposals of another page size between looks at the tally
    std::uint32_t since_look_ = 0;
    // Automatic page size: mapping a new table's GPU memory is most of a change's cost (10-14 us a MiB,
    // H100), so a thread maps the table of the first smaller page size the kernels propose while they
    // still run, clears it (every page host, owners none) on a stream of its own, and ends; view() joins
    // it at its first look and lays the table out there when it chose that size (else frees it). When the
    // first choice keeps the start's size it is parked instead, until the pager ends (park_table_maker says
    // why).
    std::thread table_maker_;
    std::mutex maker_mu_;
    std::condition_variable maker_cv_;  // wakes it at once when it is told to stop
    bool stop_maker_ = false;
    bool park_maker_ = false;
    void* spare_table_ = nullptr;  // written by table_maker_, read after it was joined: cleared, ready to relay into
    std::uint32_t spare_shift_ = 0;
    void* maker_stream_ = nullptr;   // cudaStream_t, non-blocking: the table is cleared there
    void* maker_cleared_ = nullptr;  // cudaEvent_t recorded there after the clearing
    CopyRingView ring_{};
    Engine engine_;
    void* stream_ = nullptr;  // cudaStream_t of the worker
    std::atomic<bool> stop_{false};
    std::thread worker_;
};

}  // namespace bardrive::umem
