// The `full` lab kernel (lab/lab prepare --kernel full) has what Debian's lacks: iommufd (/dev/iommu
// answers IOMMU_IOAS_ALLOC), a vfio device cdev for each bound device that binds to iommufd, the
// compat container, no-IOMMU mode and P2PDMA. Raw UAPI on purpose: this checks the kernel, not vfio/.
// SKIPs outside a guest of that kernel; lab/lab itself SKIPs (77) when the kernel is not built.
#include <fcntl.h>
#include <linux/iommufd.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include "core/fd.hpp"

namespace fs = std::filesystem;

namespace {

void require_full_kernel() {
    const char* kernel = std::getenv("BARDRIVE_LAB_KERNEL");
    if (!kernel || std::string(kernel) != "full")
        SKIP("needs the full lab kernel: lab/lab run basic --kernel full -- <this binary>");
}

std::string first_bound_device() {
    std::istringstream words(std::getenv("BARDRIVE_LAB_BOUND") ? std::getenv("BARDRIVE_LAB_BOUND") : "");
    std::string bdf;
    words >> bdf;
    return bdf;
}

}  // namespace

TEST_CASE("the full kernel's /dev/iommu allocates an IOAS", "[lab]") {
    require_full_kernel();
    bardrive::UniqueFd iommu(::open("/dev/iommu", O_RDWR | O_CLOEXEC));
    INFO("open /dev/iommu: " << std::strerror(errno));
    REQUIRE(iommu.valid());
    iommu_ioas_alloc alloc{};
    alloc.size = sizeof(alloc);
    INFO("IOMMU_IOAS_ALLOC: " << std::strerror(errno));
    REQUIRE(::ioctl(iommu.get(), IOMMU_IOAS_ALLOC, &alloc) == 0);
    CHECK(alloc.out_ioas_id != 0);
}

TEST_CASE("a device bound to vfio-pci gets a cdev that binds to iommufd and attaches to an IOAS", "[lab]") {
    require_full_kernel();
    std::string bdf = first_bound_device();
    REQUIRE(!bdf.empty());
    fs::path dir = fs::path("/sys/bus/pci/devices") / bdf / "vfio-dev";
    REQUIRE(fs::is_directory(dir));
    std::string name = fs::directory_iterator(dir)->path().filename();  // vfioN
    bardrive::UniqueFd dev(::open(("/dev/vfio/devices/" + name).c_str(), O_RDWR | O_CLOEXEC));
    INFO("open /dev/vfio/devices/" << name << ": " << std::strerror(errno));
    REQUIRE(dev.valid());
    bardrive::UniqueFd iommu(::open("/dev/iommu", O_RDWR | O_CLOEXEC));
    REQUIRE(iommu.valid());

    vfio_device_bind_iommufd bind{};
    bind.argsz = sizeof(bind);
    bind.iommufd = iommu.get();
    INFO("VFIO_DEVICE_BIND_IOMMUFD: " << std::strerror(errno));
    REQUIRE(::ioctl(dev.get(), VFIO_DEVICE_BIND_IOMMUFD, &bind) == 0);

    iommu_ioas_alloc alloc{};
    alloc.size = sizeof(alloc);
    REQUIRE(::ioctl(iommu.get(), IOMMU_IOAS_ALLOC, &alloc) == 0);
    vfio_device_attach_iommufd_pt attach{};
    attach.argsz = sizeof(attach);
    attach.pt_id = alloc.out_ioas_id;
    INFO("VFIO_DEVICE_ATTACH_IOMMUFD_PT: " << std::strerror(errno));
    REQUIRE(::ioctl(dev.get(), VFIO_DEVICE_ATTACH_IOMMUFD_PT, &attach) == 0);

    vfio_device_info info{};
    info.argsz = sizeof(info);
    REQUIRE(::ioctl(dev.get(), VFIO_DEVICE_GET_INFO, &info) == 0);
    CHECK((info.flags & VFIO_DEVICE_FLAGS_PCI) != 0);
}

TEST_CASE("the full kernel offers the compat container and no-IOMMU mode", "[lab]") {
    require_full_kernel();
    struct stat st {};
    REQUIRE(::stat("/dev/vfio/vfio", &st) == 0);  // iommufd's compatibility container
    CHECK(S_ISCHR(st.st_mode));
    CHECK(fs::exists("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode"));
}
