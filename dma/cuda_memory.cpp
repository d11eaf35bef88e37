#include "dma/cuda_memory.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <cerrno>
#include <utility>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"

namespace bardrive::dma {

namespace {

constexpr std::size_t export_alignment = std::size_t{2} << 20;  // GPU large page; a multiple of the host page

#define BARDRIVE_STR2(x) #x
#define BARDRIVE_STR(x) BARDRIVE_STR2(x)  // expands cuda.h's versioned names (cuMemAlloc -> cuMemAlloc_v2)

// The driver API entry points, resolved once from libcuda.so.1.
struct Driver {
    decltype(&::cuInit) init = nullptr;
    decltype(&::cuGetErrorString) error_string = nullptr;
    decltype(&::cuDeviceGetCount) device_count = nullptr;
    decltype(&::cuDeviceGet) device_get = nullptr;
    decltype(&::cuDeviceGetAttribute) attribute = nullptr;
    decltype(&::cuDevicePrimaryCtxRetain) ctx_retain = nullptr;
    decltype(&::cuDevicePrimaryCtxRelease) ctx_release = nullptr;
    decltype(&::cuCtxSetCurrent) ctx_set = nullptr;
    decltype(&::cuMemAlloc) alloc = nullptr;
    decltype(&::cuMemFree) free = nullptr;
    decltype(&::cuMemGetHandleForAddressRange) get_handle = nullptr;
    std::string missing;  // why it could not be loaded; empty when loaded
};

template <class F>
void resolve(void* lib, F& f, const char* name, std::string& missing) {
    f = reinterpret_cast<F>(::dlsym(lib, name));
    if (f == nullptr && missing.empty()) missing = std::string("libcuda.so.1 lacks ") + name;
}

const Driver& driver() {
    static const Driver d = [] {
        Driver r;
        void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            const char* why = ::dlerror();
            r.missing = why ? why : "libcuda.so.1 not found";
            return r;
        }
        resolve(lib, r.init, BARDRIVE_STR(cuInit), r.missing);
        resolve(lib, r.error_string, BARDRIVE_STR(cuGetErrorString), r.missing);
        resolve(lib, r.device_count, BARDRIVE_STR(cuDeviceGetCount), r.missing);
        resolve(lib, r.device_get, BARDRIVE_STR(cuDeviceGet), r.missing);
        resolve(lib, r.attribute, BARDRIVE_STR(cuDeviceGetAttribute), r.missing);
        resolve(lib, r.ctx_retain, BARDRIVE_STR(cuDevicePrimaryCtxRetain), r.missing);
        resolve(lib, r.ctx_release, BARDRIVE_STR(cuDevicePrimaryCtxRelease), r.missing);
        resolve(lib, r.ctx_set, BARDRIVE_STR(cuCtxSetCurrent), r.missing);
        resolve(lib, r.alloc, BARDRIVE_STR(cuMemAlloc), r.missing);
        resolve(lib, r.free, BARDRIVE_STR(cuMemFree), r.missing);
        resolve(lib, r.get_handle, BARDRIVE_STR(cuMemGetHandleForAddressRange), r.missing);
        return r;  // the library stays loaded for the life of the process
    }();
    return d;
}

void check(CUresult rc, const char* call, const std::string& object, const std::string& hint = {}) {
    if (rc == CUDA_SUCCESS) return;
    const char* text = nullptr;
    if (driver().error_string == nullptr || driver().error_string(rc, &text) != CUDA_SUCCESS || text == nullptr)
        text = "unknown CUDA error";
    throw Error(call, object, log::concat(text, " (CUresult ", static_cast<int>(rc), ")"), hint);
}

}  // namespace

