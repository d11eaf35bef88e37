// The Intel e1000 family's registers that the 82576 (igb) and the 82574 (e1000e) keep at the same
// offsets, with the bits bardrive uses, nothing more. Section numbers refer to the 82576EB datasheet,
// chapter 8 (Programming Interface); the 82574's chapter 10 has the same. Part-specific registers:
// ../igb/regs.hpp, ../e1000e/regs.hpp.
#pragma once

#include <cstdint>

namespace bardrive::nic::e1000 {

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
inline constexpr Reg ICR = 0x00C0;  // interrupt cause read (clear on read)
inline constexpr Reg ICS = 0x00C8;  // interrupt cause set
inline constexpr Reg IMS = 0x00D0;  // interrupt mask set/read
inline constexpr Reg IMC = 0x00D8;  // interrupt mask clear

namespace icr {
inline constexpr std::uint32_t LSC = 1u << 2;  // link status change (ICR/ICS/IMS bit 2, 82574 too)
}  // namespace icr

// --- 8.10 Receive registers ------------------------------------------------------------------
inline constexpr Reg RCTL = 0x0100;                       // receive control
constexpr Reg MTA(unsigned n) { return 0x5200 + 4 * n; }  // multicast table array, 128 x 32 bits
constexpr Reg RAL(unsigned n) { return 0x5400 + 8 * n; }  // receive address low
constexpr Reg RAH(unsigned n) { return 0x5404 + 8 * n; }  // receive address high (+ AV bit)

inline constexpr unsigned MTA_REGS = 128;

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

inline constexpr std::uint32_t RAH_AV = 1u << 31;  // address valid

// --- 8.12 Transmit registers -----------------------------------------------------------------
inline constexpr Reg TCTL = 0x0400;

namespace tctl {
inline constexpr std::uint32_t EN = 1u << 1;
inline constexpr std::uint32_t PSP = 1u << 3;    // pad short packets
inline constexpr std::uint32_t CT_SHIFT = 4;     // collision threshold
inline constexpr std::uint32_t COLD_SHIFT = 12;  // collision distance
}  // namespace tctl

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
inline constexpr std::uint32_t BAR0_MIN_SIZE = 128 * 1024;

}  // namespace bardrive::nic::e1000
