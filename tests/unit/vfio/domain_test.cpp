#include "vfio/domain.hpp"

#include <sys/stat.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("a missing /dev/vfio says how to enable VFIO and the IOMMU") {
    struct stat st {};
    if (::stat("/dev/vfio", &st) == 0) SKIP("/dev/vfio exists here; the lab tests cover a working VFIO");
    CHECK_THROWS_WITH(vfio::Domain(), ContainsSubstring("/dev/vfio/vfio") && ContainsSubstring("modprobe vfio-pci") &&
                                          ContainsSubstring("intel_iommu=on"));
}