CudaMemory CudaMemory::allocate(std::size_t bytes, int gpu) {
    const std::string obj = log::concat("GPU ", gpu);
    const Driver& d = driver();
    if (!d.missing.empty())
        throw Error("load the CUDA driver for", obj, d.missing,
                    "no NVIDIA driver on this machine; run this where a GPU is");
    if (bytes == 0) throw Error("allocate GPU memory on", obj, "0 bytes asked for");
    check(d.init(0), "cuInit", obj, "is the NVIDIA kernel module loaded ('nvidia-smi')?");
    int count = 0;
    check(d.device_count(&count), "cuDeviceGetCount", obj);
    if (gpu < 0 || gpu >= count)
        throw Error("allocate GPU memory on", obj, log::concat("there are ", count, " GPU(s)"));
    CUdevice dev = 0;
    check(d.device_get(&dev, gpu), "cuDeviceGet", obj);
    int dmabuf = 0;
    check(d.attribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev), "cuDeviceGetAttribute(DMA_BUF_SUPPORTED)",
          obj);
    if (!dmabuf)
        throw Error("export GPU memory of", obj, "the driver reports no dma-buf support (DMA_BUF_SUPPORTED=0)",
                    "needs the open NVIDIA kernel modules (515+) on Linux 5.12+");

    CudaMemory m;
    CUcontext ctx = nullptr;
    check(d.ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain", obj);
    m.gpu_ = gpu;
    check(d.ctx_set(ctx), "cuCtxSetCurrent", obj);
    const std::size_t size = (bytes + export_alignment - 1) / export_alignment * export_alignment;
    CUdeviceptr p = 0;
    check(d.alloc(&p, size), "cuMemAlloc", log::concat(obj, " ", size, " bytes"));
    m.dptr_ = p;
    m.size_ = size;
    if (p % export_alignment != 0)
        throw Error("export GPU memory of", obj,
                    log::concat("cuMemAlloc returned 0x", std::hex, p, ", not 2 MiB aligned"));
    m.alignment_ = export_alignment;
    int fd = -1;
    check(d.get_handle(&fd, p, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
          "cuMemGetHandleForAddressRange(DMA_BUF_FD)", obj);
    m.dmabuf_.reset(fd);
    log::debug("GPU ", gpu, ": ", size, " bytes at 0x", std::hex, p, " exported as dma-buf fd ", std::dec, fd);
    return m;
}

CudaMemory::CudaMemory(CudaMemory&& o) noexcept
    : dptr_(std::exchange(o.dptr_, 0)),
      size_(std::exchange(o.size_, 0)),
      alignment_(o.alignment_),
      dmabuf_(std::move(o.dmabuf_)),
      cpu_(std::exchange(o.cpu_, nullptr)),
      gpu_(std::exchange(o.gpu_, -1)) {}

CudaMemory& CudaMemory::operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
        release();
        dptr_ = std::exchange(o.dptr_, 0);
        size_ = std::exchange(o.size_, 0);
        alignment_ = o.alignment_;
        dmabuf_ = std::move(o.dmabuf_);
        cpu_ = std::exchange(o.cpu_, nullptr);
        gpu_ = std::exchange(o.gpu_, -1);
    }
    return *this;
}

CudaMemory::~CudaMemory() { release(); }

void CudaMemory::release() noexcept {
    if (cpu_ != nullptr) ::munmap(cpu_, size_);
    cpu_ = nullptr;
    dmabuf_.reset();
    const Driver& d = driver();
    if (dptr_ != 0 && d.free(dptr_) != CUDA_SUCCESS) log::warn("cuMemFree of exported GPU memory failed");
    dptr_ = 0;
    if (gpu_ >= 0) {
        CUdevice dev = 0;
        if (d.device_get(&dev, gpu_) == CUDA_SUCCESS) d.ctx_release(dev);
        gpu_ = -1;
    }
}

std::string CudaMemory::exporter() const {
    auto info = file::try_read_text("/proc/self/fdinfo/" + std::to_string(dmabuf_.get()));
    if (!info) return {};
    auto pos = info->find("exp_name:");
    if (pos == std::string::npos) return {};
    pos = info->find_first_not_of(" \t", pos + 9);
    return info->substr(pos, info->find('\n', pos) - pos);
}

void* CudaMemory::map_cpu() {
    if (cpu_ != nullptr) return cpu_;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf_.get(), 0);
    if (p == MAP_FAILED) {
        int err = errno;
        std::string exp = exporter();
        const std::string obj = log::concat("GPU ", gpu_, " memory (exporter ", exp.empty() ? "?" : exp, ")");
        const char* hint =
            "unsupported on this driver: its dma-buf exporter does not allow CPU mmap; copy with "
            "cuMemcpy, or let a device import the dma-buf instead";
        constexpr int kernel_enotsupp = 524;  // ENOTSUPP, kernel-internal: libc has no text for it
        if (err == kernel_enotsupp) throw Error("mmap dma-buf of", obj, "ENOTSUPP (524) from the exporter", hint);
        throw Error::from_errno("mmap dma-buf of", obj, err, hint);
    }
    cpu_ = p;
    return p;
}

}  // namespace bardrive::dma
