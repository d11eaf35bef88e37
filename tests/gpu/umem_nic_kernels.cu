// GPU warps driving umem's NIC engine (NicMover over nic::LoopbackQueue): each warp's leader writes
// descriptors, rings the doorbells and polls its completions, exactly the code CPU threads run in the
// lab. The lent GPU machines have no NIC (and no VFIO), so the device on the other side is the software
// port of tests/support (a CPU thread serving the rings in pinned host memory): this checks the engine's
// GPU side (ordering of descriptor stores before the doorbell, polling host-written completions, locks
// between warps sharing a queue), not a NIC. Built by nvcc in CI; run on the GPU machine.
#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "support/fake_loopback_port.hpp"
#include "umem/gpu.cuh"
#include "umem/nic_mover.hpp"
#include "umem_kernels.hpp"

namespace bardrive::umem::gputest {

namespace {

constexpr std::uint64_t kPage = 4096, kWords = kPage / 8;
constexpr std::uint32_t kRing = 64;
constexpr std::uint64_t kStoreIova = 0x100000000, kFramesIova = 0x200000000, kHeadersIova = 0x300000000;

void ck(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) throw Error("umem NIC gpu test", what, cudaGetErrorString(rc));
}

// Every allocation of one run, freed at its end.
struct Allocations {
    std::vector<void*> host, device;
    ~Allocations() {
        for (void* p : host) cudaFreeHost(p);
        for (void* p : device) cudaFree(p);
    }
    template <class T>
    T* pinned(std::size_t n) {
        void* p = nullptr;
        ck(cudaHostAlloc(&p, n * sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
        host.push_back(p);
        std::memset(p, 0, n * sizeof(T));
        return static_cast<T*>(p);
    }
    template <class T>
    T* on_device(std::size_t n, int fill = 0) {
        void* p = nullptr;
        ck(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
        device.push_back(p);
        ck(cudaMemset(p, fill, n * sizeof(T)), "cudaMemset");
        return static_cast<T*>(p);
    }
};

using Mover = NicMover<DeviceMover>;

__device__ std::uint32_t mix(std::uint32_t& s) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
}

// Each warp reads random pages through the protocol, the NIC engine moving them; every other access
// also bumps the warp's own counter word in that page (words 0..255 hold the pattern).
__global__ void nic_warps_kernel(PagerView v, NicEngineView e, std::uint32_t ops, unsigned long long* bad) {
    WarpGroup g = WarpGroup::self();
    std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    Mover m{&e, warp % e.n, DeviceMover{}};
    std::uint32_t s = warp * 2654435761u + 1;
    for (std::uint32_t i = 0; i < ops; ++i) {
        std::uint64_t page = mix(s) % v.pages;
        bool write = i % 2 == 1;
        auto* p = reinterpret_cast<std::uint64_t*>(acquire(v, page, write, g, m));
        unsigned wrong = 0;
        for (std::uint64_t w = g.lane; w < 256; w += 32) wrong += load_cg(p + w) != page * kWords + w;
        if (write && g.leader()) p[256 + warp] = load_cg(p + 256 + warp) + 1;
        if (write) __threadfence_system();
        release(v, page, g, reinterpret_cast<std::byte*>(p), write);
        for (int o = 16; o > 0; o >>= 1) wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
        if (g.leader() && wrong) atomicAdd(bad, static_cast<unsigned long long>(wrong));
    }
}

__global__ void nic_flush_kernel(PagerView v, NicEngineView e) {
    WarpGroup g = WarpGroup::self();
    Mover m{&e, 0, DeviceMover{}};
    flush_all(v, g, m);
}

}  // namespace

NicWarpResult run_nic_warps(std::uint64_t pages, std::uint64_t frames, std::uint32_t queues, std::uint32_t warps,
                            std::uint32_t ops) {
    NicWarpResult out;
    Allocations a;
    const std::uint32_t blocks = (warps + 7) / 8;
    warps = blocks * 8;  // 8 warps a block
    auto* store = a.pinned<std::uint64_t>(pages * kWords);
    auto* pool = a.pinned<std::byte>(frames * kPage);
    for (std::uint64_t w = 0; w < pages * kWords; ++w) store[w] = w % kWords < 256 ? w : 0;

    // One software port per queue, its rings, header slots and registers in pinned memory.
    std::vector<std::unique_ptr<testing::FakeLoopbackPort>> ports;
    std::vector<nic::LoopbackQueue> queues_host(queues);
    for (std::uint32_t q = 0; q < queues; ++q) {
        testing::FakeLoopbackPort::Memory mem{a.pinned<nic::e1000::AdvRxDesc>(kRing),
                                              a.pinned<nic::e1000::AdvTxDesc>(kRing),
                                              a.pinned<std::uint8_t>(2 * kRing * 64), a.pinned<std::uint32_t>(4)};
        ports.push_back(std::make_unique<testing::FakeLoopbackPort>(mem, kRing, kHeadersIova + q * 2 * kRing * 64));
        ports.back()->map(kStoreIova, store, pages * kPage);
        ports.back()->map(kFramesIova, pool, frames * kPage);
        nic::LoopbackQueue& lq = queues_host[q];
        lq = nic::LoopbackQueue{};
        lq.qp = ports.back()->queue_pair();
        lq.payload = 4096;
        lq.port = static_cast<std::uint16_t>(49152 + q);
        const std::uint8_t eth_ip[] = {0x08, 0x00, 0x45};
        std::memcpy(lq.header + 12, eth_ip, sizeof eth_ip);
        lq.header[34] = static_cast<std::uint8_t>(lq.port >> 8);
        lq.header[35] = static_cast<std::uint8_t>(lq.port);
        lq.status = nic::LoopbackQueue::Status::ok;
    }
    auto* queues_dev = a.on_device<nic::LoopbackQueue>(queues);
    ck(cudaMemcpy(queues_dev, queues_host.data(), queues * sizeof(nic::LoopbackQueue), cudaMemcpyHostToDevice),
       "copy queues");

    // The page table and its companions in GPU memory; the frames and the store in pinned host memory.
    auto* pte = a.on_device<std::uint64_t>(pages);
    auto* owner = a.on_device<std::uint32_t>(frames, 0xff);
    auto* ctl = a.on_device<std::uint64_t>(ctl_words);
    auto* counters = a.on_device<std::uint64_t>(counter_shards * counter_stride);
    PagerView v{pte,
                owner,
                ctl,
                counters,
                reinterpret_cast<std::byte*>(store),
                pool,
                pages * kPage,
                pages,
                static_cast<std::uint32_t>(frames),
                12,
                Admission::migrate,
                Eviction::clock,
                0};
    if (v.never_evicts()) v.whole = a.on_device<std::uint64_t>(whole_words(pages));  // as the owners set it
    auto* locks = a.on_device<std::uint32_t>(queues * counter_stride);
    auto* engine_counters = a.on_device<std::uint64_t>(queues * counter_stride);
    auto* fills = a.on_device<std::uint64_t>(1);
    NicEngineView e{queues_dev, locks, engine_counters, queues,         reinterpret_cast<std::byte*>(store),
                    kStoreIova, pool,  kFramesIova,     frames * kPage, 5'000'000'000ull,
                    fills,      0,     NicFault::none};
    auto* bad = a.on_device<unsigned long long>(1);

    // The device: a CPU thread serving every port until the kernels are done.
    std::atomic<bool> stop{false};
    std::thread device([&] {
        while (!stop.load(std::memory_order_relaxed))
            for (auto& p : ports) p->run();
    });
    nic_warps_kernel<<<blocks, 256>>>(v, e, ops, bad);
    cudaError_t rc = cudaDeviceSynchronize();
    if (rc == cudaSuccess) {
        nic_flush_kernel<<<1, 32>>>(v, e);
        rc = cudaDeviceSynchronize();
    }
    stop = true;
    device.join();
    ck(rc, "NIC engine kernels");

    ck(cudaMemcpy(&out.bad_reads, bad, sizeof out.bad_reads, cudaMemcpyDeviceToHost), "copy result");
    std::vector<std::uint64_t> c(counter_shards * counter_stride), ec(queues * counter_stride);
    ck(cudaMemcpy(c.data(), counters, c.size() * 8, cudaMemcpyDeviceToHost), "copy counters");
    ck(cudaMemcpy(ec.data(), engine_counters, ec.size() * 8, cudaMemcpyDeviceToHost), "copy engine counters");
    ck(cudaMemcpy(queues_host.data(), queues_dev, queues * sizeof(nic::LoopbackQueue), cudaMemcpyDeviceToHost),
       "copy queues back");
    std::vector<std::uint64_t> ctl_host(ctl_words);
    ck(cudaMemcpy(ctl_host.data(), ctl, ctl_words * 8, cudaMemcpyDeviceToHost), "copy control words");
    out.stats = sum_stats(c.data(), ctl_host.data(), v);
    for (std::uint32_t q = 0; q < queues; ++q) {
        out.moves += ec[q * counter_stride + nc_moves];
        out.fallbacks += ec[q * counter_stride + nc_fallbacks];
        out.frames += queues_host[q].frames;
        out.broken += queues_host[q].status != nic::LoopbackQueue::Status::ok;
    }
    // Host memory after the flush: the pattern intact, and each warp's counter words summing to its writes.
    std::uint64_t increments = 0;
    for (std::uint64_t p = 0; p < pages; ++p)
        for (std::uint64_t w = 0; w < kWords; ++w) {
            std::uint64_t x = store[p * kWords + w];
            if (w < 256)
                out.bad_words += x != p * kWords + w;
            else
                increments += x;
        }
    out.bad_words += increments != std::uint64_t{warps} * (ops / 2);
    return out;
}

}  // namespace bardrive::umem::gputest
