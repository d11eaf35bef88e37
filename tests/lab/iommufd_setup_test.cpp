// The iommufd setup scenarios of Linux's VFIO selftests (vfio_iommufd_setup_test.c), under their names,
// plus the malformed and out-of-order calls they leave out; where they only check that a call fails,
// these check the exact errno the kernel's code returns (6.12: drivers/vfio/device_cdev.c, vfio_main.c,
// drivers/iommu/iommufd/main.c, ioas.c, io_pagetable.c). Raw UAPI on purpose: bardrive's vfio/ never
// makes these calls malformed, so only the kernel's answer is under test here; the last case then opens
// the same device through bardrive's iommufd backend and copies by DMA, to show nothing stuck.
// Needs the full lab kernel (/dev/iommu, the vfio cdev); SKIPs elsewhere. NIC A of the preset is used.
#include <fcntl.h>
#include <linux/iommufd.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "core/fd.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "lab_env.hpp"
#include "nic/memcpy_driver.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kIova = 1ull << 32;  // inside the lab's VT-d aperture (39-bit), page aligned
constexpr std::size_t kPage = 4096;

// 0 on success, else errno: the assertions compare the kernel's exact answer.
int call(int fd, unsigned long request, void* arg) { return ::ioctl(fd, request, arg) == 0 ? 0 : errno; }

struct Cdev {
    Cdev() : lab(labenv::lab_or_skip()) {
        const char* kernel = std::getenv("BARDRIVE_LAB_KERNEL");
        if (!kernel || std::string(kernel) != "full" || !fs::exists("/dev/iommu"))
            SKIP("needs the full lab kernel with its IOMMU: lab/lab run basic --kernel full -- <this binary>");
        fs::path dir = fs::path("/sys/bus/pci/devices") / lab.nics.at(0).str() / "vfio-dev";
        REQUIRE(fs::is_directory(dir));
        path = "/dev/vfio/devices/" + fs::directory_iterator(dir)->path().filename().string();
        cdev = UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        INFO("open " << path << ": " << std::strerror(errno));
        REQUIRE(cdev.valid());
        iommufd = UniqueFd(::open("/dev/iommu", O_RDWR | O_CLOEXEC));
        REQUIRE(iommufd.valid());
    }

    int bind(std::int32_t fd, std::uint32_t argsz = sizeof(vfio_device_bind_iommufd), std::uint32_t flags = 0) {
        vfio_device_bind_iommufd b{};
        b.argsz = argsz;
        b.flags = flags;
        b.iommufd = fd;
        return call(cdev.get(), VFIO_DEVICE_BIND_IOMMUFD, &b);
    }
    int bind() { return bind(iommufd.get()); }
    int get_info() {
        vfio_device_info info{};
        info.argsz = sizeof(info);
        return call(cdev.get(), VFIO_DEVICE_GET_INFO, &info);
    }
    int attach(std::uint32_t pt_id, std::uint32_t flags = 0) {
        vfio_device_attach_iommufd_pt a{};
        a.argsz = sizeof(a);
        a.flags = flags;
        a.pt_id = pt_id;
        return call(cdev.get(), VFIO_DEVICE_ATTACH_IOMMUFD_PT, &a);
    }
    int detach() {
        vfio_device_detach_iommufd_pt d{};
        d.argsz = sizeof(d);
        return call(cdev.get(), VFIO_DEVICE_DETACH_IOMMUFD_PT, &d);
    }
    std::uint32_t ioas_alloc() {
        iommu_ioas_alloc a{};
        a.size = sizeof(a);
        REQUIRE(call(iommufd.get(), IOMMU_IOAS_ALLOC, &a) == 0);
        return a.out_ioas_id;
    }

    labenv::Lab lab;
    std::string path;
    UniqueFd cdev, iommufd;
};

