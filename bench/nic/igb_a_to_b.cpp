#include "bench/nic/igb_a_to_b.hpp"

#include <algorithm>
#include <chrono>
#include <span>

#include "nic/test_frame.hpp"

namespace bardrive::bench {

FrameRun igb_a_to_b(nic::Igb& a, nic::Igb& b, dma::BufferPool& pool, std::uint32_t len, std::uint32_t tx_batch,
                    std::uint32_t rx_batch, std::uint64_t count) {
    using Clock = std::chrono::steady_clock;
    tx_batch = std::clamp<std::uint32_t>(tx_batch, 1, kMaxIgbBatch);
    rx_batch = std::clamp<std::uint32_t>(rx_batch, 1, kMaxIgbBatch);
    FrameRun r;
    std::uint64_t sent = 0;
    auto t0 = Clock::now(), last = t0;
    while (r.received < count) {
        if (sent < count && sent - r.received < 256) {  // as the kernel runs: at most 256 frames in flight
            nic::Packet pkts[kMaxIgbBatch];
            std::uint32_t k = 0;
            dma::BufferPool::Buffer buf;
            while (k < tx_batch && sent + k < count && pool.alloc(buf)) {
                auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                nic::write_test_frame(d, len, b.mac(), a.mac(), sent + k);
                pkts[k++] = nic::Packet{d, buf.iova, len, buf.index, &pool};
            }
            std::uint16_t took = a.tx_burst(0, std::span(pkts, k));
            ++r.tx_bursts;
            for (std::uint32_t i = took; i < k; ++i) nic::Igb::release(pkts[i]);
            sent += took;
        }
        nic::Packet got[kMaxIgbBatch];
        std::uint16_t n = b.rx_burst(0, std::span(got, rx_batch));
        auto now = Clock::now();
        ++r.rx_polls;
        if (n == 0) ++r.empty_polls;
        for (std::uint16_t i = 0; i < n; ++i) {
            auto seq = nic::check_test_frame(got[i].data, got[i].len);
            if (seq && *seq == r.received) ++r.in_order;
            ++r.received;
            nic::Igb::release(got[i]);
        }
        if (n) last = now;
        if (now - last > std::chrono::seconds(2)) break;
    }
    a.tx_reclaim(0);
    r.seconds = std::chrono::duration<double>(last - t0).count();
    return r;
}

}  // namespace bardrive::bench
