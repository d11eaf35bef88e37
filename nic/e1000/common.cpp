#include "nic/e1000/common.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000/regs.hpp"

namespace bardrive::nic::e1000 {

using namespace std::chrono_literals;
namespace r = e1000;  // the family's registers, at the same offsets on the 82576 and the 82574

// A device that stopped answering (surprise removal, powered down, its PCIe link down) completes every
// read with all ones; a live 82576/82574 never reads STATUS so (it has reserved bits that read 0).
bool answering(const vfio::Mmio& regs) noexcept { return regs.read32(r::STATUS) != ~0u; }

void require_answering(const vfio::Mmio& regs, const std::string& who, const char* step) {
    if (!answering(regs))
        throw Error(step, who, "every register reads 0xffffffff: the device is not answering",
                    "it was removed, powered down or lost its link; check 'lspci -vv -s' for it, then rebind or "
                    "reset it through sysfs");
}

// 82576 4.5 / 82574 4.6 (software initialization): mask interrupts, global reset, mask again, take ownership.
void reset(const vfio::Mmio& regs, const std::string& who, std::uint32_t extended_mask_clear) {
    require_answering(regs, who, "reset NIC");
    regs.write32(r::IMC, ~0u);
    if (extended_mask_clear) regs.write32(extended_mask_clear, ~0u);
    regs.write32(r::CTRL, regs.read32(r::CTRL) | r::ctrl::RST);
    std::this_thread::sleep_for(1ms);  // the datasheets ask for a pause before the next register access
    if (!poll_until([&] { return !(regs.read32(r::CTRL) & r::ctrl::RST); }, 100ms)) {
        throw Error("reset NIC", who, "CTRL.RST did not clear within 100 ms",
                    "the device may be wedged: bind it again or reset it through sysfs");
    }
    regs.write32(r::IMC, ~0u);
    if (extended_mask_clear) regs.write32(extended_mask_clear, ~0u);
    (void)regs.read32(r::ICR);
    regs.write32(r::CTRL_EXT, regs.read32(r::CTRL_EXT) | r::ctrl_ext::DRV_LOAD);
}

void phy_write(const vfio::Mmio& regs, const std::string& who, std::uint32_t reg, std::uint16_t value) {
    regs.write32(r::MDIC,
                 value | reg << r::mdic::REG_SHIFT | r::mdic::INTERNAL_PHY << r::mdic::PHY_SHIFT | r::mdic::OP_WRITE);
    std::uint32_t m = 0;
    if (!poll_until([&] { return ((m = regs.read32(r::MDIC)) & r::mdic::READY) != 0; }, 100ms) ||
        (m & r::mdic::ERROR)) {
        require_answering(regs, who, "write PHY register");
        throw Error("write PHY register", who,
                    log::concat("MDIC ", (m & r::mdic::ERROR) ? "reported an error" : "never became ready",
                                " writing PHY register ", reg),
                    "the PHY is not answering; reset the device");
    }
}

// Copper link set-up: set link up, restart auto-negotiation in the PHY, wait for STATUS.LU.
void bring_link_up(const vfio::Mmio& regs, const std::string& who, Loopback loopback, int timeout_ms) {
    require_answering(regs, who, "bring link up");
    regs.write32(r::CTRL, regs.read32(r::CTRL) | r::ctrl::SLU);
    std::uint16_t bmcr =
        r::phy::BMCR_AUTONEG | r::phy::BMCR_ANRESTART | r::phy::BMCR_SPEED1000 | r::phy::BMCR_FULL_DUPLEX;
    if (loopback == Loopback::phy) bmcr |= r::phy::BMCR_LOOPBACK;
    phy_write(regs, who, r::phy::BMCR, bmcr);
    const bool up = poll_until([&] { return link_up(regs) || !answering(regs); },
                               std::chrono::milliseconds(std::max(timeout_ms, 0)));
    require_answering(regs, who, "bring link up");
    if (!up) {
        throw Error("bring link up", who,
                    log::concat("STATUS.LU still 0 after ", timeout_ms, " ms (STATUS=0x", std::hex,
                                regs.read32(r::STATUS), ")"),
                    "check the cable or the peer; in QEMU the netdev must be connected and 'set_link' on");
    }
}

MacAddress read_mac(const vfio::Mmio& regs, const std::string& who) {
    require_answering(regs, who, "read MAC address");
    std::uint32_t lo = regs.read32(r::RAL(0)), hi = regs.read32(r::RAH(0));
    if (!(hi & r::RAH_AV)) {
        throw Error("read MAC address", who, "RAH0.AV is 0: no address was loaded from the EEPROM",
                    "the device's NVM is blank or unreadable");
    }
    MacAddress mac;
    for (int i = 0; i < 4; ++i) mac.bytes[i] = static_cast<std::uint8_t>(lo >> (8 * i));
    mac.bytes[4] = static_cast<std::uint8_t>(hi);
    mac.bytes[5] = static_cast<std::uint8_t>(hi >> 8);
    return mac;
}

void write_mac(const vfio::Mmio& regs, const MacAddress& mac) noexcept {
    const auto& b = mac.bytes;
    regs.write32(r::RAL(0), b[0] | b[1] << 8 | b[2] << 16 | static_cast<std::uint32_t>(b[3]) << 24);
    regs.write32(r::RAH(0), b[4] | b[5] << 8 | r::RAH_AV);
}

bool link_up(const vfio::Mmio& regs) noexcept {
    std::uint32_t s = regs.read32(r::STATUS);
    return s != ~0u && (s & r::status::LU);
}

unsigned link_speed_mbps(const vfio::Mmio& regs) noexcept {
    std::uint32_t s = regs.read32(r::STATUS);
    if (!(s & r::status::LU)) return 0;
    switch ((s & r::status::SPEED_MASK) >> r::status::SPEED_SHIFT) {
        case 0:
            return 10;
        case 1:
            return 100;
        default:
            return 1000;
    }
}

std::optional<LinkEvent> LinkWatch::poll(const vfio::Mmio& regs) noexcept {
    unsigned speed = link_speed_mbps(regs);  // 0 when down
    bool now_up = speed != 0;
    if (now_up == up && speed == speed_mbps) return std::nullopt;
    if (now_up != up) ++changes;
    up = now_up;
    speed_mbps = speed;
    return LinkEvent{now_up, speed};
}

void check_identity(const vfio::Device& device, bool (*drives)(std::uint16_t, std::uint16_t) noexcept, const char* part,
                    const char* hint) {
    const std::uint16_t vendor = device.config_read16(0x00), id = device.config_read16(0x02);
    if (drives(vendor, id)) return;
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, id);
    throw Error("open NIC", device.bdf().str(), log::concat("device ", ids, " is not an ", part), hint);
}

