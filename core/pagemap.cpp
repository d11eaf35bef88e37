#include "core/pagemap.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/log.hpp"

namespace bardrive::pagemap {

namespace {
constexpr const char* path = "/proc/self/pagemap";
constexpr std::uint64_t present_bit = 1ull << 63;
constexpr std::uint64_t pfn_mask = (1ull << 55) - 1;  // bits 0-54

std::uint64_t page_size() {
    static const auto size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

std::uint64_t entry(int fd, std::uintptr_t va) {
    std::uint64_t e = 0;
    auto off = static_cast<off_t>(va / page_size() * sizeof e);
    if (::pread(fd, &e, sizeof e, off) != static_cast<ssize_t>(sizeof e)) throw Error::from_errno("read", path, errno);
    return e;
}
}  // namespace

namespace {
UniqueFd open_pagemap() {
    UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd) throw Error::from_errno("open", path, errno);
    return fd;
}

std::uint64_t physical_address(int fd, const void* vaddr) {
    auto va = reinterpret_cast<std::uintptr_t>(vaddr);
    std::uint64_t e = entry(fd, va);
    if (!(e & present_bit))
        throw Error("find the physical address of", log::concat("0x", std::hex, va), "the page is not resident",
                    "touch or lock the memory first (dma::Memory does)");
    std::uint64_t pfn = e & pfn_mask;
    if (pfn == 0)
        throw Error("find the physical address of", log::concat("0x", std::hex, va),
                    "the kernel hides page frame numbers",
                    "run as root (reading PFNs from /proc/self/pagemap needs CAP_SYS_ADMIN)");
    return pfn * page_size() + va % page_size();
}
}  // namespace

std::uint64_t physical_address(const void* vaddr) { return physical_address(open_pagemap().get(), vaddr); }

bool physically_contiguous(const void* vaddr, std::uint64_t size) {
    UniqueFd fd = open_pagemap();
    const auto* p = static_cast<const std::uint8_t*>(vaddr);
    std::uint64_t first = physical_address(fd.get(), p);
    for (std::uint64_t off = page_size() - reinterpret_cast<std::uintptr_t>(p) % page_size(); off < size;
         off += page_size())
        if (physical_address(fd.get(), p + off) != first + off) return false;
    return true;
}

}  // namespace bardrive::pagemap
