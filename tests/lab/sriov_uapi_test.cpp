// The SR-IOV scenarios of Linux's VFIO selftests (vfio_pci_sriov_uapi_test.c), under their names: NIC B
// of preset basic (QEMU's igb, an 82576 offering 8 VFs) bound to vfio-pci with enable_sriov set, one VF
// enabled from it (it comes up bound to vfio-pci: vfio-pci sets the VF's driver_override), and the VF
// token rules: the PF's token is UUID_1; a VF opened with UUID_1 works, with UUID_2 or none it is refused
// (EACCES), also after the PF closed, and after the PF set UUID_2 the rules follow the new token.
// Raw UAPI (linux/vfio.h): the group path (type1, iommufd's compat container, no-IOMMU) passes the token in the
// device name ("BDF vf_token=UUID"); the cdev path passes it in VFIO_DEVICE_BIND_IOMMUFD, where the
// kernel supports that (VFIO_DEVICE_BIND_FLAG_TOKEN, Linux 6.17). NIC B: the other lab-vfio-selftests
// cases use NIC A, which must not run with VFs enabled.
#include <fcntl.h>
#include <linux/iommufd.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "lab_env.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
namespace fs = std::filesystem;

namespace {

constexpr const char* UUID_1 = "52ac9bff-3a88-4fbd-901a-0d767c3b6c97";
constexpr const char* UUID_2 = "88594674-90a0-47a9-aea8-9d9b352ac08a";

// VFIO_DEVICE_BIND_IOMMUFD with a VF token (Linux 6.17); absent from older headers.
constexpr std::uint32_t kBindFlagToken = 1u << 0;
struct BindWithToken {
    std::uint32_t argsz, flags;
    std::int32_t iommufd;
    std::uint32_t out_devid;
    std::uint64_t token_uuid_ptr;
};

fs::path sysdev(const std::string& bdf) { return fs::path("/sys/bus/pci/devices") / bdf; }

std::string read_line(const fs::path& p) {
    std::ifstream f(p);
    std::string s;
    std::getline(f, s);
    return s;
}

bool write_text(const fs::path& p, const std::string& v) {
    std::ofstream f(p);
    f << v;
    f.flush();
    return static_cast<bool>(f);
}

std::array<std::uint8_t, 16> uuid_bytes(const char* text) {
    std::array<std::uint8_t, 16> out{};
    std::size_t n = 0;
    for (const char* c = text; *c && n < 32; ++c) {
        if (*c == '-') continue;
        const int v = std::isdigit(static_cast<unsigned char>(*c)) ? *c - '0' : std::tolower(*c) - 'a' + 10;
        out[n / 2] = static_cast<std::uint8_t>(out[n / 2] << 4 | v);
        ++n;
    }
    return out;
}

// One VF enabled on NIC B for the whole process; disabled again (and enable_sriov put back) at exit.
struct Sriov {
    std::string pf, vf, skip;
    std::string old_enable;
    const fs::path param = "/sys/module/vfio_pci/parameters/enable_sriov";

    Sriov() {
        const labenv::Lab lab = labenv::lab_or_skip();
        pf = lab.nics.at(1).str();
        if (!fs::exists(sysdev(pf) / "driver") || fs::read_symlink(sysdev(pf) / "driver").filename() != "vfio-pci") {
            skip = pf + " is not bound to vfio-pci: run with --bind all";
            return;
        }
        if (!fs::exists(sysdev(pf) / "sriov_totalvfs") || std::stoi(read_line(sysdev(pf) / "sriov_totalvfs")) < 1) {
            skip = pf + " offers no VFs";
            return;
        }
        if (read_line(sysdev(pf) / "sriov_numvfs") != "0") {
            skip = pf + " has VFs enabled already";
            return;
        }
        if (!fs::exists(param)) {
            skip = "vfio-pci has no enable_sriov parameter";
            return;
        }
        old_enable = read_line(param);
        REQUIRE(write_text(param, "1"));
        REQUIRE(write_text(sysdev(pf) / "sriov_numvfs", "1"));
        vf = fs::read_symlink(sysdev(pf) / "virtfn0").filename().string();
        std::printf("SR-IOV: VF %s of PF %s\n", vf.c_str(), pf.c_str());
    }
    ~Sriov() {
        if (vf.empty()) return;
        write_text(sysdev(pf) / "sriov_numvfs", "0");
        write_text(param, old_enable == "Y" ? "1" : "0");
    }

