#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdlib>

#include "core/error.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
struct EnvGuard {
    explicit EnvGuard(const char* value) {
        if (value)
            ::setenv("BARDRIVE_IOMMU", value, 1);
        else
            ::unsetenv("BARDRIVE_IOMMU");
    }
    ~EnvGuard() { ::unsetenv("BARDRIVE_IOMMU"); }
};
}  // namespace

TEST_CASE("BARDRIVE_IOMMU picks the backend, and only an explicit choice gives no-IOMMU mode") {
    {
        EnvGuard env("type1");
        CHECK(vfio::default_backend() == vfio::Backend::type1);
    }
    {
        EnvGuard env("iommufd");
        CHECK(vfio::default_backend() == vfio::Backend::iommufd);
    }
    {
        EnvGuard env("noiommu");
        CHECK(vfio::default_backend() == vfio::Backend::noiommu);
    }
    {
        EnvGuard env(nullptr);
        CHECK(vfio::default_backend() != vfio::Backend::noiommu);
    }
    {
        EnvGuard env("vfio-magic");
        CHECK_THROWS_WITH(vfio::default_backend(), ContainsSubstring("use type1, iommufd or noiommu"));
    }
}

TEST_CASE("backends have names for logs") {
    CHECK(std::string(vfio::to_string(vfio::Backend::type1)) == "type1");
    CHECK(std::string(vfio::to_string(vfio::Backend::iommufd)) == "iommufd");
    CHECK(std::string(vfio::to_string(vfio::Backend::iommufd_compat)) == "iommufd-compat");
    CHECK(std::string(vfio::to_string(vfio::Backend::noiommu)) == "noiommu");
}

TEST_CASE("iommufd backend on a kernel without it says what is missing") {
    if (::access("/dev/iommu", F_OK) == 0)
        SKIP("this kernel has /dev/iommu (the lab's full kernel tests that backend)");
    CHECK_THROWS_WITH(vfio::Domain(vfio::Backend::iommufd),
                      ContainsSubstring("/dev/iommu") && ContainsSubstring("BARDRIVE_IOMMU=type1"));
}
