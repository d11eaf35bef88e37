// A port on NIC A sending numbered frames to a port on NIC B (one wire) and B receiving them, every
// sequence number checked: the loop igb-pps times against pktgen and igb-cost counts instructions in.
// A template over the port type: nic::Port (any driver, a virtual call per burst) or a driver's own
// class (nic::Igb: direct calls), so igb-cost can count what the interface costs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include "dma/buffer_pool.hpp"
#include "nic/packet.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"

namespace bardrive::bench {

inline constexpr std::uint32_t kMaxBatch = 64;

struct FrameRun {
    std::uint64_t received = 0, in_order = 0;
    std::uint64_t rx_polls = 0, empty_polls = 0, tx_bursts = 0;
    double seconds = 0;  // from the first send to the last poll that received
    double pps() const { return seconds > 0 ? static_cast<double>(received) / seconds : 0; }
};

// Sends `count` frames of `len` bytes in tx_bursts of up to `tx_batch` (at most 256 in flight) and receives
// them with rx_bursts of up to `rx_batch` (both 1..kMaxBatch); stops after 2 s without a frame. Reclaims
// A's finished TX buffers at the end.
template <class Port>
[[gnu::noinline]] FrameRun a_to_b(Port& a, Port& b, dma::BufferPool& pool, std::uint32_t len, std::uint32_t tx_batch,
                                  std::uint32_t rx_batch, std::uint64_t count) {
    using Clock = std::chrono::steady_clock;
    tx_batch = std::clamp<std::uint32_t>(tx_batch, 1, kMaxBatch);
    rx_batch = std::clamp<std::uint32_t>(rx_batch, 1, kMaxBatch);
    FrameRun r;
    std::uint64_t sent = 0;
    auto t0 = Clock::now(), last = t0;
    while (r.received < count) {
        if (sent < count && sent - r.received < 256) {  // as the kernel runs: at most 256 frames in flight
            nic::Packet pkts[kMaxBatch];
            std::uint32_t k = 0;
            dma::BufferPool::Buffer buf;
            while (k < tx_batch && sent + k < count && pool.alloc(buf)) {
                auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                nic::write_test_frame(d, len, b.mac(), a.mac(), sent + k);
                pkts[k++] = nic::Packet{d, buf.iova, len, buf.index, &pool};
            }
            std::uint16_t took = a.tx_burst(0, std::span(pkts, k));
            ++r.tx_bursts;
            for (std::uint32_t i = took; i < k; ++i) nic::Port::release(pkts[i]);
            sent += took;
        }
        nic::Packet got[kMaxBatch];
        std::uint16_t n = b.rx_burst(0, std::span(got, rx_batch));
        auto now = Clock::now();
        ++r.rx_polls;
        if (n == 0) ++r.empty_polls;
        for (std::uint16_t i = 0; i < n; ++i) {
            auto seq = nic::check_test_frame(got[i].data, got[i].len);
            if (seq && *seq == r.received) ++r.in_order;
            ++r.received;
            nic::Port::release(got[i]);
        }
        if (n) last = now;
        if (now - last > std::chrono::seconds(2)) break;
    }
    a.tx_reclaim(0);
    r.seconds = std::chrono::duration<double>(last - t0).count();
    return r;
}

}  // namespace bardrive::bench
