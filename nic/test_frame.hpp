// Test frames: deterministic Ethernet frames carrying a sequence number, so a receiver (an example, a
// lab test, the host reading a window's backing file) can tell each frame's exact bytes from its number.
// Layout: destination MAC, source MAC, EtherType 0x88B5 (IEEE local experimental), 64-bit sequence
// number (little endian) at byte 14, then byte i = (seq * 131 + i) & 0xff up to the frame's length.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "mac_address.hpp"

namespace bardrive::nic {

inline constexpr std::uint16_t TEST_ETHERTYPE = 0x88B5;
inline constexpr std::uint32_t TEST_FRAME_MIN = 60;  // shortest frame on the wire without CRC

// Writes a test frame of `len` bytes (TEST_FRAME_MIN..) to `dst`.
void write_test_frame(std::uint8_t* dst, std::uint32_t len, const MacAddress& to, const MacAddress& from,
                      std::uint64_t seq) noexcept;

// The sequence number when `frame` is an intact test frame of `len` bytes; nullopt otherwise.
std::optional<std::uint64_t> check_test_frame(const std::uint8_t* frame, std::uint32_t len) noexcept;

// Test frames 0..count-1 arriving in any order (a wire may reorder): each must come once, intact and of the
// length `length_of` gives its sequence number. Duplicates, strangers and damaged frames count as wrong; the
// order is counted, not required.
class TestFrameArrivals {
public:
    TestFrameArrivals(std::uint64_t count, std::function<std::uint32_t(std::uint64_t)> length_of);
    // The frame's sequence number when it is a new, intact one of its length; nullopt (counted wrong) otherwise.
    std::optional<std::uint64_t> frame(const std::uint8_t* data, std::uint32_t len);
    std::uint64_t good() const noexcept { return good_; }
    std::uint64_t wrong() const noexcept { return wrong_; }
    std::uint64_t out_of_order() const noexcept { return out_of_order_; }  // good ones not at their arrival index
    std::uint64_t arrived() const noexcept { return good_ + wrong_; }

private:
    std::vector<bool> seen_;
    std::function<std::uint32_t(std::uint64_t)> length_of_;
    std::uint64_t good_ = 0, wrong_ = 0, out_of_order_ = 0;
};

}  // namespace bardrive::nic
