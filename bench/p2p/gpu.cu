// The GPU paths (see gpu.hpp), on the CUDA runtime. Each path is a PathSpec: how to enqueue one
// transfer, how to prepare known bytes, how to check what landed, and its reference. One sweep
// loop times them all with CUDA events.
#include <cuda_runtime.h>

#include <cctype>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

#include "bench/p2p/gpu.hpp"
#include "bench/p2p/pattern.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::bench {
namespace {

void ck(cudaError_t e, const char* op, const std::string& object) {
    if (e != cudaSuccess) throw Error(op, object, cudaGetErrorString(e));
}

__device__ inline std::size_t thread_index() { return blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; }
__device__ inline std::size_t thread_count() { return std::size_t{gridDim.x} * blockDim.x; }

__global__ void fill_kernel(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
    for (std::size_t i = thread_index(); i < words; i += thread_count()) p[i] = pattern(i, seed);
}

__global__ void check_kernel(const std::uint64_t* p, std::size_t words, std::uint64_t seed, unsigned long long* bad) {
    unsigned long long n = 0;
    for (std::size_t i = thread_index(); i < words; i += thread_count()) n += p[i] != pattern(i, seed);
    if (n) atomicAdd(bad, n);
}

__global__ void xor_pattern_kernel(std::size_t words, std::uint64_t seed, unsigned long long* out) {
    unsigned long long x = 0;
    for (std::size_t i = thread_index(); i < words; i += thread_count()) x ^= pattern(i, seed);
    atomicXor(out, x);
}

// SM copy: 16-byte loads and stores, grid-stride, so any grid size covers the buffer.
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
    for (std::size_t i = thread_index(); i < n; i += thread_count()) dst[i] = src[i];
}

