#include "nic/ring.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic {

namespace {
// The device writes status words by DMA: read them as atomics so the compiler reloads them, and with
// acquire so the rest of the descriptor is read after the DD bit was seen.
// (The builtin, not std::atomic_ref: its alignment assertion would cost a branch per frame.)
std::uint32_t load_acquire(const std::uint32_t& word) noexcept { return __atomic_load_n(&word, __ATOMIC_ACQUIRE); }
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
    storage_.resize(size);
    slots_ = storage_.data();
}

std::uint32_t RxRing::post(std::span<const Packet> bufs) noexcept {
    std::uint32_t n = std::min<std::uint32_t>(static_cast<std::uint32_t>(bufs.size()), free_slots());
    for (std::uint32_t i = 0; i < n; ++i) repost(bufs.data()[i]);
    return n;
}

void RxRing::repost(const Packet& p) noexcept {
    igb::AdvRxDesc& d = descs_[tail_];
    d.read.pkt_addr = p.iova;
    d.read.hdr_addr = 0;  // also clears the write-back status word, so a stale DD cannot be seen again
    slots_[tail_] = p;
    tail_ = (tail_ + 1) & mask_;
}

// The hot loops below walk descriptors and slots by pointer over runs that do not wrap around the
// ring, and keep what they need in locals (their stores could alias any member, which the compiler
// would then reload every frame).

std::uint32_t RxRing::refill(dma::BufferPool& pool) noexcept {
    const std::uint32_t* idx;
    const std::uint32_t k = pool.alloc_bulk(free_slots(), idx);
    const dma::BufferPool::Buffer first = pool.at(0);
    const std::size_t stride = pool.stride();
    std::uint32_t tail = tail_;
    for (std::uint32_t left = k; left != 0;) {
        const std::uint32_t run = std::min(left, mask_ + 1 - tail);
        igb::AdvRxDesc* d = descs_ + tail;
        Packet* slot = slots_ + tail;
        for (const std::uint32_t* const end = idx + run; idx != end; ++idx, ++d, ++slot) {
            const std::size_t off = std::size_t{*idx} * stride;
            const std::uint64_t iova = first.iova + off;
            d->read.pkt_addr = iova;
            d->read.hdr_addr = 0;  // also clears the write-back status word
            *slot = Packet{reinterpret_cast<std::uint8_t*>(first.data + off), iova, 0, *idx, &pool};
        }
        tail = (tail + run) & mask_;
        left -= run;
    }
    tail_ = tail;
    return k;
}

std::uint32_t RxRing::poll(std::span<Packet> out) noexcept {
    // Never more descriptors than are posted: a device that sets DD on stale or unposted descriptors can
    // neither hand a buffer out twice nor keep this loop going past one lap.
    std::uint32_t look = std::min<std::uint32_t>(static_cast<std::uint32_t>(out.size()), posted());
    const std::uint32_t longest = buffer_size_ - ETH_HEADER_LEN;
    Packet* o = out.data();
    bool chain = in_chain_;
    std::uint32_t clean = clean_;
    std::uint64_t bytes = 0;
    while (look != 0) {
        const std::uint32_t run = std::min(look, mask_ + 1 - clean);
        const igb::AdvRxDesc* const begin = descs_ + clean;
        const igb::AdvRxDesc* d = begin;
        const Packet* slot = slots_ + clean;
        for (const igb::AdvRxDesc* const end = begin + run; d != end; ++d, ++slot) {
            const std::uint32_t status = load_acquire(d->wb.status_error);
            if (!(status & igb::rxd::DD)) break;
            const std::uint32_t len = d->wb.length;
            // One branch for every check: the frame's last descriptor (EOP), not the rest of a chain, no
            // frame error (RXE), from an Ethernet header up to the buffer's size (len - 14 wraps below 14).
            if ((status & (igb::rxd::EOP | igb::rxd::ERR_RXE)) != igb::rxd::EOP || chain ||
                len - ETH_HEADER_LEN > longest) [[unlikely]] {
                chain = drop(*slot, status, chain);
                continue;
            }
            *o = *slot;
            o->len = len;
            o->flags = status & pkt::RX_MASK;
            o->vlan = d->wb.vlan;
            ++o;
            bytes += len;
        }
        const auto done = static_cast<std::uint32_t>(d - begin);
        clean = (clean + done) & mask_;
        look -= done;
        if (done != run) break;  // stopped at a descriptor the device has not written yet
    }
    const auto n = static_cast<std::uint32_t>(o - out.data());
    clean_ = clean;
    in_chain_ = chain;
    counters_.packets += n;
    counters_.bytes += bytes;
    return n;
}

