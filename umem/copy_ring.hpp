// The copy-engine request ring: GPU warps post page copies into pinned host memory, a host
// thread (GpuPager's worker) batches them into cudaMemcpyAsync calls on its own stream and marks
// each done. Device-visible layout: both sides read and write these bytes over PCIe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"

namespace bardrive::umem {

struct CopyRequest {
    std::uint64_t posted;  // ticket + 1 once dst/src/bytes are valid (written last by the GPU)
    std::uint64_t done;    // ticket + 1 once the copy landed (written by the host worker)
    std::uint64_t dst;     // device-usable addresses (UVA: same value on the host)
    std::uint64_t src;
    std::uint64_t bytes;
    std::uint64_t pad[3];
};
// One slot per 64-byte line: the GPU polls `done` of its slot while the host writes others.
static_assert(sizeof(CopyRequest) == 64 && offsetof(CopyRequest, done) == 8 && offsetof(CopyRequest, dst) == 16);

struct CopyRingView {
    CopyRequest* slots;   // pinned mapped host memory, `size` slots; nullptr: no copy engine
    std::uint64_t* tail;  // device memory: next ticket
    std::uint64_t size;
};

#if defined(__CUDACC__)
// Posts one copy and waits until the worker reports it done (one thread calls it).
__device__ inline void ring_copy(const CopyRingView& r, std::byte* dst, const std::byte* src, std::uint32_t n) {
    using SysRef = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>;
    std::uint64_t t = atom::fetch_add(r.tail, std::uint64_t{1});
    CopyRequest* s = &r.slots[t % r.size];
    SysRef done(s->done);
    if (t >= r.size)  // the slot is free once the request one lap earlier is done
        while (done.load(cuda::std::memory_order_acquire) != t - r.size + 1) __nanosleep(500);
    s->dst = reinterpret_cast<std::uint64_t>(dst);
    s->src = reinterpret_cast<std::uint64_t>(src);
    s->bytes = n;
    SysRef(s->posted).store(t + 1, cuda::std::memory_order_release);
    while (done.load(cuda::std::memory_order_acquire) != t + 1) __nanosleep(500);
}
#endif

}  // namespace bardrive::umem
