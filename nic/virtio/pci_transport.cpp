#include "nic/virtio/pci_transport.hpp"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic::virtio {

namespace {

constexpr std::uint32_t kCapPointer = 0x34;
constexpr std::uint16_t kStatusCapList = 1u << 4;
// The common configuration's fields up to queue_used_hi (virtio 1.2, 4.1.4.3).
constexpr std::uint32_t kCommonMinLength = VIRTIO_PCI_COMMON_Q_USEDHI + 4;

std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t at) {
    return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | static_cast<std::uint32_t>(b[at + 3]) << 24;
}

const char* cap_name(std::uint8_t type) {
    switch (type) {
        case VIRTIO_PCI_CAP_COMMON_CFG:
            return "common configuration";
        case VIRTIO_PCI_CAP_NOTIFY_CFG:
            return "notifications";
        case VIRTIO_PCI_CAP_ISR_CFG:
            return "ISR status";
        case VIRTIO_PCI_CAP_DEVICE_CFG:
            return "device configuration";
    }
    return "?";
}

template <class F>
bool poll_until(F done, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
        if (std::chrono::steady_clock::now() >= end) return done();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

}  // namespace

PciCaps find_pci_caps(std::span<const std::uint8_t> config) noexcept {
    PciCaps caps;
    if (config.size() < 0x40 || !((config[0x06] | config[0x07] << 8) & kStatusCapList)) return caps;
    std::size_t at = config[kCapPointer] & 0xfc;
    // At most 48 capabilities fit in 192 bytes: a longer walk is a loop.
    for (int n = 0; n < 48 && at >= 0x40 && at + 2 <= config.size(); ++n) {
        const std::uint8_t id = config[at], next = config[at + 1] & 0xfc;
        if (id == PCI_CAP_ID_VENDOR && at + sizeof(virtio_pci_cap) <= config.size()) {
            const std::uint8_t len = config[at + VIRTIO_PCI_CAP_LEN], type = config[at + VIRTIO_PCI_CAP_CFG_TYPE];
            const std::uint8_t bar = config[at + VIRTIO_PCI_CAP_BAR];
            CapLocation* slot = nullptr;
            switch (type) {
                case VIRTIO_PCI_CAP_COMMON_CFG:
                    slot = &caps.common;
                    break;
                case VIRTIO_PCI_CAP_NOTIFY_CFG:
                    slot = &caps.notify;
                    break;
                case VIRTIO_PCI_CAP_ISR_CFG:
                    slot = &caps.isr;
                    break;
                case VIRTIO_PCI_CAP_DEVICE_CFG:
                    slot = &caps.device;
                    break;
            }
            const bool notify_ok =
                type != VIRTIO_PCI_CAP_NOTIFY_CFG ||
                (len >= sizeof(virtio_pci_notify_cap) && at + sizeof(virtio_pci_notify_cap) <= config.size());
            if (slot && !slot->present && bar <= 5 && len >= sizeof(virtio_pci_cap) && notify_ok) {
                *slot = CapLocation{true, bar, le32(config, at + VIRTIO_PCI_CAP_OFFSET),
                                    le32(config, at + VIRTIO_PCI_CAP_LENGTH)};
                if (type == VIRTIO_PCI_CAP_NOTIFY_CFG)
                    caps.notify_off_multiplier = le32(config, at + VIRTIO_PCI_NOTIFY_CAP_MULT);
            }
        }
        if (next == 0) break;
        at = next;
    }
    return caps;
}

