// Packet: one frame in one DMA buffer, as rx_burst hands it out and tx_burst takes it.
#pragma once

#include <cstdint>

namespace bardrive::dma {
class BufferPool;
}

namespace bardrive::nic {

struct Packet {
    std::uint8_t* data = nullptr;     // CPU address of the frame's first byte (host memory or a peer window)
    std::uint64_t iova = 0;           // the same byte as the device sees it
    std::uint32_t len = 0;            // frame length in bytes, Ethernet header included, CRC excluded
    std::uint32_t buf = 0;            // index of the buffer in its pool
    dma::BufferPool* pool = nullptr;  // where the buffer goes back when done (null: the caller's own memory)
    // Offloads (igb). RX: what the device reported (pkt::RX_*), set on every received frame. TX: what the
    // device should do (pkt::TX_*; 0 sends the frame as it is). RX bits never ask for a TX offload, so a
    // received frame can be sent on unchanged.
    std::uint32_t flags = 0;
    std::uint16_t vlan = 0;   // RX with pkt::RX_VLAN: the stripped tag's TCI; TX with pkt::TX_VLAN: the TCI to insert
    std::uint8_t l2_len = 0;  // TX checksums: bytes before the IPv4 header (14; 18 with a tag in the frame)
    std::uint8_t l3_len = 0;  // TX checksums: bytes of the IPv4 header (20 without options)
};

namespace pkt {
// RX: the descriptor's own status and error bits (82576 datasheet 7.1.5.2), masked, so reporting them
// costs one AND. Checksums only with IgbOptions::rx_checksum, the tag only with IgbOptions::vlan_strip.
// A checksum is good when its _CHECKED bit is set and its _BAD bit is not.
inline constexpr std::uint32_t RX_VLAN = 1u << 3;        // VP: a VLAN tag was stripped into Packet::vlan
inline constexpr std::uint32_t RX_UDP = 1u << 4;         // UDPCS: the L4 checksum checked was UDP's
inline constexpr std::uint32_t RX_L4_CHECKED = 1u << 5;  // L4CS: TCP or UDP checksum checked
inline constexpr std::uint32_t RX_IP_CHECKED = 1u << 6;  // IPCS: IPv4 header checksum checked
inline constexpr std::uint32_t RX_L4_BAD = 1u << 29;     // L4E: ... and found wrong
inline constexpr std::uint32_t RX_IP_BAD = 1u << 30;     // IPE
inline constexpr std::uint32_t RX_MASK = RX_VLAN | RX_UDP | RX_L4_CHECKED | RX_IP_CHECKED | RX_L4_BAD | RX_IP_BAD;
// TX requests (bits the RX status never sets): the IPv4 header checksum, the TCP or the UDP checksum
// (l2_len and l3_len say where the headers are; the IPv4 checksum field must hold 0, the TCP/UDP one the
// pseudo-header's sum, as for every Intel part), a VLAN tag with Packet::vlan inserted.
inline constexpr std::uint32_t TX_IP_CSUM = 1u << 8;
inline constexpr std::uint32_t TX_TCP_CSUM = 1u << 9;
inline constexpr std::uint32_t TX_UDP_CSUM = 1u << 10;
inline constexpr std::uint32_t TX_VLAN = 1u << 11;
inline constexpr std::uint32_t TX_MASK = TX_IP_CSUM | TX_TCP_CSUM | TX_UDP_CSUM | TX_VLAN;
static_assert((RX_MASK & TX_MASK) == 0);
}  // namespace pkt

inline constexpr std::uint32_t ETH_HEADER_LEN = 14;
inline constexpr std::uint32_t ETH_MIN_FRAME = 60;  // without CRC; shorter frames are padded on the wire

}  // namespace bardrive::nic
