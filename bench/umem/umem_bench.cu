// bench/umem: umem against zero-copy, CUDA UVM and an explicit cudaMemcpy, same GPU, same data,
// same run. Workloads: random 4 KiB gathers (first and repeated pass), a hot set, a sequential
// scan and BFS on an RMAT graph; umem with its frame pool at 100%, 50% and 25% of the data.
// Every result is checked against the CPU. Prints a table of useful GB/s and ratios.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.cuh"
#include "core/error.hpp"
#include "core/log.hpp"
#include "graph.hpp"
#include "umem/gpu.cuh"
#include "umem/gpu_pager.hpp"

namespace bardrive::umem {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPageWords = kPage / 8;

std::uint64_t page_sum(std::uint64_t page) {
    std::uint64_t s = 0;
    for (std::uint64_t w = 0; w < kPageWords; ++w) s += mix(page * kPageWords + w);
    return s;
}

// ---- where a kernel's pages come from ------------------------------------------------------

// Memory the GPU reads directly: zero-copy host memory, UVM, or device memory.
struct Direct {
    const std::byte* base;
    __device__ std::uint64_t page_bytes() const { return kPage; }
    __device__ const std::byte* acquire(std::uint64_t page, std::uint64_t, std::uint64_t) const {
        return base + page * kPage;
    }
    __device__ void release(std::uint64_t, const std::byte*) const {}
};

// Through umem's page table; acquire says which bytes [first, first + n) of the array the warp reads
// (what the automatic page size learns from). `pager` is the host's: current() builds the Array from
// its view() for every launch, as a kernel must with the page size left out.
struct Paged {
    Array<std::uint64_t> a;
    GpuPager* pager = nullptr;
    __device__ std::uint64_t page_bytes() const { return a.per_page() * 8; }
    __device__ const std::byte* acquire(std::uint64_t page, std::uint64_t first, std::uint64_t n) const {
        const std::uint64_t w = first / 8;
        return reinterpret_cast<const std::byte*>(a.warp_acquire(page, false, w, (first + n + 7) / 8 - w).data);
    }
    __device__ void release(std::uint64_t page, const std::byte* p) const {
        a.warp_release({reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(p)), 0, page, false});
    }
};

__device__ inline std::uint64_t sum8(const uint4 (&x)[8]) {
    std::uint64_t s = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        s += (static_cast<std::uint64_t>(x[k].y) << 32 | x[k].x) + (static_cast<std::uint64_t>(x[k].w) << 32 | x[k].z);
    return s;
}

inline Direct current(const Direct& d) { return d; }
inline Paged current(const Paged& p) { return Paged{Array<std::uint64_t>(p.pager->view(), p.pager->ring()), p.pager}; }

// One warp per 4 KiB gather. (An acquire-ahead variant, translating the next page while this
// one's loads are in flight, measured 28% slower on reuse in GPU run 3: bench/results.)
// Reads 4 KiB block `block` (16-byte loads, eight in flight per lane, when the source's pages are
// 4 KiB or larger; page by page when they are smaller) and returns this lane's sum of it.
template <class Src>
__device__ inline std::uint64_t lane_page_sum(const Src& src, std::uint64_t block) {
    unsigned lane = threadIdx.x & 31;
    const std::uint64_t size = src.page_bytes(), at = block * kPage;
    const unsigned shift = static_cast<unsigned>(__ffsll(static_cast<long long>(size)) - 1);
    if (size >= kPage) {
        const std::uint64_t page = at >> shift, off = at & (size - 1);
        const std::byte* p = src.acquire(page, at, kPage);
        uint4 x[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = load16(p + off + (lane + 32 * k) * 16);
        std::uint64_t s = sum8(x);
        src.release(page, p);
        return s;
    }
    std::uint64_t s = 0;
    for (std::uint64_t page = at >> shift; page < (at + kPage) >> shift; ++page) {
        const std::byte* p = src.acquire(page, page << shift, size);
        for (std::uint64_t c = lane * 16; c < size; c += 512) {
            uint4 x = load16(p + c);
            s += (static_cast<std::uint64_t>(x.y) << 32 | x.x) + (static_cast<std::uint64_t>(x.w) << 32 | x.z);
        }
        src.release(page, p);
    }
    return s;
}

// Gather and BFS kernels capped at 128 registers, as umem/README.md advises for kernels reading through
// warp_acquire (the protocol inlined takes 168-228 here, against 32-36 reading GPU memory). H200, 8 GiB,
// same call, capped at 64 against uncapped: gather reuse at a 25% pool 1087 -> 1830 GB/s, BFS pass 2
// 28.0 -> 37.8 GB/s (100%) and 8.0 -> 10.6 (25%). H100, 2 GiB, 128 against 64: gather reuse 1709 -> 2024
// (100%) and 1744 -> 1903 GB/s (25%), BFS pass 2 26.0 -> 25.5 (100%) and 10.1 -> 10.3 (25%). The scan is
// not capped: its reuse pass fell 3003 -> 2362 GB/s at 64 (928 bytes spilled).
template <class Src>
__global__ void __launch_bounds__(256, 2)
    gather_kernel(Src src, const std::uint32_t* idx, std::uint64_t n, std::uint64_t* sums) {
    for (std::uint64_t g = warp_id(); g < n; g += warp_count()) {
        std::uint64_t s = warp_sum(lane_page_sum(src, idx[g]));
        if ((threadIdx.x & 31) == 0) sums[g] = s;
    }
}

// Sequential scan: warp w reads pages w, w + warps, ... so the whole GPU walks the data in order.
template <class Src>
__global__ void scan_kernel(Src src, std::uint64_t pages, unsigned long long* total) {
    std::uint64_t s = 0;
    for (std::uint64_t page = warp_id(); page < pages; page += warp_count()) s += lane_page_sum(src, page);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, static_cast<unsigned long long>(s));
}

