// vfio::Mmio: the project's one typed accessor for device registers (a mapped BAR).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/hd.hpp"

namespace bardrive::vfio {

// Owns one mmap()ed register window and is the only way the project touches MMIO.
// - Every access is volatile, naturally aligned and of exactly the width asked for (devices
//   decode the byte enables: a 32-bit register must not be read as two 16-bit halves).
// - Bounds: drivers call require() once at set-up for the highest register they use, so a BAR
//   that is too small is a clear error there; each access is also assert()-checked in debug builds.
//   The data path itself never throws.
// - Ordering: accesses to one Mmio are not reordered by the compiler; use wmb()/rmb()/mb() below
//   where the device needs ordering against ordinary (DMA) memory, e.g. descriptors before a doorbell.
// Move-only; unmaps on destruction. Obtained from vfio::Device::map_bar().
class Mmio {
public:
    Mmio() noexcept = default;
    // Takes ownership of an mmap()ed range; `name` ("0000:01:00.0 BAR0") appears in errors.
    static Mmio adopt(void* base, std::size_t size, std::string name);

    Mmio(Mmio&& o) noexcept;
    Mmio& operator=(Mmio&& o) noexcept;
    Mmio(const Mmio&) = delete;
    Mmio& operator=(const Mmio&) = delete;
    ~Mmio();

    std::uint8_t read8(std::size_t off) const noexcept { return load<std::uint8_t>(off); }
    std::uint16_t read16(std::size_t off) const noexcept { return load<std::uint16_t>(off); }
    std::uint32_t read32(std::size_t off) const noexcept { return load<std::uint32_t>(off); }
    std::uint64_t read64(std::size_t off) const noexcept { return load<std::uint64_t>(off); }
    void write8(std::size_t off, std::uint8_t v) const noexcept { store(off, v); }
    void write16(std::size_t off, std::uint16_t v) const noexcept { store(off, v); }
    void write32(std::size_t off, std::uint32_t v) const noexcept { store(off, v); }
    void write64(std::size_t off, std::uint64_t v) const noexcept { store(off, v); }

    // Throws bardrive::Error unless [offset, offset + bytes) lies inside the window.
    void require(std::size_t offset, std::size_t bytes) const;
    // The address of the 32-bit register at `offset`, checked here once (throws bardrive::Error outside
    // the window or unaligned): for a data path that writes it every burst (a tail doorbell).
    volatile std::uint32_t* reg32(std::size_t offset) const;

    std::size_t size() const noexcept { return size_; }
    volatile std::uint8_t* data() const noexcept { return base_; }
    const std::string& name() const noexcept { return name_; }
    explicit operator bool() const noexcept { return base_ != nullptr; }

private:
    template <class T>
    T load(std::size_t off) const noexcept {
        assert(off % sizeof(T) == 0 && off + sizeof(T) <= size_ && "MMIO read outside the BAR or unaligned");
        return *reinterpret_cast<const volatile T*>(base_ + off);
    }
    template <class T>
    void store(std::size_t off, T v) const noexcept {
        assert(off % sizeof(T) == 0 && off + sizeof(T) <= size_ && "MMIO write outside the BAR or unaligned");
        *reinterpret_cast<volatile T*>(base_ + off) = v;
    }
    void release() noexcept;

    volatile std::uint8_t* base_ = nullptr;
    std::size_t size_ = 0;
    std::string name_;
};

// Barriers for device ordering (the CPU's, not only the compiler's), from core/hd.hpp.
// wmb: earlier stores (descriptors in DMA memory, write-combined stores) are visible before later
//      ones (the doorbell write). rmb: a later load (descriptor body) is not satisfied before an
//      earlier one (the done bit / a register). mb: both.
using io::mb;
using io::rmb;
using io::wmb;

}  // namespace bardrive::vfio
