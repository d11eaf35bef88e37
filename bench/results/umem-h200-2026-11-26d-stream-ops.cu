// What a stream op before a kernel costs in the kernel's timed span: none, cudaMemsetAsync (small, large),
// a tiny kernel, cudaFreeAsync. The kernel reads 256 MB randomly-ish (about 0.3 ms).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>
#define CK(x)                                                   \
    do {                                                        \
        cudaError_t e = (x);                                    \
        if (e != cudaSuccess) {                                 \
            std::printf("%s: %s\n", #x, cudaGetErrorString(e)); \
            return 1;                                           \
        }                                                       \
    } while (0)
__global__ void work(const std::uint64_t* p, std::uint64_t n, std::uint64_t* out) {
    std::uint64_t s = 0;
    for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += p[(i * 0x9e3779b97f4a7c15ull) % n];
    if (s == 42) *out = s;
}
__global__ void tiny(std::uint64_t* p, std::uint64_t n) {
    for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = ~0ull;
}
int main() {
    const std::uint64_t n = 32ull << 20;  // 256 MiB
    std::uint64_t *p, *out, *junk;
    CK(cudaMalloc(&p, n * 8));
    CK(cudaMalloc(&out, 8));
    CK(cudaMalloc(&junk, 64 << 20));
    CK(cudaMemset(p, 1, n * 8));
    CK(cudaMemset(junk, 1, 64 << 20));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    const char* names[] = {"none",
                           "memsetAsync 4 KiB",
                           "memsetAsync 48 MiB",
                           "mallocAsync 32 MiB (default pool)",
                           "freeAsync of it (default pool)",
                           "mallocAsync 32 MiB (own pool, kept)",
                           "freeAsync of it (own pool, kept)",
                           "cudaFree of a 32 MiB cudaMalloc",
                           "none",
                           "mallocAsync 32 MiB on a side stream, synced before",
                           "freeAsync 3 MiB (default pool)"};
    cudaMemPool_t own;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(cudaMemPoolCreate(&own, &props));
    std::uint64_t keep = ~0ull;
    CK(cudaMemPoolSetAttribute(own, cudaMemPoolAttrReleaseThreshold, &keep));
    void *t1 = nullptr, *t2 = nullptr, *t3 = nullptr, *t4 = nullptr;
    cudaStream_t side;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    for (int rep = 0; rep < 3; ++rep)
        for (int op = 0; op < 11; ++op) {
            CK(cudaDeviceSynchronize());
            // idle gap as between the bench's batches (the host checks results)
            std::vector<char> h(4 << 20);
            CK(cudaMemcpy(h.data(), junk, h.size(), cudaMemcpyDeviceToHost));
            if (op == 7) cudaMalloc(&t3, 32 << 20);
            if (op == 10) cudaMallocAsync(&t4, 3 << 20, 0), cudaMemsetAsync(t4, 0, 3 << 20, 0), cudaDeviceSynchronize();
            void* t5 = nullptr;
            if (op == 9)
                cudaMallocAsync(&t5, 32 << 20, side), cudaMemsetAsync(t5, 0, 32 << 20, side),
                    cudaStreamSynchronize(side);
            cudaEventRecord(a);
            switch (op) {
                case 1:
                    cudaMemsetAsync(junk, 0xff, 4096, 0);
                    break;
                case 2:
                    cudaMemsetAsync(junk, 0xff, 48 << 20, 0);
                    break;
                case 3:
                    cudaMallocAsync(&t1, 32 << 20, 0);
                    cudaMemsetAsync(t1, 0, 32 << 20, 0);
                    break;
                case 4:
                    cudaFreeAsync(t1, 0);
                    break;
                case 5:
                    cudaMallocFromPoolAsync(&t2, 32 << 20, own, 0);
                    cudaMemsetAsync(t2, 0, 32 << 20, 0);
                    break;
                case 6:
                    cudaFreeAsync(t2, 0);
                    break;
                case 7:
                    cudaFree(t3);
                    break;
                case 9:
                    cudaFreeAsync(t5, 0);
                    break;
                case 10:
                    cudaFreeAsync(t4, 0);
                    break;
                default:
                    break;
            }
            work<<<132 * 4, 256>>>(p, n, out);
            cudaEventRecord(b);
            CK(cudaEventSynchronize(b));
            float ms;
            cudaEventElapsedTime(&ms, a, b);
            if (rep > 0) std::printf("rep %d %-28s %.1f us\n", rep, names[op], ms * 1000);
        }
}
