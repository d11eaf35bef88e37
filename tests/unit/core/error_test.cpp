#include "core/error.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cerrno>

#include "core/file.hpp"

using bardrive::Error;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("Error names the operation, the object, errno text and the hint") {
    Error e = Error::from_errno("open", "/dev/vfio/12", EACCES, "run as root or chown the group file");
    CHECK(e.error_number() == EACCES);
    CHECK_THAT(e.what(), ContainsSubstring("open /dev/vfio/12"));
    CHECK_THAT(e.what(), ContainsSubstring("Permission denied"));
    CHECK_THAT(e.what(), ContainsSubstring("run as root"));
}

TEST_CASE("file helpers report the path that failed") {
    CHECK_THROWS_WITH(bardrive::file::read_text("/nonexistent/bardrive/x"),
                      ContainsSubstring("/nonexistent/bardrive/x"));
    CHECK_FALSE(bardrive::file::try_read_text("/nonexistent/bardrive/x").has_value());
    CHECK(bardrive::file::read_text("/proc/self/comm") == "unit-core");
}
