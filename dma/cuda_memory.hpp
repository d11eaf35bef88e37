// dma::CudaMemory: GPU memory exported as a dma-buf, for importers (NICs, other GPUs, RDMA).
// Built only when CUDA is found (library bardrive_cuda; dma/meson.build).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/fd.hpp"

namespace bardrive::dma {

// The CUDA driver (libcuda.so.1) is loaded at run time, so programs using this run on machines
// without a GPU and get a clear error instead of failing to start.
// allocate(bytes, gpu) allocates device memory with the CUDA driver API (size rounded up to the
// export granularity) and exports it with cuMemGetHandleForAddressRange as a dma-buf fd.
// Errors name the CUDA call and its error string; no GPU / no dma-buf support is a clear error.
// map_cpu() mmaps the dma-buf for CPU access where the exporting driver allows it, else throws
// "unsupported on this driver" (NVIDIA's nv_dmabuf does not implement mmap as of 580).
// Move-only; frees the memory and closes the fd on destruction (unmapping map_cpu() first).
class CudaMemory {
public:
    static CudaMemory allocate(std::size_t bytes, int gpu = 0);

    CudaMemory(CudaMemory&& o) noexcept;
    CudaMemory& operator=(CudaMemory&& o) noexcept;
    CudaMemory(const CudaMemory&) = delete;
    CudaMemory& operator=(const CudaMemory&) = delete;
    ~CudaMemory();

    std::uint64_t device_ptr() const noexcept { return dptr_; }  // CUdeviceptr
    std::size_t size() const noexcept { return size_; }
    std::size_t alignment() const noexcept { return alignment_; }  // of device_ptr() and size()
    int dmabuf_fd() const noexcept { return dmabuf_.get(); }
    std::string exporter() const;  // the dma-buf exporter's name (/proc/self/fdinfo), e.g. "nv_dmabuf"
    void* map_cpu();

private:
    CudaMemory() = default;
    void release() noexcept;
    std::uint64_t dptr_ = 0;
    std::size_t size_ = 0;
    std::size_t alignment_ = 0;
    UniqueFd dmabuf_;
    void* cpu_ = nullptr;
    int gpu_ = -1;  // primary context retained while the memory lives
};

}  // namespace bardrive::dma
