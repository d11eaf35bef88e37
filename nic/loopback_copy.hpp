// LoopbackCopy: an igb port in MAC loopback used as a DMA engine (the "device as DMA engine" face of
// Linux's VFIO selftests): memory at one IOVA is sent as frames and received at another IOVA, so the
// NIC copies it without the CPU touching the bytes. Both ranges must be mapped in the port's domain.
// QEMU's model still receives from the wire in MAC loopback (promiscuous): keep the port's wire quiet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "igb.hpp"

namespace bardrive::nic {

class LoopbackCopy {
public:
    // What the port must be opened with: MAC loopback, promiscuous (any bytes are a valid "frame"),
    // RX buffers posted by this engine.
    static IgbOptions port_options(std::uint32_t ring = 512);

    // Throws bardrive::Error unless `port` was opened with port_options().
    explicit LoopbackCopy(Igb& port);

    // Queues a copy of `size` bytes (>= 60: shorter frames would be padded and written past the end),
    // cut into frames of at most 1514 bytes. False (nothing queued) when the size is too small or the
    // rings lack room for all its frames: wait() for earlier copies first.
    bool start(std::uint64_t dst_iova, std::uint64_t src_iova, std::size_t size) noexcept;

    // Waits until every queued frame has landed. False on timeout, or when a frame came back where or
    // how long it should not have been (the engine is then unusable: open the port again).
    bool wait(int timeout_ms) noexcept;

    std::uint64_t bytes_copied() const noexcept { return bytes_; }

private:
    struct Chunk {
        std::uint64_t dst;
        std::uint32_t len;
    };
    Igb& port_;
    std::vector<Chunk> pending_;  // ring-sized FIFO of frames in flight, allocated once
    std::size_t head_ = 0, count_ = 0;
    std::uint64_t bytes_ = 0;
    bool broken_ = false;
};

}  // namespace bardrive::nic