    static Sriov& get() {
        static Sriov s;
        if (!s.skip.empty()) SKIP(s.skip);
        return s;
    }
};

unsigned group_of(const std::string& bdf) {
    return std::stoul(fs::read_symlink(sysdev(bdf) / "iommu_group").filename());
}

// The devices of one test, opened the way BARDRIVE_IOMMU says.
struct Uapi {
    bool cdev = false, noiommu = false;
    UniqueFd container, iommufd;
    std::vector<UniqueFd> groups;
    bool iommu_set = false;

    Uapi() {
        const char* mode = std::getenv("BARDRIVE_IOMMU");
        if (!mode) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
        noiommu = std::string(mode) == "noiommu";
        cdev = std::string(mode) == "iommufd";
        if (cdev) {
            iommufd = UniqueFd(::open("/dev/iommu", O_RDWR | O_CLOEXEC));
            REQUIRE(iommufd.valid());
        } else {
            container = UniqueFd(::open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC));
            REQUIRE(container.valid());
        }
    }

    // The device fd, or -errno. `token` null: none given.
    int open(const std::string& bdf, const char* token) {
        if (cdev) return open_cdev(bdf, token);
        const std::string node = (noiommu ? "/dev/vfio/noiommu-" : "/dev/vfio/") + std::to_string(group_of(bdf));
        UniqueFd g(::open(node.c_str(), O_RDWR | O_CLOEXEC));
        REQUIRE(g.valid());
        int cfd = container.get();
        REQUIRE(::ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd) == 0);
        if (!iommu_set) {
            REQUIRE(::ioctl(container.get(), VFIO_SET_IOMMU, noiommu ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU) == 0);
            iommu_set = true;
        }
        std::string name = bdf + (token ? std::string(" vf_token=") + token : "");
        int fd = ::ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, name.c_str());
        int err = errno;
        groups.push_back(std::move(g));
        return fd >= 0 ? fd : -err;
    }

    int open_cdev(const std::string& bdf, const char* token) {
        std::string node;
        for (const auto& e : fs::directory_iterator(sysdev(bdf) / "vfio-dev")) node = e.path().filename();
        REQUIRE(!node.empty());
        int fd = ::open(("/dev/vfio/devices/" + node).c_str(), O_RDWR | O_CLOEXEC);
        REQUIRE(fd >= 0);
        auto uuid = token ? uuid_bytes(token) : std::array<std::uint8_t, 16>{};
        BindWithToken b{sizeof b, token ? kBindFlagToken : 0, iommufd.get(), 0,
                        reinterpret_cast<std::uintptr_t>(uuid.data())};
        if (!token) b.argsz = sizeof(vfio_device_bind_iommufd);
        if (::ioctl(fd, VFIO_DEVICE_BIND_IOMMUFD, &b) != 0) {
            int err = errno;
            ::close(fd);
            return -err;
        }
        return fd;
    }
};

// The PF sets its token (a PF with no VF in use takes the one it is opened with; through the cdev with
// VFIO_DEVICE_FEATURE_PCI_VF_TOKEN, which every kernel since 5.7 has).
void set_token(int pf_fd, const char* token) {
    alignas(8) std::uint8_t buf[sizeof(vfio_device_feature) + 16] = {};
    auto* f = reinterpret_cast<vfio_device_feature*>(buf);
    f->argsz = sizeof buf;
    f->flags = VFIO_DEVICE_FEATURE_SET | VFIO_DEVICE_FEATURE_PCI_VF_TOKEN;
    auto uuid = uuid_bytes(token);
    std::memcpy(f->data, uuid.data(), 16);
    REQUIRE(::ioctl(pf_fd, VFIO_DEVICE_FEATURE, f) == 0);
}

enum class Scenario { init_token_match, pf_early_close, override_token };