// Both directions at once from one launch: even blocks copy a, odd blocks copy b.
__global__ void copy2_kernel(const uint4* __restrict__ a_src, uint4* __restrict__ a_dst,
                             const uint4* __restrict__ b_src, uint4* __restrict__ b_dst, std::size_t n) {
    const uint4* src = blockIdx.x % 2 ? b_src : a_src;
    uint4* dst = blockIdx.x % 2 ? b_dst : a_dst;
    std::size_t stride = std::size_t{gridDim.x / 2} * blockDim.x;
    for (std::size_t i = (blockIdx.x / 2) * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

__device__ inline std::uint64_t lo_word(uint4 v) { return v.x | (std::uint64_t{v.y} << 32); }
__device__ inline std::uint64_t hi_word(uint4 v) { return v.z | (std::uint64_t{v.w} << 32); }

// Zero-copy read: every word is loaded and folded into one XOR, which the check compares.
__global__ void read_kernel(const uint4* __restrict__ src, std::size_t n, unsigned long long* out) {
    std::uint64_t x = 0;
    for (std::size_t i = thread_index(); i < n; i += thread_count()) {
        uint4 v = src[i];
        x ^= lo_word(v) ^ hi_word(v);
    }
    atomicXor(out, static_cast<unsigned long long>(x));
}

// Zero-copy write: the pattern is computed in registers and stored, 16 bytes at a time.
__global__ void write_kernel(uint4* __restrict__ dst, std::size_t n, std::uint64_t seed) {
    for (std::size_t i = thread_index(); i < n; i += thread_count()) {
        std::uint64_t a = pattern(2 * i, seed), b = pattern(2 * i + 1, seed);
        dst[i] = make_uint4(static_cast<unsigned>(a), static_cast<unsigned>(a >> 32), static_cast<unsigned>(b),
                            static_cast<unsigned>(b >> 32));
    }
}

// One thread follows a chain of indexes through pinned host memory: each load waits for the
// previous one, so the time per step is the round trip of one read over the link.
__global__ void chase_kernel(const volatile std::uint64_t* p, int steps, std::uint64_t* out) {
    std::uint64_t i = 0;
    for (int s = 0; s < steps; ++s) i = p[i];
    *out = i;
}

struct EventDeleter {
    void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
struct StreamDeleter {
    void operator()(CUstream_st* s) const { cudaStreamDestroy(s); }
};
struct DeviceDeleter {
    void operator()(void* p) const { cudaFree(p); }
};
struct UnregisterDeleter {
    void operator()(void* p) const { cudaHostUnregister(p); }
};
using Event = std::unique_ptr<CUevent_st, EventDeleter>;
using Stream = std::unique_ptr<CUstream_st, StreamDeleter>;
using DeviceMemory = std::unique_ptr<void, DeviceDeleter>;
using Registration = std::unique_ptr<void, UnregisterDeleter>;

Event make_event(const std::string& who) {
    cudaEvent_t e = nullptr;
    ck(cudaEventCreate(&e), "cudaEventCreate", who);
    return Event(e);
}

Stream make_stream(const std::string& who) {
    cudaStream_t s = nullptr;
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", who);
    return Stream(s);
}

// One GPU: its streams, events, two device buffers of the largest size and a few scratch words.
struct Gpu {
    GpuDevice dev;
    int blocks = 0;  // grid size for the kernels: enough resident threads to keep the link busy
    Stream s1, s2;
    Event start, join, stop;
    DeviceMemory d0, d1, scratch;

    void use() const { ck(cudaSetDevice(dev.index), "cudaSetDevice", dev.bdf); }
    unsigned long long* counter() const { return static_cast<unsigned long long*>(scratch.get()); }
};

std::unique_ptr<Gpu> open_gpu(const GpuDevice& d, std::size_t bytes) {
    auto g = std::make_unique<Gpu>();
    g->dev = d;
    g->use();
    const std::string who = "gpu" + std::to_string(d.index) + " (" + d.bdf + ")";
    cudaDeviceProp prop{};
    ck(cudaGetDeviceProperties(&prop, d.index), "cudaGetDeviceProperties", who);
    g->blocks = prop.multiProcessorCount * (prop.maxThreadsPerMultiProcessor / 256);
    std::size_t free = 0, total = 0;
    ck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", who);
    if (free < 2 * bytes + (64u << 20))
        throw Error("allocate GPU memory", who,
                    log::concat("the sweep needs 2 x ", format_size(bytes), " but ", free >> 20, " MiB are free"),
                    "pick a smaller largest size with --sizes");
    void* p = nullptr;
    ck(cudaMalloc(&p, bytes), "cudaMalloc", who);
    g->d0.reset(p);
    ck(cudaMalloc(&p, bytes), "cudaMalloc", who);
    g->d1.reset(p);
    ck(cudaMalloc(&p, 64), "cudaMalloc", who);
    g->scratch.reset(p);
    g->s1 = make_stream(who);
    g->s2 = make_stream(who);
    g->start = make_event(who);
    g->join = make_event(who);
    g->stop = make_event(who);
    return g;
}

// A host buffer on one NUMA node, pinned and mapped into every GPU's address space.
struct PinnedHost {
    HostBuffer mem;
    Registration reg;
    void* dev_ptr = nullptr;  // the address kernels use (the same as the host's with UVA)
};

PinnedHost pin(const HostNodes& nodes, int node, std::size_t bytes) {
    PinnedHost h{HostBuffer(nodes, node, bytes), nullptr, nullptr};
    const std::string who = log::concat(format_size(bytes), " on NUMA node ", node);
    ck(cudaHostRegister(h.mem.data(), bytes, cudaHostRegisterPortable | cudaHostRegisterMapped), "cudaHostRegister",
       who);
    h.reg.reset(h.mem.data());
    ck(cudaHostGetDevicePointer(&h.dev_ptr, h.mem.data(), 0), "cudaHostGetDevicePointer", who);
    return h;
}

void fill(const Gpu& g, void* p, std::size_t bytes, std::uint64_t seed) {
    fill_kernel<<<g.blocks, 256, 0, g.s1.get()>>>(static_cast<std::uint64_t*>(p), bytes / 8, seed);
    ck(cudaGetLastError(), "fill_kernel", g.dev.bdf);
}

// Counts the words of [p, p + bytes) that differ from pattern(seed); "" when all match.
std::string check(const Gpu& g, const void* p, std::size_t bytes, std::uint64_t seed, const char* where) {
    g.use();
    ck(cudaMemsetAsync(g.counter(), 0, 8, g.s1.get()), "cudaMemsetAsync", g.dev.bdf);
    check_kernel<<<g.blocks, 256, 0, g.s1.get()>>>(static_cast<const std::uint64_t*>(p), bytes / 8, seed, g.counter());
    unsigned long long bad = 0;
    ck(cudaMemcpyAsync(&bad, g.counter(), 8, cudaMemcpyDeviceToHost, g.s1.get()), "cudaMemcpyAsync", g.dev.bdf);
    ck(cudaStreamSynchronize(g.s1.get()), "check_kernel", g.dev.bdf);
    if (!bad) return {};
    return log::concat(bad, " of ", bytes / 8, " 64-bit words in ", where, " hold the wrong bytes after a ",
                       format_size(bytes), " transfer");
}

// One path: how to move `bytes` once (both ways when bidirectional), how to set known bytes up
// and how to check the result of one more transfer after the sweep.
struct PathSpec {
    PathResult row;
    Gpu* timer = nullptr;      // whose streams and events time it
    bool two_streams = false;  // work goes on s1 and s2 at once
    std::function<void(std::uint64_t bytes, std::uint64_t seed)> issue;
    std::function<void(std::uint64_t seed)> prepare;  // sources = pattern(seed), destinations = other
    std::function<std::string(std::uint64_t bytes, std::uint64_t seed)> verify;
    std::function<double(std::uint64_t bytes)> ref_gbps;  // the reference at this size; empty = none
    std::function<double()> latency_us;                   // empty = not measured
    std::uint64_t latency_bytes = 0;
};

// Device time of one repetition: `issue` runs `batch` times between two events.
template <class F>
double time_once(Gpu& g, bool two_streams, int batch, F&& issue) {
    g.use();
    cudaStream_t s1 = g.s1.get(), s2 = g.s2.get();
    ck(cudaEventRecord(g.start.get(), s1), "cudaEventRecord", g.dev.bdf);
    if (two_streams) ck(cudaStreamWaitEvent(s2, g.start.get(), 0), "cudaStreamWaitEvent", g.dev.bdf);
    for (int i = 0; i < batch; ++i) issue();
    if (two_streams) {
        ck(cudaEventRecord(g.join.get(), s2), "cudaEventRecord", g.dev.bdf);
        ck(cudaStreamWaitEvent(s1, g.join.get(), 0), "cudaStreamWaitEvent", g.dev.bdf);
    }
    ck(cudaEventRecord(g.stop.get(), s1), "cudaEventRecord", g.dev.bdf);
    ck(cudaEventSynchronize(g.stop.get()), "cudaEventSynchronize", g.dev.bdf);
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, g.start.get(), g.stop.get()), "cudaEventElapsedTime", g.dev.bdf);
    return ms / 1e3;
}

// Median rate over the repetitions after the warm-up, in GB/s of `bytes_per_issue` per issue().
template <class F>
double rate(Gpu& g, const SweepConfig& cfg, bool two_streams, std::uint64_t bytes_per_issue, int batch, F&& issue) {
    for (int i = 0; i < cfg.warmup; ++i) time_once(g, two_streams, batch, issue);
    std::vector<double> s;
    for (int i = 0; i < cfg.repetitions; ++i) s.push_back(time_once(g, two_streams, batch, issue));
    double t = median(s);
    return t > 0 ? static_cast<double>(bytes_per_issue) * batch / t / 1e9 : 0;
}

// Median device time of one small transfer, in microseconds.
template <class F>
double latency(Gpu& g, F&& issue) {
    constexpr int warm = 3, samples = 21;
    std::vector<double> s;
    for (int i = 0; i < warm + samples; ++i) {
        double t = time_once(g, false, 1, issue);
        if (i >= warm) s.push_back(t * 1e6);
    }
    return median(s);
}

// The cudaMemcpy reference between two buffers, timed on the legacy stream; cached per size.
struct Reference {
    Gpu* g;
    const void* src;
    void* dst;
    cudaMemcpyKind kind;
    std::map<std::uint64_t, double> cache;
};

double reference_gbps(Reference& r, const SweepConfig& cfg, std::uint64_t bytes) {
    if (auto it = r.cache.find(bytes); it != r.cache.end()) return it->second;
    Gpu& g = *r.g;
    g.use();
    int batch = batch_for(bytes);
    auto once = [&] {
        ck(cudaEventRecord(g.start.get(), nullptr), "cudaEventRecord", g.dev.bdf);
        for (int i = 0; i < batch; ++i) ck(cudaMemcpy(r.dst, r.src, bytes, r.kind), "cudaMemcpy", g.dev.bdf);
        ck(cudaEventRecord(g.stop.get(), nullptr), "cudaEventRecord", g.dev.bdf);
        ck(cudaEventSynchronize(g.stop.get()), "cudaEventSynchronize", g.dev.bdf);
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, g.start.get(), g.stop.get()), "cudaEventElapsedTime", g.dev.bdf);
        return ms / 1e3;
    };
    for (int i = 0; i < cfg.warmup; ++i) once();
    std::vector<double> s;
    for (int i = 0; i < cfg.repetitions; ++i) s.push_back(once());
    double t = median(s);
    return r.cache[bytes] = t > 0 ? static_cast<double>(bytes) * batch / t / 1e9 : 0;
}

