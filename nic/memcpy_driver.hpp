// MemcpyDriver: a device that copies memory by DMA and raises an interrupt on demand. This is the
// driver shape of Linux's VFIO selftests (tools/testing/selftests/vfio, their vfio_pci_driver_ops):
// one test program (tests/lab/driver_test.cpp) runs every scenario against whichever device has an
// implementation, in every IOMMU mode (docs/vfio-selftests.md). probe_memcpy_driver() picks one.
//
// Implementations. The NICs whose driver serves as a nic::LoopbackEngine run nic::LoopbackQueue over one
// queue pair of a port in MAC loopback: each copy goes out as frames read from the source IOVA and comes back into the
// destination IOVA, with the header split off so only the data lands there. Every write-back is checked.
//
// | driver | device         | copy size        | alignment        | in flight | send_msi                          |
// |--------|----------------|------------------|------------------|-----------|-----------------------------------|
// | igb    | 82576 (igb)    | 23 B to 32 KiB   | none             | 32        | EICS bit 0 -> MSI-X vector 0      |
// | e1000e | 82574L (e1000e)| 23 B to 32 KiB   | destination even | 32        | ICS TXQ1 cause -> MSI-X vector 0  |
// |        |                |                  |                  |           | (QEMU's model: 1 or 2 messages)   |
// | ivshmem-doorbell | QEMU's model | none (0)   | -                | 0         | its own doorbell -> MSI-X vector 0 |
//
// A failed memcpy_wait() leaves the engine stopped (it refuses every later copy): init() it again.
// send_msi() uses an interrupt cause the copies never raise, so copies fire no MSI.
// Why each limit is what it is, and what QEMU's models do: docs/vfio-selftests.md ("The drivers' limits").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../dma/iova_allocator.hpp"
#include "../vfio/device.hpp"

namespace bardrive::nic {

struct MemcpyLimits {
    std::size_t min_size = 0;             // bytes per copy
    std::size_t max_size = 0;             // max_in_flight copies of max_size fit at once
    std::size_t dst_alignment = 1;        // the destination IOVA is a multiple of this
    std::uint32_t max_in_flight = 0;      // copies started before one memcpy_wait()
    std::uint32_t max_msis_per_send = 1;  // messages one send_msi() may deliver to msi_fd() (at least one)
};

class MemcpyDriver {
public:
    virtual ~MemcpyDriver() = default;

    virtual const char* name() const noexcept = 0;
    const MemcpyLimits& limits() const noexcept { return limits_; }

    // Takes the device over: reset, rings in DMA memory mapped through the allocator the driver was
    // probed with, MSI-X vector 0 routed to msi_fd(). Again after remove() (or instead of it: init()
    // on an initialised device removes it first). Throws bardrive::Error naming the device and step.
    virtual void init() = 0;
    // Stops the device (reset: no DMA after this), disables its interrupts, frees its rings.
    virtual void remove() noexcept = 0;
    virtual bool initialized() const noexcept = 0;

    // Queues a copy of `size` bytes from `src` to `dst` (IOVAs mapped in the device's domain). False,
    // with nothing queued, when not initialised, broken, outside limits() or max_in_flight are queued.
    virtual bool memcpy_start(std::uint64_t dst, std::uint64_t src, std::size_t size) noexcept = 0;
    // Waits until every queued copy has landed: false on timeout, or when the device wrote back
    // something other than what was sent (then init() again).
    virtual bool memcpy_wait(int timeout_ms) noexcept = 0;

    // Why the last memcpy_wait() failed, in words ("" while nothing failed).
    virtual const char* failure() const noexcept = 0;

    // Raises MSI-X vector 0 now; it arrives on msi_fd(), an eventfd.
    virtual void send_msi() noexcept = 0;
    virtual int msi_fd() const noexcept = 0;

protected:
    MemcpyLimits limits_;
};

// The driver for `device`, chosen by its vendor:device ID (igb: the 82576 IDs nic::Igb takes; e1000e:
// 8086:10d3; ivshmem-doorbell: 1af4:1110 with MSI-X); not initialised yet. `device` and `iovas` must
// outlive it. Throws bardrive::Error naming the IDs when no implementation drives the device.
std::unique_ptr<MemcpyDriver> probe_memcpy_driver(vfio::Device& device, dma::IovaAllocator& iovas);

}  // namespace bardrive::nic
