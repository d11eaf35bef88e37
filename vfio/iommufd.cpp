// The iommufd backend: /dev/iommu with one IOAS, devices bound through their VFIO cdev
// (/dev/vfio/devices/vfioN). Needs a kernel with CONFIG_IOMMUFD and CONFIG_VFIO_DEVICE_CDEV.
#include <fcntl.h>
#include <linux/iommufd.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "vfio/backend.hpp"
#include "vfio/sysfs.hpp"

namespace bardrive::vfio::detail {
namespace {

constexpr const char* iommu_path = "/dev/iommu";

// VFIO_DEVICE_BIND_IOMMUFD with a VF token (Linux 6.17: VFIO_DEVICE_BIND_FLAG_TOKEN); older headers lack it.
constexpr std::uint32_t bind_flag_token = 1u << 0;
struct BindWithToken {
    std::uint32_t argsz, flags;
    std::int32_t iommufd;
    std::uint32_t out_devid;
    std::uint64_t token_uuid_ptr;
};
static_assert(sizeof(vfio_device_bind_iommufd) <= sizeof(BindWithToken));

class Iommufd final : public DomainBackend {
public:
    Iommufd() {
        iommufd_.reset(::open(iommu_path, O_RDWR | O_CLOEXEC));
        if (!iommufd_) {
            int err = errno;
            throw Error::from_errno("open iommufd", iommu_path, err,
                                    err == ENOENT ? "this kernel has no iommufd (CONFIG_IOMMUFD); use the type1 "
                                                    "backend (BARDRIVE_IOMMU=type1)"
                                                  : "run as root or give your user access to /dev/iommu");
        }
        iommu_ioas_alloc alloc{};
        alloc.size = sizeof alloc;
        if (::ioctl(iommufd_.get(), IOMMU_IOAS_ALLOC, &alloc) != 0)
            throw Error::from_errno("allocate an IOAS on", iommu_path, errno);
        ioas_ = alloc.out_ioas_id;
        log::debug("iommufd: IOAS ", ioas_);
    }

    Backend kind() const noexcept override { return Backend::iommufd; }
    bool ready() const noexcept override { return attached_; }
    const std::vector<IovaRange>& iova_ranges() const noexcept override { return ranges_; }
    std::uint64_t page_sizes() const noexcept override { return page_sizes_; }

    UniqueFd attach(const pci::Bdf& bdf, const VfToken* vf_token) override {
        Sysfs sys;
        unsigned group = check_openable(sys, bdf);
        std::string cdev = cdev_path(sys, bdf);
        UniqueFd dev(::open(cdev.c_str(), O_RDWR | O_CLOEXEC));
        if (!dev) {
            int err = errno;
            throw Error::from_errno("open VFIO device cdev", cdev, err,
                                    err == EACCES || err == EPERM ? "run as root or give your user the cdev"
                                    : err == EBUSY                ? "the device is already open elsewhere"
                                                                  : "");
        }
        BindWithToken bind{};
        bind.argsz = vf_token ? sizeof bind : sizeof(vfio_device_bind_iommufd);
        bind.flags = vf_token ? bind_flag_token : 0;
        bind.iommufd = iommufd_.get();
        if (vf_token) bind.token_uuid_ptr = reinterpret_cast<std::uintptr_t>(vf_token->bytes().data());
        if (::ioctl(dev.get(), VFIO_DEVICE_BIND_IOMMUFD, &bind) != 0) {
            int err = errno;
            // iommufd claims DMA ownership of the whole group: a member with a kernel driver refuses it.
            if (err == EBUSY) throw group_not_viable(sys, group);
            // Before Linux 6.17 the bind has no flags and refuses the token flag (EINVAL).
            if (err == EINVAL && vf_token)
                throw Error::from_errno("bind to iommufd with a VF token", cdev, err,
                                        "this kernel's iommufd path may take no VF token (Linux 6.17 added it): "
                                        "open the VF through its group (BARDRIVE_IOMMU=type1)");
            throw Error::from_errno("bind to iommufd", cdev, err, vf_token_hint(err, vf_token));
        }
        vfio_device_attach_iommufd_pt pt{};
        pt.argsz = sizeof pt;
        pt.pt_id = ioas_;
        if (::ioctl(dev.get(), VFIO_DEVICE_ATTACH_IOMMUFD_PT, &pt) != 0)
            throw Error::from_errno("attach to the IOAS", log::concat(cdev, " (IOAS ", ioas_, ")"), errno);
        attached_ = true;
        read_ranges();  // each attached device can narrow the usable ranges
        log::debug("iommufd: ", bdf.str(), " bound through ", cdev, " as device ", bind.out_devid);
        return dev;
    }

