#include "vfio/domain.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/pagemap.hpp"
#include "vfio/backend.hpp"

namespace bardrive::vfio {

namespace detail {
// What every backend shares: the set of open devices and the table of live mappings, so errors can
// name the mapping an overlapping request collides with.
struct DomainState {
    std::set<pci::Bdf> devices;
    std::map<std::uint64_t, std::uint64_t> mappings;  // iova -> size
};
}  // namespace detail

namespace {

std::string hex_range(std::uint64_t iova, std::uint64_t size) {
    return log::concat("IOVA 0x", std::hex, iova, "-0x", iova + size - 1);
}

std::string ranges_text(const std::vector<IovaRange>& ranges) {
    std::string s;
    for (const auto& r : ranges) s += log::concat(s.empty() ? "" : ", ", "0x", std::hex, r.first, "-0x", r.last);
    return s;
}

bool exists(const char* path) {
    struct stat st {};
    return ::stat(path, &st) == 0;
}

// iommufd with the device cdev: /dev/iommu and the vfio-dev class (CONFIG_VFIO_DEVICE_CDEV).
bool kernel_has_iommufd_cdev() { return exists("/dev/iommu") && exists("/sys/class/vfio-dev"); }

std::unique_ptr<detail::DomainBackend> make(Backend backend) {
    switch (backend) {
        case Backend::type1:
        case Backend::iommufd_compat:
            return detail::make_type1();
        case Backend::iommufd:
            return detail::make_iommufd();
        case Backend::noiommu:
            log::warn(
                "VFIO no-IOMMU mode: nothing checks the device's DMA, which can reach all of physical "
                "memory; use it only for a trusted device on a machine without an IOMMU");
            return detail::make_noiommu();
    }
    throw Error("open IOMMU domain", "", "unknown backend");
}

}  // namespace

const char* to_string(Backend backend) noexcept {
    switch (backend) {
        case Backend::type1:
            return "type1";
        case Backend::iommufd:
            return "iommufd";
        case Backend::iommufd_compat:
            return "iommufd-compat";
        case Backend::noiommu:
            return "noiommu";
    }
    return "?";
}

Backend default_backend() {
    if (const char* env = std::getenv("BARDRIVE_IOMMU"); env != nullptr && *env != '\0') {
        if (std::strcmp(env, "type1") == 0) return Backend::type1;
        if (std::strcmp(env, "iommufd") == 0) return Backend::iommufd;
        if (std::strcmp(env, "noiommu") == 0) return Backend::noiommu;
        throw Error("choose IOMMU backend", std::string("BARDRIVE_IOMMU=") + env, "unknown backend",
                    "use type1, iommufd or noiommu, or unset it to let bardrive choose");
    }
    return kernel_has_iommufd_cdev() ? Backend::iommufd : Backend::type1;
}

Domain::Domain() : Domain(default_backend()) {}
Domain::Domain(Backend backend) : Domain(make(backend)) {}
Domain::Domain(std::unique_ptr<detail::DomainBackend> backend)
    : impl_(std::move(backend)), state_(std::make_unique<detail::DomainState>()) {}

Domain::~Domain() {
    auto& st = *state_;
    if (!st.devices.empty()) log::warn("IOMMU domain closed while ", st.devices.size(), " device(s) are still open");
    // Closing the container drops every mapping in the kernel; live dma::Mappings would dangle.
    if (!st.mappings.empty()) log::warn("IOMMU domain closed with ", st.mappings.size(), " DMA mapping(s) still live");
}

Backend Domain::backend() const noexcept { return impl_->kind(); }

const std::vector<IovaRange>& Domain::iova_ranges() const {
    if (!impl_->ready())
        throw Error("read IOVA ranges of IOMMU domain", "", "no device is attached yet",
                    "open a device in the domain first (vfio::Device::open): the kernel sets the IOMMU up then");
    return impl_->iova_ranges();
}

std::uint64_t Domain::page_sizes() const {
    iova_ranges();  // same precondition, same error
    return impl_->page_sizes();
}

std::size_t Domain::device_count() const noexcept { return state_->devices.size(); }

bool Domain::iova_is_physical() const noexcept { return impl_->kind() == Backend::noiommu; }

void Domain::map(const void* vaddr, std::uint64_t iova, std::size_t size, Access access) {
    const std::string what = hex_range(iova, size == 0 ? 1 : size);
    if (!impl_->ready())
        throw Error("map DMA", what, "no device is attached to the domain yet",
                    "open a device first: the kernel sets the IOMMU up when the first group joins");
    constexpr std::uint64_t page = 4096;
    auto va = reinterpret_cast<std::uintptr_t>(vaddr);
    if (size == 0 || size % page != 0 || iova % page != 0 || va % page != 0)
        throw Error(
            "map DMA", what,
            log::concat("vaddr 0x", std::hex, va, ", iova and size 0x", size, " must be non-zero multiples of 4 KiB"),
            "allocate with dma::Memory and take IOVAs from dma::IovaAllocator");
    if (iova + size - 1 < iova) throw Error("map DMA", what, "the range wraps around the address space");
    bool inside = false;
    for (const auto& r : impl_->iova_ranges()) inside |= iova >= r.first && iova + size - 1 <= r.last;
    if (!inside)
        throw Error("map DMA", what,
                    "outside the IOMMU's usable IOVA ranges (" + ranges_text(impl_->iova_ranges()) + ")",
                    "take IOVAs from dma::IovaAllocator, which only hands out usable ones");
    if (iova_is_physical() &&
        (pagemap::physical_address(vaddr) != iova || !pagemap::physically_contiguous(vaddr, size)))
        throw Error("map DMA", what,
                    log::concat("in no-IOMMU mode the device sees physical addresses, and vaddr 0x", std::hex, va,
                                " is not physically contiguous memory at that address"),
                    "without an IOMMU one mapping cannot span separate pages: keep each within one hugepage "
                    "(dma::Memory of at most 2 MiB, or 1 GiB pages) and map it with dma::Mapping, which takes "
                    "the IOVA from /proc/self/pagemap");
    auto& maps = state_->mappings;
    auto next = maps.lower_bound(iova);
    if (next != maps.end() && next->first < iova + size)
        throw Error("map DMA", what, "overlaps the existing mapping " + hex_range(next->first, next->second),
                    "unmap that first or use another IOVA");
    if (next != maps.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second > iova)
            throw Error("map DMA", what, "overlaps the existing mapping " + hex_range(prev->first, prev->second),
                        "unmap that first or use another IOVA");
    }
    if (int err = impl_->map(vaddr, iova, size, access == Access::read_write)) {
        std::string hint;
        if (err == ENOMEM)
            hint = "pinning hit the locked-memory limit: raise 'ulimit -l' (memlock) or run as root";
        else if (err == EFAULT)
            hint = "the memory is not mapped in this process or cannot be pinned";
        else if (err == EEXIST)
            hint = "the kernel already has a mapping there";
        throw Error::from_errno("map DMA", log::concat(what, " (vaddr 0x", std::hex, va, ")"), err, hint);
    }
    maps.emplace(iova, size);
    log::debug("mapped ", what);
}