// One BFS level, top down, one warp per frontier vertex. Row offsets (u64) and neighbours (u32)
// both come through their sources page by page.
template <class Src>
__device__ inline std::uint64_t row_at(const Src& row, std::uint64_t v) {
    const std::uint64_t per_page = row.page_bytes() / 8;
    std::uint64_t page = v / per_page;
    const std::byte* p = row.acquire(page, v * 8, 8);
    std::uint64_t x = load_cg(reinterpret_cast<const std::uint64_t*>(p) + v % per_page);
    row.release(page, p);
    return x;
}

template <class Src>
__global__ void __launch_bounds__(256, 2)
    bfs_kernel(Src row, Src col, const std::uint32_t* frontier, std::uint32_t fsize, std::uint32_t* next,
               std::uint32_t* next_size, std::int32_t* level, std::int32_t depth) {
    unsigned lane = threadIdx.x & 31;
    const std::uint64_t per_page = col.page_bytes() / 4;
    for (std::uint64_t i = warp_id(); i < fsize; i += warp_count()) {
        std::uint32_t v = frontier[i];
        std::uint64_t begin = row_at(row, v), end = row_at(row, v + 1);
        for (std::uint64_t e = begin; e < end;) {
            std::uint64_t page = e / per_page;
            std::uint64_t stop = std::min(end, (page + 1) * per_page);
            const auto* p = reinterpret_cast<const std::uint32_t*>(col.acquire(page, e * 4, (stop - e) * 4));
            for (std::uint64_t k = e + lane; k < stop; k += 32) {
                std::uint32_t u = load_cg(p + k % per_page);
                if (atomicCAS(&level[u], -1, depth) == -1) next[atomicAdd(next_size, 1u)] = u;
            }
            col.release(page, reinterpret_cast<const std::byte*>(p));
            e = stop;
        }
    }
}

// ---- timing and results ----------------------------------------------------------------------

struct Row {
    std::string workload, pass, method, pool;
    double ms;
    double useful_bytes;
    bool ok;
    std::string note;
    double gbps() const { return useful_bytes / (ms * 1e6); }
};

std::vector<Row> results;
FILE* detail = nullptr;  // full log: every row and every pager's counters

void record(Row r) {
    std::printf("  %-9s %-6s %-34s %-5s %9.2f ms %8.2f GB/s %s %s\n", r.workload.c_str(), r.pass.c_str(),
                r.method.c_str(), r.pool.c_str(), r.ms, r.gbps(), r.ok ? "ok" : "WRONG", r.note.c_str());
    std::fflush(stdout);
    if (detail)
        std::fprintf(detail, "| %s | %s | %s | %s | %.3f | %.2f | %s | %s |\n", r.workload.c_str(), r.pass.c_str(),
                     r.method.c_str(), r.pool.c_str(), r.ms, r.gbps(), r.ok ? "ok" : "WRONG", r.note.c_str());
    if (detail) std::fflush(detail);
    results.push_back(std::move(r));
}

std::string stats_note(const Stats& s) {
    std::string out;
    for (unsigned c = 0; c < c_count_; ++c) out += log::concat(name(static_cast<Counter>(c)), " ", s.value[c], " ");
    return out + log::concat("used_MiB ", s.bytes_used >> 20);
}

// ---- the bench -------------------------------------------------------------------------------

struct Options {
    std::uint64_t gib = 8;
    std::uint64_t gathers = 131072;
    unsigned bfs_scale = 22;
    std::vector<unsigned> pools{100, 50, 25};
    std::vector<std::uint64_t> bfs_pages;  // BFS also with the default policy over pages of these sizes
    std::vector<std::uint64_t> pages{128, 256, 512, 1024, 2048, 4096};  // umem with these fixed page sizes too
    bool policies = false;  // also migrate, second-touch, read-through and the copy engine (4 KiB pages)
    Workloads only;         // --only: those workloads, or all
    bool uvm = true;
    std::string detail_path;
};

struct Launch {
    unsigned blocks, threads = 256;
};

