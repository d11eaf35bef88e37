// LoopbackCopy: a NIC in MAC loopback used as a DMA engine (the "device as DMA engine" face of Linux's
// VFIO selftests): memory at one IOVA is sent as frames and received at another IOVA, so the NIC copies
// it without the CPU touching the bytes. Both ranges must be mapped in the port's domain. The engine is
// one nic::LoopbackQueue of a nic::LoopbackEngine (open_loopback_engine(): igb or e1000e); this class
// gives it a host API. umem::NicPager drives the same queues.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loopback_engine.hpp"

namespace bardrive::nic {

class LoopbackCopy {
public:
    // Throws bardrive::Error for a queue the engine does not have.
    explicit LoopbackCopy(const LoopbackEngine& engine, std::uint16_t queue = 0) : q_(engine.engine_queue(queue)) {}

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
