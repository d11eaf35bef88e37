#include "nic/drivers.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000e/e1000e.hpp"
#include "nic/igb/igb.hpp"
#include "nic/igbvf/igbvf.hpp"
#include "nic/virtio/virtio_net.hpp"

namespace bardrive::nic {

namespace {

// One entry per driver. The first whose drives() takes the IDs wins.
constexpr Driver kDrivers[] = {
    {"igb", "Intel 82576 (8086:10c9 and its family; QEMU -device igb)", &Igb::drives, &Igb::open, &Igb::open_engine},
    {"e1000e", "Intel 82574L (8086:10d3; QEMU -device e1000e)", &E1000e::drives, &E1000e::open, &E1000e::open_engine},
    {"igbvf", "Intel 82576 virtual function (8086:10ca), its PF on the kernel's igb", &Igbvf::drives, &Igbvf::open,
     nullptr},
    {"virtio-net", "virtio-net (1af4:1041, or 1af4:1000 with modern capabilities; QEMU -device virtio-net-pci)",
     &VirtioNet::drives, &open_virtio_net, nullptr},
};

std::string ids_of(const vfio::Device& device) {
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", device.config_read16(0x00), device.config_read16(0x02));
    return ids;
}

std::string every_driver() {
    std::string all;
    for (const Driver& d : kDrivers) all += std::string(all.empty() ? "" : "; ") + d.name + ": " + d.devices;
    return all;
}

}  // namespace

std::span<const Driver> drivers() noexcept { return kDrivers; }

const Driver* find_driver(std::uint16_t vendor, std::uint16_t device) noexcept {
    for (const Driver& d : kDrivers) {
        if (d.drives(vendor, device)) return &d;
    }
    return nullptr;
}

const Driver& driver_for(const vfio::Device& device) {
    if (const Driver* d = find_driver(device.config_read16(0x00), device.config_read16(0x02))) return *d;
    throw Error("open NIC port", device.bdf().str(), "device " + ids_of(device) + " is not a NIC bardrive drives",
                "bardrive drives " + every_driver() + "; check the BDF with lspci -nn");
}

std::unique_ptr<Port> open_port(vfio::Device& device, dma::IovaAllocator& iovas,
                                std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    return driver_for(device).open(device, iovas, rx_pools, options);
}

std::unique_ptr<Port> open_port(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool,
                                const PortOptions& options) {
    std::array<dma::BufferPool*, 1> pools{&rx_pool};
    return open_port(device, iovas, pools, options);
}

std::unique_ptr<LoopbackEngine> open_loopback_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                     const EngineOptions& options) {
    const Driver& d = driver_for(device);
    if (!d.open_engine) {
        std::string engines;
        for (const Driver& e : kDrivers) {
            if (e.open_engine) engines += std::string(engines.empty() ? "" : ", ") + e.name;
        }
        throw Error("open loopback DMA engine", device.bdf().str(),
                    std::string("the ") + d.name + " driver cannot serve as a DMA engine",
                    "use a NIC whose driver can: " + engines);
    }
    return d.open_engine(device, iovas, options);
}

}  // namespace bardrive::nic
