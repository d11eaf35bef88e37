#include "dma/memory.hpp"

#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"
#include "vfio/device.hpp"

namespace bardrive::dma {

namespace {

std::string size_text(std::size_t bytes) {
    if (bytes % page_1g == 0) return log::concat(bytes / page_1g, " GiB");
    if (bytes % (std::size_t{1} << 20) == 0) return log::concat(bytes >> 20, " MiB");
    return log::concat(bytes >> 10, " KiB");
}

std::string hugepage_dir(std::size_t page, int node) {
    std::string leaf = "hugepages-" + std::to_string(page >> 10) + "kB";
    return node >= 0 ? "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/" + leaf
                     : "/sys/kernel/mm/hugepages/" + leaf;
}

// Faults every page in now, reporting failure instead of SIGBUS (MADV_POPULATE_WRITE, Linux 5.14).
int populate(void* p, std::size_t size) {
#ifndef MADV_POPULATE_WRITE
    constexpr int MADV_POPULATE_WRITE = 23;
#endif
    return ::madvise(p, size, MADV_POPULATE_WRITE) == 0 ? 0 : errno;
}

int bind_node(void* p, std::size_t size, int node) {
    if (node < 0) return 0;
    if (node >= 64) return EINVAL;
    unsigned long mask = 1ul << node;
    // Linux numbers the mask bits up to maxnode - 1; pass one more than the highest node we use.
    long r = ::syscall(SYS_mbind, p, size, MPOL_BIND, &mask, static_cast<unsigned long>(node) + 2, MPOL_MF_STRICT);
    return r == 0 ? 0 : errno;
}

}  // namespace

Memory Memory::allocate(std::size_t bytes, const MemoryOptions& options) {
    const std::size_t page = options.page_size;
    if (page != page_4k && page != page_2m && page != page_1g)
        throw Error("allocate DMA memory", size_text(bytes),
                    log::concat("page size ", page, " is not 4 KiB, 2 MiB or 1 GiB"));
    if (bytes == 0) throw Error("allocate DMA memory", "0 bytes", "nothing to allocate");
    if (bytes > (std::size_t{1} << 46)) throw Error("allocate DMA memory", size_text(bytes), "implausibly large");
    const std::size_t size = (bytes + page - 1) / page * page;
    const std::string what = size_text(size) + " in " + size_text(page) + " pages" +
                             (options.numa_node >= 0 ? " on NUMA node " + std::to_string(options.numa_node) : "");

    // MAP_SHARED: a fork()ed child writing to these pages must not copy-on-write them away from
    // what the IOMMU has pinned.
    int flags = MAP_SHARED | MAP_ANONYMOUS;
    if (page == page_2m) flags |= MAP_HUGETLB | (21 << MAP_HUGE_SHIFT);
    if (page == page_1g) flags |= MAP_HUGETLB | (30 << MAP_HUGE_SHIFT);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    int err = p == MAP_FAILED ? errno : 0;
    if (!err) err = bind_node(p, size, options.numa_node);
    if (!err) err = populate(p, size);
    if (!err && page == page_4k && ::mlock(p, size) != 0) err = errno;
    if (err) {
        if (p != MAP_FAILED) ::munmap(p, size);
        if (page != page_4k && options.allow_small_pages) {
            log::warn("no ", size_text(page), " hugepages for ", what, " (", std::strerror(err),
                      "); falling back to locked 4 KiB pages as allowed");
            MemoryOptions small = options;
            small.page_size = page_4k;
            return allocate(bytes, small);
        }
        std::string hint;
        if (page == page_4k)
            hint = err == ENOMEM || err == EPERM || err == EAGAIN
                       ? "locking the pages hit the memlock limit: raise 'ulimit -l' or run as root"
                       : "";
        else if (err == EINVAL && options.numa_node >= 0)
            hint = "NUMA node " + std::to_string(options.numa_node) + " does not exist here";
        else {
            std::string dir = hugepage_dir(page, options.numa_node);
            auto free = file::try_read_text(dir + "/free_hugepages");
            auto total = file::try_read_text(dir + "/nr_hugepages");
            hint = (free ? free.value() + " of " + total.value_or("?") + " free; " : std::string("none configured; ")) +
                   "reserve " + std::to_string(size / page) + " more with 'echo N > " + dir +
                   "/nr_hugepages', or opt in to 4 KiB pages (MemoryOptions::allow_small_pages)";
        }
        throw Error::from_errno("allocate DMA memory", what, err, hint);
    }
    Memory m;
    m.data_ = static_cast<std::byte*>(p);
    m.size_ = size;
    m.page_size_ = page;
    m.numa_node_ = options.numa_node;
    log::debug("allocated ", what, " at ", p);
    return m;
}

Memory Memory::allocate_near(const vfio::Device& device, std::size_t bytes, MemoryOptions options) {
    options.numa_node = device.numa_node();
    if (options.numa_node < 0) log::debug(device.bdf().str(), " reports no NUMA node; memory is not bound");
    return allocate(bytes, options);
}

Memory::Memory(Memory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      page_size_(o.page_size_),
      numa_node_(o.numa_node_) {}

Memory& Memory::operator=(Memory&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        page_size_ = o.page_size_;
        numa_node_ = o.numa_node_;
    }
    return *this;
}

Memory::~Memory() { release(); }

void Memory::release() noexcept {
    if (data_ == nullptr) return;
    if (::munmap(data_, size_) != 0) log::warn("munmap of DMA memory failed: ", std::strerror(errno));
    data_ = nullptr;
    size_ = 0;
}

}  // namespace bardrive::dma
