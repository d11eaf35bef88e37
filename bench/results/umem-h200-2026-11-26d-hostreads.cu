// Zero-copy random reads of pinned host memory: cudaHostAlloc against mmap (+THP or hugetlbfs) + cudaHostRegister.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#define CK(x)                                                   \
    do {                                                        \
        cudaError_t e = (x);                                    \
        if (e != cudaSuccess) {                                 \
            std::printf("%s: %s\n", #x, cudaGetErrorString(e)); \
            std::exit(1);                                       \
        }                                                       \
    } while (0)

__global__ void reads(const std::uint64_t* __restrict__ h, const std::uint32_t* __restrict__ idx, std::uint64_t n,
                      std::uint64_t stride, std::uint64_t* out) {
    std::uint64_t t = blockIdx.x * blockDim.x + threadIdx.x;
    std::uint64_t s = 0;
    for (std::uint64_t i = t; i < n; i += stride) s += h[std::uint64_t(idx[i]) * 2];  // 16-byte slots
    if (s == 42) *out = s;
}
// 4 KiB copies by warps: each warp copies pages idx[w] from host to dev.
__global__ void pages(const uint4* __restrict__ h, const std::uint32_t* __restrict__ idx, std::uint64_t n, uint4* dev,
                      std::uint64_t pages_n) {
    std::uint64_t w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    std::uint64_t warps = gridDim.x * blockDim.x / 32;
    for (std::uint64_t i = w; i < n; i += warps) {
        std::uint64_t p = idx[i] % pages_n;
        const uint4* src = h + p * 256;
        uint4* dst = dev + (i % 65536) * 256;
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = src[lane + 32 * k];
#pragma unroll
        for (int k = 0; k < 8; ++k) dst[lane + 32 * k] = v[k];
    }
}

int main(int argc, char** argv) {
    const std::uint64_t gib = argc > 1 ? std::atoll(argv[1]) : 4;
    const std::uint64_t bytes = gib << 30, slots = bytes / 16;
    const std::uint64_t n = 32ull << 20;
    std::vector<std::uint32_t> idx(n);
    std::mt19937_64 rng(7);
    for (auto& i : idx) i = static_cast<std::uint32_t>(rng() % slots);
    std::uint32_t* didx;
    std::uint64_t* out;
    uint4* dev;
    CK(cudaMalloc(&didx, n * 4));
    CK(cudaMalloc(&out, 8));
    CK(cudaMalloc(&dev, 65536ull * 4096));
    CK(cudaMemcpy(didx, idx.data(), n * 4, cudaMemcpyHostToDevice));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int kind = 0; kind < 3; ++kind) {
        void* h = nullptr;
        const char* name = kind == 0 ? "cudaHostAlloc" : kind == 1 ? "mmap+THP+register" : "hugetlbfs2M+register";
        if (kind == 0) {
            CK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
        } else {
            int flags = MAP_PRIVATE | MAP_ANONYMOUS | (kind == 2 ? MAP_HUGETLB : 0);
            h = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
            if (h == MAP_FAILED) {
                std::printf("%s: mmap failed\n", name);
                continue;
            }
            if (kind == 1) madvise(h, bytes, MADV_HUGEPAGE);
            std::memset(h, 1, bytes);
            cudaError_t e = cudaHostRegister(h, bytes, cudaHostRegisterMapped);
            if (e != cudaSuccess) {
                std::printf("%s: register %s\n", name, cudaGetErrorString(e));
                munmap(h, bytes);
                continue;
            }
        }
        if (kind == 0) std::memset(h, 1, bytes);
        void* dh;
        CK(cudaHostGetDevicePointer(&dh, h, 0));
        for (int rep = 0; rep < 3; ++rep) {
            cudaEventRecord(a);
            reads<<<132 * 8, 256>>>(static_cast<const std::uint64_t*>(dh), didx, n, 132ull * 8 * 256, out);
            cudaEventRecord(b);
            CK(cudaEventSynchronize(b));
            float ms;
            cudaEventElapsedTime(&ms, a, b);
            std::uint64_t pn = bytes / 4096, m = 1ull << 20;
            cudaEventRecord(a);
            pages<<<132 * 8, 256>>>(static_cast<const uint4*>(dh), didx, m, dev, pn);
            cudaEventRecord(b);
            CK(cudaEventSynchronize(b));
            float ms2;
            cudaEventElapsedTime(&ms2, a, b);
            std::printf(
                "%-22s %llu GiB: 32M random 8 B reads %.2f ms (%.2f ns a read); 1M random 4 KiB pages %.2f ms (%.1f "
                "GB/s)\n",
                name, (unsigned long long)gib, ms, ms * 1e6 / n, ms2, m * 4096.0 / (ms2 * 1e6));
        }
        if (kind == 0)
            cudaFreeHost(h);
        else {
            cudaHostUnregister(h);
            munmap(h, bytes);
        }
    }
}
