#include "nic/loopback_copy.hpp"

#include <chrono>

#include "core/error.hpp"

namespace bardrive::nic {

namespace {
constexpr std::uint32_t kMaxChunk = 1514;  // RCTL.LPE off
constexpr std::uint32_t kMinChunk = ETH_MIN_FRAME;

// Cuts `size` into frames of at most kMaxChunk, none shorter than kMinChunk; calls f(offset, len).
template <class F>
void chunks(std::size_t size, F f) {
    std::size_t off = 0;
    while (off < size) {
        std::size_t left = size - off;
        std::size_t len = left > kMaxChunk ? kMaxChunk : left;
        if (left > kMaxChunk && left - kMaxChunk < kMinChunk) len = left - kMinChunk;  // keep the last one long enough
        f(off, static_cast<std::uint32_t>(len));
        off += len;
    }
}
}  // namespace

IgbOptions LoopbackCopy::port_options(std::uint32_t ring) {
    IgbOptions o;
    o.loopback = Loopback::mac;
    o.promiscuous = true;
    o.rx_manual = true;
    o.rx_ring = ring;
    o.tx_ring = ring;
    return o;
}

LoopbackCopy::LoopbackCopy(Igb& port) : port_(port) {
    const IgbOptions& o = port.options();
    if (o.loopback != Loopback::mac || !o.promiscuous || !o.rx_manual || port.rx_free_slots(0) + 1 != o.rx_ring) {
        throw Error("open loopback copy engine", port.device().bdf().str(),
                    "the port is not in MAC loopback with promiscuous receive and empty RX rings",
                    "open the nic::Igb with LoopbackCopy::port_options()");
    }
    pending_.resize(port.rx_free_slots(0) + 1);
}

bool LoopbackCopy::start(std::uint64_t dst, std::uint64_t src, std::size_t size) noexcept {
    if (broken_ || size < kMinChunk) return false;
    std::size_t frames = 0;
    chunks(size, [&](std::size_t, std::uint32_t) { ++frames; });
    if (frames > port_.rx_free_slots(0) || frames > port_.tx_free_slots(0) || count_ + frames > pending_.size())
        return false;
    // Receive buffers first (at the exact destinations), then the frames: nothing can arrive unposted.
    Packet batch[32];
    std::size_t k = 0;
    auto flush_rx = [&] {
        port_.rx_post(0, std::span(batch, k));
        k = 0;
    };
    chunks(size, [&](std::size_t off, std::uint32_t len) {
        batch[k++] = Packet{nullptr, dst + off, len, 0, nullptr};
        pending_[(head_ + count_++) % pending_.size()] = Chunk{dst + off, len};
        if (k == 32) flush_rx();
    });
    flush_rx();
    chunks(size, [&](std::size_t off, std::uint32_t len) {
        batch[k++] = Packet{nullptr, src + off, len, 0, nullptr};
        if (k == 32) {
            port_.tx_burst(0, std::span(batch, k));
            k = 0;
        }
    });
    port_.tx_burst(0, std::span(batch, k));
    return true;
}

bool LoopbackCopy::wait(int timeout_ms) noexcept {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (count_ && !broken_) {
        Packet got[32];
        std::uint16_t n = port_.rx_burst(0, got);
        for (std::uint16_t i = 0; i < n; ++i) {
            const Chunk& c = pending_[head_];
            if (got[i].iova != c.dst || got[i].len != c.len) broken_ = true;
            bytes_ += c.len;
            head_ = (head_ + 1) % pending_.size();
            --count_;
        }
        port_.tx_reclaim(0);
        if (n == 0 && std::chrono::steady_clock::now() > end) return false;
    }
    return !broken_;
}

}  // namespace bardrive::nic