// Two anonymous pages to map, and the calls on an IOAS of its own (no device needed).
struct Ioas : Cdev {
    Ioas() : id(ioas_alloc()) {
        buf = ::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(buf != MAP_FAILED);
        std::memset(buf, 0x5a, 2 * kPage);
    }
    ~Ioas() { ::munmap(buf, 2 * kPage); }

    iommu_ioas_map request(std::uint64_t iova, std::uint64_t length, const void* va) const {
        iommu_ioas_map m{};
        m.size = sizeof(m);
        m.flags = IOMMU_IOAS_MAP_FIXED_IOVA | IOMMU_IOAS_MAP_READABLE | IOMMU_IOAS_MAP_WRITEABLE;
        m.ioas_id = id;
        m.user_va = reinterpret_cast<std::uintptr_t>(va);
        m.length = length;
        m.iova = iova;
        return m;
    }
    int map(iommu_ioas_map m) { return call(iommufd.get(), IOMMU_IOAS_MAP, &m); }
    int map(std::uint64_t iova, std::uint64_t length) { return map(request(iova, length, buf)); }
    int unmap(std::uint64_t iova, std::uint64_t length) {
        iommu_ioas_unmap u{};
        u.size = sizeof(u);
        u.ioas_id = id;
        u.iova = iova;
        u.length = length;
        return call(iommufd.get(), IOMMU_IOAS_UNMAP, &u);
    }

    std::uint32_t id;
    void* buf = nullptr;
};

}  // namespace

// --- the selftest's cases (vfio_cdev fixture) ---

TEST_CASE("vfio_iommufd_setup_test.bind", "[lab][iommufd]") {
    Cdev c;
    CHECK(c.bind() == 0);
    CHECK(c.get_info() == 0);
}

TEST_CASE("vfio_iommufd_setup_test.get_info_without_bind_fails", "[lab][iommufd]") {
    Cdev c;
    // vfio_main.c: an fd without access granted (no bind yet) answers every device ioctl with EINVAL.
    CHECK(c.get_info() == EINVAL);
}

TEST_CASE("vfio_iommufd_setup_test.bind_bad_iommufd_fails", "[lab][iommufd]") {
    Cdev c;
    CHECK(c.bind(-2) == EINVAL);  // a negative fd is refused before it is looked up
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    REQUIRE(null.valid());
    CHECK(c.bind(null.get()) == EBADFD);  // an open fd that is not /dev/iommu
    int closed = null.get();
    null = UniqueFd();
    CHECK(c.bind(closed) == EBADF);  // no file at that number
    CHECK(c.get_info() == EINVAL);   // none of them bound it
    CHECK(c.bind() == 0);
}

TEST_CASE("vfio_iommufd_setup_test.repeated_bind_fails", "[lab][iommufd]") {
    Cdev c;
    REQUIRE(c.bind() == 0);
    CHECK(c.bind() == EINVAL);
    CHECK(c.get_info() == 0);  // the first bind still holds
}

TEST_CASE("vfio_iommufd_setup_test.attach_detatch_pt", "[lab][iommufd]") {  // the selftest's spelling
    Cdev c;
    REQUIRE(c.bind() == 0);
    std::uint32_t ioas = c.ioas_alloc();
    CHECK(c.attach(ioas) == 0);
    CHECK(c.detach() == 0);
    CHECK(c.attach(ioas) == 0);  // and again after the detach
}

TEST_CASE("vfio_iommufd_setup_test.attach_invalid_pt_fails", "[lab][iommufd]") {
    Cdev c;
    REQUIRE(c.bind() == 0);
    CHECK(c.attach(UINT32_MAX) == ENOENT);  // no object has that id
    CHECK(c.attach(c.ioas_alloc()) == 0);
}

// --- malformed and out-of-order calls the selftest does not make ---

