#include "vfio/mmio.hpp"

#include <sys/mman.h>

#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::vfio {

Mmio Mmio::adopt(void* base, std::size_t size, std::string name) {
    Mmio m;
    m.base_ = static_cast<volatile std::uint8_t*>(base);
    m.size_ = size;
    m.name_ = std::move(name);
    return m;
}

Mmio::Mmio(Mmio&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)), name_(std::move(o.name_)) {}

Mmio& Mmio::operator=(Mmio&& o) noexcept {
    if (this != &o) {
        release();
        base_ = std::exchange(o.base_, nullptr);
        size_ = std::exchange(o.size_, 0);
        name_ = std::move(o.name_);
    }
    return *this;
}

Mmio::~Mmio() { release(); }

void Mmio::release() noexcept {
    if (base_ == nullptr) return;
    // const_cast: munmap takes a plain pointer; nothing is accessed through it.
    if (::munmap(const_cast<std::uint8_t*>(base_), size_) != 0) log::warn("munmap ", name_, " failed");
    base_ = nullptr;
    size_ = 0;
}

void Mmio::require(std::size_t offset, std::size_t bytes) const {
    if (base_ == nullptr) throw Error("check MMIO window", name_.empty() ? "(none)" : name_, "not mapped");
    if (offset > size_ || bytes > size_ - offset)
        throw Error("check MMIO window", name_,
                    log::concat("registers up to 0x", std::hex, offset + bytes, " needed but the window is only 0x",
                                size_, " bytes"),
                    "is this the right device and BAR? compare 'lspci -vv' with the datasheet");
}

volatile std::uint32_t* Mmio::reg32(std::size_t offset) const {
    require(offset, sizeof(std::uint32_t));
    if (offset % sizeof(std::uint32_t) != 0)
        throw Error("check MMIO window", name_,
                    log::concat("register offset 0x", std::hex, offset, " is not 4-byte aligned"),
                    "a driver bug: registers of this BAR are 32-bit words");
    return reinterpret_cast<volatile std::uint32_t*>(base_ + offset);
}

}  // namespace bardrive::vfio