// Every buffer is posted large enough for a whole frame, so a chain means the device ignored SRRCTL:
// the whole chain is dropped, through its EOP descriptor. Each dropped buffer goes back at the tail.
// Returns whether the next descriptor is still inside a chain.
bool RxRing::drop(const Packet& p, std::uint32_t status, bool chain) noexcept {
    const bool eop = status & igb::rxd::EOP;
    if (!eop || chain) {
        ++counters_.chained;
        chain = !eop;
    } else if (status & igb::rxd::ERR_RXE) {
        ++counters_.frame_errors;
    } else {
        ++counters_.bad_length;
    }
    repost(p);
    return chain;
}

bool RxRing::has_work() const noexcept {
    return posted() != 0 && (load_acquire(descs_[clean_].wb.status_error) & igb::rxd::DD);
}

std::uint32_t RxRing::drain(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    while (n < out.size() && posted() != 0) {
        out.data()[n++] = slots_[clean_];
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
    storage_.resize(size);
    slots_ = storage_.data();
}

std::uint32_t TxRing::push(std::span<const Packet> pkts) noexcept {
    const auto count = static_cast<std::uint32_t>(pkts.size());
    return format_ == TxFormat::igb_advanced ? push_frames<true>(pkts.data(), count)
                                             : push_frames<false>(pkts.data(), count);
}

template <bool Advanced>
std::uint32_t TxRing::push_frames(const Packet* const in, std::uint32_t count) noexcept {
    // Without head write-back each descriptor reports its own completion.
    const std::uint32_t type = (Advanced ? igb::txd::DTYP_DATA : igb::txd::DTYP_E1000E_DATA) | igb::txd::CMD_DEXT |
                               igb::txd::CMD_IFCS | igb::txd::CMD_EOP | (head_wb_ ? 0 : igb::txd::CMD_RS);
    const std::uint32_t max_frame = max_frame_, first = tail_;
    std::uint32_t room = free_slots(), tail = first;
    std::uint64_t bytes = 0;
    const Packet* p = in;
    const Packet* const end = in + count;
    while (p != end && room != 0) {
        // A run of frames without offloads, up to the batch's end, the room left or the ring's end.
        const auto run =
            static_cast<std::uint32_t>(std::min<std::size_t>(std::min<std::size_t>(end - p, room), mask_ + 1 - tail));
        igb::AdvTxDesc* const begin = descs_ + tail;
        igb::AdvTxDesc* d = begin;
        Packet* slot = slots_ + tail;
        for (const Packet* const run_end = p + run; p != run_end; ++p, ++d, ++slot) {
            // One branch for both: a length from 1 to max_frame (len - 1 wraps for 0), no offload asked.
            if (p->len - 1 >= max_frame || (p->flags & pkt::TX_MASK)) [[unlikely]]
                break;
            d->read.buffer_addr = p->iova;
            d->read.cmd_type_len = type | p->len;
            // PAYLEN (igb); 0 on the 82574, whose descriptor has no such field. Also clears a stale DD.
            d->read.olinfo_status = Advanced ? p->len << igb::txd::PAYLEN_SHIFT : 0;
            *slot = *p;
            bytes += p->len;
        }
        const auto done = static_cast<std::uint32_t>(d - begin);
        tail = (tail + done) & mask_;
        room -= done;
        if (done == run) continue;
        // *p stopped the run: a length to refuse, or offloads (a context descriptor, then the frame's).
        if (p->len - 1 >= max_frame) {
            ++counters_.bad_length;
            break;
        }
        if (!Advanced) {
            ++counters_.bad_offload;
            break;
        }
        if (room < 2 || !push_context(*p, tail)) break;
        tail = (tail + 1) & mask_;
        std::uint32_t cmd = type | p->len, olinfo = p->len << igb::txd::PAYLEN_SHIFT;
        if (p->flags & pkt::TX_VLAN) cmd |= igb::txd::CMD_VLE;
        if (p->flags & pkt::TX_IP_CSUM) olinfo |= igb::txd::POPTS_IXSM;
        if (p->flags & (pkt::TX_TCP_CSUM | pkt::TX_UDP_CSUM)) olinfo |= igb::txd::POPTS_TXSM;
        igb::AdvTxDesc& data = descs_[tail];
        data.read.buffer_addr = p->iova;
        data.read.cmd_type_len = cmd;
        data.read.olinfo_status = olinfo;
        slots_[tail] = *p;
        bytes += p->len;
        tail = (tail + 1) & mask_;
        room -= 2;
        ++p;
    }
    // One head write-back per batch is enough: the head covers every descriptor before it.
    if (tail != first) descs_[(tail - 1) & mask_].read.cmd_type_len |= igb::txd::CMD_RS;
    const auto n = static_cast<std::uint32_t>(p - in);
    tail_ = tail;
    counters_.packets += n;
    counters_.bytes += bytes;
    return n;
}

// Writes the context descriptor of a frame with offloads (igb) at `tail`: its header lengths and VLAN
// tag. False (nothing written, counted) when the checksum offloads lack their header lengths.
bool TxRing::push_context(const Packet& p, std::uint32_t tail) noexcept {
    const bool csum = p.flags & (pkt::TX_IP_CSUM | pkt::TX_TCP_CSUM | pkt::TX_UDP_CSUM);
    const bool both_l4 = (p.flags & pkt::TX_TCP_CSUM) && (p.flags & pkt::TX_UDP_CSUM);
    if (csum && (p.l2_len < ETH_HEADER_LEN || p.l3_len < 20 || both_l4)) {
        ++counters_.bad_offload;
        return false;
    }
    auto& c = reinterpret_cast<igb::AdvTxContextDesc&>(descs_[tail]);
    c.vlan_macip_lens = (p.flags & pkt::TX_VLAN ? std::uint32_t{p.vlan} << igb::txd::VLAN_SHIFT : 0) |
                        std::uint32_t{p.l2_len} << igb::txd::MACLEN_SHIFT | p.l3_len;
    c.seqnum_seed = 0;
    c.type_tucmd_mlhl = igb::txd::DTYP_CONTEXT | igb::txd::CMD_DEXT | (csum ? igb::txd::TUCMD_IPV4 : 0) |
                        (p.flags & pkt::TX_TCP_CSUM ? igb::txd::TUCMD_L4T_TCP : 0);
    c.mss_l4len_idx = 0;      // context 0
    slots_[tail] = Packet{};  // nothing to give back when it completes
    return true;
}

std::uint32_t TxRing::finished() noexcept {
    if (!head_wb_) {
        std::uint32_t n = 0, at = clean_;
        for (std::uint32_t queued = in_flight(); n < queued && (load_acquire(descs_[at].wb.status) & igb::txd::STA_DD);
             ++n)
            at = (at + 1) & mask_;
        return n;
    }
    const std::uint32_t head = load_acquire(*head_wb_);
    const std::uint32_t done = (head - clean_) & mask_;
    if (head > mask_ || done > in_flight()) [[unlikely]] {
        ++counters_.bad_head;
        return 0;
    }
    return done;
}

std::uint32_t TxRing::reclaim(std::span<Packet> out) noexcept {
    const std::uint32_t n = std::min<std::uint32_t>(finished(), static_cast<std::uint32_t>(out.size()));
    for (std::uint32_t i = 0; i < n; ++i) {
        out.data()[i] = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

std::uint32_t TxRing::reclaim_to_pools() noexcept {
    const std::uint32_t n = finished();
    std::uint32_t clean = clean_;
    for (std::uint32_t left = n; left != 0;) {
        const std::uint32_t run = std::min(left, mask_ + 1 - clean);
        for (const Packet *s = slots_ + clean, *const end = s + run; s != end; ++s)
            if (s->pool) s->pool->free(s->buf);
        clean = (clean + run) & mask_;
        left -= run;
    }
    clean_ = clean;
    return n;
}

std::uint32_t TxRing::drain(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    while (n < out.size() && in_flight() != 0) {
        out.data()[n++] = slots_[clean_];
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

}  // namespace bardrive::nic
