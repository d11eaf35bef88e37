// Intel 82576 (igb) registers that only the 82576 has, or has at other offsets than the rest of the
// e1000 family: extended interrupts (EICR/EIMS, IVAR, EITR), RSS, per-queue rings with SRRCTL and head
// write-back. Source: Intel 82576EB GbE Controller Datasheet, chapter 8; QEMU's igb model
// (hw/net/igb_core.c) implements the same offsets. The family's shared registers (CTRL, STATUS, MDIC,
// RCTL, TCTL, RAL/RAH, MTA, ICR/IMS, statistics) are in ../e1000/regs.hpp and visible here as igb::X:
// the 82576 has them all.
#pragma once

#include <cstdint>

#include "../e1000/desc.hpp"
#include "../e1000/regs.hpp"

namespace bardrive::nic::igb {

using namespace e1000;  // the family's registers and descriptors, which the 82576 has

// --- 8.8 Interrupt registers (extended, MSI-X) ---
inline constexpr Reg GPIE = 0x1514;                                  // general purpose interrupt enable
inline constexpr Reg EICS = 0x1520;                                  // extended interrupt cause set
inline constexpr Reg EIMS = 0x1524;                                  // extended interrupt mask set/read
inline constexpr Reg EIMC = 0x1528;                                  // extended interrupt mask clear
inline constexpr Reg EIAC = 0x152C;                                  // extended interrupt auto clear
inline constexpr Reg EIAM = 0x1530;                                  // extended interrupt auto mask
inline constexpr Reg EICR = 0x1580;                                  // extended interrupt cause read
constexpr Reg EITR(unsigned vector) { return 0x1680 + 4 * vector; }  // throttling per MSI-X vector
namespace eitr {
constexpr std::uint32_t INTERVAL_SHIFT = 2;  // bits 14:2, in microseconds
constexpr std::uint32_t INTERVAL_MAX_US = 0x1fff;
}  // namespace eitr
constexpr Reg IVAR(unsigned n) { return 0x1700 + 4 * n; }  // queue -> vector allocation
inline constexpr Reg IVAR_MISC = 0x1740;                   // "other causes" -> vector
inline constexpr unsigned IVAR_MISC_OTHER_SHIFT = 8;       // IVAR_MISC bits 15:8: the vector of other causes (LSC ...)
namespace gpie {
inline constexpr std::uint32_t NSICR = 1u << 0;      // clear ICR on read regardless of IMS
inline constexpr std::uint32_t MSIX_MODE = 1u << 4;  // one EICR bit per MSI-X vector
inline constexpr std::uint32_t EIAME = 1u << 30;     // auto mask on MSI-X
inline constexpr std::uint32_t PBA = 1u << 31;       // PBA support
}  // namespace gpie
inline constexpr std::uint32_t IVAR_VALID = 0x80;  // in each IVAR byte, with the vector in bits 4:0
inline constexpr unsigned MSIX_VECTORS = 10;       // 82576 PF: 10 MSI-X vectors
// IVAR layout (8.8): IVAR[q % 8] holds RX q in byte 0 (q < 8) or byte 2 (q >= 8), TX in the next byte.
constexpr unsigned ivar_index(unsigned queue) { return queue % 8; }
constexpr unsigned ivar_rx_shift(unsigned queue) { return queue < 8 ? 0 : 16; }
constexpr unsigned ivar_tx_shift(unsigned queue) { return queue < 8 ? 8 : 24; }

// --- 8.10 Receive registers ---
inline constexpr Reg RXCSUM = 0x5000;                       // receive checksum control
inline constexpr Reg RLPML = 0x5004;                        // long packet maximum length
inline constexpr Reg MRQC = 0x5818;                         // multiple receive queues command
constexpr Reg RETA(unsigned n) { return 0x5C00 + 4 * n; }   // RSS redirection table, 32 x 4 entries
constexpr Reg RSSRK(unsigned n) { return 0x5C80 + 4 * n; }  // RSS random key, 10 x 32 bits
constexpr Reg RDBAL(unsigned q) { return 0xC000 + 0x40 * q; }
constexpr Reg RDBAH(unsigned q) { return 0xC004 + 0x40 * q; }
constexpr Reg RDLEN(unsigned q) { return 0xC008 + 0x40 * q; }
constexpr Reg SRRCTL(unsigned q) { return 0xC00C + 0x40 * q; }
constexpr Reg RDH(unsigned q) { return 0xC010 + 0x40 * q; }
constexpr Reg RDT(unsigned q) { return 0xC018 + 0x40 * q; }
constexpr Reg RXDCTL(unsigned q) { return 0xC028 + 0x40 * q; }
constexpr Reg RQDPC(unsigned q) { return 0xC030 + 0x40 * q; }  // per-queue drop count (clear on read)
inline constexpr unsigned MAX_QUEUES = 8;                      // the PF's usable queues without VMDq
inline constexpr unsigned RETA_ENTRIES = 128;
inline constexpr unsigned RSSRK_REGS = 10;
namespace srrctl {
inline constexpr std::uint32_t BSIZEPKT_SHIFT = 10;  // the field counts 1 KiB units, bits 6:0
inline constexpr std::uint32_t BSIZEPKT_MASK = 0x7f;
inline constexpr std::uint32_t BSIZEHEADER_SHIFT = 8;  // header buffer size in 64-byte units, bits 11:8
inline constexpr std::uint32_t BSIZEHEADER_MASK = 0xf;
inline constexpr std::uint32_t DESCTYPE_ADV_ONEBUF = 1u << 25;
inline constexpr std::uint32_t DESCTYPE_HDR_SPLIT_ALWAYS = 5u << 25;  // header split, always use the header buffer
inline constexpr std::uint32_t DROP_EN = 1u << 31;                    // drop when no descriptors instead of stalling
}  // namespace srrctl
namespace rxdctl {  // same layout for TXDCTL
inline constexpr std::uint32_t PTHRESH_SHIFT = 0;
inline constexpr std::uint32_t HTHRESH_SHIFT = 8;
inline constexpr std::uint32_t WTHRESH_SHIFT = 16;
inline constexpr std::uint32_t ENABLE = 1u << 25;
}  // namespace rxdctl
namespace rxcsum {
inline constexpr std::uint32_t IPOFLD = 1u << 8;
inline constexpr std::uint32_t TUOFLD = 1u << 9;
inline constexpr std::uint32_t PCSD = 1u << 13;  // descriptor carries the RSS hash instead of the checksum
}  // namespace rxcsum
namespace mrqc {
inline constexpr std::uint32_t RSS = 0x2;  // MRQE = 010b: RSS only
inline constexpr std::uint32_t RSS_TCP_IPV4 = 1u << 16;
inline constexpr std::uint32_t RSS_IPV4 = 1u << 17;
inline constexpr std::uint32_t RSS_IPV6 = 1u << 20;
inline constexpr std::uint32_t RSS_TCP_IPV6 = 1u << 21;
inline constexpr std::uint32_t RSS_UDP_IPV4 = 1u << 22;
}  // namespace mrqc

// --- 8.12 Transmit registers (per queue; head write-back) ---
constexpr Reg TDBAL(unsigned q) { return 0xE000 + 0x40 * q; }
constexpr Reg TDBAH(unsigned q) { return 0xE004 + 0x40 * q; }
constexpr Reg TDLEN(unsigned q) { return 0xE008 + 0x40 * q; }
constexpr Reg TDH(unsigned q) { return 0xE010 + 0x40 * q; }
constexpr Reg TDT(unsigned q) { return 0xE018 + 0x40 * q; }
constexpr Reg TXDCTL(unsigned q) { return 0xE028 + 0x40 * q; }
constexpr Reg TDWBAL(unsigned q) { return 0xE038 + 0x40 * q; }  // head write-back address low (+ enable bit)
constexpr Reg TDWBAH(unsigned q) { return 0xE03C + 0x40 * q; }
inline constexpr std::uint32_t TDWBAL_HEAD_WB_EN = 1u << 0;
inline constexpr std::uint16_t DEVICE_82576 = 0x10C9;

}  // namespace bardrive::nic::igb
