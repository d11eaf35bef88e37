// What lets one source run on CPU threads and on GPU threads: the __host__ __device__ marker when
// nvcc compiles it, and the few device-I/O primitives such code needs on both sides: barriers that
// order descriptor writes before a doorbell (and a done bit before the data it guards), and a
// monotonic clock for timeouts. Used by umem's paging protocol and by nic's loopback DMA queue.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BARDRIVE_HD __host__ __device__
#else
#include <ctime>
#define BARDRIVE_HD
#endif

namespace bardrive::io {

// wmb: earlier stores (descriptors in DMA memory, write-combined stores) are visible to devices
//      before later ones (the doorbell write). On a GPU: visible system-wide (PCIe) before.
BARDRIVE_HD inline void wmb() noexcept {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#elif defined(__x86_64__)
    __asm__ __volatile__("sfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// rmb: a later load (a descriptor's body) is not satisfied before an earlier one (its done bit).
BARDRIVE_HD inline void rmb() noexcept {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#elif defined(__x86_64__)
    __asm__ __volatile__("lfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// mb: both.
BARDRIVE_HD inline void mb() noexcept {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#elif defined(__x86_64__)
    __asm__ __volatile__("mfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// Monotonic nanoseconds (the GPU's global timer on the device), for data-path timeouts.
BARDRIVE_HD inline std::uint64_t now_ns() noexcept {
#if defined(__CUDA_ARCH__)
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
#endif
}

}  // namespace bardrive::io
