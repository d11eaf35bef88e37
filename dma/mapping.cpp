#include "dma/mapping.hpp"

#include <cassert>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/pagemap.hpp"

namespace bardrive::dma {

Mapping Mapping::map(vfio::Domain& domain, const void* vaddr, std::size_t size, std::uint64_t iova,
                     vfio::Access access) {
    domain.map(vaddr, iova, size, access);
    Mapping m;
    m.domain_ = &domain;
    m.vaddr_ = const_cast<void*>(vaddr);
    m.iova_ = iova;
    m.size_ = size;
    return m;
}

Mapping Mapping::map(vfio::Domain& domain, IovaAllocator& iovas, const void* vaddr, std::size_t size,
                     std::uint64_t align, vfio::Access access) {
    // Without an IOMMU the device sees physical addresses: there is no IOVA to choose.
    if (domain.iova_is_physical()) return map(domain, vaddr, size, pagemap::physical_address(vaddr), access);
    if (align == 0) {
        // The IOMMU can use a large page only where IOVA and vaddr share the alignment.
        auto va = reinterpret_cast<std::uintptr_t>(vaddr);
        align = page_4k;
        for (std::size_t big : {page_1g, page_2m})
            if (size % big == 0 && va % big == 0) {
                align = big;
                break;
            }
    }
    std::uint64_t iova = iovas.allocate(size, align);
    try {
        Mapping m = map(domain, vaddr, size, iova, access);
        m.iovas_ = &iovas;
        return m;
    } catch (...) {
        iovas.free(iova, size);
        throw;
    }
}

Mapping::Mapping(Mapping&& o) noexcept
    : domain_(std::exchange(o.domain_, nullptr)),
      iovas_(std::exchange(o.iovas_, nullptr)),
      vaddr_(std::exchange(o.vaddr_, nullptr)),
      iova_(std::exchange(o.iova_, 0)),
      size_(std::exchange(o.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
    if (this != &o) {
        release();
        domain_ = std::exchange(o.domain_, nullptr);
        iovas_ = std::exchange(o.iovas_, nullptr);
        vaddr_ = std::exchange(o.vaddr_, nullptr);
        iova_ = std::exchange(o.iova_, 0);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

Mapping::~Mapping() { release(); }

void Mapping::release() noexcept {
    if (domain_ == nullptr) return;
    try {
        domain_->unmap(iova_, size_);
        if (iovas_ != nullptr) iovas_->free(iova_, size_);
    } catch (const Error& e) {
        log::warn("releasing a DMA mapping: ", e.what());
    }
    domain_ = nullptr;
    iovas_ = nullptr;
    size_ = 0;
}

std::uint64_t Mapping::iova_of(const void* p) const noexcept {
    auto off = static_cast<std::size_t>(static_cast<const std::byte*>(p) - static_cast<const std::byte*>(vaddr_));
    assert(off < size_ && "pointer outside the DMA mapping");
    return iova_ + off;
}

}  // namespace bardrive::dma
