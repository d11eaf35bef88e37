// Physical addresses of this process's memory, from /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst).
// Needed only where no IOMMU translates DMA (VFIO no-IOMMU mode): the device then sees physical addresses.
#pragma once

#include <cstdint>

namespace bardrive::pagemap {

// Physical address of the byte at `vaddr`; the page must be resident (touch or mlock it first).
// Throws bardrive::Error when the page is not present or the PFN is hidden (reading PFNs needs
// CAP_SYS_ADMIN: without it the kernel reports 0).
std::uint64_t physical_address(const void* vaddr);

// True when [vaddr, vaddr+size) is one physically contiguous run (e.g. inside one hugepage).
bool physically_contiguous(const void* vaddr, std::uint64_t size);

}  // namespace bardrive::pagemap
