// Receive-side scaling as nic::Igb programs it: the Toeplitz hash (Microsoft's RSS specification) over
// an IPv4/UDP 4-tuple, the key, and the redirection table's rule. One place, so that software can say
// in advance which RX queue a flow lands in (the loopback DMA queue picks its UDP ports this way).
#pragma once

#include <cstdint>
#include <span>

namespace bardrive::nic {

// The RSS key only has to spread flows; this is the widely published Toeplitz verification key.
inline constexpr std::uint8_t rss_key[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
                                             0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
                                             0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
                                             0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// Toeplitz hash of `input` (network byte order) under `key` (at least input.size() + 4 bytes).
std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept;

// Hash of an IPv4/UDP (or TCP) flow: source address, destination address, source port, destination
// port, as the 82576 feeds them to Toeplitz (addresses and ports given in host byte order).
std::uint32_t rss_hash_ipv4(std::uint32_t src, std::uint32_t dst, std::uint16_t sport, std::uint16_t dport) noexcept;

// Redirection table: 128 entries indexed by the hash's low 7 bits; Igb fills entry i with i % queues.
inline constexpr unsigned rss_reta_entries = 128;
inline constexpr unsigned rss_queue(std::uint32_t hash, unsigned queues) noexcept {
    return (hash % rss_reta_entries) % queues;
}

}  // namespace bardrive::nic