struct Managed {
    std::byte* p = nullptr;
    std::uint64_t bytes;
    explicit Managed(std::uint64_t n) : bytes(n) {
        std::size_t free_b = 0, total_b = 0;
        ck(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
        // The shared GPU must never be oversubscribed with managed memory (it can hang it).
        if (n + (2ull << 30) > free_b)
            throw Error("umem-bench: UVM baseline", log::concat(n >> 20, " MiB managed"),
                        log::concat("only ", free_b >> 20, " MiB free on the GPU"), "run with a smaller --gib");
        ck(cudaMallocManaged(reinterpret_cast<void**>(&p), n), "cudaMallocManaged");
    }
    ~Managed() { cudaFree(p); }
    Managed(const Managed&) = delete;
    // Data back on the host, no advice: the next UVM variant starts from the same state.
    void to_host() {
        cudaMemLocation dev{cudaMemLocationTypeDevice, 0}, host{cudaMemLocationTypeHost, 0};
        ck(cudaMemAdvise(p, bytes, cudaMemAdviseUnsetPreferredLocation, host), "advise");
        ck(cudaMemAdvise(p, bytes, cudaMemAdviseUnsetAccessedBy, dev), "advise");
        ck(cudaMemPrefetchAsync(p, bytes, host, 0, 0), "prefetch to host");
        ck(cudaDeviceSynchronize(), "prefetch to host");
    }
    void advise_host_accessed_by_gpu() {
        cudaMemLocation dev{cudaMemLocationTypeDevice, 0}, host{cudaMemLocationTypeHost, 0};
        ck(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host), "advise");
        ck(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, dev), "advise");
    }
    double prefetch_to_gpu_ms(Events& ev) {
        cudaMemLocation dev{cudaMemLocationTypeDevice, 0};
        return ev.time_ms([&] { ck(cudaMemPrefetchAsync(p, bytes, dev, 0, 0), "prefetch to GPU"); });
    }
};

std::string pool_name(unsigned pct) { return log::concat(pct, "%"); }

// The pool is pct of the array at every page size (automatic, page 0: counted in 4 KiB frames).
Config pager_config(std::uint64_t bytes, unsigned pct, Admission adm, std::uint32_t prefetch,
                    std::uint64_t page = kPage) {
    Config c;
    c.bytes = bytes;
    c.page_size = page;
    c.frames = std::max<std::uint64_t>(1, (bytes / (page == auto_page_size ? kPage : page)) * pct / 100);
    c.admission = adm;
    c.prefetch_depth = prefetch;
    return c;
}

struct UmemVariant {
    Admission admission;
    Engine engine;
    std::uint32_t prefetch;
    std::uint64_t page = auto_page_size;  // 0: automatic (the default)
    std::string label() const {
        if (page == auto_page_size && admission == Config{}.admission && engine == Engine::gpu_threads && !prefetch)
            return "umem default (auto)";
        std::string s = log::concat("umem ", name(engine), " ", name(admission));
        if (prefetch) s += log::concat(" pf", prefetch);
        return s + log::concat(" p", page == auto_page_size ? std::string("auto") : std::to_string(page));
    }
};

class Bench {
public:
    Bench(const Options& o) : opt_(o), bytes_(o.gib << 30), pages_(bytes_ / kPage), data_(bytes_) {
        cudaDeviceProp prop{};
        ck(cudaGetDeviceProperties(&prop, 0), "device properties");
        launch_.blocks = prop.multiProcessorCount * 8;  // 64 warps per SM
        int drv = 0;
        cudaDriverGetVersion(&drv);
        std::printf("GPU %s, %d SMs, driver API %d, data %llu GiB pinned+mapped, %llu gathers of 4 KiB\n", prop.name,
                    prop.multiProcessorCount, drv, static_cast<unsigned long long>(o.gib),
                    static_cast<unsigned long long>(o.gathers));
        auto* w = reinterpret_cast<std::uint64_t*>(data_.p);
        parallel_for(pages_, [&](std::uint64_t pg) {
            for (std::uint64_t k = 0; k < kPageWords; ++k) w[pg * kPageWords + k] = mix(pg * kPageWords + k);
        });
        warm_up();
    }

    // The first paged kernel of a process ran ~30% slower than every later one in the first GPU
    // run (a one-time cost, not per pager): pay it here, untimed, on a 64 MiB pager.
    void warm_up() {
        std::uint64_t n = std::min<std::uint64_t>(16384, pages_);
        std::vector<std::uint32_t> idx(n);
        for (std::uint64_t i = 0; i < n; ++i) idx[i] = static_cast<std::uint32_t>(i);
        DeviceBuf<std::uint32_t> didx(n);
        DeviceBuf<std::uint64_t> sums(n);
        ck(cudaMemcpy(didx.p, idx.data(), n * 4, cudaMemcpyHostToDevice), "copy indices");
        GpuPager pager(pager_config(n * kPage, 100, Admission::adaptive, 0), data_.p, Engine::gpu_threads);
        gather_pass(Paged{Array<std::uint64_t>(pager.view(), pager.ring()), &pager}, didx, n, sums);
        gather_pass(Direct{data_.p}, didx, n, sums);
    }

    void run() {
        if (want("memcpy")) memcpy_baseline();
        if (want("ce")) copy_engine();
        if (want("gather")) gathers();
        if (want("hotset")) hotset();
        if (want("scan")) scan();
        if (want("bfs")) bfs();
    }

private:
    bool want(const char* w) const { return opt_.only.want(w); }

