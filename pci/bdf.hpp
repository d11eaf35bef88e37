// Bdf: a PCI address (domain:bus:device.function), the one BDF type of the project.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bardrive::pci {

struct Bdf {
    std::uint32_t domain = 0;  // 16 bits in practice; VMD domains exceed 0xffff
    std::uint8_t bus = 0;
    std::uint8_t device = 0;    // 0..31
    std::uint8_t function = 0;  // 0..7

    // Accepts "DDDD:BB:DD.F" and "BB:DD.F" (domain 0); hex, case-insensitive.
    static std::optional<Bdf> try_parse(std::string_view text);
    // Same, but throws bardrive::Error explaining the expected form.
    static Bdf parse(std::string_view text);

    // "0000:01:00.0", the form sysfs uses.
    std::string str() const;

    auto operator<=>(const Bdf&) const = default;
};

}  // namespace bardrive::pci
