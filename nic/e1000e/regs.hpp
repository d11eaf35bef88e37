// Intel 82574 (e1000e) registers that differ from the 82576's, and its extended descriptors.
// Source: Intel 82574 GbE Controller Family Datasheet, chapter 10 (registers) and 7.1.5 / 7.2.3
// (extended receive and transmit descriptors); QEMU's e1000e model (hw/net/e1000e_core.c) matches.
// Everything else the driver touches (CTRL, STATUS, MDIC, RCTL, TCTL, RAL/RAH, MTA, statistics) sits
// at the 82576's offsets in igb_regs.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../e1000/desc.hpp"

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
inline constexpr Reg RFCTL = 0x5008;                      // receive filter control
inline constexpr std::uint32_t RFCTL_EXTEN = 1u << 15;    // extended receive descriptors
inline constexpr Reg PSRCTL = 0x2170;                     // packet split buffer sizes (10.2.5.3)
inline constexpr std::uint32_t PSRCTL_BSIZE0_UNIT = 128;  // bits 6:0, header buffer, in 128 bytes
inline constexpr std::uint32_t PSRCTL_BSIZE1_SHIFT = 8;   // bits 13:8, data buffer 1, in KiB
inline constexpr std::uint32_t RCTL_DTYP_PS = 1u << 10;   // RCTL.DTYP 01b: packet split descriptors
inline constexpr std::uint32_t RCTL_LPE = 1u << 5;        // long packets (above 1522 bytes)
// Interrupts (10.2.4): ICR/ICS/IMS at the 82576's offsets; IVAR maps causes to MSI-X vectors.
inline constexpr Reg IVAR = 0x00E4;
inline constexpr Reg EIAC = 0x00DC;                   // MSI-X causes that clear themselves (and mask: IMS) once sent
inline constexpr std::uint32_t ICR_RXQ0 = 1u << 20;   // RX queue 0's cause in MSI-X mode
inline constexpr std::uint32_t ICR_TXQ1 = 1u << 23;   // TX queue 1's cause (this driver never uses queue 1)
inline constexpr std::uint32_t ICR_OTHER = 1u << 24;  // MSI-X: set with any other cause (LSC ...)
inline constexpr std::uint32_t IVAR_RXQ0_SHIFT = 0;   // IVAR's 4-bit entries: vector 2:0, valid bit 3
inline constexpr std::uint32_t IVAR_TXQ1_SHIFT = 12;
inline constexpr std::uint32_t IVAR_OTHER_SHIFT = 16;
inline constexpr std::uint32_t IVAR_ENTRY_VALID = 0x8;

inline constexpr std::uint16_t DEVICE_82574L = 0x10D3;

// 7.1.5: with RFCTL.EXTEN the receive descriptor is 16 bytes with the write-back status/error dword at
// byte 8 and the length at byte 12, DD/EOP in bits 0/1 and RXE in bit 31: the layout of the 82576's
// advanced descriptor, so the same ring code reads both. 7.2.3: the extended transmit data
// descriptor has the advanced one's layout too (address, DTALEN/DTYP/DCMD, status), with DTYP 0001.
using RxDesc = e1000::AdvRxDesc;
using TxDesc = e1000::AdvTxDesc;
static_assert(sizeof(RxDesc) == 16 && sizeof(TxDesc) == 16);

// 7.1.5.3: packet split receive descriptor (RFCTL.EXTEN, RCTL.DTYP 01b), 32 bytes: the protocol header
// goes to buffer 0, the data to buffers 1-3. The write-back's status dword overlays buffer 1's low
// half, so buffer 1 must be even (its bit 0 reads as DD).
union PsRxDesc {
    struct Read {
        std::uint64_t buffer_addr[4];
    } read;
    struct Writeback {
        std::uint32_t mrq;
        std::uint32_t rss;           // RSS hash or IP id + checksum
        std::uint32_t status_error;  // extended status (DD bit 0, EOP bit 1) and errors (bits 31:24)
        std::uint16_t length0;       // bytes in buffer 0 (the header)
        std::uint16_t vlan;
        std::uint16_t header_status;  // HDRSP bit 15: the header was split off; its length in bits 9:0
        std::uint16_t length[3];      // bytes in buffers 1-3
        std::uint64_t reserved;
    } wb;
};
static_assert(sizeof(PsRxDesc) == 32, "7.1.5.3: packet split descriptors are 32 bytes");
static_assert(offsetof(PsRxDesc::Writeback, status_error) == 8 && offsetof(PsRxDesc::Writeback, length0) == 12);
static_assert(offsetof(PsRxDesc::Writeback, header_status) == 16 && offsetof(PsRxDesc::Writeback, length) == 18);

namespace psd {
inline constexpr std::uint32_t ERR_MASK = 0xffu << 24;
inline constexpr std::uint16_t HDRSP = 1u << 15;
inline constexpr std::uint16_t HDRLEN_MASK = 0x3ff;
}  // namespace psd

}  // namespace bardrive::nic::e1000e
