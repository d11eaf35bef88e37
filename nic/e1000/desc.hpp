// The e1000 family's 16-byte descriptors (the 82576's advanced ones; the 82574's extended ones share
// their layout) as the device reads and writes them (little endian, 16 bytes each).
// Intel 82576EB GbE Controller Datasheet: 7.1.5 (advanced receive descriptors), 7.2.2.3 (advanced
// transmit data descriptor). The static_asserts check the layout against those tables.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bardrive::nic::e1000 {

// Receive, 7.1.5: software hands the device a buffer in the read format; the device overwrites the same
// 16 bytes with the write-back format once the buffer holds a frame (DD set).
union AdvRxDesc {
    struct Read {
        std::uint64_t pkt_addr;  // IOVA of the packet buffer
        std::uint64_t hdr_addr;  // header buffer (header split only); bit 0 overlaps DD
    } read;
    struct Writeback {
        std::uint16_t pkt_info;      // RSS type, packet type
        std::uint16_t hdr_info;      // split header length
        std::uint32_t rss;           // RSS hash or IP id + checksum
        std::uint32_t status_error;  // extended status (bits 19:0) and errors (bits 31:20)
        std::uint16_t length;        // bytes written to the buffer
        std::uint16_t vlan;
    } wb;
};
static_assert(sizeof(AdvRxDesc) == 16, "7.1.5: advanced receive descriptors are 16 bytes");
static_assert(offsetof(AdvRxDesc::Read, hdr_addr) == 8);
static_assert(offsetof(AdvRxDesc::Writeback, rss) == 4);
static_assert(offsetof(AdvRxDesc::Writeback, status_error) == 8, "7.1.5: status/error in the third dword");
static_assert(offsetof(AdvRxDesc::Writeback, length) == 12, "7.1.5: PKT_LEN at bytes 12-13");
static_assert(offsetof(AdvRxDesc::Writeback, vlan) == 14);

namespace rxd {
inline constexpr std::uint32_t DD = 1u << 0;             // descriptor done
inline constexpr std::uint32_t EOP = 1u << 1;            // end of packet
inline constexpr std::uint32_t VP = 1u << 3;             // VLAN tag stripped into .vlan
inline constexpr std::uint32_t UDPCS = 1u << 4;          // the L4 checksum checked was UDP's
inline constexpr std::uint32_t L4CS = 1u << 5;           // TCP/UDP checksum checked (RXCSUM.TUOFLD)
inline constexpr std::uint32_t IPCS = 1u << 6;           // IPv4 header checksum checked (RXCSUM.IPOFLD)
inline constexpr std::uint32_t ERR_L4E = 1u << 29;       // TCP/UDP checksum error
inline constexpr std::uint32_t ERR_IPE = 1u << 30;       // IPv4 checksum error
inline constexpr std::uint32_t ERR_RXE = 1u << 31;       // frame error (CRC, symbol, ...): the frame is bad
inline constexpr std::uint32_t ERR_MASK = 0xfffu << 20;  // every error bit (31:20), header buffer overflow included
// hdr_info (header split): HDR_LEN in bits 14:5, SPH (the header was split off) in bit 15.
inline constexpr std::uint16_t HDR_LEN_SHIFT = 5;
inline constexpr std::uint16_t HDR_LEN_MASK = 0x3ff;
inline constexpr std::uint16_t HDR_SPH = 1u << 15;
}  // namespace rxd

// Transmit data descriptor, 7.2.2.3. The write-back only sets DD in .status; bardrive uses head
// write-back instead (TDWBAL), so it never reads descriptors back.
union AdvTxDesc {
    struct Read {
        std::uint64_t buffer_addr;    // IOVA of the data
        std::uint32_t cmd_type_len;   // DTALEN 15:0, DTYP 23:20, DCMD 31:24
        std::uint32_t olinfo_status;  // PAYLEN 31:14, options, STA 3:0
    } read;
    struct Writeback {
        std::uint64_t reserved;
        std::uint32_t nxtseq_seed;
        std::uint32_t status;
    } wb;
};
static_assert(sizeof(AdvTxDesc) == 16, "7.2.2.3: advanced transmit descriptors are 16 bytes");
static_assert(offsetof(AdvTxDesc::Read, cmd_type_len) == 8);
static_assert(offsetof(AdvTxDesc::Read, olinfo_status) == 12);
static_assert(offsetof(AdvTxDesc::Writeback, status) == 12);

// Transmit context descriptor, 7.2.2.2: the header lengths and VLAN tag the data descriptors after it
// use for checksum offload and VLAN insertion (IDX 0 only: one context, written before each such frame).
struct AdvTxContextDesc {
    std::uint32_t vlan_macip_lens;  // IPLEN 8:0, MACLEN 15:9, VLAN 31:16
    std::uint32_t seqnum_seed;
    std::uint32_t type_tucmd_mlhl;  // TUCMD 19:9 (IPV4 bit 10, L4T 12:11), DTYP 23:20 = 0010, DEXT bit 29
    std::uint32_t mss_l4len_idx;    // IDX 6:4, L4LEN 15:8, MSS 31:16
};
static_assert(sizeof(AdvTxContextDesc) == sizeof(AdvTxDesc), "7.2.2.2: context descriptors fill a data slot");

namespace txd {
inline constexpr std::uint32_t DTALEN_MASK = 0xffff;
inline constexpr std::uint32_t DTYP_DATA = 0x3u << 20;         // advanced data descriptor
inline constexpr std::uint32_t DTYP_E1000E_DATA = 0x1u << 20;  // 82574 extended data descriptor (its 7.2.3)
inline constexpr std::uint32_t CMD_EOP = 1u << 24;             // last descriptor of the frame
inline constexpr std::uint32_t CMD_IFCS = 1u << 25;            // append the Ethernet CRC
inline constexpr std::uint32_t CMD_RS = 1u << 27;              // report status (head write-back)
inline constexpr std::uint32_t CMD_DEXT = 1u << 29;            // advanced format
inline constexpr std::uint32_t CMD_VLE = 1u << 30;             // insert the context's VLAN tag
inline constexpr std::uint32_t PAYLEN_SHIFT = 14;
inline constexpr std::uint32_t POPTS_IXSM = 1u << 8;  // olinfo: insert the IPv4 header checksum
inline constexpr std::uint32_t POPTS_TXSM = 1u << 9;  // olinfo: insert the TCP/UDP checksum
inline constexpr std::uint32_t DTYP_CONTEXT = 0x2u << 20;
inline constexpr std::uint32_t TUCMD_IPV4 = 1u << 10;
inline constexpr std::uint32_t TUCMD_L4T_TCP = 1u << 11;  // 00: UDP
inline constexpr std::uint32_t MACLEN_SHIFT = 9;
inline constexpr std::uint32_t VLAN_SHIFT = 16;
inline constexpr std::uint32_t STA_DD = 1u << 0;
}  // namespace txd

// Ring lengths: RDLEN/TDLEN must be multiples of 128 bytes (8 descriptors); head and tail are 16 bits.
inline constexpr std::uint32_t RING_ALIGN_DESCS = 8;
inline constexpr std::uint32_t RING_MAX_DESCS = 32768;
inline constexpr std::size_t RING_BASE_ALIGN = 128;  // RDBAL/TDBAL: 128-byte aligned (the model masks 5 bits)

}  // namespace bardrive::nic::e1000
