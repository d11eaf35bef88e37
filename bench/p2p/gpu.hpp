// The GPU paths: host <-> GPU by copy engine (cudaMemcpyAsync) and by GPU threads (SM copy
// kernels, zero-copy reads and writes of pinned host memory), and GPU <-> GPU with peer access on
// and off. Timed with CUDA events; every path checks the bytes that landed. gpu.cu implements it
// when bardrive is built with CUDA, gpu_none.cpp otherwise.
#pragma once

#include <string>
#include <vector>

#include "bench/p2p/host_memory.hpp"
#include "bench/p2p/progress.hpp"
#include "bench/p2p/report.hpp"
#include "bench/p2p/sweep.hpp"

namespace bardrive::bench {

struct GpuDevice {
    int index = 0;
    std::string name;  // "NVIDIA H100 80GB HBM3"
    std::string bdf;   // "0000:06:00.0", lower case as sysfs writes it
};

struct GpuList {
    std::vector<GpuDevice> devices;
    std::string driver;  // "CUDA driver 13.0, runtime 13.0"
    std::string reason;  // why there are none: built without CUDA, no driver, no device
};

GpuList list_gpus();  // never throws: a machine without GPUs gets a reason

// The methods run_gpu_paths measures, for the unavailable rows of a machine without GPUs.
inline constexpr const char* gpu_methods[] = {"ce", "sm", "zc-read", "zc-write", "peer", "nopeer"};

// Every host <-> GPU path for each GPU and each host NUMA node, then GPU <-> GPU for each pair
// (peer-access rows say why when they cannot run). Methods that cfg does not want are left out.
// A path whose CUDA call fails or whose bytes come out wrong is marked failed; the rest still
// run. Throws bardrive::Error only when memory for the sweep cannot be had.
std::vector<PathResult> run_gpu_paths(const GpuList& gpus, const HostNodes& nodes, const SweepConfig& cfg,
                                      Progress& progress);

}  // namespace bardrive::bench