PciTransport::PciTransport(vfio::Device& device) : who_(device.bdf().str()) {
    std::array<std::uint8_t, 256> config{};
    for (std::uint32_t off = 0; off < config.size(); off += 4) {
        const std::uint32_t v = device.config_read32(off);
        for (unsigned b = 0; b < 4; ++b) config[off + b] = static_cast<std::uint8_t>(v >> (8 * b));
    }
    caps_ = find_pci_caps(config);
    for (const auto& [cap, type] :
         {std::pair{&caps_.common, VIRTIO_PCI_CAP_COMMON_CFG}, std::pair{&caps_.notify, VIRTIO_PCI_CAP_NOTIFY_CFG},
          std::pair{&caps_.device, VIRTIO_PCI_CAP_DEVICE_CFG}}) {
        if (!cap->present) {
            throw Error("open virtio device", who_,
                        log::concat("no virtio ", cap_name(static_cast<std::uint8_t>(type)),
                                    " capability in config space: not a virtio 1.x (modern) PCI device"),
                        "bardrive speaks virtio 1.x only; QEMU: leave disable-modern off (or set disable-legacy=on)");
        }
    }
    if (caps_.common.length < kCommonMinLength) {
        throw Error("open virtio device", who_,
                    log::concat("the common configuration is ", caps_.common.length, " bytes, virtio 1.x has ",
                                kCommonMinLength));
    }
    for (const CapLocation* cap : {&caps_.common, &caps_.notify, &caps_.isr, &caps_.device}) {
        if (!cap->present) continue;
        vfio::Mmio& bar = bars_[cap->bar];
        if (!bar) bar = device.map_bar(cap->bar);
        if (cap->length) bar.require(cap->offset, cap->length);
    }
    device.enable_bus_master();
}

std::uint8_t PciTransport::status() const noexcept { return common_bar().read8(common(VIRTIO_PCI_COMMON_STATUS)); }

void PciTransport::add_status(std::uint8_t bits) noexcept {
    common_bar().write8(common(VIRTIO_PCI_COMMON_STATUS), static_cast<std::uint8_t>(status() | bits));
}

bool PciTransport::reset_noexcept(int timeout_ms) noexcept {
    common_bar().write8(common(VIRTIO_PCI_COMMON_STATUS), 0);
    // 4.1.4.3.2: the driver waits for device_status to read 0 before reusing queue memory.
    return poll_until([&] { return status() == 0; }, timeout_ms);
}

void PciTransport::reset(int timeout_ms) {
    if (!reset_noexcept(timeout_ms)) {
        throw Error(
            "reset virtio device", who_,
            log::concat("device_status still reads ", unsigned{status()}, " ", timeout_ms, " ms after writing 0"),
            "the device does not finish its reset; check it is a virtio device that still answers");
    }
}

std::uint64_t PciTransport::device_features() const noexcept {
    const vfio::Mmio& b = common_bar();
    b.write32(common(VIRTIO_PCI_COMMON_DFSELECT), 0);
    std::uint64_t f = b.read32(common(VIRTIO_PCI_COMMON_DF));
    b.write32(common(VIRTIO_PCI_COMMON_DFSELECT), 1);
    f |= std::uint64_t{b.read32(common(VIRTIO_PCI_COMMON_DF))} << 32;
    return f;
}

void PciTransport::set_features(std::uint64_t features) {
    const vfio::Mmio& b = common_bar();
    b.write32(common(VIRTIO_PCI_COMMON_GFSELECT), 0);
    b.write32(common(VIRTIO_PCI_COMMON_GF), static_cast<std::uint32_t>(features));
    b.write32(common(VIRTIO_PCI_COMMON_GFSELECT), 1);
    b.write32(common(VIRTIO_PCI_COMMON_GF), static_cast<std::uint32_t>(features >> 32));
    add_status(VIRTIO_CONFIG_S_FEATURES_OK);
    // 3.1.1: only a FEATURES_OK that reads back means the device accepts this subset.
    if (!(status() & VIRTIO_CONFIG_S_FEATURES_OK)) {
        char hex[24];
        std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(features));
        throw Error("negotiate virtio features", who_,
                    std::string("the device cleared FEATURES_OK: it refuses the features ") + hex,
                    "the device's offer and bardrive's needs do not meet; BARDRIVE_LOG=debug lists both");
    }
}

std::uint16_t PciTransport::num_queues() const noexcept { return common_bar().read16(common(VIRTIO_PCI_COMMON_NUMQ)); }

std::uint8_t PciTransport::config_generation() const noexcept {
    return common_bar().read8(common(VIRTIO_PCI_COMMON_CFGGENERATION));
}

std::uint16_t PciTransport::queue_max_size(std::uint16_t index) const noexcept {
    const vfio::Mmio& b = common_bar();
    if (index >= num_queues()) return 0;
    b.write16(common(VIRTIO_PCI_COMMON_Q_SELECT), index);
    return b.read16(common(VIRTIO_PCI_COMMON_Q_SIZE));
}

