// What lets one protocol source run on CPU threads and on GPU warps: the __host__ __device__
// marker when nvcc compiles it, and 64-bit atomics with explicit ordering on both sides
// (std::atomic_ref on the host, cuda::atomic_ref at device scope in kernels).
#pragma once

#include <cstdint>

#include "../core/hd.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#else
#include <atomic>
#include <thread>
#endif
#define UMEM_HD BARDRIVE_HD

namespace bardrive::umem::atom {

#if defined(__CUDACC__)
template <class T>
using Ref = cuda::atomic_ref<T, cuda::thread_scope_device>;
namespace order = cuda::std;
#else
template <class T>
using Ref = std::atomic_ref<T>;
namespace order = std;
#endif
// Read-modify-writes are acq_rel unless a caller needs less: on the GPU a release costs a fence that
// waits for all the thread's memory operations, an acquire an invalidation of the SM's L1.
using Order = order::memory_order;
inline constexpr Order acq_rel = order::memory_order_acq_rel, acquire = order::memory_order_acquire,
                       release = order::memory_order_release, relaxed = order::memory_order_relaxed;

template <class T>
UMEM_HD inline T load(T* p) {
    return Ref<T>(*p).load(order::memory_order_acquire);
}
template <class T>
UMEM_HD inline void store(T* p, T v) {
    Ref<T>(*p).store(v, order::memory_order_release);
}
template <class T>
UMEM_HD inline T fetch_add(T* p, T v, Order o = acq_rel) {
    return Ref<T>(*p).fetch_add(v, o);
}
template <class T>
UMEM_HD inline T fetch_sub(T* p, T v, Order o = acq_rel) {
    return Ref<T>(*p).fetch_sub(v, o);
}
template <class T>
UMEM_HD inline T fetch_or(T* p, T v, Order o = acq_rel) {
    return Ref<T>(*p).fetch_or(v, o);
}
template <class T>
UMEM_HD inline T fetch_and(T* p, T v) {
    return Ref<T>(*p).fetch_and(v, order::memory_order_acq_rel);
}
// On failure `expected` holds the current value.
template <class T>
UMEM_HD inline bool cas(T* p, T& expected, T desired) {
    return Ref<T>(*p).compare_exchange_strong(expected, desired, order::memory_order_acq_rel,
                                              order::memory_order_acquire);
}
// A load whose value only gives the address of the next read, or whether it is made (a PTE before its frame's
// data; a GPU issues a load only once the value it depends on is in): relaxed on the GPU, where frames are written
// and read at L2 (st.cg / ld.cg) and an acquire load would also invalidate the SM's L1 at every call; acquire on
// the CPU (the C++ model has no dependency ordering, and ThreadSanitizer checks it).
template <class T>
UMEM_HD inline T load_dep(T* p) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) == 8, "umem: page-table words");
    // Global space (LDG), not generic: page tables are in global memory (GPU or mapped host).
    T v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(__cvta_generic_to_global(p)));
    return v;
#else
    return Ref<T>(*p).load(order::memory_order_acquire);
#endif
}
// load_dep for a word whose bits only turn on while a kernel runs (where nothing is evicted: the pages' bits, and a
// partial page's blocks in its frame): on the GPU a weak load through the SM's L1. A stale 0 only sends the access
// to the protocol, which reads the page's word; a 1 was stored after the frame's data reached L2, and L1 starts each
// kernel empty. H200, hits through get() over 1 GiB 6-15% faster, over 8 GiB 1-4% slower, warp_acquire's rows over
// 8 GiB 7-10% faster (bench/results/umem-h200-2026-11-27b.md).
template <class T>
UMEM_HD inline T load_growing(T* p) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) == 8, "umem: page-table words");
    T v;
    asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v) : "l"(__cvta_generic_to_global(p)));
    return v;
#else
    return load_dep(p);
#endif
}
// Counters need no ordering, only no lost updates. On the GPU a reduction in global space (red), which
// nothing waits for: fetch_add on a generic address compiles to an atom the thread waits on, in case the
// address was shared memory (get() hits 1% faster, H100). Counters are in GPU or mapped host memory.
template <class T>
UMEM_HD inline void count(T* p, T v) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) == 8, "umem: 64-bit counters");
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "l"(v) : "memory");
#else
    Ref<T>(*p).fetch_add(v, order::memory_order_relaxed);
#endif
}
template <class T>
UMEM_HD inline T peek(T* p) {
    return Ref<T>(*p).load(order::memory_order_relaxed);
}

// Waiting for another filler or evictor: sleep a little on the GPU, yield the core on the CPU.
UMEM_HD inline void backoff() {
#if defined(__CUDA_ARCH__)
    __nanosleep(200);
#elif !defined(__CUDACC__)
    std::this_thread::yield();
#endif
}

}  // namespace bardrive::umem::atom
