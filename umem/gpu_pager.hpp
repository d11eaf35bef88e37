// GpuPager: owns a paged array's GPU side: page table, frame pool and counters in GPU memory,
// and, for the copy-engine engine, the request ring and the host worker thread serving it.
// The data itself stays in the caller's pinned, mapped host memory (cudaHostAlloc with
// cudaHostAllocMapped): GPU threads read it in place on a miss or a read-through.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "config.hpp"
#include "copy_ring.hpp"
#include "pager.hpp"

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

    const PagerView& view() const noexcept { return view_; }
    const CopyRingView& ring() const noexcept { return ring_; }

    // Writes dirty frames back to host memory (a kernel) and waits; no kernel may use the pager.
    void flush();
    // Counters and frames used, copied from the GPU; call between kernels.
    Stats stats() const;

private:
    void set_up(const Config& cfg, std::byte* host);
    void release_all() noexcept;
    void serve();  // copy-engine worker loop

    PagerView view_{};
    CopyRingView ring_{};
    Engine engine_;
    void* stream_ = nullptr;  // cudaStream_t of the worker
    std::atomic<bool> stop_{false};
    std::thread worker_;
};

}  // namespace bardrive::umem
