// LoopbackCopy: an igb (or e1000e) port in MAC loopback used as a DMA engine (the "device as DMA engine" face of
// Linux's VFIO selftests): memory at one IOVA is sent as frames and received at another IOVA, so the
// NIC copies it without the CPU touching the bytes. Both ranges must be mapped in the port's domain.
// The engine itself is nic::LoopbackQueue (loopback_queue.hpp): one queue pair, frames with a UDP header
// that receive header split keeps out of the destination, every write-back checked. This class opens
// it on a port set up by port_options() and gives it a host API; umem::NicPager drives the same queues.
#pragma once

#include <cstddef>
#include <cstdint>

#include "e1000e.hpp"
#include "igb.hpp"
#include "loopback_queue.hpp"

namespace bardrive::nic {

// The station address an engine port answers to: locally administered, so nothing on the wire sends
// to it (QEMU's model still receives from the wire in MAC loopback).
inline constexpr MacAddress loopback_engine_mac{{0x02, 0x62, 0x64, 0x76, 0x00, 0x01}};

// Data bytes per frame an engine port carries by default: one 4 KiB page per jumbo frame (measured
// against smaller frames in bench/nic/loopback-engine; umem/README.md).
inline constexpr std::uint32_t loopback_default_payload = 4096;

// What a port must be opened with to serve as an engine: MAC loopback, `queues` external queue pairs
// (RSS across them), header split, receive buffers and frame limit for `payload` data bytes per frame
// (a multiple of 1 KiB: 1024 fits standard frames, up to 9 KiB as jumbo frames).
IgbOptions loopback_port_options(std::uint16_t queues = 1, std::uint32_t ring = 512,
                                 std::uint32_t payload = loopback_default_payload);

// The same for an e1000e (one queue pair; packet split descriptors keep the header out of the data,
// jumbo frames up to 8 KiB of data).
E1000eOptions loopback_e1000e_options(std::uint32_t ring = 512, std::uint32_t payload = loopback_default_payload);

// An engine on queue pair `queue` of `port`: the UDP port RSS maps to it, the header template. Throws
// bardrive::Error unless the port was opened with loopback_port_options() (loopback_e1000e_options()).
LoopbackQueue make_loopback_queue(const Igb& port, std::uint16_t queue);
LoopbackQueue make_loopback_queue(const E1000e& port);

class LoopbackCopy {
public:
    static IgbOptions port_options(std::uint32_t ring = 512) { return loopback_port_options(1, ring); }

    // Throws bardrive::Error unless `port` was opened with port_options() (or loopback_port_options()).
    explicit LoopbackCopy(Igb& port, std::uint16_t queue = 0);
    // Throws unless `port` was opened with loopback_e1000e_options().
    explicit LoopbackCopy(E1000e& port);

    // Queues a copy of `size` bytes (at least LoopbackQueue::min_data, 23: a shorter frame would stay
    // in the header buffer whole), cut into frames. False (nothing queued) when the size is too small or
    // the rings lack room for all its frames: wait() for earlier copies first.
    bool start(std::uint64_t dst_iova, std::uint64_t src_iova, std::size_t size) noexcept {
        return q_.start(dst_iova, src_iova, size);
    }

    // Waits until every queued copy has landed. False on timeout, or when a frame came back other than
    // sent (the engine is then unusable: open the port again).
    bool wait(int timeout_ms) noexcept {
        return q_.wait(static_cast<std::uint64_t>(timeout_ms < 0 ? 0 : timeout_ms) * 1000000);
    }

    std::uint64_t bytes_copied() const noexcept { return q_.bytes; }
    const LoopbackQueue& queue() const noexcept { return q_; }

private:
    LoopbackQueue q_;
};

}  // namespace bardrive::nic
