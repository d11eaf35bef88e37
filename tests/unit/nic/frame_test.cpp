#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <vector>

#include "core/error.hpp"
#include "nic/mac_address.hpp"
#include "nic/test_frame.hpp"

using namespace bardrive::nic;

TEST_CASE("MAC addresses parse and print") {
    auto m = MacAddress::parse("52:54:00:12:34:5A");
    CHECK(m.str() == "52:54:00:12:34:5a");
    CHECK(MacAddress::parse("52-54-00-12-34-5a") == m);
    CHECK_FALSE(m.is_multicast());
    CHECK(BROADCAST.is_multicast());
    for (const char* bad : {"", "52:54:00:12:34", "52:54:00:12:34:5g", "52:54:00:12:34:5a:", "5254.0012.345a"}) {
        INFO(bad);
        CHECK_FALSE(MacAddress::try_parse(bad));
    }
    CHECK_THROWS_WITH(MacAddress::parse("x"), Catch::Matchers::ContainsSubstring("52:54:00:12:34:56"));
}

TEST_CASE("test frames carry their sequence number and any changed byte is caught") {
    auto to = MacAddress::parse("52:54:00:12:34:11"), from = MacAddress::parse("52:54:00:12:34:10");
    for (std::uint32_t len : {60u, 64u, 512u, 1514u}) {
        std::vector<std::uint8_t> f(len);
        write_test_frame(f.data(), len, to, from, 0x1122334455667788ull + len);
        CHECK(f[12] == 0x88);
        CHECK(f[13] == 0xb5);
        REQUIRE(check_test_frame(f.data(), len) == 0x1122334455667788ull + len);
        for (std::uint32_t i : {12u, 14u, 21u, 22u, len - 1}) {
            auto g = f;
            g[i] ^= 0x40;
            INFO(i);
            CHECK(check_test_frame(g.data(), len) != 0x1122334455667788ull + len);
        }
    }
    std::vector<std::uint8_t> f(60);
    write_test_frame(f.data(), 60, to, from, 1);
    CHECK_FALSE(check_test_frame(f.data(), 59));  // too short
}

TEST_CASE("test frame arrivals: each once, intact, of its length, in any order") {
    const MacAddress to{{2, 0, 0, 0, 0, 1}}, from{{2, 0, 0, 0, 0, 2}};
    auto length_of = [](std::uint64_t seq) { return static_cast<std::uint32_t>(60 + seq); };
    TestFrameArrivals in(4, length_of);
    std::vector<std::uint8_t> f(128);
    auto arrive = [&](std::uint64_t seq, std::uint32_t len) {
        write_test_frame(f.data(), len, to, from, seq);
        return in.frame(f.data(), len);
    };
    CHECK(arrive(1, 61) == 1u);  // first, but it is 1: out of order
    CHECK(arrive(0, 60) == 0u);
    CHECK_FALSE(arrive(1, 61));  // a duplicate
    CHECK_FALSE(arrive(2, 70));  // the wrong length for 2
    CHECK_FALSE(arrive(4, 64));  // not one of 0..3
    f[30] ^= 1;
    CHECK_FALSE(in.frame(f.data(), 64));  // damaged
    CHECK(arrive(3, 63) == 3u);
    CHECK(arrive(2, 62) == 2u);
    CHECK(in.good() == 4);
    CHECK(in.wrong() == 4);
    CHECK(in.arrived() == 8);
    CHECK(in.out_of_order() == 4);  // 1 at index 0, 0 at 1, 3 at 6, 2 at 7
}
