// bardrive's igb on NIC A sending numbered frames to bardrive's igb on NIC B (one wire) and B receiving
// them, every sequence number checked: the loop igb-pps times against pktgen and igb-cost counts
// instructions in.
#pragma once

#include <cstdint>

#include "dma/buffer_pool.hpp"
#include "nic/igb/igb.hpp"

namespace bardrive::bench {

inline constexpr std::uint32_t kMaxIgbBatch = 64;

struct FrameRun {
    std::uint64_t received = 0, in_order = 0;
    std::uint64_t rx_polls = 0, empty_polls = 0, tx_bursts = 0;
    double seconds = 0;  // from the first send to the last poll that received
    double pps() const { return seconds > 0 ? static_cast<double>(received) / seconds : 0; }
};

// Sends `count` frames of `len` bytes in tx_bursts of up to `tx_batch` (at most 256 in flight) and receives
// them with rx_bursts of up to `rx_batch` (both 1..kMaxIgbBatch); stops after 2 s without a frame. Reclaims
// A's finished TX buffers at the end.
FrameRun igb_a_to_b(nic::Igb& a, nic::Igb& b, dma::BufferPool& pool, std::uint32_t len, std::uint32_t tx_batch,
                    std::uint32_t rx_batch, std::uint64_t count);

}  // namespace bardrive::bench