int grid_for(const Gpu& g, std::uint64_t bytes) {
    std::uint64_t need = (bytes / 16 + 255) / 256;
    return static_cast<int>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(need, g.blocks)));
}

// Everything one run needs alive while the specs' closures use it.
struct Rig {
    std::vector<std::unique_ptr<Gpu>> gpus;
    std::map<int, PinnedHost> in, out;  // per NUMA node: a source and a destination buffer
    std::vector<std::unique_ptr<Reference>> refs;
};

std::string host_name(int node) { return "host" + std::to_string(node); }

void add_host_paths(Rig& rig, Gpu& g, int node, const SweepConfig& cfg, std::uint64_t largest,
                    std::vector<PathSpec>& specs) {
    PinnedHost& hin = rig.in.at(node);
    PinnedHost& hout = rig.out.at(node);
    const std::string h = host_name(node), d = "gpu" + std::to_string(g.dev.index);
    void* hsrc = hin.mem.data();
    void* hdst = hout.mem.data();
    void* hsrc_dev = hin.dev_ptr;
    void* hdst_dev = hout.dev_ptr;
    void* dd = g.d0.get();  // device destination of host -> GPU
    void* ds = g.d1.get();  // device source of GPU -> host
    rig.refs.push_back(std::make_unique<Reference>(Reference{&g, hsrc, dd, cudaMemcpyHostToDevice, {}}));
    Reference* ref_h2d = rig.refs.back().get();
    rig.refs.push_back(std::make_unique<Reference>(Reference{&g, ds, hdst, cudaMemcpyDeviceToHost, {}}));
    Reference* ref_d2h = rig.refs.back().get();
    auto h2d_ref = [ref_h2d, &cfg](std::uint64_t b) { return reference_gbps(*ref_h2d, cfg, b); };
    auto d2h_ref = [ref_d2h, &cfg](std::uint64_t b) { return reference_gbps(*ref_d2h, cfg, b); };
    auto both_ref = [ref_h2d, ref_d2h, &cfg](std::uint64_t b) {
        return reference_gbps(*ref_h2d, cfg, b) + reference_gbps(*ref_d2h, cfg, b);
    };
    Gpu* gp = &g;
    auto prep_h2d = [gp, hsrc_dev, dd, largest](std::uint64_t seed) {
        fill(*gp, hsrc_dev, largest, seed);
        fill(*gp, dd, largest, seed + 1);
    };
    auto prep_d2h = [gp, ds, hdst_dev, largest](std::uint64_t seed) {
        fill(*gp, ds, largest, seed);
        fill(*gp, hdst_dev, largest, seed + 1);
    };
    auto prep_both = [prep_h2d, prep_d2h](std::uint64_t seed) {
        prep_h2d(seed);
        prep_d2h(seed);
    };
    auto check_h2d = [gp, dd, d](std::uint64_t b, std::uint64_t seed) { return check(*gp, dd, b, seed, d.c_str()); };
    auto check_d2h = [gp, hdst_dev, h](std::uint64_t b, std::uint64_t seed) {
        return check(*gp, hdst_dev, b, seed, h.c_str());
    };
    auto check_both = [check_h2d, check_d2h](std::uint64_t b, std::uint64_t seed) {
        std::string e = check_h2d(b, seed);
        return e.empty() ? check_d2h(b, seed) : e;
    };
    auto base = [&](const char* method, const std::string& src, const std::string& dst, bool bidir,
                    const char* reference) {
        PathSpec s;
        s.row = make_path(method, src, dst, bidir);
        s.row.host_node = node;
        s.row.reference = reference;
        s.row.src_bdf = src == d ? g.dev.bdf : "";
        s.row.dst_bdf = dst == d ? g.dev.bdf : "";
        s.timer = gp;
        s.two_streams = bidir;
        return s;
    };

    if (cfg.wants("ce")) {
        PathSpec s = base("ce", h, d, false, "cudaMemcpy H2D");
        s.issue = [gp, hsrc, dd](std::uint64_t b, std::uint64_t) {
            cudaMemcpyAsync(dd, hsrc, b, cudaMemcpyHostToDevice, gp->s1.get());
        };
        s.prepare = prep_h2d, s.verify = check_h2d, s.ref_gbps = h2d_ref;
        s.latency_bytes = 4;
        specs.push_back(std::move(s));

        s = base("ce", d, h, false, "cudaMemcpy D2H");
        s.issue = [gp, hdst, ds](std::uint64_t b, std::uint64_t) {
            cudaMemcpyAsync(hdst, ds, b, cudaMemcpyDeviceToHost, gp->s1.get());
        };
        s.prepare = prep_d2h, s.verify = check_d2h, s.ref_gbps = d2h_ref;
        s.latency_bytes = 4;
        specs.push_back(std::move(s));

        s = base("ce", h, d, true, "cudaMemcpy H2D + D2H, each alone");
        s.issue = [gp, hsrc, dd, hdst, ds](std::uint64_t b, std::uint64_t) {
            cudaMemcpyAsync(dd, hsrc, b, cudaMemcpyHostToDevice, gp->s1.get());
            cudaMemcpyAsync(hdst, ds, b, cudaMemcpyDeviceToHost, gp->s2.get());
        };
        s.prepare = prep_both, s.verify = check_both, s.ref_gbps = both_ref;
        specs.push_back(std::move(s));
    }
    if (cfg.wants("sm")) {
        PathSpec s = base("sm", h, d, false, "cudaMemcpy H2D");
        s.issue = [gp, hsrc_dev, dd](std::uint64_t b, std::uint64_t) {
            copy_kernel<<<grid_for(*gp, b), 256, 0, gp->s1.get()>>>(static_cast<const uint4*>(hsrc_dev),
                                                                    static_cast<uint4*>(dd), b / 16);
        };
        s.prepare = prep_h2d, s.verify = check_h2d, s.ref_gbps = h2d_ref;
        s.latency_bytes = 16;
        specs.push_back(std::move(s));

        s = base("sm", d, h, false, "cudaMemcpy D2H");
        s.issue = [gp, hdst_dev, ds](std::uint64_t b, std::uint64_t) {
            copy_kernel<<<grid_for(*gp, b), 256, 0, gp->s1.get()>>>(static_cast<const uint4*>(ds),
                                                                    static_cast<uint4*>(hdst_dev), b / 16);
        };
        s.prepare = prep_d2h, s.verify = check_d2h, s.ref_gbps = d2h_ref;
        s.latency_bytes = 16;
        specs.push_back(std::move(s));

        s = base("sm", h, d, true, "cudaMemcpy H2D + D2H, each alone");
        s.two_streams = false;  // one launch carries both directions
        s.issue = [gp, hsrc_dev, dd, hdst_dev, ds](std::uint64_t b, std::uint64_t) {
            copy2_kernel<<<2 * grid_for(*gp, b), 256, 0, gp->s1.get()>>>(
                static_cast<const uint4*>(hsrc_dev), static_cast<uint4*>(dd), static_cast<const uint4*>(ds),
                static_cast<uint4*>(hdst_dev), b / 16);
        };
        s.prepare = prep_both, s.verify = check_both, s.ref_gbps = both_ref;
        specs.push_back(std::move(s));
    }
    if (cfg.wants("zc-read")) {
        PathSpec s = base("zc-read", h, d, false, "cudaMemcpy H2D");
        s.issue = [gp, hsrc_dev](std::uint64_t b, std::uint64_t) {
            read_kernel<<<grid_for(*gp, b), 256, 0, gp->s1.get()>>>(static_cast<const uint4*>(hsrc_dev), b / 16,
                                                                    gp->counter() + 1);
        };
        s.prepare = [gp, hsrc_dev, largest](std::uint64_t seed) { fill(*gp, hsrc_dev, largest, seed); };
        s.verify = [gp, hsrc_dev, h](std::uint64_t b, std::uint64_t seed) -> std::string {
            // The XOR the kernel folded from host memory against the XOR of the pattern itself.
            gp->use();
            cudaStream_t st = gp->s1.get();
            ck(cudaMemsetAsync(gp->counter() + 1, 0, 16, st), "cudaMemsetAsync", gp->dev.bdf);
            read_kernel<<<grid_for(*gp, b), 256, 0, st>>>(static_cast<const uint4*>(hsrc_dev), b / 16,
                                                          gp->counter() + 1);
            xor_pattern_kernel<<<gp->blocks, 256, 0, st>>>(b / 8, seed, gp->counter() + 2);
            unsigned long long got[2] = {};
            ck(cudaMemcpyAsync(got, gp->counter() + 1, 16, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync", gp->dev.bdf);
            ck(cudaStreamSynchronize(st), "read_kernel", gp->dev.bdf);
            if (got[0] == got[1]) return {};
            return log::concat("the GPU read wrong bytes from ", h, ": XOR of ", format_size(b), " is ", got[0],
                               ", expected ", got[1]);
        };
        s.ref_gbps = h2d_ref;
        // Latency: one thread chases indexes through distinct 4 KiB pages of pinned memory.
        if (largest >= 2 * 4096) {
            int steps = static_cast<int>(std::min<std::uint64_t>(256, largest / 4096 - 1));
            s.latency_bytes = 8;
            s.latency_us = [gp, hsrc, hsrc_dev, steps]() {
                auto* w = static_cast<std::uint64_t*>(hsrc);
                for (int k = 0; k < steps; ++k) w[std::uint64_t(k) * 512] = std::uint64_t(k + 1) * 512;
                auto one = [&] {
                    chase_kernel<<<1, 1, 0, gp->s1.get()>>>(static_cast<const std::uint64_t*>(hsrc_dev), steps,
                                                            reinterpret_cast<std::uint64_t*>(gp->counter() + 3));
                };
                return latency(*gp, one) / steps;
            };
        }
        specs.push_back(std::move(s));
    }
    if (cfg.wants("zc-write")) {
        PathSpec s = base("zc-write", d, h, false, "cudaMemcpy D2H");
        s.issue = [gp, hdst_dev](std::uint64_t b, std::uint64_t seed) {
            write_kernel<<<grid_for(*gp, b), 256, 0, gp->s1.get()>>>(static_cast<uint4*>(hdst_dev), b / 16, seed);
        };
        s.prepare = [gp, hdst_dev, largest](std::uint64_t seed) { fill(*gp, hdst_dev, largest, seed + 1); };
        s.verify = check_d2h, s.ref_gbps = d2h_ref;
        specs.push_back(std::move(s));
    }
}

// Latency for the specs that time one small issue() (copy engine, SM copy).
void add_issue_latency(PathSpec& s) {
    if (s.latency_us || !s.latency_bytes) return;
    Gpu* g = s.timer;
    auto issue = s.issue;
    std::uint64_t b = s.latency_bytes;
    s.latency_us = [g, issue, b] { return latency(*g, [&] { issue(b, 0); }); };
}

void peer_on(Gpu& a, Gpu& b, bool on) {
    for (auto [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        x->use();
        cudaError_t e = on ? cudaDeviceEnablePeerAccess(y->dev.index, 0) : cudaDeviceDisablePeerAccess(y->dev.index);
        if (e == cudaErrorPeerAccessAlreadyEnabled || e == cudaErrorPeerAccessNotEnabled) {
            cudaGetLastError();  // already in the wanted state: clear the error it just returned
        } else {
            ck(e, on ? "cudaDeviceEnablePeerAccess" : "cudaDeviceDisablePeerAccess", x->dev.bdf + " -> " + y->dev.bdf);
        }
    }
}

void add_peer_paths(Rig& rig, Gpu& a, Gpu& b, const SweepConfig& cfg, std::uint64_t largest,
                    std::vector<PathSpec>& specs, std::vector<PathResult>& unavailable) {
    const std::string na = "gpu" + std::to_string(a.dev.index), nb = "gpu" + std::to_string(b.dev.index);
    int ab = 0, ba = 0;
    ck(cudaDeviceCanAccessPeer(&ab, a.dev.index, b.dev.index), "cudaDeviceCanAccessPeer", a.dev.bdf);
    ck(cudaDeviceCanAccessPeer(&ba, b.dev.index, a.dev.index), "cudaDeviceCanAccessPeer", b.dev.bdf);
    Gpu* ga = &a;
    Gpu* gb = &b;
    void* src_a = a.d0.get();  // a -> b lands in b.d1; b -> a lands in a.d1
    void* src_b = b.d0.get();
    void* dst_b = b.d1.get();
    void* dst_a = a.d1.get();
    for (const char* method : {"nopeer", "peer"}) {
        const bool peer = std::string(method) == "peer";
        if (!cfg.wants(method)) continue;
        if (peer && !(ab && ba)) {
            for (bool bidir : {false, true}) {
                if (bidir && a.dev.index > b.dev.index) continue;
                PathResult r = make_path(method, na, nb, bidir);
                r.reason =
                    "cudaDeviceCanAccessPeer says no between these GPUs (no P2P over this topology, or the "
                    "driver disables it)";
                unavailable.push_back(r);
            }
            continue;
        }
        rig.refs.push_back(std::make_unique<Reference>(Reference{&a, src_a, dst_b, cudaMemcpyDefault, {}}));
        Reference* ref = rig.refs.back().get();
        auto set_peer = [ga, gb, peer] { peer_on(*ga, *gb, peer); };
        for (bool bidir : {false, true}) {
            if (bidir && a.dev.index > b.dev.index) continue;  // one bidirectional row per pair
            PathSpec s;
            s.row = make_path(method, na, nb, bidir);
            s.row.src_bdf = a.dev.bdf;
            s.row.dst_bdf = b.dev.bdf;
            s.row.reference = peer ? "cudaMemcpy, same pair, peer access on" : "cudaMemcpy, same pair, peer access off";
            s.timer = ga;
            s.two_streams = bidir;
            s.issue = [ga, gb, src_a, src_b, dst_a, dst_b, bidir](std::uint64_t n, std::uint64_t) {
                cudaMemcpyPeerAsync(dst_b, gb->dev.index, src_a, ga->dev.index, n, ga->s1.get());
                if (bidir) cudaMemcpyPeerAsync(dst_a, ga->dev.index, src_b, gb->dev.index, n, ga->s2.get());
            };
            s.prepare = [ga, gb, src_a, src_b, dst_a, dst_b, largest, set_peer](std::uint64_t seed) {
                set_peer();
                gb->use();
                fill(*gb, src_b, largest, seed);
                fill(*gb, dst_b, largest, seed + 1);
                ck(cudaStreamSynchronize(gb->s1.get()), "fill_kernel", gb->dev.bdf);
                ga->use();
                fill(*ga, src_a, largest, seed);
                fill(*ga, dst_a, largest, seed + 1);
                ck(cudaStreamSynchronize(ga->s1.get()), "fill_kernel", ga->dev.bdf);
            };
            s.verify = [ga, gb, dst_a, dst_b, bidir, na, nb](std::uint64_t n, std::uint64_t seed) {
                ck(cudaStreamSynchronize(ga->s2.get()), "cudaMemcpyPeerAsync", ga->dev.bdf);
                std::string e = check(*gb, dst_b, n, seed, nb.c_str());
                if (e.empty() && bidir) e = check(*ga, dst_a, n, seed, na.c_str());
                return e;
            };
            if (bidir) {
                s.ref_gbps = [ref, &cfg](std::uint64_t n) { return 2 * reference_gbps(*ref, cfg, n); };
                s.row.reference += ", one way, doubled";
            } else {
                s.ref_gbps = [ref, &cfg](std::uint64_t n) { return reference_gbps(*ref, cfg, n); };
                s.latency_bytes = 4;
            }
            specs.push_back(std::move(s));
        }
    }
}

void run_spec(PathSpec& s, const SweepConfig& cfg, std::uint64_t largest, Progress& progress) {
    PathResult& r = s.row;
    try {
        s.timer->use();
        s.prepare(1);
        ck(cudaDeviceSynchronize(), "prepare", r.id);
        for (std::uint64_t b : cfg.sizes) {
            progress.step(r.id + " " + format_size(b));
            const std::uint64_t per_issue = s.row.bidirectional ? 2 * b : b;
            Point p;
            p.bytes = b;
            if (s.ref_gbps) p.ref_gbps = s.ref_gbps(b);
            p.gbps = rate(*s.timer, cfg, s.two_streams, per_issue, batch_for(b), [&] { s.issue(b, 1); });
            ck(cudaGetLastError(), "launch", r.id);
            r.points.push_back(p);
        }
        if (cfg.latency && s.latency_us) r.latency_us = s.latency_us(), r.latency_bytes = s.latency_bytes;
        // One more transfer of the largest size from fresh bytes, then check what landed.
        s.timer->use();
        s.prepare(7);
        // The fills ran on s1; a bidirectional path's second direction runs on s2, so wait here.
        ck(cudaDeviceSynchronize(), "prepare", r.id);
        s.issue(largest, 7);
        ck(cudaDeviceSynchronize(), "transfer", r.id);
        r.failure = s.verify(largest, 7);
    } catch (const Error& e) {
        r.failure = e.what();
        cudaGetLastError();
    }
}

}  // namespace

GpuList list_gpus() {
    GpuList out;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        const char* why = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this CUDA runtime"
                          : e == cudaErrorNoDevice         ? "no CUDA device"
                                                           : "no usable GPU";
        out.reason = log::concat(why, " (cudaGetDeviceCount: ", cudaGetErrorString(e), ")");
        cudaGetLastError();
        return out;
    }
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    out.driver =
        log::concat("CUDA driver ", drv / 1000, '.', drv % 1000 / 10, ", runtime ", rt / 1000, '.', rt % 1000 / 10);
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        char bus[32] = {};
        cudaDeviceGetPCIBusId(bus, sizeof bus, i);
        std::string bdf = bus;
        for (auto& c : bdf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        // The runtime writes an 8-digit domain ("00000000:06:00.0"); sysfs uses 4.
        if (bdf.size() == 16) bdf = bdf.substr(4);
        out.devices.push_back({i, p.name, bdf});
    }
    if (out.devices.empty()) out.reason = "no CUDA device";
    return out;
}

std::vector<PathResult> run_gpu_paths(const GpuList& gpus, const HostNodes& nodes, const SweepConfig& cfg,
                                      Progress& progress) {
    std::vector<PathResult> out;
    if (cfg.sizes.empty()) return out;
    const std::uint64_t largest = cfg.sizes.back();
    Rig rig;
    for (const auto& d : gpus.devices) rig.gpus.push_back(open_gpu(d, largest));
    rig.gpus.front()->use();
    for (int node : nodes.nodes()) {
        rig.in.emplace(node, pin(nodes, node, largest));
        rig.out.emplace(node, pin(nodes, node, largest));
    }
    std::vector<PathSpec> specs;
    std::vector<PathResult> unavailable;
    for (auto& g : rig.gpus)
        for (int node : nodes.nodes()) add_host_paths(rig, *g, node, cfg, largest, specs);
    if (nodes.nodes().size() == 1 && cfg.wants("ce")) {
        PathResult r = make_path("ce", "host1", "gpu0", false);
        r.reason = "one NUMA node: no remote host memory to measure";
        unavailable.push_back(r);
    }
    for (std::size_t a = 0; a < rig.gpus.size(); ++a)
        for (std::size_t b = 0; b < rig.gpus.size(); ++b)
            if (a != b) add_peer_paths(rig, *rig.gpus[a], *rig.gpus[b], cfg, largest, specs, unavailable);
    if (rig.gpus.size() == 1)
        for (const char* m : {"peer", "nopeer"})
            if (cfg.wants(m)) {
                PathResult r = make_path(m, "gpu0", "gpu1", false);
                r.reason = "one GPU: GPU-to-GPU paths need two";
                unavailable.push_back(r);
            }
    for (auto& s : specs) add_issue_latency(s);
    progress.add_total(static_cast<int>(specs.size() * cfg.sizes.size()));
    for (auto& s : specs) {
        run_spec(s, cfg, largest, progress);
        out.push_back(std::move(s.row));
    }
    for (auto& u : unavailable) out.push_back(std::move(u));
    return out;
}

}  // namespace bardrive::bench
