#include "pci/bdf.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"

using bardrive::pci::Bdf;

TEST_CASE("BDF parses both sysfs and short forms") {
    auto b = Bdf::parse("0000:3b:1f.7");
    CHECK(b.domain == 0);
    CHECK(b.bus == 0x3b);
    CHECK(b.device == 0x1f);
    CHECK(b.function == 7);
    CHECK(b.str() == "0000:3b:1f.7");
    CHECK(Bdf::parse("01:00.1") == Bdf{0, 1, 0, 1});
    CHECK(Bdf::parse("10000:00:02.0").domain == 0x10000);  // VMD domain
    CHECK(Bdf::parse("0000:AB:0C.0").bus == 0xab);
}

TEST_CASE("BDF rejects malformed addresses with a hint") {
    for (const char* bad :
         {"", "0000:01:00", "01:00", "01:20.0", "01:00.8", "01:00.0x", "zz:00.0", "0:0:0:0.0", "0000:100:00.0"}) {
        INFO(bad);
        CHECK_FALSE(Bdf::try_parse(bad).has_value());
    }
    CHECK_THROWS_WITH(Bdf::parse("nope"), Catch::Matchers::ContainsSubstring("lspci -D"));
    // One number out of range is named.
    CHECK_THROWS_WITH(Bdf::parse("0000:00:1f.8"), Catch::Matchers::ContainsSubstring("function 8 is past 7"));
    CHECK_THROWS_WITH(Bdf::parse("00:20.0"), Catch::Matchers::ContainsSubstring("device 20 is past 1f"));
    CHECK_THROWS_WITH(Bdf::parse("0000:zz:00.0"), Catch::Matchers::ContainsSubstring("not a PCI address"));
}
