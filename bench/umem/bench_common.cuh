// Shared by the GPU benchmarks of bench/umem (umem-bench, umem-sparse-bench): the data pattern,
// host threads, CUDA error checks, event timing, warp helpers and RAII buffers.
// Include from .cu files only.
#pragma once

#include <cuda_runtime.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace bardrive::umem {

// Errors name the program that failed (umem-bench, umem-sparse-bench).
inline void ck(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) throw Error(program_invocation_short_name, what, cudaGetErrorString(rc));
}

// The data: word i holds mix(i), so any word can be checked without reading it back.
__host__ __device__ inline std::uint64_t mix(std::uint64_t i) {
    std::uint64_t z = i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 29);
}

// The comma-separated pieces of a list option ("100,50,25"), in order; a trailing comma adds none.
inline std::vector<std::string> split_list(const std::string& v) {
    std::vector<std::string> out;
    for (std::size_t p = 0; p < v.size();) {
        std::size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        out.push_back(v.substr(p, q - p));
        p = q + 1;
    }
    return out;
}

// --only's workloads: a comma list of known names ("gather,hotset"); empty runs them all. An unknown
// name is an error, not a run that measures nothing.
class Workloads {
public:
    Workloads() = default;
    Workloads(const std::string& tool, const std::string& list, const std::vector<std::string>& known) {
        for (const std::string& w : split_list(list)) {
            if (std::find(known.begin(), known.end(), w) == known.end()) {
                std::string names;
                for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
                throw Error(tool, "--only " + list, "unknown workload '" + w + "'",
                            "one or more of " + names + ", comma-separated");
            }
            names_.push_back(w);
        }
    }
    bool want(const std::string& w) const {
        return names_.empty() || std::find(names_.begin(), names_.end(), w) != names_.end();
    }

private:
    std::vector<std::string> names_;
};

inline unsigned host_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// f(i) for i in [0, n), split into one contiguous range per host thread.
template <class F>
void parallel_for(std::uint64_t n, F f) {
    unsigned t = host_threads();
    std::vector<std::thread> ts;
    for (unsigned k = 0; k < t; ++k)
        ts.emplace_back([&, k] {
            for (std::uint64_t i = n * k / t; i < n * (k + 1) / t; ++i) f(i);
        });
    for (auto& x : ts) x.join();
}

__device__ inline std::uint64_t warp_sum(std::uint64_t s) {
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__device__ inline std::uint64_t warp_id() {
    return (blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x) >> 5;
}
__device__ inline std::uint64_t warp_count() { return (gridDim.x * static_cast<std::uint64_t>(blockDim.x)) >> 5; }

// Times what f enqueues on the default stream, then checks the launch.
struct Events {
    cudaEvent_t a, b;
    Events() {
        ck(cudaEventCreate(&a), "event");
        ck(cudaEventCreate(&b), "event");
    }
    ~Events() {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    template <class F>
    double time_ms(F f) {
        ck(cudaEventRecord(a), "event record");
        f();
        ck(cudaEventRecord(b), "event record");
        ck(cudaEventSynchronize(b), "kernel");
        ck(cudaGetLastError(), "kernel launch");
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, a, b), "elapsed");
        return ms;
    }
};

template <class T>
struct DeviceBuf {
    T* p = nullptr;
    explicit DeviceBuf(std::uint64_t n) { ck(cudaMalloc(&p, std::max<std::uint64_t>(n, 1) * sizeof(T)), "cudaMalloc"); }
    ~DeviceBuf() { cudaFree(p); }
    DeviceBuf(const DeviceBuf&) = delete;
};

// Pinned host memory mapped into the GPU's address space (what umem pages from).
struct HostPinned {
    std::byte* p = nullptr;
    std::uint64_t bytes;
    explicit HostPinned(std::uint64_t n) : bytes(n) {
        ck(cudaHostAlloc(reinterpret_cast<void**>(&p), n, cudaHostAllocMapped), "cudaHostAlloc (pinned, mapped)");
    }
    ~HostPinned() { cudaFreeHost(p); }
    HostPinned(const HostPinned&) = delete;
};

}  // namespace bardrive::umem