TEST_CASE("vfio_iommufd_setup_test.bind_bad_argsz_fails", "[lab][iommufd]") {
    Cdev c;
    // argsz must cover up to out_devid; a shorter struct is refused, a longer one is fine (zeroed tail).
    CHECK(c.bind(c.iommufd.get(), offsetof(vfio_device_bind_iommufd, out_devid)) == EINVAL);
    CHECK(c.bind(c.iommufd.get(), 0) == EINVAL);
    CHECK(c.get_info() == EINVAL);
    CHECK(c.bind() == 0);
}

TEST_CASE("vfio_iommufd_setup_test.bind_bad_flags_fails", "[lab][iommufd]") {
    Cdev c;
    CHECK(c.bind(c.iommufd.get(), sizeof(vfio_device_bind_iommufd), 1u << 31) == EINVAL);
    CHECK(c.get_info() == EINVAL);
    CHECK(c.bind() == 0);
}

TEST_CASE("vfio_iommufd_setup_test.attach_before_bind_fails", "[lab][iommufd]") {
    Cdev c;
    std::uint32_t ioas = c.ioas_alloc();
    CHECK(c.attach(ioas) == EINVAL);  // the same gate as get_info: no access before the bind
    CHECK(c.detach() == EINVAL);
    REQUIRE(c.bind() == 0);
    CHECK(c.attach(ioas, 1u << 31) == EINVAL);  // unknown flag
    CHECK(c.attach(ioas) == 0);
}

TEST_CASE("vfio_iommufd_setup_test.ioas_map_bad_flags_fails", "[lab][iommufd]") {
    Ioas s;
    auto m = s.request(kIova, kPage, s.buf);
    m.flags |= 1u << 31;
    CHECK(s.map(m) == EOPNOTSUPP);  // unknown flag
    m = s.request(kIova, kPage, s.buf);
    m.__reserved = 1;
    CHECK(s.map(m) == EOPNOTSUPP);  // reserved field not zero
    m = s.request(kIova, kPage, s.buf);
    m.flags = IOMMU_IOAS_MAP_FIXED_IOVA;
    CHECK(s.map(m) == EINVAL);  // neither readable nor writeable
    m = s.request(kIova, kPage, s.buf);
    m.size = 8;
    CHECK(s.map(m) == EINVAL);  // struct shorter than the command's minimum
    m = s.request(kIova, kPage, s.buf);
    m.ioas_id = UINT32_MAX;
    CHECK(s.map(m) == ENOENT);               // no such IOAS
    CHECK(s.unmap(kIova, kPage) == ENOENT);  // none of them mapped anything
    CHECK(s.map(kIova, kPage) == 0);
}

// An IOAS's IOVA alignment is that of the domains attached to it: 1 byte with none, the IOMMU's page
// (4 KiB under VT-d) once the device is attached. So the check needs the device attached first.
TEST_CASE("vfio_iommufd_setup_test.ioas_map_unaligned_fails", "[lab][iommufd]") {
    Ioas s;
    REQUIRE(s.bind() == 0);
    REQUIRE(s.attach(s.id) == 0);
    CHECK(s.map(kIova + 1, kPage) == EINVAL);
    CHECK(s.map(kIova + 512, kPage) == EINVAL);
    CHECK(s.map(kIova, 0) == EINVAL);  // nothing to map
    CHECK(s.unmap(kIova, kPage) == ENOENT);
    CHECK(s.map(kIova, kPage) == 0);
}

// The other order: with no device attached the IOAS takes an unaligned IOVA (alignment 1), and then
// the device cannot attach (EADDRINUSE: a domain could not represent that mapping) until it is gone.
TEST_CASE("vfio_iommufd_setup_test.attach_to_unaligned_ioas_fails", "[lab][iommufd]") {
    Ioas s;
    REQUIRE(s.map(kIova + 1, kPage) == 0);
    REQUIRE(s.bind() == 0);
    CHECK(s.attach(s.id) == EADDRINUSE);
    CHECK(s.unmap(kIova + 1, kPage) == 0);
    CHECK(s.attach(s.id) == 0);
}