// The VF opens when its token equals the PF's, and is refused with EACCES otherwise (none included).
void run(const char* vf_token, Scenario scenario) {
    Sriov& s = Sriov::get();
    Uapi u;
    const char* pf_token = UUID_1;
    int pf = u.open(s.pf, pf_token);
    // A cdev bind that refuses the token flag (EINVAL): the kernel predates VFIO_DEVICE_BIND_FLAG_TOKEN.
    const bool cdev_without_tokens = u.cdev && pf == -EINVAL;
    if (cdev_without_tokens) pf = u.open(s.pf, nullptr);
    INFO("PF " << s.pf << " open: " << (pf < 0 ? std::strerror(-pf) : "ok"));
    REQUIRE(pf >= 0);
    UniqueFd pf_fd(pf);
    if (cdev_without_tokens) set_token(pf_fd.get(), pf_token);
    if (scenario == Scenario::pf_early_close) pf_fd.reset();
    if (scenario == Scenario::override_token) {
        pf_token = UUID_2;
        set_token(pf_fd.get(), pf_token);
    }
    const int vf = u.open(s.vf, cdev_without_tokens ? nullptr : vf_token);
    UniqueFd vf_fd(vf >= 0 ? vf : -1);
    if (cdev_without_tokens) {
        SKIP(
            "this kernel's VFIO_DEVICE_BIND_IOMMUFD takes no VF token (VFIO_DEVICE_BIND_FLAG_TOKEN, Linux 6.17) "
            "and a VF bind without one "
            << (vf >= 0 ? "succeeded: it does not check VF tokens on the cdev path"
                        : std::string("failed: ") + std::strerror(-vf))
            << "; the rules are checked on the group path (type1, iommufd-compat)");
    }
    const bool should_open = vf_token && std::strcmp(vf_token, pf_token) == 0;
    INFO("VF " << s.vf << " with token " << (vf_token ? vf_token : "(none)") << ", PF token " << pf_token << ": "
               << (vf < 0 ? std::strerror(-vf) : "opened"));
    if (should_open) {
        CHECK(vf >= 0);
    } else {
        CHECK(vf == -EACCES);
    }
}

}  // namespace

#define SRIOV_CASES(variant, token)                                                       \
    TEST_CASE("vfio_pci_sriov_uapi_test." #variant ".init_token_match", "[lab][sriov]") { \
        run(token, Scenario::init_token_match);                                           \
    }                                                                                     \
    TEST_CASE("vfio_pci_sriov_uapi_test." #variant ".pf_early_close", "[lab][sriov]") {   \
        run(token, Scenario::pf_early_close);                                             \
    }                                                                                     \
    TEST_CASE("vfio_pci_sriov_uapi_test." #variant ".override_token", "[lab][sriov]") {   \
        run(token, Scenario::override_token);                                             \
    }

SRIOV_CASES(same_uuid, UUID_1)
SRIOV_CASES(diff_uuid, UUID_2)
SRIOV_CASES(null_uuid, nullptr)

// The same rules through bardrive's API: Device::set_vf_token on the PF, Device::open(domain, vf, token),
// each refusal a bardrive::Error that says what to do.
TEST_CASE("bardrive_vf_token.device_open", "[lab][sriov]") {
    using Catch::Matchers::ContainsSubstring;
    Sriov& s = Sriov::get();
    if (!std::getenv("BARDRIVE_IOMMU")) SKIP("run under lab/each-iommu-mode, which sets BARDRIVE_IOMMU");
    vfio::Domain domain;
    const auto pf_bdf = pci::Bdf::parse(s.pf), vf_bdf = pci::Bdf::parse(s.vf);
    const auto right = vfio::VfToken::parse(UUID_1), wrong = vfio::VfToken::parse(UUID_2);
    vfio::Device pf = vfio::Device::open(domain, pf_bdf);
    pf.set_vf_token(right);
    if (domain.backend() == vfio::Backend::iommufd) {
        try {
            vfio::Device::open(domain, vf_bdf, right);
        } catch (const Error& e) {
            CHECK_THAT(e.what(), ContainsSubstring("Linux 6.17"));
            SKIP("this kernel's iommufd bind takes no VF token: " << e.what());
        }
        return;  // a kernel that takes it: the group-path rules below are the kernel's, not checked twice
    }
    CHECK_THROWS_WITH(vfio::Device::open(domain, vf_bdf), ContainsSubstring("pass it"));
    CHECK_THROWS_WITH(vfio::Device::open(domain, vf_bdf, wrong), ContainsSubstring("not the one the PF's owner set"));
    vfio::Device vf = vfio::Device::open(domain, vf_bdf, right);
    CHECK(vf.config_read16(0) == 0x8086);  // the 82576 VF answers through VFIO
    // A token where none is asked: the window (ivshmem) is neither a PF nor a VF.
    const auto lab = labenv::lab_or_skip();
    if (lab.windows.empty()) return;
    vfio::Domain other;
    CHECK_THROWS_WITH(vfio::Device::open(other, lab.windows.at(0), right),
                      ContainsSubstring("open this device without one"));
}
