#include "nic/ring.hpp"

#include <algorithm>
#include <atomic>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic {

namespace {
// The device writes status words by DMA: read them as atomics so the compiler reloads them, and with
// acquire so the rest of the descriptor is read after the DD bit was seen.
std::uint32_t load_acquire(const std::uint32_t& word) noexcept {
    return std::atomic_ref<const std::uint32_t>(word).load(std::memory_order_acquire);
}
}  // namespace

void check_ring_size(std::uint32_t descriptors, const char* what) {
    bool pow2 = descriptors != 0 && (descriptors & (descriptors - 1)) == 0;
    if (!pow2 || descriptors < igb::RING_ALIGN_DESCS || descriptors > igb::RING_MAX_DESCS) {
        throw Error("configure ring", what,
                    log::concat(descriptors, " descriptors is not a power of two from ", igb::RING_ALIGN_DESCS, " to ",
                                igb::RING_MAX_DESCS),
                    "pick e.g. 512");
    }
}

RxRing::RxRing(igb::AdvRxDesc* descs, std::uint32_t size, std::uint32_t buffer_size)
    : descs_(descs), mask_(size - 1), buffer_size_(buffer_size) {
    check_ring_size(size, "rx ring");
    if (buffer_size < ETH_MIN_FRAME) {
        throw Error("configure ring", "rx ring", log::concat("buffers of ", buffer_size, " bytes cannot hold a frame"),
                    "use buffers of at least 2048 bytes");
    }
    slots_.resize(size);
}

std::uint32_t RxRing::post(std::span<const Packet> bufs) noexcept {
    std::uint32_t n = std::min<std::uint32_t>(static_cast<std::uint32_t>(bufs.size()), free_slots());
    for (std::uint32_t i = 0; i < n; ++i) repost(bufs[i]);
    return n;
}

void RxRing::repost(const Packet& p) noexcept {
    igb::AdvRxDesc& d = descs_[tail_];
    d.read.pkt_addr = p.iova;
    d.read.hdr_addr = 0;  // also clears the write-back status word, so a stale DD cannot be seen again
    slots_[tail_] = p;
    tail_ = (tail_ + 1) & mask_;
}

std::uint32_t RxRing::poll(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    // A device that keeps setting DD on reposted descriptors cannot keep this loop going: one lap at most.
    for (std::uint32_t seen = 0; n < out.size() && posted() != 0 && seen <= mask_; ++seen) {
        const igb::AdvRxDesc& d = descs_[clean_];
        std::uint32_t status = load_acquire(d.wb.status_error);
        if (!(status & igb::rxd::DD)) break;
        std::uint32_t len = d.wb.length;
        Packet p = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;

        // Every buffer is posted large enough for a whole frame, so a chain means the device ignored
        // SRRCTL: drop the whole chain, through its EOP descriptor.
        bool eop = status & igb::rxd::EOP;
        if (!eop || in_chain_) {
            ++counters_.chained;
            in_chain_ = !eop;
            repost(p);
            continue;
        }
        if (status & igb::rxd::ERR_RXE) {
            ++counters_.frame_errors;
            repost(p);
            continue;
        }
        if (len < ETH_HEADER_LEN || len > buffer_size_) {
            ++counters_.bad_length;
            repost(p);
            continue;
        }
        p.len = len;
        out[n++] = p;
        ++counters_.packets;
        counters_.bytes += len;
    }
    return n;
}

bool RxRing::has_work() const noexcept {
    return posted() != 0 && (load_acquire(descs_[clean_].wb.status_error) & igb::rxd::DD);
}

std::uint32_t RxRing::drain(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    while (n < out.size() && posted() != 0) {
        out[n++] = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;
    }
    in_chain_ = false;
    return n;
}

TxRing::TxRing(igb::AdvTxDesc* descs, std::uint32_t size, const std::uint32_t* head_wb, std::uint32_t max_frame,
               TxFormat format)
    : descs_(descs),
      head_wb_(head_wb),
      mask_(size - 1),
      max_frame_(std::min<std::uint32_t>(max_frame, igb::txd::DTALEN_MASK)),
      format_(format) {
    check_ring_size(size, "tx ring");
    slots_.resize(size);
}

std::uint32_t TxRing::push(std::span<const Packet> pkts) noexcept {
    std::uint32_t room = std::min<std::uint32_t>(static_cast<std::uint32_t>(pkts.size()), free_slots());
    std::uint32_t n = 0;
    igb::AdvTxDesc* last = nullptr;
    const bool igb = format_ == TxFormat::igb_advanced;
    // Without head write-back each descriptor reports its own completion.
    const std::uint32_t rs_each = head_wb_ ? 0 : igb::txd::CMD_RS;
    const std::uint32_t type = (igb ? igb::txd::DTYP_DATA : igb::txd::DTYP_E1000E_DATA) | igb::txd::CMD_DEXT |
                               igb::txd::CMD_IFCS | igb::txd::CMD_EOP | rs_each;
    for (; n < room; ++n) {
        const Packet& p = pkts[n];
        if (p.len == 0 || p.len > max_frame_) {
            ++counters_.bad_length;
            break;
        }
        igb::AdvTxDesc& d = descs_[tail_];
        d.read.buffer_addr = p.iova;
        d.read.cmd_type_len = type | p.len;
        d.read.olinfo_status = igb ? p.len << igb::txd::PAYLEN_SHIFT : 0;  // also clears a stale DD
        slots_[tail_] = p;
        tail_ = (tail_ + 1) & mask_;
        counters_.bytes += p.len;
        last = &d;
    }
    // One head write-back per batch is enough: the head covers every descriptor before it.
    if (last) last->read.cmd_type_len |= igb::txd::CMD_RS;
    counters_.packets += n;
    return n;
}

std::uint32_t TxRing::reclaim(std::span<Packet> out) noexcept {
    if (!head_wb_) {
        std::uint32_t n = 0;
        while (n < out.size() && in_flight() != 0 && (load_acquire(descs_[clean_].wb.status) & igb::txd::STA_DD)) {
            out[n++] = slots_[clean_];
            clean_ = (clean_ + 1) & mask_;
        }
        return n;
    }
    std::uint32_t head = load_acquire(*head_wb_);
    std::uint32_t queued = in_flight();
    std::uint32_t done = (head - clean_) & mask_;
    if (head > mask_ || done > queued) {
        ++counters_.bad_head;
        return 0;
    }
    std::uint32_t n = std::min<std::uint32_t>(done, static_cast<std::uint32_t>(out.size()));
    for (std::uint32_t i = 0; i < n; ++i) {
        out[i] = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

std::uint32_t TxRing::drain(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    while (n < out.size() && in_flight() != 0) {
        out[n++] = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

}  // namespace bardrive::nic
