// vfio::Domain: one IOMMU address space that devices share and DMA mappings live in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../core/fd.hpp"
#include "../pci/bdf.hpp"
#include "vf_token.hpp"

namespace bardrive::vfio {

// An inclusive range of I/O virtual addresses the IOMMU can translate.
struct IovaRange {
    std::uint64_t first = 0;
    std::uint64_t last = 0;  // inclusive
    bool operator==(const IovaRange&) const = default;
};

// Which kernel interface backs a Domain. Callers never branch on it; it is reported for logs and
// chosen with BARDRIVE_IOMMU=type1|iommufd|noiommu (docs/iommu-modes.md has a table of what each can do).
enum class Backend {
    type1,           // /dev/vfio/vfio container + /dev/vfio/GROUP, VFIO_TYPE1v2_IOMMU
    iommufd,         // /dev/iommu IOAS + the device cdev /dev/vfio/devices/vfioN
    iommufd_compat,  // the type1 calls, served by iommufd's /dev/vfio/vfio (kernel without VFIO_CONTAINER)
    noiommu,         // no IOMMU: DMA sees physical addresses, unprotected; explicit opt-in only
};

const char* to_string(Backend backend) noexcept;

// The backend Domain() picks: BARDRIVE_IOMMU when set (type1, iommufd, noiommu; noiommu is never picked
// otherwise), else iommufd where the kernel has /dev/iommu and the VFIO cdev, else the container
// (type1, or iommufd_compat where iommufd provides it). Throws for an unknown BARDRIVE_IOMMU value.
Backend default_backend();

enum class Access { read_write, read_only };  // what the device may do to mapped memory

class Device;

namespace detail {
class DomainBackend;  // the per-backend operations: type1.cpp (container, compat, no-IOMMU), iommufd.cpp
struct DomainState;   // open devices and live mappings, whatever the backend
}  // namespace detail

// An IOMMU domain: devices are attached with vfio::Device::open(domain, bdf); several devices may
// share it (they then see the same IOVA space, e.g. NIC A and NIC B both reach a peer window).
// - map()/unmap(): DMA mappings; map() rejects an IOVA range outside iova_ranges() and one that
//   overlaps an existing mapping with a clear error naming both; unmap() takes exactly a range
//   that map() made.
// - iova_ranges(), page_sizes(): what the kernel reports once the first device is attached (the
//   type1 IOMMU is set when the first group joins); before that they throw.
// Not copyable or movable (devices and mappings refer to it): keep it in place or in a unique_ptr,
// and let it outlive the devices and mappings made in it.
class Domain {
public:
    Domain();                          // default_backend()
    explicit Domain(Backend backend);  // Backend::noiommu warns loudly: DMA is then unprotected
    // A backend made elsewhere (the unit tests' fake one): Domain's own checks run against it unchanged.
    explicit Domain(std::unique_ptr<detail::DomainBackend> backend);
    ~Domain();
    Domain(const Domain&) = delete;
    Domain& operator=(const Domain&) = delete;

    Backend backend() const noexcept;
    const std::vector<IovaRange>& iova_ranges() const;
    std::uint64_t page_sizes() const;  // bitmap: bit n set = 2^n-byte IOMMU pages supported
    std::size_t device_count() const noexcept;
    // No IOMMU translates (Backend::noiommu): a mapping's IOVA must be the physical address of its
    // memory, which dma::Mapping then takes from /proc/self/pagemap.
    bool iova_is_physical() const noexcept;

    void map(const void* vaddr, std::uint64_t iova, std::size_t size, Access access = Access::read_write);
    void unmap(std::uint64_t iova, std::size_t size);

private:
    friend class Device;
    UniqueFd attach(const pci::Bdf& bdf, const VfToken* vf_token);  // the device's fd; its group joins this domain
    void detach(const pci::Bdf& bdf) noexcept;

    std::unique_ptr<detail::DomainBackend> impl_;
    std::unique_ptr<detail::DomainState> state_;
};

}  // namespace bardrive::vfio
