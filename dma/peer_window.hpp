// dma::PeerWindow: another device's BAR mapped into a domain as a DMA target (peer-to-peer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../vfio/device.hpp"
#include "../vfio/mmio.hpp"
#include "iova_allocator.hpp"
#include "mapping.hpp"

namespace bardrive::dma {

// map(domain, iovas, peer, bar, offset, size) mmaps the peer's BAR (vfio::Device::map_bar) and maps
// [offset, offset+size) of it (size 0: to the end) into `domain`, so devices in that domain can DMA
// to iova() and land in the peer's memory (in production a GPU's BAR1; in the lab an ivshmem BAR).
// The type1 backend allows it (the BAR is a VM_PFNMAP range); where the kernel refuses (iommufd
// before dma-buf import, a BAR that cannot be mmapped) it throws saying so. cpu() is the CPU's
// view of the same window. Move-only; must not outlive the domain, the allocator or the peer.
class PeerWindow {
public:
    static PeerWindow map(vfio::Domain& domain, IovaAllocator& iovas, const vfio::Device& peer, unsigned bar,
                          std::uint64_t offset = 0, std::uint64_t size = 0);

    std::uint64_t iova() const noexcept { return mapping_.iova(); }
    std::size_t size() const noexcept { return mapping_.size(); }
    std::uint64_t bar_offset() const noexcept { return offset_; }
    const pci::Bdf& peer() const noexcept { return peer_; }  // the device whose BAR this is
    const vfio::Mmio& cpu() const noexcept { return bar_; }  // whole BAR; window starts at bar_offset()

private:
    PeerWindow() = default;
    vfio::Mmio bar_;
    Mapping mapping_;  // declared after bar_: leaves the IOMMU before the BAR is unmapped
    std::uint64_t offset_ = 0;
    pci::Bdf peer_{};
};

}  // namespace bardrive::dma