void PciTransport::setup_queue(std::uint16_t index, std::uint16_t size, std::uint64_t desc, std::uint64_t driver,
                               std::uint64_t device, std::uint16_t vector) {
    const std::uint16_t max = queue_max_size(index);
    if (max == 0 || size > max) {
        throw Error("set up virtqueue", who_,
                    log::concat("queue ", index, ": ", size, " descriptors asked, the device allows ", max,
                                max == 0 ? " (no such queue)" : ""));
    }
    const vfio::Mmio& b = common_bar();
    b.write16(common(VIRTIO_PCI_COMMON_Q_SELECT), index);
    b.write16(common(VIRTIO_PCI_COMMON_Q_SIZE), size);
    b.write32(common(VIRTIO_PCI_COMMON_Q_DESCLO), static_cast<std::uint32_t>(desc));
    b.write32(common(VIRTIO_PCI_COMMON_Q_DESCHI), static_cast<std::uint32_t>(desc >> 32));
    b.write32(common(VIRTIO_PCI_COMMON_Q_AVAILLO), static_cast<std::uint32_t>(driver));
    b.write32(common(VIRTIO_PCI_COMMON_Q_AVAILHI), static_cast<std::uint32_t>(driver >> 32));
    b.write32(common(VIRTIO_PCI_COMMON_Q_USEDLO), static_cast<std::uint32_t>(device));
    b.write32(common(VIRTIO_PCI_COMMON_Q_USEDHI), static_cast<std::uint32_t>(device >> 32));
    b.write16(common(VIRTIO_PCI_COMMON_Q_MSIX), vector);
    const std::uint16_t got = b.read16(common(VIRTIO_PCI_COMMON_Q_MSIX));
    if (got != vector) {
        throw Error("set up virtqueue", who_,
                    log::concat("queue ", index, ": the device did not take MSI-X vector ", vector, " (reads back ",
                                got, got == VIRTIO_MSI_NO_VECTOR ? ", NO_VECTOR" : "", ")"),
                    "the device has too few MSI-X vectors (QEMU: vectors=2N+2 for N queue pairs) or use polling mode");
    }
    (void)notify_offset(index);  // throws when the doorbell lies outside the capability
}

std::size_t PciTransport::notify_offset(std::uint16_t index) const {
    const vfio::Mmio& b = common_bar();
    b.write16(common(VIRTIO_PCI_COMMON_Q_SELECT), index);
    const std::uint64_t off = std::uint64_t{b.read16(common(VIRTIO_PCI_COMMON_Q_NOFF))} * caps_.notify_off_multiplier;
    if (off + 2 > caps_.notify.length) {
        throw Error("set up virtqueue", who_,
                    log::concat("queue ", index, "'s doorbell at offset ", off, " lies outside the ",
                                caps_.notify.length, "-byte notify capability"));
    }
    return caps_.notify.offset + off;
}

void PciTransport::enable_queue(std::uint16_t index) {
    const vfio::Mmio& b = common_bar();
    b.write16(common(VIRTIO_PCI_COMMON_Q_SELECT), index);
    b.write16(common(VIRTIO_PCI_COMMON_Q_ENABLE), 1);
    if (b.read16(common(VIRTIO_PCI_COMMON_Q_ENABLE)) != 1) {
        throw Error("enable virtqueue", who_, log::concat("queue ", index, ": queue_enable does not read back 1"));
    }
}

void PciTransport::set_config_vector(std::uint16_t vector) {
    const vfio::Mmio& b = common_bar();
    b.write16(common(VIRTIO_PCI_COMMON_MSIX), vector);
    if (b.read16(common(VIRTIO_PCI_COMMON_MSIX)) != vector) {
        throw Error("set up configuration interrupt", who_,
                    log::concat("the device did not take MSI-X vector ", vector, " for configuration changes"),
                    "use polling mode");
    }
}

void PciTransport::require_device_config(std::uint32_t off, std::uint32_t bytes, const char* field) const {
    if (std::uint64_t{off} + bytes > caps_.device.length) {
        throw Error("read virtio device configuration", who_,
                    log::concat(field, " at ", off, "+", bytes, " lies outside the ", caps_.device.length,
                                "-byte device configuration"));
    }
}

}  // namespace bardrive::nic::virtio