TEST_CASE("vfio_iommufd_setup_test.ioas_map_overflow_fails", "[lab][iommufd]") {
    Ioas s;
    CHECK(s.map(UINT64_MAX, kPage) == EOVERFLOW);                  // iova >= ULONG_MAX
    CHECK(s.map(kIova, UINT64_MAX) == EOVERFLOW);                  // length >= ULONG_MAX
    CHECK(s.map(UINT64_MAX - kPage + 1, 2 * kPage) == EOVERFLOW);  // iova + length wraps
    CHECK(s.map(kIova, 2 * kPage) == 0);
}

TEST_CASE("vfio_iommufd_setup_test.ioas_map_overlap_fails", "[lab][iommufd]") {
    Ioas s;
    REQUIRE(s.map(kIova, 2 * kPage) == 0);
    CHECK(s.map(kIova, kPage) == EEXIST);
    CHECK(s.map(kIova + kPage, 2 * kPage) == EEXIST);  // overlaps the tail
    CHECK(s.map(kIova - kPage, 2 * kPage) == EEXIST);  // overlaps the head
    CHECK(s.map(kIova + 2 * kPage, kPage) == 0);       // adjacent is fine
}

TEST_CASE("vfio_iommufd_setup_test.ioas_unmap_unmapped_fails", "[lab][iommufd]") {
    Ioas s;
    CHECK(s.unmap(kIova, kPage) == ENOENT);  // nothing mapped yet
    REQUIRE(s.map(kIova, 2 * kPage) == 0);
    CHECK(s.unmap(kIova + 2 * kPage, kPage) == ENOENT);  // beside the mapping
    CHECK(s.unmap(kIova, kPage) == ENOENT);              // half of an area: areas unmap whole
    CHECK(s.unmap(kIova, 2 * kPage) == 0);
    CHECK(s.unmap(kIova, 2 * kPage) == ENOENT);  // twice
}

// After every refusal above in one process, a correct bind + attach + map works, and so does the
// device: closed, reopened through bardrive's iommufd backend, it copies 4 KiB by DMA.
TEST_CASE("vfio_iommufd_setup_test.device_works_after_refusals", "[lab][iommufd]") {
    {
        Ioas s;
        CHECK(s.attach(s.id) == EINVAL);
        CHECK(s.bind(-1) == EINVAL);
        CHECK(s.map(kIova, UINT64_MAX) == EOVERFLOW);
        CHECK(s.unmap(kIova, kPage) == ENOENT);
        REQUIRE(s.bind() == 0);
        CHECK(s.bind() == EINVAL);
        CHECK(s.attach(UINT32_MAX) == ENOENT);
        REQUIRE(s.attach(s.id) == 0);
        CHECK(s.map(kIova + 1, kPage) == EINVAL);
        REQUIRE(s.map(kIova, 2 * kPage) == 0);
        CHECK(s.get_info() == 0);
    }
    labenv::Lab lab = labenv::lab_or_skip();
    vfio::Domain domain(vfio::Backend::iommufd);
    vfio::Device device = vfio::Device::open(domain, lab.nics.at(0));
    dma::IovaAllocator iovas(domain);
    auto driver = nic::probe_memcpy_driver(device, iovas);
    dma::Memory mem = dma::Memory::allocate(2 << 20);
    dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
    auto* bytes = reinterpret_cast<std::uint8_t*>(mem.data());
    std::memset(bytes, 0, mem.size());
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < kPage; ++i) bytes[i] = static_cast<std::uint8_t>(rng());
    driver->init();
    REQUIRE(driver->memcpy_start(map.iova() + (1 << 20), map.iova(), kPage));
    bool ok = driver->memcpy_wait(30000);  // a hang, not a speed limit
    INFO(driver->failure());
    REQUIRE(ok);
    CHECK(std::memcmp(bytes + (1 << 20), bytes, kPage) == 0);
}