    int map(const void* vaddr, std::uint64_t iova, std::uint64_t size, bool writable) noexcept override {
        iommu_ioas_map m{};
        m.size = sizeof m;
        m.flags = IOMMU_IOAS_MAP_FIXED_IOVA | IOMMU_IOAS_MAP_READABLE | (writable ? IOMMU_IOAS_MAP_WRITEABLE : 0);
        m.ioas_id = ioas_;
        m.user_va = reinterpret_cast<std::uintptr_t>(vaddr);
        m.length = size;
        m.iova = iova;
        return ::ioctl(iommufd_.get(), IOMMU_IOAS_MAP, &m) == 0 ? 0 : errno;
    }

    int unmap(std::uint64_t iova, std::uint64_t size) noexcept override {
        iommu_ioas_unmap u{};
        u.size = sizeof u;
        u.ioas_id = ioas_;
        u.iova = iova;
        u.length = size;
        if (::ioctl(iommufd_.get(), IOMMU_IOAS_UNMAP, &u) != 0) return errno;
        return u.length == size ? 0 : EINVAL;
    }

private:
    // /sys/bus/pci/devices/<bdf>/vfio-dev/vfioN names the cdev /dev/vfio/devices/vfioN.
    static std::string cdev_path(const Sysfs& sys, const pci::Bdf& bdf) {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(sys.device_dir(bdf) + "/vfio-dev", ec))
            return "/dev/vfio/devices/" + e.path().filename().string();
        throw Error("find the VFIO cdev of", bdf.str(), "the device has no vfio-dev entry in sysfs",
                    "this kernel lacks CONFIG_VFIO_DEVICE_CDEV: use the type1 backend (BARDRIVE_IOMMU=type1)");
    }

    void read_ranges() {
        iommu_ioas_iova_ranges q{};
        q.size = sizeof q;
        q.ioas_id = ioas_;
        std::vector<iommu_iova_range> buf;
        // First call learns the count (EMSGSIZE), the second fills; ranges can change in between.
        for (int attempt = 0; attempt < 3; ++attempt) {
            q.num_iovas = static_cast<std::uint32_t>(buf.size());
            q.allowed_iovas = reinterpret_cast<std::uintptr_t>(buf.data());
            if (::ioctl(iommufd_.get(), IOMMU_IOAS_IOVA_RANGES, &q) == 0) break;
            if (errno != EMSGSIZE) throw Error::from_errno("read IOVA ranges of IOAS", std::to_string(ioas_), errno);
            buf.resize(q.num_iovas);
        }
        if (q.num_iovas > buf.size())
            throw Error("read IOVA ranges of IOAS", std::to_string(ioas_), "the kernel kept changing the count");
        ranges_.clear();
        for (std::uint32_t i = 0; i < q.num_iovas; ++i) ranges_.push_back({buf[i].start, buf[i].last});
        // iommufd reports the smallest IOVA alignment, not a page-size bitmap.
        page_sizes_ = q.out_iova_alignment != 0 ? q.out_iova_alignment : 4096;
        for (const auto& r : ranges_) log::debug("IOVA range 0x", std::hex, r.first, "-0x", r.last);
    }

    UniqueFd iommufd_;
    std::uint32_t ioas_ = 0;
    bool attached_ = false;  // the IOAS and its mappings outlive the devices; ranges are known from here on
    std::vector<IovaRange> ranges_;
    std::uint64_t page_sizes_ = 4096;
};

}  // namespace

std::unique_ptr<DomainBackend> make_iommufd() { return std::make_unique<Iommufd>(); }

}  // namespace bardrive::vfio::detail