    // The default (automatic page size, adaptive admission), the default policy at every fixed page
    // size of --pages, and with --policies the other admissions and the copy engine at 4 KiB.
    std::vector<UmemVariant> variants(bool copy_engine) const {
        std::vector<UmemVariant> v{{Config{}.admission, Engine::gpu_threads, 0, Config{}.page_size}};
        for (std::uint64_t p : opt_.pages) v.push_back({Config{}.admission, Engine::gpu_threads, 0, p});
        if (opt_.policies) {
            for (Admission a : {Admission::migrate, Admission::second_touch, Admission::read_through})
                v.push_back({a, Engine::gpu_threads, 0, kPage});
            if (copy_engine) v.push_back({Admission::adaptive, Engine::copy_engine, 0, kPage});
        }
        return v;
    }

    // Pinned host -> device cudaMemcpy of all data: the PCIe bar for the scan.
    void memcpy_baseline() {
        DeviceBuf<std::byte> dev(bytes_);
        double ms = ev_.time_ms([&] { ck(cudaMemcpy(dev.p, data_.p, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy"); });
        record({"memcpy", "1", "cudaMemcpy pinned H2D", "-", ms, double(bytes_), true, ""});
    }

    // -- the copy engine alone moving scattered 4 KiB pages host -> device, no umem in the way: what
    // umem's copy-engine worker could reach at best. 64 MiB of random pages: one cudaMemcpyBatchAsync
    // per 256 pages (the worker's batch), per 4096, one cudaMemcpyAsync per page, and the same bytes
    // as one contiguous copy.
    void copy_engine() {
        constexpr std::uint64_t n = 16384;
        DeviceBuf<std::byte> dev(n * kPage);
        std::mt19937_64 rng(7);
        std::vector<void*> dst(n);
        std::vector<const void*> src(n);
        std::vector<std::size_t> size(n, kPage);
        for (std::uint64_t i = 0; i < n; ++i) {
            dst[i] = dev.p + i * kPage;
            src[i] = data_.p + (rng() % pages_) * kPage;
        }
        cudaStream_t stream = nullptr;
        ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        cudaMemcpyAttributes attr{};
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        std::size_t attr_index = 0;
        auto timed = [&](const char* method, auto copy) {
            copy();  // once untimed: first-use costs
            ck(cudaStreamSynchronize(stream), "copy");
            auto t0 = std::chrono::steady_clock::now();
            copy();
            ck(cudaStreamSynchronize(stream), "copy");
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            record({"ce", "1", method, "-", ms, double(n * kPage), true,
                    log::concat(n, " pages of 4 KiB, ", ms * 1000.0 / n, " us a page")});
        };
        for (std::uint64_t per : {std::uint64_t{256}, std::uint64_t{4096}})
            timed(per == 256 ? "cudaMemcpyBatchAsync, 256 a batch" : "cudaMemcpyBatchAsync, 4096 a batch", [&] {
                for (std::uint64_t i = 0; i < n; i += per) {
                    ck(cudaMemcpyBatchAsync(dst.data() + i, src.data() + i, size.data() + i, per, &attr, &attr_index, 1,
                                            stream),
                       "cudaMemcpyBatchAsync");
                    ck(cudaStreamSynchronize(stream), "copy");
                }
            });
        timed("cudaMemcpyAsync per page", [&] {
            for (std::uint64_t i = 0; i < n; ++i)
                ck(cudaMemcpyAsync(dst[i], src[i], kPage, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
        });
        timed("one contiguous cudaMemcpyAsync", [&] {
            ck(cudaMemcpyAsync(dev.p, data_.p, n * kPage, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
        });
        cudaStreamDestroy(stream);
    }

    // -- gathers: one index list, two passes (the second is pure reuse)
    template <class Src>
    bool check_gather(const std::vector<std::uint32_t>& idx, const std::vector<std::uint64_t>& want_sums,
                      DeviceBuf<std::uint64_t>& sums) {
        std::vector<std::uint64_t> got(idx.size());
        ck(cudaMemcpy(got.data(), sums.p, got.size() * 8, cudaMemcpyDeviceToHost), "read sums");
        return got == want_sums;
    }

    template <class Src>
    double gather_pass(const Src& src, const DeviceBuf<std::uint32_t>& idx, std::uint64_t n,
                       DeviceBuf<std::uint64_t>& sums) {
        ck(cudaMemset(sums.p, 0, n * 8), "memset");
        return ev_.time_ms([&] { gather_kernel<<<launch_.blocks, launch_.threads>>>(current(src), idx.p, n, sums.p); });
    }

    void gather_set(const char* workload, const std::vector<std::vector<std::uint32_t>>& passes) {
        std::uint64_t n = passes[0].size();
        std::vector<std::vector<std::uint64_t>> want(passes.size(), std::vector<std::uint64_t>(n));
        for (std::size_t p = 0; p < passes.size(); ++p)
            parallel_for(n, [&](std::uint64_t g) { want[p][g] = page_sum(passes[p][g]); });
        std::vector<std::unique_ptr<DeviceBuf<std::uint32_t>>> idx;
        for (auto& pass : passes) {
            idx.push_back(std::make_unique<DeviceBuf<std::uint32_t>>(n));
            ck(cudaMemcpy(idx.back()->p, pass.data(), n * 4, cudaMemcpyHostToDevice), "copy indices");
        }
        DeviceBuf<std::uint64_t> sums(n);
        const double useful = double(n) * kPage;
        auto run_passes = [&](const std::string& method, const std::string& pool, auto src, const char* note) {
            for (std::size_t p = 0; p < passes.size(); ++p) {
                double ms = gather_pass(src, *idx[p], n, sums);
                bool ok = check_gather<decltype(src)>(passes[p], want[p], sums);
                record({workload, log::concat(p + 1), method, pool, ms, useful, ok, note});
            }
        };
        run_passes("zero-copy", "-", Direct{data_.p}, "");
        {
            DeviceBuf<std::byte> dev(bytes_);
            double copy =
                ev_.time_ms([&] { ck(cudaMemcpy(dev.p, data_.p, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy"); });
            double ms = gather_pass(Direct{dev.p}, *idx[0], n, sums);
            bool ok = check_gather<Direct>(passes[0], want[0], sums);
            record({workload, "1", "cudaMemcpy all, then gather", "-", copy + ms, useful, ok,
                    log::concat("copy ", copy, " ms + kernel ", ms, " ms")});
            for (std::size_t p = 1; p < passes.size(); ++p) {
                ms = gather_pass(Direct{dev.p}, *idx[p], n, sums);
                record({workload, log::concat(p + 1), "device memory (after copy)", "-", ms, useful,
                        check_gather<Direct>(passes[p], want[p], sums), ""});
            }
        }
        if (uvm_) {
            uvm_->to_host();
            run_passes("UVM", "-", Direct{uvm_->p}, "");
            uvm_->to_host();
            uvm_->advise_host_accessed_by_gpu();
            run_passes("UVM advise host+accessed-by", "-", Direct{uvm_->p}, "");
            uvm_->to_host();
            double pf = uvm_->prefetch_to_gpu_ms(ev_);
            double ms = gather_pass(Direct{uvm_->p}, *idx[0], n, sums);
            record({workload, "1", "UVM prefetch all, then gather", "-", pf + ms, useful,
                    check_gather<Direct>(passes[0], want[0], sums), log::concat("prefetch ", pf, " ms")});
            uvm_->to_host();
        }
        for (unsigned pct : opt_.pools)
            for (const UmemVariant& v : variants(std::string(workload) == "gather")) {
                GpuPager pager(pager_config(bytes_, pct, v.admission, v.prefetch, v.page), data_.p, v.engine);
                Paged src{Array<std::uint64_t>(pager.view(), pager.ring()), &pager};
                for (std::size_t p = 0; p < passes.size(); ++p) {
                    double ms = gather_pass(src, *idx[p], n, sums);
                    bool ok = check_gather<Paged>(passes[p], want[p], sums);
                    record({workload, log::concat(p + 1), v.label(), pool_name(pct), ms, useful, ok,
                            log::concat("page ", pager.page_size(), " relayouts ", pager.relayouts(), "; ") +
                                (p + 1 == passes.size() ? stats_note(pager.stats()) : "")});
                }
            }
    }

    void ensure_uvm() {
        if (!opt_.uvm || uvm_) return;
        try {
            uvm_ = std::make_unique<Managed>(bytes_);
            parallel_for(pages_,
                         [&](std::uint64_t pg) { std::memcpy(uvm_->p + pg * kPage, data_.p + pg * kPage, kPage); });
        } catch (const Error& e) {
            std::printf("UVM baselines skipped: %s\n", e.what());
            uvm_.reset();
            opt_.uvm = false;
        }
    }

    void gathers() {
        ensure_uvm();
        std::mt19937_64 rng(42);
        std::vector<std::uint32_t> idx(opt_.gathers);
        for (auto& x : idx) x = static_cast<std::uint32_t>(rng() % pages_);
        gather_set("gather", {idx, idx});
    }

    // 90% of the gathers fall in a hot set of 1/32 of the data, a fresh random draw each pass.
    void hotset() {
        ensure_uvm();
        std::mt19937_64 rng(7);
        std::uint64_t hot = std::max<std::uint64_t>(1, pages_ / 32);
        std::vector<std::vector<std::uint32_t>> passes(3, std::vector<std::uint32_t>(opt_.gathers));
        for (auto& pass : passes)
            for (auto& x : pass) {
                std::uint64_t hot_page = (rng() % hot) * 32;  // spread over the data, one page in 32
                x = static_cast<std::uint32_t>(rng() % 10 < 9 ? hot_page : rng() % pages_);
            }
        gather_set("hotset", passes);
    }

    void scan() {
        ensure_uvm();
        unsigned long long want = 0;
        {
            std::vector<std::uint64_t> part(host_threads());
            unsigned t = host_threads();
            std::vector<std::thread> ts;
            for (unsigned k = 0; k < t; ++k)
                ts.emplace_back([&, k] {
                    std::uint64_t s = 0;
                    for (std::uint64_t pg = pages_ * k / t; pg < pages_ * (k + 1) / t; ++pg) s += page_sum(pg);
                    part[k] = s;
                });
            for (auto& x : ts) x.join();
            for (auto s : part) want += s;
        }
        DeviceBuf<unsigned long long> total(1);
        auto pass = [&](auto src) {
            ck(cudaMemset(total.p, 0, 8), "memset");
            double ms =
                ev_.time_ms([&] { scan_kernel<<<launch_.blocks, launch_.threads>>>(current(src), pages_, total.p); });
            unsigned long long got = 0;
            ck(cudaMemcpy(&got, total.p, 8, cudaMemcpyDeviceToHost), "read total");
            return std::make_pair(ms, got == want);
        };
        const double useful = double(bytes_);
        auto [zms, zok] = pass(Direct{data_.p});
        record({"scan", "1", "zero-copy", "-", zms, useful, zok, ""});
        {
            DeviceBuf<std::byte> dev(bytes_);
            double copy =
                ev_.time_ms([&] { ck(cudaMemcpy(dev.p, data_.p, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy"); });
            auto [ms, ok] = pass(Direct{dev.p});
            record({"scan", "1", "cudaMemcpy all, then scan", "-", copy + ms, useful, ok,
                    log::concat("copy ", copy, " ms + kernel ", ms, " ms")});
        }
        if (uvm_) {
            uvm_->to_host();
            auto [ms, ok] = pass(Direct{uvm_->p});
            record({"scan", "1", "UVM", "-", ms, useful, ok, ""});
            auto [ms2, ok2] = pass(Direct{uvm_->p});
            record({"scan", "2", "UVM", "-", ms2, useful, ok2, ""});
            uvm_->to_host();
            double pf = uvm_->prefetch_to_gpu_ms(ev_);
            auto [ms3, ok3] = pass(Direct{uvm_->p});
            record({"scan", "1", "UVM prefetch all, then scan", "-", pf + ms3, useful, ok3,
                    log::concat("prefetch ", pf, " ms")});
            uvm_->to_host();
        }
        std::vector<UmemVariant> vs = variants(false);
        if (opt_.policies) vs.push_back({Admission::migrate, Engine::gpu_threads, 8, kPage});
        for (unsigned pct : opt_.pools)
            for (const UmemVariant& v : vs) {
                GpuPager pager(pager_config(bytes_, pct, v.admission, v.prefetch, v.page), data_.p, v.engine);
                Paged src{Array<std::uint64_t>(pager.view(), pager.ring()), &pager};
                for (int p = 1; p <= 2; ++p) {
                    auto [ms, ok] = pass(src);
                    record({"scan", log::concat(p), v.label(), pool_name(pct), ms, useful, ok,
                            log::concat("page ", pager.page_size(), " relayouts ", pager.relayouts(), "; ") +
                                (p == 2 ? stats_note(pager.stats()) : "")});
                }
            }
    }

    void bfs() {
        uvm_.reset();  // the graph's own managed copies replace the array's
        auto t0 = std::chrono::steady_clock::now();
        bench::Csr g = bench::rmat(opt_.bfs_scale, 16, 1, host_threads());
        std::uint32_t source = bench::busy_vertex(g);
        std::vector<std::int32_t> want = bench::bfs_levels(g, source);
        double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::uint64_t reached = std::count_if(want.begin(), want.end(), [](std::int32_t l) { return l >= 0; });
        std::printf(
            "BFS graph: scale %u, %u vertices, %zu arcs, %llu reached from %u (built and checked on the CPU in %.1f "
            "s)\n",
            opt_.bfs_scale, g.vertices, g.col.size(), static_cast<unsigned long long>(reached), source, gen_s);
        // Pad both arrays to whole pages (umem moves 16-byte multiples; kernels read whole pages).
        std::uint64_t row_bytes = (g.row.size() * 8 + kPage - 1) / kPage * kPage;
        std::uint64_t col_bytes = (g.col.size() * 4 + kPage - 1) / kPage * kPage;
        HostPinned row(row_bytes), col(col_bytes);
        std::memcpy(row.p, g.row.data(), g.row.size() * 8);
        std::memcpy(col.p, g.col.data(), g.col.size() * 4);
        const double graph_bytes = double(g.row.size() * 8 + g.col.size() * 4);

        DeviceBuf<std::int32_t> level(g.vertices);
        DeviceBuf<std::uint32_t> fa(g.vertices), fb(g.vertices), count(1);
        auto run_bfs = [&](auto rsrc, auto csrc) {
            ck(cudaMemset(level.p, 0xff, g.vertices * 4ull), "memset");
            std::int32_t zero = 0;
            ck(cudaMemcpy(level.p + source, &zero, 4, cudaMemcpyHostToDevice), "source");
            ck(cudaMemcpy(fa.p, &source, 4, cudaMemcpyHostToDevice), "frontier");
            double ms = ev_.time_ms([&] {
                std::uint32_t fsize = 1;
                std::uint32_t* cur = fa.p;
                std::uint32_t* nxt = fb.p;
                for (std::int32_t depth = 1; fsize > 0; ++depth) {
                    ck(cudaMemsetAsync(count.p, 0, 4), "memset");
                    unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(launch_.blocks, (fsize + 7) / 8));
                    bfs_kernel<<<blocks, launch_.threads>>>(current(rsrc), current(csrc), cur, fsize, nxt, count.p,
                                                            level.p, depth);
                    ck(cudaMemcpy(&fsize, count.p, 4, cudaMemcpyDeviceToHost), "frontier size");
                    std::swap(cur, nxt);
                }
            });
            std::vector<std::int32_t> got(g.vertices);
            ck(cudaMemcpy(got.data(), level.p, g.vertices * 4ull, cudaMemcpyDeviceToHost), "levels");
            return std::make_pair(ms, got == want);
        };
        auto rec = [&](const char* pass, const std::string& method, const std::string& pool, std::pair<double, bool> r,
                       const std::string& note) {
            record({"bfs", pass, method, pool, r.first, graph_bytes, r.second, note});
        };
        rec("1", "zero-copy", "-", run_bfs(Direct{row.p}, Direct{col.p}), "");
        {
            DeviceBuf<std::byte> drow(row_bytes), dcol(col_bytes);
            double copy = ev_.time_ms([&] {
                ck(cudaMemcpy(drow.p, row.p, row_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
                ck(cudaMemcpy(dcol.p, col.p, col_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
            });
            auto r = run_bfs(Direct{drow.p}, Direct{dcol.p});
            rec("1", "cudaMemcpy all, then BFS", "-", {copy + r.first, r.second},
                log::concat("copy ", copy, " ms + BFS ", r.first, " ms"));
        }
        if (opt_.uvm) {
            try {
                Managed mrow(row_bytes), mcol(col_bytes);
                std::memcpy(mrow.p, row.p, row_bytes);
                std::memcpy(mcol.p, col.p, col_bytes);
                rec("1", "UVM", "-", run_bfs(Direct{mrow.p}, Direct{mcol.p}), "");
                rec("2", "UVM", "-", run_bfs(Direct{mrow.p}, Direct{mcol.p}), "");
                mrow.to_host();
                mcol.to_host();
                mrow.advise_host_accessed_by_gpu();
                mcol.advise_host_accessed_by_gpu();
                rec("1", "UVM advise host+accessed-by", "-", run_bfs(Direct{mrow.p}, Direct{mcol.p}), "");
                mrow.to_host();
                mcol.to_host();
                double pf = mrow.prefetch_to_gpu_ms(ev_) + mcol.prefetch_to_gpu_ms(ev_);
                auto r = run_bfs(Direct{mrow.p}, Direct{mcol.p});
                rec("1", "UVM prefetch all, then BFS", "-", {pf + r.first, r.second},
                    log::concat("prefetch ", pf, " ms"));
            } catch (const Error& e) {
                std::printf("UVM BFS skipped: %s\n", e.what());
            }
        }
        for (unsigned pct : opt_.pools)
            for (const UmemVariant& v : variants(false)) {
                GpuPager prow(pager_config(row_bytes, pct, v.admission, 0, v.page), row.p, v.engine);
                GpuPager pcol(pager_config(col_bytes, pct, v.admission, 0, v.page), col.p, v.engine);
                Paged rs{Array<std::uint64_t>(prow.view(), prow.ring()), &prow};
                Paged cs{Array<std::uint64_t>(pcol.view(), pcol.ring()), &pcol};
                // Each pass's note after the pass (an argument beside run_bfs() could be evaluated before it).
                for (const char* pass : {"1", "2"}) {
                    auto r = run_bfs(rs, cs);
                    rec(pass, v.label(), pool_name(pct), r,
                        log::concat("pages row ", prow.page_size(), " col ", pcol.page_size(), " relayouts ",
                                    prow.relayouts(), "+", pcol.relayouts(), "; col: ") +
                            stats_note(pcol.stats()) + "; row: " + stats_note(prow.stats()));
                }
            }
        for (std::uint64_t page : opt_.bfs_pages)
            for (unsigned pct : opt_.pools) {
                const Admission adm = Config{}.admission;
                GpuPager prow(pager_config(row_bytes, pct, adm, 0, page), row.p, Engine::gpu_threads);
                GpuPager pcol(pager_config(col_bytes, pct, adm, 0, page), col.p, Engine::gpu_threads);
                Paged rs{Array<std::uint64_t>(prow.view(), prow.ring()), &prow};
                Paged cs{Array<std::uint64_t>(pcol.view(), pcol.ring()), &pcol};
                const std::string label = log::concat("umem gpu-threads ", name(adm), " p", page);
                for (const char* pass : {"1", "2"}) {
                    auto r = run_bfs(rs, cs);
                    rec(pass, label, pool_name(pct), r,
                        "col: " + stats_note(pcol.stats()) + "; row: " + stats_note(prow.stats()));
                }
            }
    }

    Options opt_;
    std::uint64_t bytes_, pages_;
    HostPinned data_;
    std::unique_ptr<Managed> uvm_;
    Events ev_;
    Launch launch_{};
};

// The short table: the baselines, then per workload, pass and pool the best umem method, with
// ratios to zero-copy and to UVM (same pass). Every row is in the --detail file.
void summary() {
    auto find = [](const std::string& w, const std::string& pass, const std::string& m) -> const Row* {
        for (const Row& r : results)
            if (r.workload == w && r.pass == pass && r.method == m) return &r;
        return nullptr;
    };
    auto line = [&](const Row& r) {
        const Row* z = find(r.workload, r.pass, "zero-copy");
        if (!z) z = find(r.workload, "1", "zero-copy");  // zero-copy does not change between passes
        const Row* u = find(r.workload, r.pass, "UVM");
        std::string xz = z ? log::concat(r.gbps() / z->gbps()) : "-";
        std::string xu = u ? log::concat(r.gbps() / u->gbps()) : "-";
        std::printf("| %s | %s | %s | %s | %.2f | %s | %s | %s |\n", r.workload.c_str(), r.pass.c_str(),
                    r.method.c_str(), r.pool.c_str(), r.gbps(), xz.c_str(), xu.c_str(), r.ok ? "ok" : "WRONG");
    };
    std::printf(
        "\n| workload | pass | method | pool | GB/s | x zero-copy | x UVM | ok |\n|---|---|---|---|---|---|---|---|\n");
    std::vector<const Row*> best;
    for (const Row& r : results) {
        if (r.pool == "-") {
            line(r);
            continue;
        }
        auto same = std::find_if(best.begin(), best.end(), [&](const Row* b) {
            return b->workload == r.workload && b->pass == r.pass && b->pool == r.pool;
        });
        if (same == best.end())
            best.push_back(&r);
        else if (r.gbps() > (*same)->gbps())
            *same = &r;
    }
    for (const Row* r : best) line(*r);
    // The automatic page size against every fixed one of the same workload, pass and pool.
    std::printf(
        "\n| workload | pass | pool | auto GB/s | best fixed GB/s | best fixed / auto (time) | today's default p4096 "
        "GB/s | auto / p4096 (speed) | auto page |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& a : results) {
        if (a.method != "umem default (auto)") continue;
        const Row *b = nullptr, *p4 = nullptr;
        for (const Row& c : results) {
            if (c.workload != a.workload || c.pass != a.pass || c.pool != a.pool ||
                c.method.rfind("umem gpu-threads adaptive p", 0) != 0)
                continue;
            if (c.method == "umem gpu-threads adaptive p4096") p4 = &c;
            if (!b || c.gbps() > b->gbps()) b = &c;
        }
        const std::string page = a.note.substr(0, a.note.find(';'));
        const std::string bname = b ? b->method.substr(b->method.rfind(' ') + 1) : "";
        std::printf("| %s | %s | %s | %.2f | %s %s | %s | %s | %s | %s |\n", a.workload.c_str(), a.pass.c_str(),
                    a.pool.c_str(), a.gbps(), b ? log::concat(b->gbps()).c_str() : "-", bname.c_str(),
                    b ? log::concat(b->gbps() / a.gbps()).c_str() : "-", p4 ? log::concat(p4->gbps()).c_str() : "-",
                    p4 ? log::concat(a.gbps() / p4->gbps()).c_str() : "-", page.c_str());
    }
    bool all_ok = std::all_of(results.begin(), results.end(), [](const Row& r) { return r.ok; });
    std::printf("%zu results, %s\n", results.size(), all_ok ? "all checked against the CPU: ok" : "SOME WRONG");
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw Error("umem-bench", a, "missing value", "see --help");
            return argv[++i];
        };
        if (a == "--gib")
            o.gib = std::stoull(value());
        else if (a == "--gathers")
            o.gathers = std::stoull(value());
        else if (a == "--bfs-pages") {
            for (const std::string& x : split_list(value())) o.bfs_pages.push_back(std::stoull(x));
        } else if (a == "--pages") {
            o.pages.clear();
            for (const std::string& x : split_list(value())) o.pages.push_back(std::stoull(x));
        } else if (a == "--policies")
            o.policies = true;
        else if (a == "--bfs-scale")
            o.bfs_scale = static_cast<unsigned>(std::stoul(value()));
        else if (a == "--only")
            o.only = Workloads("umem-bench", value(), {"memcpy", "ce", "gather", "hotset", "scan", "bfs"});
        else if (a == "--no-uvm")
            o.uvm = false;
        else if (a == "--detail")
            o.detail_path = value();
        else if (a == "--pools") {
            o.pools.clear();
            for (const std::string& x : split_list(value())) o.pools.push_back(static_cast<unsigned>(std::stoul(x)));
        } else {
            std::printf(
                "usage: umem-bench [--gib N] [--gathers N] [--bfs-scale S] [--bfs-pages 256,1024] [--pools 100,50,25]\n"
                "                  [--pages 128,256,512,1024,2048,4096] [--policies]\n"
                "                  [--only memcpy,ce,gather,hotset,scan,bfs] [--no-uvm] [--detail FILE]\n");
            std::exit(a == "--help" ? 0 : 2);
        }
    }
    return o;
}

int bench_main(int argc, char** argv) {
    try {
        Options o = parse(argc, argv);
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
            std::printf("umem-bench: no CUDA device here; nothing measured\n");
            return 77;
        }
        if (!o.detail_path.empty()) detail = std::fopen(o.detail_path.c_str(), "w");
        Bench b(o);
        b.run();
        summary();
        if (detail) std::fclose(detail);
        bool all_ok = std::all_of(results.begin(), results.end(), [](const Row& r) { return r.ok; });
        return all_ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "umem-bench: %s\n", e.what());
        return 1;
    }
}

}  // namespace
}  // namespace bardrive::umem

int main(int argc, char** argv) { return bardrive::umem::bench_main(argc, argv); }
