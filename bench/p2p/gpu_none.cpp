// The GPU paths in a build without CUDA: there are no GPUs to list, and the reason says why.
#include "bench/p2p/gpu.hpp"

namespace bardrive::bench {

GpuList list_gpus() {
    GpuList l;
    l.reason =
        "bardrive was built without CUDA (-Dcuda=disabled, or meson found no nvcc): reconfigure with "
        "-Dcuda=enabled where the CUDA toolkit is installed";
    return l;
}

std::vector<PathResult> run_gpu_paths(const GpuList&, const HostNodes&, const SweepConfig&, Progress&) { return {}; }

}  // namespace bardrive::bench
