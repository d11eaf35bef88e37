// Intel 82576 (igb) register map: the offsets and bits bardrive's igb driver uses, nothing more.
// Source: Intel 82576EB GbE Controller Datasheet, chapter 8 (Programming Interface); section numbers
// below refer to it. QEMU's igb model (hw/net/igb_core.c) implements the same offsets.
#pragma once

#include <cstdint>

namespace bardrive::nic::igb {

using Reg = std::uint32_t;  // byte offset into BAR 0 (memory-mapped CSR space, 128 KiB)

// --- 8.2 General registers -------------------------------------------------------------------
inline constexpr Reg CTRL = 0x0000;      // 8.2.1 Device Control
inline constexpr Reg STATUS = 0x0008;    // 8.2.2 Device Status (read only)
inline constexpr Reg CTRL_EXT = 0x0018;  // 8.2.3 Extended Device Control
inline constexpr Reg MDIC = 0x0020;      // 8.2.4 MDI Control (PHY register access)

namespace ctrl {
inline constexpr std::uint32_t FD = 1u << 0;  // full duplex
inline constexpr std::uint32_t GIO_MASTER_DISABLE = 1u << 2;
inline constexpr std::uint32_t SLU = 1u << 6;   // set link up
inline constexpr std::uint32_t RST = 1u << 26;  // device reset, self-clearing
inline constexpr std::uint32_t VME = 1u << 30;  // VLAN mode
}  // namespace ctrl

namespace status {
inline constexpr std::uint32_t FD = 1u << 0;
inline constexpr std::uint32_t LU = 1u << 1;  // link up
inline constexpr std::uint32_t SPEED_SHIFT = 6;
inline constexpr std::uint32_t SPEED_MASK = 3u << SPEED_SHIFT;  // 00: 10, 01: 100, 1x: 1000 Mb/s
inline constexpr std::uint32_t GIO_MASTER_ENABLE = 1u << 19;
}  // namespace status

namespace ctrl_ext {
inline constexpr std::uint32_t DRV_LOAD = 1u << 28;  // driver owns the device (firmware hand-off)
}  // namespace ctrl_ext

namespace mdic {
inline constexpr std::uint32_t DATA_MASK = 0xffff;
inline constexpr std::uint32_t REG_SHIFT = 16;  // PHY register, 5 bits
inline constexpr std::uint32_t PHY_SHIFT = 21;  // PHY address, 5 bits; the internal PHY is 1
inline constexpr std::uint32_t OP_WRITE = 1u << 26;
inline constexpr std::uint32_t OP_READ = 2u << 26;
inline constexpr std::uint32_t READY = 1u << 28;
inline constexpr std::uint32_t ERROR = 1u << 30;
inline constexpr std::uint32_t INTERNAL_PHY = 1;
}  // namespace mdic

// IEEE 802.3 clause 22 PHY registers reached through MDIC.
namespace phy {
inline constexpr std::uint32_t BMCR = 0;  // basic mode control
inline constexpr std::uint32_t BMSR = 1;  // basic mode status
inline constexpr std::uint16_t BMCR_SPEED1000 = 1u << 6;
inline constexpr std::uint16_t BMCR_FULL_DUPLEX = 1u << 8;
inline constexpr std::uint16_t BMCR_ANRESTART = 1u << 9;
inline constexpr std::uint16_t BMCR_AUTONEG = 1u << 12;
inline constexpr std::uint16_t BMCR_LOOPBACK = 1u << 14;
}  // namespace phy

// --- 8.8 Interrupt registers -----------------------------------------------------------------
inline constexpr Reg ICR = 0x00C0;                                   // interrupt cause read (clear on read)
inline constexpr Reg ICS = 0x00C8;                                   // interrupt cause set
inline constexpr Reg IMS = 0x00D0;                                   // interrupt mask set/read
inline constexpr Reg IMC = 0x00D8;                                   // interrupt mask clear
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

namespace icr {
inline constexpr std::uint32_t LSC = 1u << 2;  // link status change (ICR/ICS/IMS bit 2, 82574 too)
}  // namespace icr

namespace gpie {
inline constexpr std::uint32_t NSICR = 1u << 0;      // clear ICR on read regardless of IMS
inline constexpr std::uint32_t MSIX_MODE = 1u << 4;  // one EICR bit per MSI-X vector
inline constexpr std::uint32_t EIAME = 1u << 30;     // auto mask on MSI-X
inline constexpr std::uint32_t PBA = 1u << 31;       // PBA support
}  // namespace gpie

inline constexpr std::uint32_t IVAR_VALID = 0x80;  // in each IVAR byte, with the vector in bits 4:0
inline constexpr unsigned MSIX_VECTORS = 10;       // 82576 PF: 10 MSI-X vectors

// 82576 IVAR layout (8.8): IVAR[q % 8] holds RX q in byte 0 (q < 8) or byte 2 (q >= 8), TX in the next byte.
constexpr unsigned ivar_index(unsigned queue) { return queue % 8; }
constexpr unsigned ivar_rx_shift(unsigned queue) { return queue < 8 ? 0 : 16; }
constexpr unsigned ivar_tx_shift(unsigned queue) { return queue < 8 ? 8 : 24; }

// --- 8.10 Receive registers ------------------------------------------------------------------
inline constexpr Reg RCTL = 0x0100;                         // receive control
inline constexpr Reg RXCSUM = 0x5000;                       // receive checksum control
inline constexpr Reg RLPML = 0x5004;                        // long packet maximum length
inline constexpr Reg MRQC = 0x5818;                         // multiple receive queues command
constexpr Reg MTA(unsigned n) { return 0x5200 + 4 * n; }    // multicast table array, 128 x 32 bits
constexpr Reg RAL(unsigned n) { return 0x5400 + 8 * n; }    // receive address low
constexpr Reg RAH(unsigned n) { return 0x5404 + 8 * n; }    // receive address high (+ AV bit)
constexpr Reg RETA(unsigned n) { return 0x5C00 + 4 * n; }   // RSS redirection table, 32 x 4 entries
constexpr Reg RSSRK(unsigned n) { return 0x5C80 + 4 * n; }  // RSS random key, 10 x 32 bits

// Per-queue receive registers at 0xC000 + 0x40 * queue (queues 0..15).
constexpr Reg RDBAL(unsigned q) { return 0xC000 + 0x40 * q; }
constexpr Reg RDBAH(unsigned q) { return 0xC004 + 0x40 * q; }
constexpr Reg RDLEN(unsigned q) { return 0xC008 + 0x40 * q; }
constexpr Reg SRRCTL(unsigned q) { return 0xC00C + 0x40 * q; }
constexpr Reg RDH(unsigned q) { return 0xC010 + 0x40 * q; }
constexpr Reg RDT(unsigned q) { return 0xC018 + 0x40 * q; }
constexpr Reg RXDCTL(unsigned q) { return 0xC028 + 0x40 * q; }
constexpr Reg RQDPC(unsigned q) { return 0xC030 + 0x40 * q; }  // per-queue drop count (clear on read)

inline constexpr unsigned MAX_QUEUES = 8;  // the PF's usable queues without VMDq
inline constexpr unsigned MTA_REGS = 128;
inline constexpr unsigned RETA_ENTRIES = 128;
inline constexpr unsigned RSSRK_REGS = 10;

namespace rctl {
inline constexpr std::uint32_t EN = 1u << 1;
inline constexpr std::uint32_t SBP = 1u << 2;      // store bad packets
inline constexpr std::uint32_t UPE = 1u << 3;      // unicast promiscuous
inline constexpr std::uint32_t MPE = 1u << 4;      // multicast promiscuous
inline constexpr std::uint32_t LPE = 1u << 5;      // long packets
inline constexpr std::uint32_t LBM_MAC = 1u << 6;  // loopback mode 01: MAC loopback
inline constexpr std::uint32_t LBM_MASK = 3u << 6;
inline constexpr std::uint32_t MO_SHIFT = 12;     // multicast offset; 0 = bits 47:36
inline constexpr std::uint32_t BAM = 1u << 15;    // accept broadcast
inline constexpr std::uint32_t SECRC = 1u << 26;  // strip Ethernet CRC
}  // namespace rctl

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

inline constexpr std::uint32_t RAH_AV = 1u << 31;  // address valid

// --- 8.12 Transmit registers -----------------------------------------------------------------
inline constexpr Reg TCTL = 0x0400;
constexpr Reg TDBAL(unsigned q) { return 0xE000 + 0x40 * q; }
constexpr Reg TDBAH(unsigned q) { return 0xE004 + 0x40 * q; }
constexpr Reg TDLEN(unsigned q) { return 0xE008 + 0x40 * q; }
constexpr Reg TDH(unsigned q) { return 0xE010 + 0x40 * q; }
constexpr Reg TDT(unsigned q) { return 0xE018 + 0x40 * q; }
constexpr Reg TXDCTL(unsigned q) { return 0xE028 + 0x40 * q; }
constexpr Reg TDWBAL(unsigned q) { return 0xE038 + 0x40 * q; }  // head write-back address low (+ enable bit)
constexpr Reg TDWBAH(unsigned q) { return 0xE03C + 0x40 * q; }

namespace tctl {
inline constexpr std::uint32_t EN = 1u << 1;
inline constexpr std::uint32_t PSP = 1u << 3;    // pad short packets
inline constexpr std::uint32_t CT_SHIFT = 4;     // collision threshold
inline constexpr std::uint32_t COLD_SHIFT = 12;  // collision distance
}  // namespace tctl

inline constexpr std::uint32_t TDWBAL_HEAD_WB_EN = 1u << 0;

// --- 8.19 Statistics (all clear on read) ---------------------------------------------------
inline constexpr Reg CRCERRS = 0x4000;
inline constexpr Reg MPC = 0x4010;    // missed packets (no room in the packet buffer)
inline constexpr Reg GPRC = 0x4074;   // good packets received
inline constexpr Reg BPRC = 0x4078;   // broadcast packets received
inline constexpr Reg MPRC = 0x407C;   // multicast packets received
inline constexpr Reg GPTC = 0x4080;   // good packets transmitted
inline constexpr Reg GORCL = 0x4088;  // good octets received (low, then high at +4)
inline constexpr Reg GOTCL = 0x4090;  // good octets transmitted
inline constexpr Reg RNBC = 0x40A0;   // receive no buffers
inline constexpr Reg RUC = 0x40A4;    // receive undersize
inline constexpr Reg ROC = 0x40AC;    // receive oversize
inline constexpr Reg TPR = 0x40D0;    // total packets received
inline constexpr Reg TPT = 0x40D4;    // total packets transmitted

// 8.1 / PCI IDs of the parts this driver handles.
inline constexpr std::uint16_t VENDOR_INTEL = 0x8086;
inline constexpr std::uint16_t DEVICE_82576 = 0x10C9;
inline constexpr std::uint32_t BAR0_MIN_SIZE = 128 * 1024;

}  // namespace bardrive::nic::igb
