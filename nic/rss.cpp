#include "nic/rss.hpp"

namespace bardrive::nic {

std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept {
    // A 32-bit window slides over the key one bit per input bit; each set input bit XORs the window in.
    std::uint32_t result = 0;
    std::uint32_t window = static_cast<std::uint32_t>(key[0]) << 24 | key[1] << 16 | key[2] << 8 | key[3];
    for (std::size_t i = 0; i < input.size(); ++i) {
        for (int bit = 7; bit >= 0; --bit) {
            if (input[i] >> bit & 1) result ^= window;
            std::size_t next = i + 4;  // the key bit that enters the window next
            std::uint32_t in = next < key.size() ? (key[next] >> bit) & 1 : 0;
            window = window << 1 | in;
        }
    }
    return result;
}

std::uint32_t rss_hash_ipv4(std::uint32_t src, std::uint32_t dst, std::uint16_t sport, std::uint16_t dport) noexcept {
    const std::uint8_t in[12] = {static_cast<std::uint8_t>(src >> 24),  static_cast<std::uint8_t>(src >> 16),
                                 static_cast<std::uint8_t>(src >> 8),   static_cast<std::uint8_t>(src),
                                 static_cast<std::uint8_t>(dst >> 24),  static_cast<std::uint8_t>(dst >> 16),
                                 static_cast<std::uint8_t>(dst >> 8),   static_cast<std::uint8_t>(dst),
                                 static_cast<std::uint8_t>(sport >> 8), static_cast<std::uint8_t>(sport),
                                 static_cast<std::uint8_t>(dport >> 8), static_cast<std::uint8_t>(dport)};
    return toeplitz_hash(rss_key, in);
}

}  // namespace bardrive::nic
