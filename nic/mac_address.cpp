#include "nic/mac_address.hpp"

#include <cstdio>

#include "core/error.hpp"

namespace bardrive::nic {

namespace {
int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
}  // namespace

std::optional<MacAddress> MacAddress::try_parse(std::string_view t) {
    if (t.size() != 17) return std::nullopt;
    MacAddress m;
    for (int i = 0; i < 6; ++i) {
        int hi = hex(t[i * 3]), lo = hex(t[i * 3 + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        if (i < 5 && t[i * 3 + 2] != ':' && t[i * 3 + 2] != '-') return std::nullopt;
        m.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return m;
}

MacAddress MacAddress::parse(std::string_view t) {
    if (auto m = try_parse(t)) return *m;
    throw Error("parse MAC address", std::string(t), "not six hex bytes", "write it like 52:54:00:12:34:56");
}

std::string MacAddress::str() const {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3], bytes[4],
                  bytes[5]);
    return buf;
}

}  // namespace bardrive::nic
