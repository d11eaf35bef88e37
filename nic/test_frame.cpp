#include "nic/test_frame.hpp"

#include <cstring>
#include <utility>

namespace bardrive::nic {

namespace {
constexpr std::uint32_t kSeqOffset = 14;
constexpr std::uint32_t kPayloadOffset = kSeqOffset + 8;
std::uint8_t pattern(std::uint64_t seq, std::uint32_t i) { return static_cast<std::uint8_t>(seq * 131 + i); }
}  // namespace

void write_test_frame(std::uint8_t* dst, std::uint32_t len, const MacAddress& to, const MacAddress& from,
                      std::uint64_t seq) noexcept {
    std::memcpy(dst, to.bytes.data(), 6);
    std::memcpy(dst + 6, from.bytes.data(), 6);
    dst[12] = TEST_ETHERTYPE >> 8;
    dst[13] = TEST_ETHERTYPE & 0xff;
    for (int b = 0; b < 8; ++b) dst[kSeqOffset + b] = static_cast<std::uint8_t>(seq >> (8 * b));
    for (std::uint32_t i = kPayloadOffset; i < len; ++i) dst[i] = pattern(seq, i);
}

std::optional<std::uint64_t> check_test_frame(const std::uint8_t* f, std::uint32_t len) noexcept {
    if (len < TEST_FRAME_MIN || f[12] != TEST_ETHERTYPE >> 8 || f[13] != (TEST_ETHERTYPE & 0xff)) return std::nullopt;
    std::uint64_t seq = 0;
    for (int b = 0; b < 8; ++b) seq |= std::uint64_t{f[kSeqOffset + b]} << (8 * b);
    for (std::uint32_t i = kPayloadOffset; i < len; ++i) {
        if (f[i] != pattern(seq, i)) return std::nullopt;
    }
    return seq;
}

TestFrameArrivals::TestFrameArrivals(std::uint64_t count, std::function<std::uint32_t(std::uint64_t)> length_of)
    : seen_(count, false), length_of_(std::move(length_of)) {}

std::optional<std::uint64_t> TestFrameArrivals::frame(const std::uint8_t* data, std::uint32_t len) {
    const std::uint64_t index = arrived();
    auto seq = check_test_frame(data, len);
    if (!seq || *seq >= seen_.size() || seen_[*seq] || len != length_of_(*seq)) {
        ++wrong_;
        return std::nullopt;
    }
    seen_[*seq] = true;
    out_of_order_ += *seq != index;
    ++good_;
    return seq;
}

}  // namespace bardrive::nic
