// The VFIO container/group backend: /dev/vfio/vfio + /dev/vfio/<group> with the TYPE1v2 IOMMU, or
// with the no-IOMMU "IOMMU" (/dev/vfio/noiommu-<group>; DMA then sees physical addresses, unprotected).
// On a kernel built with IOMMUFD_VFIO_CONTAINER, /dev/vfio/vfio is iommufd's compatibility container
// and the same calls go through iommufd.
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "vfio/backend.hpp"
#include "vfio/sysfs.hpp"

namespace bardrive::vfio::detail {
namespace {

constexpr const char* container_path = "/dev/vfio/vfio";

std::string open_hint(int err, const std::string& path) {
    struct stat st {};
    if (err == ENOENT && ::stat("/dev/vfio", &st) != 0)
        return "/dev/vfio is missing: load vfio-pci ('modprobe vfio-pci') and make sure the IOMMU is on "
               "(VT-d / AMD-Vi in firmware, intel_iommu=on or amd_iommu=on on the kernel command line)";
    if (err == EACCES || err == EPERM)
        return "run as root, or give your user " + path +
               " (e.g. a udev rule setting its group) and raise "
               "'ulimit -l' for DMA pinning";
    if (err == EBUSY) return "another process (or another bardrive Domain) holds it; close that first";
    return {};
}

// iommufd provides /dev/vfio/vfio when the kernel has no VFIO_CONTAINER (and so no vfio_iommu_type1).
bool container_is_iommufd_compat() {
    struct stat st {};
    return ::stat("/dev/iommu", &st) == 0 && ::stat("/sys/module/vfio_iommu_type1", &st) != 0;
}

class Type1 final : public DomainBackend {
public:
    explicit Type1(bool noiommu) : noiommu_(noiommu), iommu_type_(noiommu ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU) {
        container_.reset(::open(container_path, O_RDWR | O_CLOEXEC));
        if (!container_) {
            int err = errno;
            throw Error::from_errno("open VFIO container", container_path, err, open_hint(err, container_path));
        }
        int api = ::ioctl(container_.get(), VFIO_GET_API_VERSION);
        if (api != VFIO_API_VERSION)
            throw Error("open VFIO container", container_path,
                        log::concat("kernel VFIO API ", api, ", expected ", VFIO_API_VERSION),
                        "this kernel's VFIO is not the one bardrive was built for");
        if (noiommu_ && ::ioctl(container_.get(), VFIO_CHECK_EXTENSION, VFIO_NOIOMMU_IOMMU) != 1)
            throw Error(
                "open VFIO container", container_path, "no-IOMMU mode is not enabled",
                "the kernel needs CONFIG_VFIO_NOIOMMU, and 'echo Y > "
                "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode' before the device is bound to vfio-pci");
        if (!noiommu_ && ::ioctl(container_.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) != 1)
            throw Error("open VFIO container", container_path, "the kernel has no VFIO_TYPE1v2_IOMMU",
                        "load vfio_iommu_type1 ('modprobe vfio_iommu_type1')");
        compat_ = container_is_iommufd_compat();
    }

    Backend kind() const noexcept override {
        return noiommu_ ? Backend::noiommu : compat_ ? Backend::iommufd_compat : Backend::type1;
    }
    bool ready() const noexcept override { return iommu_set_; }
    const std::vector<IovaRange>& iova_ranges() const noexcept override { return ranges_; }
    std::uint64_t page_sizes() const noexcept override { return page_sizes_; }

    UniqueFd attach(const pci::Bdf& bdf, const VfToken* vf_token) override {
        Sysfs sys;
        unsigned group = check_openable(sys, bdf);
        int group_fd = join_group(sys, group);
        // The group path takes a VF token in the device's name.
        std::string name = bdf.str() + (vf_token ? " vf_token=" + vf_token->text() : "");
        UniqueFd dev(::ioctl(group_fd, VFIO_GROUP_GET_DEVICE_FD, name.c_str()));
        if (!dev) {
            int err = errno;
            throw Error::from_errno(
                "get device fd of", bdf.str() + " in group " + std::to_string(group), err,
                err == EBUSY ? "the device is already open elsewhere" : vf_token_hint(err, vf_token));
        }
        // iommufd's compat container attaches a device to its IOAS only when the device fd is opened:
        // before that it reports the whole 64-bit space, which the IOMMU then refuses (EINVAL) above its
        // aperture. Read the ranges again now that the device narrows them.
        if (compat_ && !noiommu_) read_info();
        return dev;
    }

    int map(const void* vaddr, std::uint64_t iova, std::uint64_t size, bool writable) noexcept override {
        if (noiommu_) return 0;  // nothing translates: Domain checked that iova is the physical address
        vfio_iommu_type1_dma_map m{};
        m.argsz = sizeof m;
        m.flags = VFIO_DMA_MAP_FLAG_READ | (writable ? VFIO_DMA_MAP_FLAG_WRITE : 0);
        m.vaddr = reinterpret_cast<std::uintptr_t>(vaddr);
        m.iova = iova;
        m.size = size;
        return ::ioctl(container_.get(), VFIO_IOMMU_MAP_DMA, &m) == 0 ? 0 : errno;
    }

