// Internal: what an IOMMU backend implements behind vfio::Domain. type1.cpp is the container/group
// backend (type1, iommufd's compat container, no-IOMMU); iommufd.cpp is /dev/iommu with the device cdev.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/fd.hpp"
#include "pci/bdf.hpp"
#include "vfio/domain.hpp"
#include "vfio/vf_token.hpp"

namespace bardrive::vfio::detail {

class DomainBackend {
public:
    virtual ~DomainBackend() = default;
    virtual Backend kind() const noexcept = 0;
    // Joins the device's group (type1) or binds its cdev (iommufd), presenting `vf_token` when not
    // null; returns the device fd.
    virtual UniqueFd attach(const pci::Bdf& bdf, const VfToken* vf_token) = 0;
    virtual bool ready() const noexcept = 0;  // an IOMMU is set up (a device is attached)
    virtual const std::vector<IovaRange>& iova_ranges() const noexcept = 0;
    virtual std::uint64_t page_sizes() const noexcept = 0;
    // Raw kernel calls; Domain has already checked ranges and overlaps. Return 0 or an errno.
    virtual int map(const void* vaddr, std::uint64_t iova, std::uint64_t size, bool writable) noexcept = 0;
    virtual int unmap(std::uint64_t iova, std::uint64_t size) noexcept = 0;
};

// What to do when opening a device failed with `err`, as far as VF tokens explain it; "" otherwise.
const char* vf_token_hint(int err, const VfToken* vf_token) noexcept;

std::unique_ptr<DomainBackend> make_type1();    // also iommufd's compat container, where /dev/vfio/vfio is that
std::unique_ptr<DomainBackend> make_iommufd();  // /dev/iommu + the device cdev
std::unique_ptr<DomainBackend> make_noiommu();  // the container in no-IOMMU mode

}  // namespace bardrive::vfio::detail
