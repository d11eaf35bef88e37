// Intel 82574 (e1000e) registers that differ from the 82576's, and its extended descriptors.
// Source: Intel 82574 GbE Controller Family Datasheet, chapter 10 (registers) and 7.1.5 / 7.2.3
// (extended receive and transmit descriptors); QEMU's e1000e model (hw/net/e1000e_core.c) matches.
// Everything else the driver touches (CTRL, STATUS, MDIC, RCTL, TCTL, RAL/RAH, MTA, statistics) sits
// at the 82576's offsets in igb_regs.hpp.
#pragma once

#include <cstdint>

#include "igb_desc.hpp"

namespace bardrive::nic::e1000e {

using Reg = std::uint32_t;

// One queue pair (the 82574 has two; this driver uses queue 0).
inline constexpr Reg RDBAL = 0x2800;
inline constexpr Reg RDBAH = 0x2804;
inline constexpr Reg RDLEN = 0x2808;
inline constexpr Reg RDH = 0x2810;
inline constexpr Reg RDT = 0x2818;
inline constexpr Reg TDBAL = 0x3800;
inline constexpr Reg TDBAH = 0x3804;
inline constexpr Reg TDLEN = 0x3808;
inline constexpr Reg TDH = 0x3810;
inline constexpr Reg TDT = 0x3818;
inline constexpr Reg RFCTL = 0x5008;                    // receive filter control
inline constexpr std::uint32_t RFCTL_EXTEN = 1u << 15;  // extended receive descriptors

inline constexpr std::uint16_t DEVICE_82574L = 0x10D3;

// 7.1.5: with RFCTL.EXTEN the receive descriptor is 16 bytes with the write-back status/error dword at
// byte 8 and the length at byte 12, DD/EOP in bits 0/1 and RXE in bit 31: the layout of the 82576's
// advanced descriptor, so the same ring code reads both. 7.2.3: the extended transmit data
// descriptor has the advanced one's layout too (address, DTALEN/DTYP/DCMD, status), with DTYP 0001.
using RxDesc = igb::AdvRxDesc;
using TxDesc = igb::AdvTxDesc;
static_assert(sizeof(RxDesc) == 16 && sizeof(TxDesc) == 16);

}  // namespace bardrive::nic::e1000e
