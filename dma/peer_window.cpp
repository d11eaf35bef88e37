#include "dma/peer_window.hpp"

#include <cerrno>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::dma {

PeerWindow PeerWindow::map(vfio::Domain& domain, IovaAllocator& iovas, const vfio::Device& peer, unsigned bar,
                           std::uint64_t offset, std::uint64_t size) {
    PeerWindow w;
    w.bar_ = peer.map_bar(bar);
    const std::string& name = w.bar_.name();
    if (offset >= w.bar_.size() || (size != 0 && size > w.bar_.size() - offset))
        throw Error("map peer window", name,
                    log::concat("offset 0x", std::hex, offset, " size 0x", size, " outside the BAR (0x", w.bar_.size(),
                                " bytes)"));
    if (size == 0) size = w.bar_.size() - offset;
    if (offset % page_4k != 0 || size % page_4k != 0)
        throw Error("map peer window", name, "offset and size must be multiples of 4 KiB");
    // The BAR is reached through the CPU mapping: type1 resolves its VM_PFNMAP pages to the BAR's
    // bus addresses. The pointer is only handed to the kernel, never dereferenced here.
    const void* cpu = const_cast<const std::uint8_t*>(w.bar_.data()) + offset;
    if (domain.iova_is_physical())
        // The device would need the BAR's bus address, and /proc/self/pagemap does not report the PFNs
        // of VFIO's (possibly huge) BAR mappings, so the address cannot be checked the way memory is.
        throw Error("map peer window", name, "not supported in VFIO no-IOMMU mode",
                    "use an IOMMU (type1 backend) for peer-to-peer windows");
    try {
        w.mapping_ = Mapping::map(domain, iovas, cpu, size);
    } catch (const Error& e) {
        if (e.error_number() == 0) throw;
        bool via_iommufd =
            domain.backend() == vfio::Backend::iommufd || domain.backend() == vfio::Backend::iommufd_compat;
        throw Error("map peer window", name, e.detail(),
                    via_iommufd
                        ? std::string("iommufd (") + vfio::to_string(domain.backend()) +
                              ") refuses, by design, to map another device's BAR by its user address; peer-to-peer "
                              "through iommufd needs the BAR exported as a dma-buf (Linux 6.19+). Use the type1 "
                              "container for peer windows: BARDRIVE_IOMMU=type1 on a kernel with VFIO_CONTAINER"
                        : "the kernel refused to map another device's BAR for DMA (peer-to-peer); the type1 "
                          "IOMMU allows it for an mmapped BAR");
    }
    w.offset_ = offset;
    w.peer_ = peer.bdf();
    log::debug("peer window ", name, " +0x", std::hex, offset, " size 0x", size, " at IOVA 0x", w.mapping_.iova());
    return w;
}

}  // namespace bardrive::dma
