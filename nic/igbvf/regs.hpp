// Intel 82576 virtual function (igbvf) registers and the VF <-> PF mailbox. Source: Intel 82576EB GbE
// Controller Datasheet, 8.24 (VF registers) and 7.8.2.9 (PF/VF mailbox); QEMU's igb model implements the
// VF (8086:10ca) with the same offsets. The VF sees the family's CTRL and STATUS, its own interrupt
// registers at the PF's offsets, queue 0's registers at the 82574-style aliases 0x2800/0x3800, and
// read-only running statistics.
#pragma once

#include <cstdint>

#include "../e1000/desc.hpp"
#include "../e1000/regs.hpp"

namespace bardrive::nic::igbvf {

using namespace e1000;  // CTRL (RST resets the VF's queues and interrupts), STATUS (the PF's link)

inline constexpr std::uint16_t DEVICE_82576_VF = 0x10CA;
inline constexpr std::uint16_t DEVICE_82576_VF_HV = 0x152D;
inline constexpr std::uint32_t BAR0_MIN_SIZE = 16 * 1024;

// Interrupts (MSI-X only: 3 vectors).
inline constexpr Reg EICR = 0x1580, EICS = 0x1520, EIMS = 0x1524, EIMC = 0x1528, EIAC = 0x152C, EIAM = 0x1530;
constexpr Reg EITR(unsigned vector) { return 0x1680 + 4 * vector; }
inline constexpr Reg IVAR0 = 0x1700;      // RX queue 0 -> byte 0, TX queue 0 -> byte 1 (queue 1: bytes 2, 3)
inline constexpr Reg IVAR_MISC = 0x1740;  // the mailbox and link ("other") cause -> byte 0
inline constexpr std::uint32_t IVAR_VALID = 0x80;
inline constexpr unsigned MSIX_VECTORS = 3;

// Queue 0 (the VF's queues 0 and 1 sit 0x100 apart).
inline constexpr Reg RDBAL = 0x2800, RDBAH = 0x2804, RDLEN = 0x2808, SRRCTL = 0x280C, RDH = 0x2810, RDT = 0x2818,
                     RXDCTL = 0x2828;
inline constexpr Reg TDBAL = 0x3800, TDBAH = 0x3804, TDLEN = 0x3808, TDH = 0x3810, TDT = 0x3818, TXDCTL = 0x3828;
namespace srrctl {
inline constexpr std::uint32_t BSIZEPKT_MASK = 0x7f;  // 1 KiB units
inline constexpr std::uint32_t DESCTYPE_ADV_ONEBUF = 1u << 25;
inline constexpr std::uint32_t DROP_EN = 1u << 31;
}  // namespace srrctl
inline constexpr std::uint32_t QUEUE_ENABLE = 1u << 25;  // RXDCTL / TXDCTL

// Running statistics of this VF (32 bits, not cleared on read: the driver accumulates the deltas).
inline constexpr Reg VFGPRC = 0x0F10, VFGPTC = 0x0F14, VFGORC = 0x0F18, VFGOTC = 0x0F34, VFMPRC = 0x0F3C;

// The mailbox: 16 words of message memory and its control register.
inline constexpr Reg V2PMAILBOX = 0x0C40;
inline constexpr Reg VMBMEM = 0x0800;
inline constexpr unsigned MAILBOX_WORDS = 16;
namespace mbx {
inline constexpr std::uint32_t REQ = 1u << 0;    // VF -> PF: a message is in the buffer
inline constexpr std::uint32_t ACK = 1u << 1;    // VF -> PF: the PF's message was read
inline constexpr std::uint32_t VFU = 1u << 2;    // the VF owns the buffer
inline constexpr std::uint32_t PFU = 1u << 3;    // the PF owns the buffer
inline constexpr std::uint32_t PFSTS = 1u << 4;  // the PF wrote a message (read to clear)
inline constexpr std::uint32_t PFACK = 1u << 5;  // the PF read the VF's message (read to clear)
inline constexpr std::uint32_t RSTI = 1u << 6;   // the PF is resetting (read to clear)
inline constexpr std::uint32_t RSTD = 1u << 7;   // the PF finished resetting the VF (read to clear)
inline constexpr std::uint32_t READ_TO_CLEAR = PFSTS | PFACK | RSTD;
}  // namespace mbx

// Messages (word 0): the type, info in bits 23:16, and the PF's answer in the top bits.
namespace msg {
inline constexpr std::uint32_t RESET = 0x01;          // reply: ACK with the VF's MAC in words 1-2, or NACK (none set)
inline constexpr std::uint32_t SET_MAC_ADDR = 0x02;   // words 1-2: the MAC
inline constexpr std::uint32_t SET_MULTICAST = 0x03;  // info: count; words 1..: 16-bit hashes, two per word
inline constexpr std::uint32_t SET_VLAN = 0x04;       // info 1: add; word 1: VLAN ID
inline constexpr std::uint32_t SET_LPE = 0x05;        // word 1: longest frame the VF takes, CRC included
inline constexpr std::uint32_t INFO_SHIFT = 16;
inline constexpr std::uint32_t ACK = 0x80000000u;
inline constexpr std::uint32_t NACK = 0x40000000u;
inline constexpr std::uint32_t CTS = 0x20000000u;  // the PF still takes requests
inline constexpr std::uint32_t TYPE_MASK = 0xffff;
inline constexpr std::uint32_t PF_CONTROL = 0x0100;  // unsolicited: the PF's state changed (link, reset)
}  // namespace msg

}  // namespace bardrive::nic::igbvf