void Domain::unmap(std::uint64_t iova, std::size_t size) {
    const std::string what = hex_range(iova, size == 0 ? 1 : size);
    auto& maps = state_->mappings;
    auto it = maps.find(iova);
    if (it == maps.end() || it->second != size)
        throw Error("unmap DMA", what, "no mapping with exactly this IOVA and size", "unmap what map() mapped");
    if (int err = impl_->unmap(iova, size)) throw Error::from_errno("unmap DMA", what, err);
    maps.erase(it);
}

namespace detail {
const char* vf_token_hint(int err, const VfToken* vf_token) noexcept {
    // vfio-pci's own rules (vfio_pci_validate_vf_token): EACCES for a VF of a PF it drives without the
    // PF's token, EINVAL for a token where none is asked.
    if (err == EACCES)
        return vf_token ? "vfio-pci refused this VF token: it is not the one the PF's owner set"
                        : "a VF whose PF is bound to vfio-pci opens only with the PF owner's VF token: pass it";
    if (err == EINVAL && vf_token)
        return "vfio-pci takes a VF token only for a VF whose PF it drives: open this device without one";
    return "";
}
}  // namespace detail

UniqueFd Domain::attach(const pci::Bdf& bdf, const VfToken* vf_token) {
    auto& devs = state_->devices;
    if (devs.count(bdf))
        throw Error("open device", bdf.str(), "already open in this domain", "use the vfio::Device you have");
    UniqueFd fd = impl_->attach(bdf, vf_token);
    devs.insert(bdf);
    return fd;
}

void Domain::detach(const pci::Bdf& bdf) noexcept { state_->devices.erase(bdf); }

}  // namespace bardrive::vfio
