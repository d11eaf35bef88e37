// Test frames: deterministic Ethernet frames carrying a sequence number, so a receiver (an example, a
// lab test, the host reading a window's backing file) can tell each frame's exact bytes from its number.
// Layout: destination MAC, source MAC, EtherType 0x88B5 (IEEE local experimental), 64-bit sequence
// number (little endian) at byte 14, then byte i = (seq * 131 + i) & 0xff up to the frame's length.
#pragma once

#include <cstdint>
#include <optional>

#include "mac_address.hpp"

namespace bardrive::nic {

inline constexpr std::uint16_t TEST_ETHERTYPE = 0x88B5;
inline constexpr std::uint32_t TEST_FRAME_MIN = 60;  // shortest frame on the wire without CRC

// Writes a test frame of `len` bytes (TEST_FRAME_MIN..) to `dst`.
void write_test_frame(std::uint8_t* dst, std::uint32_t len, const MacAddress& to, const MacAddress& from,
                      std::uint64_t seq) noexcept;

// The sequence number when `frame` is an intact test frame of `len` bytes; nullopt otherwise.
std::optional<std::uint64_t> check_test_frame(const std::uint8_t* frame, std::uint32_t len) noexcept;

}  // namespace bardrive::nic
