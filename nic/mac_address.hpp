// MacAddress: a 48-bit Ethernet address.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bardrive::nic {

struct MacAddress {
    std::array<std::uint8_t, 6> bytes{};

    // "52:54:00:12:34:56" (also '-' separated); hex, case-insensitive.
    static std::optional<MacAddress> try_parse(std::string_view text);
    static MacAddress parse(std::string_view text);  // throws bardrive::Error showing the expected form
    std::string str() const;

    bool is_multicast() const noexcept { return bytes[0] & 1; }  // broadcast included
    bool operator==(const MacAddress&) const = default;
};

inline constexpr MacAddress BROADCAST{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

}  // namespace bardrive::nic
