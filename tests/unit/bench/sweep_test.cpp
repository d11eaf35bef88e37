#include "bench/p2p/sweep.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"

using namespace bardrive::bench;

TEST_CASE("a size range doubles from its minimum to its maximum") {
    auto s = parse_sizes("4K..1G");
    REQUIRE(s.size() == 19);
    CHECK(s.front() == 4096);
    CHECK(s[1] == 8192);
    CHECK(s.back() == (1ull << 30));
}

TEST_CASE("a range with a step factor, and a list, are read as written") {
    CHECK(parse_sizes("4K..1M:4") == std::vector<std::uint64_t>{4096, 16384, 65536, 262144, 1048576});
    CHECK(parse_sizes("1M,4K,64KiB,4K") == std::vector<std::uint64_t>{4096, 65536, 1048576});
    CHECK(parse_sizes("64..208") == std::vector<std::uint64_t>{64, 128});  // stops before passing the maximum
    CHECK(parse_size("2GiB") == (2ull << 30));
    CHECK(parse_size("48") == 48);
}

TEST_CASE("bad sizes are refused with the reason") {
    CHECK_THROWS_AS(parse_size("3"), bardrive::Error);    // below 16
    CHECK_THROWS_AS(parse_size("100"), bardrive::Error);  // not a multiple of 16
    CHECK_THROWS_AS(parse_size("4Q"), bardrive::Error);   // unknown suffix
    CHECK_THROWS_AS(parse_size(""), bardrive::Error);
    // Past 2^64 is "more than 2^64 bytes", with or without a suffix, never "not a size".
    CHECK_THROWS_WITH(parse_size("99999999999999999999999"),
                      Catch::Matchers::ContainsSubstring("more than 2^64 bytes"));
    CHECK_THROWS_WITH(parse_size("17179869184T"), Catch::Matchers::ContainsSubstring("more than 2^64 bytes"));
    CHECK_THROWS_AS(parse_size("99999999999T"), bardrive::Error);  // overflows 64 bits
    CHECK_THROWS_AS(parse_sizes("1G..4K"), bardrive::Error);       // backwards
    CHECK_THROWS_AS(parse_sizes("4K..1G:1"), bardrive::Error);
    CHECK_THROWS_AS(parse_sizes("4K,,1M"), bardrive::Error);
    try {
        parse_size("100");
        FAIL("no error");
    } catch (const bardrive::Error& e) {
        CHECK(std::string(e.what()).find("multiples of 16") != std::string::npos);
    }
}

TEST_CASE("median of odd and even counts, and of none") {
    CHECK(median({3, 1, 2}) == 2);
    CHECK(median({4, 1, 3, 2}) == 2.5);
    CHECK(median({}) == 0);
}

TEST_CASE("small transfers are batched so one timed repetition moves about 64 MiB") {
    CHECK(batch_for(1ull << 30) == 1);
    CHECK(batch_for(64ull << 20) == 1);
    CHECK(batch_for(16ull << 20) == 4);
    CHECK(batch_for(4096) == 1024);  // capped
}

TEST_CASE("methods filter the paths") {
    SweepConfig c;
    CHECK(c.wants("ce"));
    c.methods = {"sm"};
    CHECK(c.wants("sm"));
    CHECK_FALSE(c.wants("ce"));
}
