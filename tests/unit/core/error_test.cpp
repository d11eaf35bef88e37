#include "core/error.hpp"

#include <sys/stat.h>
#include <unistd.h>

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

TEST_CASE("file helpers never block on a FIFO and refuse a directory") {
    char dir[] = "/tmp/bardrive-fifo-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string fifo = std::string(dir) + "/class";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // A copied sysfs attribute that is a FIFO: not an attribute (nothing to wait for).
    CHECK_FALSE(bardrive::file::try_read_text(fifo).has_value());
    // A file given by name that is a FIFO nobody writes: empty at once (a pipe with a writer is read as it comes).
    CHECK(bardrive::file::read_text(fifo).empty());
    CHECK_THROWS_WITH(bardrive::file::read_text(dir), ContainsSubstring("Is a directory"));
    CHECK_FALSE(bardrive::file::try_read_text(dir).has_value());
    ::unlink(fifo.c_str());
    ::rmdir(dir);
}
