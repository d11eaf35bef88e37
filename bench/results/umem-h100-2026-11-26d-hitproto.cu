// The prototype behind bench/results/umem-h100-2026-11-26d.md (call 1): a resident hit through an 8-byte page-table
// word (frame from the word) against a resident bit with frame = page, against GPU memory. Not built by meson;
// nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 -o hitproto umem-h100-2026-11-26d-hitproto.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#define CK(x)                                              \
    do {                                                   \
        cudaError_t e = (x);                               \
        if (e != cudaSuccess) {                            \
            printf("%s: %s\n", #x, cudaGetErrorString(e)); \
            return 1;                                      \
        }                                                  \
    } while (0)
using u64 = unsigned long long;
__device__ __forceinline__ u64 ld(const u64* p) { return __ldcg(p); }
__host__ __device__ inline u64 perm(u64 p, u64 mask) {
    return (p * 0x9e3779b97f4a7c15ull >> 7 ^ p * 2654435761ull) & mask;
}

enum Mode { GPU = 0, PTE = 1, BIT = 2 };
struct T {
    const u64* data;
    const u64* pte;
    const unsigned* bits;
    unsigned shift;
    u64 mask;
};

template <int M>
__device__ __forceinline__ const u64* xlate(const T& t, u64 word_index) {
    const u64 page = (word_index * 8) >> t.shift, off = word_index & ((1ull << (t.shift - 3)) - 1);
    if (M == GPU) return t.data + word_index;
    if (M == PTE) {
        u64 e = ld(t.pte + page);
        if ((e & 3) != 2) return nullptr;
        return t.data + ((e >> 36) << (t.shift - 3)) + off;
    }
    unsigned w = __ldcg(t.bits + (page >> 5));
    if (!((w >> (page & 31)) & 1)) return nullptr;
    return t.data + word_index;
}

template <int M>
__global__ void __launch_bounds__(256, 2) elems(T t, const unsigned* idx, u64 threads, u64* out) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= threads) return;
    u64 s = 0;
    const uint4* q = reinterpret_cast<const uint4*>(idx + i * 16);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        uint4 v = q[k];
        const u64* p[4] = {xlate<M>(t, v.x), xlate<M>(t, v.y), xlate<M>(t, v.z), xlate<M>(t, v.w)};
        bool all = p[0] && p[1] && p[2] && p[3];
        if (!all) {
            s += 1;
            continue;
        }
        s += ld(p[0]) + ld(p[1]) + ld(p[2]) + ld(p[3]);
    }
    out[i] = s;
}

template <int M>
__global__ void __launch_bounds__(256, 2) rows(T t, const unsigned* r, u64 n, unsigned row_words, u64* out) {
    const unsigned lane = threadIdx.x & 31;
    u64 warp = (blockIdx.x * (u64)blockDim.x + threadIdx.x) >> 5, warps = (gridDim.x * (u64)blockDim.x) >> 5;
    for (u64 j = warp * 32; j < n; j += warps * 32) {
        const u64* row = xlate<M>(t, (u64)r[j + lane] * row_words);
        u64 mine = 0;
        for (unsigned k0 = 0; k0 < 32; k0 += 8) {
            const u64* p[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) p[i] = (const u64*)__shfl_sync(~0u, (u64)row, k0 + i);
            u64 s[8] = {};
            for (unsigned w = lane; w < row_words; w += 32) {
                u64 x[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) x[i] = p[i] ? ld(p[i] + w) : 0;
#pragma unroll
                for (int i = 0; i < 8; ++i) s[i] += x[i];
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                u64 v = s[i];
                for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
                if (lane == k0 + i) mine = v;
            }
        }
        out[j + lane] = mine;
    }
}

__global__ void init(u64* data, u64 words, u64* pte, unsigned* bits, u64 pages, unsigned shift) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < words; i += gridDim.x * (u64)blockDim.x) {
        data[i] = i;
        if (i < pages) pte[i] = 2 | (perm(i, pages - 1) << 36);
        if (i < pages / 32) bits[i] = ~0u;
    }
}

int main(int argc, char** argv) {
    const u64 bytes = 8ull << 30, words = bytes / 8;
    u64* data;
    CK(cudaMalloc(&data, bytes));
    u64* pte;
    CK(cudaMalloc(&pte, bytes / 128 * 8));
    unsigned* bits;
    CK(cudaMalloc(&bits, bytes / 128 / 8));
    u64* out;
    CK(cudaMalloc(&out, 64ull << 20));
    unsigned* idx;
    const u64 nidx = 64ull << 20;
    CK(cudaMalloc(&idx, nidx * 4));
    std::mt19937_64 g(42);
    std::vector<unsigned> h(nidx);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    printf("%-26s %9s %9s %9s %7s %7s\n", "workload", "gpu ms", "pte ms", "bit ms", "pte/gpu", "bit/gpu");
    for (unsigned shift : {7u, 8u}) {
        const u64 pages = bytes >> shift;
        init<<<4096, 256>>>(data, words, pte, bits, pages, shift);
        CK(cudaDeviceSynchronize());
        T t{data, pte, bits, shift, pages - 1};
        for (int dist = 0; dist < 2; ++dist) {  // 0 uniform, 1 skewed (u^4 then scattered)
            std::uniform_real_distribution<double> U(0, 1);
            auto pick = [&](u64 n) -> u64 {
                double u = U(g);
                u64 k = (u64)(n * (dist ? u * u * u * u : u));
                return perm(k < n ? k : n - 1, n - 1);
            };
            if (shift == 7) {
                for (auto& x : h) x = (unsigned)pick(words);
            } else {
                for (u64 k = 0; k < (1u << 20); ++k) h[k] = (unsigned)pick(bytes / 256);
            }
            CK(cudaMemcpy(idx, h.data(), nidx * 4, cudaMemcpyHostToDevice));
            float ms[3];
            for (int m = 0; m < 3; ++m) {
                float best = 1e9;
                for (int rep = 0; rep < 6; ++rep) {
                    cudaEventRecord(a);
                    if (shift == 7) {
                        u64 th = nidx / 16;
                        unsigned bl = (unsigned)((th + 255) / 256);
                        if (m == 0) elems<GPU><<<bl, 256>>>(t, idx, th, out);
                        if (m == 1) elems<PTE><<<bl, 256>>>(t, idx, th, out);
                        if (m == 2) elems<BIT><<<bl, 256>>>(t, idx, th, out);
                    } else {
                        if (m == 0) rows<GPU><<<132 * 8, 256>>>(t, idx, 1u << 20, 32, out);
                        if (m == 1) rows<PTE><<<132 * 8, 256>>>(t, idx, 1u << 20, 32, out);
                        if (m == 2) rows<BIT><<<132 * 8, 256>>>(t, idx, 1u << 20, 32, out);
                    }
                    cudaEventRecord(b);
                    CK(cudaEventSynchronize(b));
                    float x;
                    cudaEventElapsedTime(&x, a, b);
                    if (rep > 0) best = std::min(best, x);
                }
                ms[m] = best;
            }
            printf("%-26s %9.3f %9.3f %9.3f %7.2f %7.2f\n",
                   shift == 7 ? (dist ? "64M u64 skewed, 128B pg" : "64M u64 uniform, 128B pg")
                              : (dist ? "1M 256B rows skewed" : "1M 256B rows uniform"),
                   ms[0], ms[1], ms[2], ms[1] / ms[0], ms[2] / ms[0]);
        }
    }
    return 0;
}
