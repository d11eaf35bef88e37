#include "core/pagemap.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdint>

#include "core/error.hpp"

using Catch::Matchers::ContainsSubstring;
namespace pagemap = bardrive::pagemap;

TEST_CASE("pagemap: a page that was never touched has no physical address") {
    const long page = ::sysconf(_SC_PAGESIZE);
    void* p =
        ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    CHECK_THROWS_WITH(pagemap::physical_address(p), ContainsSubstring("not resident"));
    ::munmap(p, static_cast<std::size_t>(page));
}

TEST_CASE("pagemap: physical address of touched memory keeps the offset inside the page") {
    if (::geteuid() != 0) SKIP("reading page frame numbers needs CAP_SYS_ADMIN (run as root)");
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    auto* p = static_cast<std::uint8_t*>(
        ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    REQUIRE(p != MAP_FAILED);
    p[0] = 1;
    p[page] = 2;
    std::uint64_t phys = pagemap::physical_address(p + 123);
    CHECK(phys != 0);
    CHECK(phys % page == 123);
    CHECK(pagemap::physically_contiguous(p, page));  // one page always is
    ::munmap(p, 2 * page);
}
