// nic::LoopbackEngine: a port in MAC loopback whose queue pairs serve as DMA copy engines
// (nic::LoopbackQueue: frames read from one IOVA land at another, the header split off). The consumers
// (nic::LoopbackCopy, nic::MemcpyDriver, umem::NicPager) take this interface, whatever the chip;
// nic::open_loopback_engine() picks the driver from the device's IDs, as open_port() does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../dma/iova_allocator.hpp"
#include "../vfio/device.hpp"
#include "e1000/loopback_queue.hpp"
#include "mac_address.hpp"

namespace bardrive::nic {

// The station address an engine port answers to: locally administered, so nothing on the wire sends
// to it (QEMU's models still receive from the wire in MAC loopback).
inline constexpr MacAddress loopback_engine_mac{{0x02, 0x62, 0x64, 0x76, 0x00, 0x01}};

// Data bytes per frame an engine carries by default: one 4 KiB page per jumbo frame (measured against
// smaller frames in bench/nic/loopback-engine; umem/README.md).
inline constexpr std::uint32_t loopback_default_payload = 4096;

struct EngineOptions {
    std::uint16_t queues = 1;  // queue pairs, one engine each (RSS returns each queue's frames to it)
    std::uint32_t ring = 512;  // descriptors per ring: a power of two
    // Data bytes per frame, a multiple of 1 KiB: 1024 fits standard frames, more goes as jumbo frames up
    // to what the chip takes (limits().max_payload).
    std::uint32_t payload = loopback_default_payload;
};

// What an engine can do, per chip.
struct EngineLimits {
    std::uint16_t max_queues = 1;
    std::uint32_t max_payload = 0;        // data bytes per frame
    std::size_t dst_alignment = 1;        // a copy's destination IOVA is a multiple of this
    std::uint32_t max_msis_per_send = 1;  // messages one send_msi() may deliver (QEMU's e1000e: 1 or 2)
};

class LoopbackEngine {
public:
    virtual ~LoopbackEngine() = default;
    LoopbackEngine() = default;
    LoopbackEngine(const LoopbackEngine&) = delete;
    LoopbackEngine& operator=(const LoopbackEngine&) = delete;

    virtual const char* driver() const noexcept = 0;
    virtual const vfio::Device& device() const noexcept = 0;
    virtual EngineLimits engine_limits() const noexcept = 0;
    virtual std::uint16_t engine_queues() const noexcept = 0;
    // The engine on queue pair `queue`, ready to start copies. Throws bardrive::Error for a queue the
    // port does not have.
    virtual LoopbackQueue engine_queue(std::uint16_t queue) const = 0;

    // One MSI-X vector (0, to the device's irq_fd(0)) whose cause no copy raises, for a test that wants
    // an interrupt on demand (the VFIO selftests' send_msi): arm once, then send_msi() raises it.
    virtual void arm_msi() = 0;
    virtual void send_msi() noexcept = 0;
};

// Opens `device` as a loopback DMA engine with the driver its IDs call for. Throws bardrive::Error when
// no driver takes the device, when its driver cannot serve as an engine, or for options beyond the chip.
std::unique_ptr<LoopbackEngine> open_loopback_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                     const EngineOptions& options = {});

}  // namespace bardrive::nic
