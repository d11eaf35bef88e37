// The table of NIC drivers bardrive has: adding a chip is one folder under nic/ and one entry in
// nic/drivers.cpp. open_port() and open_loopback_engine() look the device's IDs up here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "../dma/buffer_pool.hpp"
#include "../dma/iova_allocator.hpp"
#include "../vfio/device.hpp"
#include "loopback_engine.hpp"
#include "port.hpp"

namespace bardrive::nic {

struct Driver {
    const char* name;     // as Port::driver() says it
    const char* devices;  // what it drives, in words, with IDs (for "not a device bardrive drives")
    bool (*drives)(std::uint16_t vendor, std::uint16_t device) noexcept;
    std::unique_ptr<Port> (*open)(vfio::Device&, dma::IovaAllocator&, std::span<dma::BufferPool* const>,
                                  const PortOptions&);
    // Null when the chip cannot serve as a loopback DMA engine.
    std::unique_ptr<LoopbackEngine> (*open_engine)(vfio::Device&, dma::IovaAllocator&, const EngineOptions&);
};

std::span<const Driver> drivers() noexcept;
// The driver for these IDs, or null.
const Driver* find_driver(std::uint16_t vendor, std::uint16_t device) noexcept;
// The driver for an open device; throws bardrive::Error naming its IDs and every driver bardrive has.
const Driver& driver_for(const vfio::Device& device);

}  // namespace bardrive::nic
