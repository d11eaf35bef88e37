// vfio::VfToken: a UUID in its one text form, anything else refused before the kernel sees it.
#include "vfio/vf_token.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("VfToken: a UUID parses to its 16 bytes, in lower case") {
    auto t = vfio::VfToken::parse("52AC9BFF-3a88-4fbd-901a-0d767c3b6c97");
    CHECK(t.text() == "52ac9bff-3a88-4fbd-901a-0d767c3b6c97");
    const std::array<std::uint8_t, 16> want{0x52, 0xac, 0x9b, 0xff, 0x3a, 0x88, 0x4f, 0xbd,
                                            0x90, 0x1a, 0x0d, 0x76, 0x7c, 0x3b, 0x6c, 0x97};
    CHECK(t.bytes() == want);
}

TEST_CASE("VfToken: anything but a UUID is a clear error") {
    for (const char* bad : {"", "52ac9bff-3a88-4fbd-901a-0d767c3b6c9", "52ac9bff-3a88-4fbd-901a-0d767c3b6c977",
                            "52ac9bff+3a88-4fbd-901a-0d767c3b6c97", "g2ac9bff-3a88-4fbd-901a-0d767c3b6c97",
                            "52ac9bff3a88-4fbd-901a-0d767c3b6c97-", "52ac9bff-3a88-4fbd-901a-0d767c3b6c9 "}) {
        INFO(bad);
        CHECK_THROWS_WITH(vfio::VfToken::parse(bad), ContainsSubstring("not a UUID"));
    }
}