    int unmap(std::uint64_t iova, std::uint64_t size) noexcept override {
        if (noiommu_) return 0;
        vfio_iommu_type1_dma_unmap u{};
        u.argsz = sizeof u;
        u.iova = iova;
        u.size = size;
        if (::ioctl(container_.get(), VFIO_IOMMU_UNMAP_DMA, &u) != 0) return errno;
        return u.size == size ? 0 : EINVAL;
    }

private:
    // Opens the group, checks viability and adds it to the container (once per group).
    int join_group(const Sysfs& sys, unsigned group) {
        if (auto it = groups_.find(group); it != groups_.end()) return it->second.get();
        std::string path = (noiommu_ ? "/dev/vfio/noiommu-" : "/dev/vfio/") + std::to_string(group);
        UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd) {
            int err = errno;
            throw Error::from_errno("open IOMMU group", path, err, open_hint(err, path));
        }
        vfio_group_status status{};
        status.argsz = sizeof status;
        if (::ioctl(fd.get(), VFIO_GROUP_GET_STATUS, &status) != 0)
            throw Error::from_errno("get status of IOMMU group", path, errno);
        if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) throw group_not_viable(sys, group);
        int cfd = container_.get();
        if (::ioctl(fd.get(), VFIO_GROUP_SET_CONTAINER, &cfd) != 0)
            throw Error::from_errno("add IOMMU group to container", path, errno);
        if (!iommu_set_) {
            if (::ioctl(container_.get(), VFIO_SET_IOMMU, iommu_type_) != 0) {
                int err = errno;
                ::ioctl(fd.get(), VFIO_GROUP_UNSET_CONTAINER);
                throw Error::from_errno(noiommu_ ? "set the no-IOMMU mode on" : "set the type1v2 IOMMU on",
                                        container_path, err,
                                        noiommu_ && err == EPERM ? "no-IOMMU mode needs CAP_SYS_RAWIO (root)" : "");
            }
            iommu_set_ = true;
            if (noiommu_) {
                // Devices reach all of physical memory; IOVAs are physical addresses.
                ranges_ = {{0, (std::uint64_t{1} << 52) - 1}};
                page_sizes_ = 4096;
            } else {
                read_info();
            }
        }
        int raw = fd.get();
        groups_.emplace(group, std::move(fd));
        log::debug("IOMMU group ", group, noiommu_ ? " joined the no-IOMMU container" : " joined the type1 container");
        return raw;
    }

    // Page sizes and the IOVA-range capability (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE).
    void read_info() {
        std::vector<std::uint8_t> buf(sizeof(vfio_iommu_type1_info));
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buf.data());
            info->argsz = static_cast<std::uint32_t>(buf.size());
            if (::ioctl(container_.get(), VFIO_IOMMU_GET_INFO, info) != 0)
                throw Error::from_errno("get IOMMU info of", container_path, errno);
            if (info->argsz <= buf.size()) break;
            buf.resize(info->argsz);
        }
        const auto* info = reinterpret_cast<const vfio_iommu_type1_info*>(buf.data());
        page_sizes_ = (info->flags & VFIO_IOMMU_INFO_PGSIZES) ? info->iova_pgsizes : 4096;
        ranges_.clear();
        if (info->flags & VFIO_IOMMU_INFO_CAPS) {
            std::uint32_t off = info->cap_offset;
            while (off != 0 && off + sizeof(vfio_info_cap_header) <= buf.size()) {
                const auto* hdr = reinterpret_cast<const vfio_info_cap_header*>(buf.data() + off);
                if (hdr->id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE &&
                    off + sizeof(vfio_iommu_type1_info_cap_iova_range) <= buf.size()) {
                    const auto* cap = reinterpret_cast<const vfio_iommu_type1_info_cap_iova_range*>(hdr);
                    std::size_t end = off + sizeof(*cap) + std::size_t{cap->nr_iovas} * sizeof(vfio_iova_range);
                    if (end > buf.size())
                        throw Error("parse IOMMU info of", container_path,
                                    "IOVA-range capability runs past the buffer");
                    for (std::uint32_t i = 0; i < cap->nr_iovas; ++i)
                        ranges_.push_back({cap->iova_ranges[i].start, cap->iova_ranges[i].end});
                }
                if (hdr->next <= off) break;  // the chain only moves forward; stop on a loop
                off = hdr->next;
            }
        }
        if (ranges_.empty()) {
            // Kernels before 5.4 do not report ranges: the whole space below 2^48 minus nothing known.
            log::warn("the kernel reports no IOVA ranges; assuming 0x0-0xffffffffffff");
            ranges_.push_back({0, (std::uint64_t{1} << 48) - 1});
        }
        for (const auto& r : ranges_) log::debug("IOVA range 0x", std::hex, r.first, "-0x", r.last);
    }

    bool noiommu_;
    int iommu_type_;
    bool compat_ = false;
    UniqueFd container_;
    std::map<unsigned, UniqueFd> groups_;  // kept until the domain closes: leaving would drop the IOMMU
    bool iommu_set_ = false;
    std::vector<IovaRange> ranges_;
    std::uint64_t page_sizes_ = 0;
};

}  // namespace

std::unique_ptr<DomainBackend> make_type1() { return std::make_unique<Type1>(false); }
std::unique_ptr<DomainBackend> make_noiommu() { return std::make_unique<Type1>(true); }

}  // namespace bardrive::vfio::detail
