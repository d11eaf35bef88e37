#include "pci/bdf.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::pci {

namespace {
// Parses exactly `digits` max hex digits (at least one); advances text.
std::optional<std::uint32_t> take_hex(std::string_view& text, std::size_t max_digits) {
    std::uint32_t v = 0;
    std::size_t n = 0;
    while (n < text.size() && n < max_digits) {
        char c = text[n];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        v = v * 16 + static_cast<std::uint32_t>(d);
        ++n;
    }
    if (n == 0) return std::nullopt;
    text.remove_prefix(n);
    return v;
}

bool take_char(std::string_view& text, char c) {
    if (text.empty() || text.front() != c) return false;
    text.remove_prefix(1);
    return true;
}
}  // namespace

std::optional<Bdf> Bdf::try_parse(std::string_view text) {
    Bdf b;
    // Count colons to tell "DDDD:BB:DD.F" from "BB:DD.F".
    std::size_t colons = 0;
    for (char c : text) colons += (c == ':');
    if (colons == 2) {
        auto dom = take_hex(text, 8);
        if (!dom || !take_char(text, ':')) return std::nullopt;
        b.domain = *dom;
    } else if (colons != 1) {
        return std::nullopt;
    }
    auto bus = take_hex(text, 2);
    if (!bus || !take_char(text, ':')) return std::nullopt;
    auto dev = take_hex(text, 2);
    if (!dev || *dev > 31 || !take_char(text, '.')) return std::nullopt;
    auto fn = take_hex(text, 1);
    if (!fn || *fn > 7 || !text.empty()) return std::nullopt;
    b.bus = static_cast<std::uint8_t>(*bus);
    b.device = static_cast<std::uint8_t>(*dev);
    b.function = static_cast<std::uint8_t>(*fn);
    return b;
}

Bdf Bdf::parse(std::string_view text) {
    if (auto b = try_parse(text)) return *b;
    // Well-formed but for one number out of range: say which ("0000:00:1f.8" is a function past 7).
    std::string why = "not a PCI address";
    const auto dot = text.rfind('.'), colon = text.rfind(':');
    if (dot != std::string_view::npos && dot + 2 == text.size()) {
        std::string f(text);
        f[dot + 1] = '0';
        if (try_parse(f)) why = "function " + std::string(1, text[dot + 1]) + " is past 7";
    }
    if (colon != std::string_view::npos && dot == colon + 3) {
        std::string d(text);
        d.replace(colon + 1, 2, "00");
        if (try_parse(d)) why = "device " + std::string(text.substr(colon + 1, 2)) + " is past 1f";
    }
    throw Error("parse PCI address", "'" + log::bounded(text) + "'", why,
                "expected DDDD:BB:DD.F or BB:DD.F in hex, e.g. 0000:01:00.0; 'lspci -D' lists them");
}

std::string Bdf::str() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
    return buf;
}

}  // namespace bardrive::pci