void stop_port(const vfio::Mmio& regs, vfio::Device& device, std::uint32_t extended_mask_clear,
               std::span<RxRing* const> rx, std::span<TxRing* const> tx) noexcept {
    if (regs) {
        regs.write32(r::RCTL, 0);
        regs.write32(r::TCTL, 0);
        regs.write32(r::IMC, ~0u);
        if (extended_mask_clear) regs.write32(extended_mask_clear, ~0u);
        device.disable_irqs();  // the port's vectors, or the one an engine's arm_msi() enabled
        regs.write32(r::CTRL, regs.read32(r::CTRL) | r::ctrl::RST);
        std::this_thread::sleep_for(1ms);
        poll_until([&] { return !(regs.read32(r::CTRL) & r::ctrl::RST); }, 100ms);
    }
    Packet bufs[64];
    auto give_back = [&](std::uint32_t n) {
        for (std::uint32_t i = 0; i < n; ++i) {
            if (bufs[i].pool) bufs[i].pool->free(bufs[i].buf);
        }
    };
    for (RxRing* ring : rx) {
        for (std::uint32_t n; (n = ring->drain(bufs)) != 0;) give_back(n);
    }
    for (TxRing* ring : tx) {
        for (std::uint32_t n; (n = ring->drain(bufs)) != 0;) give_back(n);
    }
}

// 82576 7.1.1.1 / 82574 7.1.1.1 (multicast table).
void add_multicast(const vfio::Mmio& regs, const MacAddress& group) noexcept {
    std::uint32_t hash = ((group.bytes[5] << 8 | group.bytes[4]) >> 4) & 0xfff;
    std::uint32_t reg = r::MTA(hash >> 5);
    regs.write32(reg, regs.read32(reg) | 1u << (hash & 31));
}

void accumulate(const vfio::Mmio& regs, DeviceStats& s) noexcept {
    auto rd = [&](r::Reg reg) { return std::uint64_t{regs.read32(reg)}; };
    auto rd64 = [&](r::Reg lo) {  // low first: reading the high half clears both
        std::uint64_t l = rd(lo);
        return l | rd(lo + 4) << 32;
    };
    s.rx_packets += rd(r::GPRC);
    s.tx_packets += rd(r::GPTC);
    s.rx_bytes += rd64(r::GORCL);
    s.tx_bytes += rd64(r::GOTCL);
    s.rx_total += rd(r::TPR);
    s.tx_total += rd(r::TPT);
    s.rx_broadcast += rd(r::BPRC);
    s.rx_multicast += rd(r::MPRC);
    s.rx_missed += rd(r::MPC);
    s.rx_no_buffers += rd(r::RNBC);
    s.rx_undersize += rd(r::RUC);
    s.rx_oversize += rd(r::ROC);
    s.crc_errors += rd(r::CRCERRS);
}

}  // namespace bardrive::nic::e1000
