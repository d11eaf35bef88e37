#include "vfio/mmio.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>

#include "core/error.hpp"
#include "support/fake_bar.hpp"

using bardrive::vfio::Mmio;
using Catch::Matchers::ContainsSubstring;

namespace {
// Plain memory stands in for a BAR: the accessor's widths, offsets and bounds are what is tested.
Mmio fake_bar(std::size_t size) { return bardrive::testing::fake_bar(size, 0, "0000:01:00.0 BAR0"); }
}  // namespace

TEST_CASE("Mmio accesses land at the offset with the width asked for") {
    Mmio bar = fake_bar(4096);
    bar.write32(0x10, 0xdeadbeef);
    bar.write16(0x20, 0x1234);
    bar.write8(0x23, 0x56);
    bar.write64(0x28, 0x0102030405060708ull);
    const volatile std::uint8_t* b = bar.data();
    CHECK(b[0x10] == 0xef);  // little-endian, like the devices' registers
    CHECK(b[0x13] == 0xde);
    CHECK(b[0x14] == 0);  // nothing spilled past the 4 bytes
    CHECK(b[0x20] == 0x34);
    CHECK(b[0x22] == 0);
    CHECK(b[0x23] == 0x56);
    CHECK(bar.read32(0x10) == 0xdeadbeef);
    CHECK(bar.read16(0x12) == 0xdead);
    CHECK(bar.read8(0x11) == 0xbe);
    CHECK(bar.read64(0x28) == 0x0102030405060708ull);
    CHECK(bar.read32(0x2c) == 0x01020304);
}

TEST_CASE("Mmio::require checks the register window at set-up") {
    Mmio bar = fake_bar(0x4000);
    CHECK_NOTHROW(bar.require(0, 0x4000));
    CHECK_NOTHROW(bar.require(0x3ffc, 4));
    CHECK_THROWS_WITH(bar.require(0x3ffc, 8), ContainsSubstring("0000:01:00.0 BAR0") && ContainsSubstring("0x4004") &&
                                                  ContainsSubstring("only 0x4000 bytes"));
    CHECK_THROWS_AS(bar.require(0x5000, 4), bardrive::Error);
    CHECK_THROWS_AS(bar.require(4, SIZE_MAX), bardrive::Error);  // no wrap-around
    Mmio none;
    CHECK_THROWS_WITH(none.require(0, 4), ContainsSubstring("not mapped"));
}

TEST_CASE("Mmio is move-only and keeps its window when moved") {
    Mmio a = fake_bar(4096);
    a.write32(0, 42);
    Mmio b = std::move(a);
    CHECK_FALSE(static_cast<bool>(a));
    CHECK(b.read32(0) == 42);
    CHECK(b.size() == 4096);
    CHECK(b.name() == "0000:01:00.0 BAR0");
    a = std::move(b);
    CHECK(a.read32(0) == 42);
}
