// The virtio 1.x PCI transport (virtio 1.2, 4.1) over VFIO: the vendor-specific capabilities that
// locate the common configuration, notifications, ISR and device configuration in the BARs; reset, the
// status handshake, feature negotiation, virtqueue set-up and notifications. nic::VirtioNet drives it.
#pragma once

#include <linux/virtio_config.h>
#include <linux/virtio_pci.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "../../vfio/device.hpp"
#include "../../vfio/mmio.hpp"

namespace bardrive::nic::virtio {

inline constexpr std::uint16_t VENDOR_VIRTIO = 0x1af4;
inline constexpr std::uint16_t DEVICE_NET_MODERN = 0x1041;        // 0x1040 + VIRTIO_ID_NET
inline constexpr std::uint16_t DEVICE_NET_TRANSITIONAL = 0x1000;  // legacy ID; bardrive needs its modern caps
inline constexpr std::uint8_t PCI_CAP_ID_VENDOR = 0x09;

inline constexpr std::uint64_t bit(unsigned feature) noexcept { return std::uint64_t{1} << feature; }

// Where one structure lives: BAR, offset and length (a virtio_pci_cap).
struct CapLocation {
    bool present = false;
    std::uint8_t bar = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
};

// The virtio capabilities of a device's config space: the first of each type whose BAR is a memory BAR
// index (0-5), as the specification asks drivers to take them.
struct PciCaps {
    CapLocation common, notify, isr, device;
    std::uint32_t notify_off_multiplier = 0;
};

// Walks the capability list of `config` (the first 256 bytes or fewer); stops at a loop, a pointer
// outside the bytes or a truncated capability, never reading past them.
PciCaps find_pci_caps(std::span<const std::uint8_t> config) noexcept;

// One device through its modern PCI transport. Set-up methods throw bardrive::Error naming the device.
class PciTransport {
public:
    // Reads the capabilities from config space and maps the BARs they name. Throws when one of common
    // configuration, notifications or device configuration is missing (a legacy-only device), or lies
    // outside its BAR.
    explicit PciTransport(vfio::Device& device);
    PciTransport(PciTransport&&) noexcept = default;
    PciTransport& operator=(PciTransport&&) noexcept = default;

    const std::string& who() const noexcept { return who_; }
    const PciCaps& caps() const noexcept { return caps_; }

    // Writes 0 to device_status and waits until it reads 0 (the device stopped every queue and DMA);
    // throws after timeout_ms. The no-throw form returns whether it finished (destruction paths).
    void reset(int timeout_ms = 1000);
    bool reset_noexcept(int timeout_ms = 1000) noexcept;
    std::uint8_t status() const noexcept;
    void add_status(std::uint8_t bits) noexcept;  // ORs bits into device_status
    void fail() noexcept { add_status(VIRTIO_CONFIG_S_FAILED); }

    std::uint64_t device_features() const noexcept;
    // Writes the driver's features, sets FEATURES_OK and reads it back; throws when the device refuses.
    void set_features(std::uint64_t features);
    std::uint16_t num_queues() const noexcept;
    std::uint8_t config_generation() const noexcept;

    // The size the device allows for queue `index` (0: the queue does not exist).
    std::uint16_t queue_max_size(std::uint16_t index) const noexcept;
    // Programs queue `index`: size (at most queue_max_size), the three areas' IOVAs, and its MSI-X vector
    // (VIRTIO_MSI_NO_VECTOR: none); throws when the device does not take the vector (reads back
    // NO_VECTOR) or the queue's notification address lies outside the notify capability. The queue is
    // enabled by enable_queue().
    void setup_queue(std::uint16_t index, std::uint16_t size, std::uint64_t desc, std::uint64_t driver,
                     std::uint64_t device, std::uint16_t vector);
    void enable_queue(std::uint16_t index);
    // Byte offset in the notify BAR of queue `index`'s doorbell (from setup_queue).
    std::size_t notify_offset(std::uint16_t index) const;
    // The configuration-change vector; throws when the device does not take it.
    void set_config_vector(std::uint16_t vector);

    // Rings queue `index`'s doorbell at `offset` (notify_offset()): the queue's index, 16 bits.
    void notify(std::size_t offset, std::uint16_t index) const noexcept { notify_bar().write16(offset, index); }

    // Device configuration, read field by field (little-endian, width as asked; offsets within the
    // capability's length, checked by require_device_config()).
    std::uint8_t config8(std::uint32_t off) const noexcept { return device_bar().read8(caps_.device.offset + off); }
    std::uint16_t config16(std::uint32_t off) const noexcept { return device_bar().read16(caps_.device.offset + off); }
    std::uint32_t config32(std::uint32_t off) const noexcept { return device_bar().read32(caps_.device.offset + off); }
    // Throws unless the device configuration holds [off, off + bytes).
    void require_device_config(std::uint32_t off, std::uint32_t bytes, const char* field) const;

private:
    const vfio::Mmio& bar_of(const CapLocation& c) const noexcept { return bars_[c.bar]; }
    const vfio::Mmio& common_bar() const noexcept { return bars_[caps_.common.bar]; }
    const vfio::Mmio& notify_bar() const noexcept { return bars_[caps_.notify.bar]; }
    const vfio::Mmio& device_bar() const noexcept { return bars_[caps_.device.bar]; }
    std::size_t common(std::size_t field) const noexcept { return caps_.common.offset + field; }

    std::string who_;
    PciCaps caps_;
    std::array<vfio::Mmio, 6> bars_;
};

}  // namespace bardrive::nic::virtio
