#include "nic/e1000/ring.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic {

void check_ring_size(std::uint32_t descriptors, const char* what) {
    bool pow2 = descriptors != 0 && (descriptors & (descriptors - 1)) == 0;
    if (!pow2 || descriptors < e1000::RING_ALIGN_DESCS || descriptors > e1000::RING_MAX_DESCS) {
        throw Error("configure ring", what,
                    log::concat(descriptors, " descriptors is not a power of two from ", e1000::RING_ALIGN_DESCS,
                                " to ", e1000::RING_MAX_DESCS),
                    "pick e.g. 512");
    }
}

RxRing::RxRing(e1000::AdvRxDesc* descs, std::uint32_t size, std::uint32_t buffer_size)
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
    e1000::AdvRxDesc& d = descs_[tail_];
    d.read.pkt_addr = p.iova;
    d.read.hdr_addr = 0;  // also clears the write-back status word, so a stale DD cannot be seen again
    slots_[tail_] = Packet{p.data, p.iova, 0, p.buf, p.pool};  // poll() fills in the rest
    tail_ = (tail_ + 1) & mask_;
}

// Every buffer is posted large enough for a whole frame, so a chain means the device ignored SRRCTL:
// the whole chain is dropped, through its EOP descriptor. Each dropped buffer goes back at the tail.
std::uint32_t RxRing::drop(const Packet& p, std::uint32_t status, std::uint32_t whole) noexcept {
    const bool eop = status & e1000::rxd::EOP;
    bool chain = whole != kWhole;
    if (!eop || chain) {
        ++counters_.chained;
        chain = !eop;
    } else if (status & e1000::rxd::ERR_RXE) {
        ++counters_.frame_errors;
    } else {
        ++counters_.bad_length;
    }
    repost(p);
    return chain ? ~0u : kWhole;
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

TxRing::TxRing(e1000::AdvTxDesc* descs, std::uint32_t size, const std::uint32_t* head_wb, std::uint32_t max_frame,
               TxFormat format)
    : descs_(descs),
      head_wb_(head_wb),
      mask_(size - 1),
      max_frame_(std::min<std::uint32_t>(max_frame, e1000::txd::DTALEN_MASK)),
      format_(format) {
    check_ring_size(size, "tx ring");
    storage_.resize(size);
    slots_ = storage_.data();
    to_slots_ = reinterpret_cast<std::uintptr_t>(slots_) - reinterpret_cast<std::uintptr_t>(descs_);
    data_type_ = (format == TxFormat::igb_advanced ? e1000::txd::DTYP_DATA : e1000::txd::DTYP_E1000E_DATA) |
                 e1000::txd::CMD_DEXT | e1000::txd::CMD_IFCS | e1000::txd::CMD_EOP | (head_wb ? 0 : e1000::txd::CMD_RS);
    static_assert(((e1000::txd::DTYP_DATA | e1000::txd::DTYP_E1000E_DATA | e1000::txd::CMD_DEXT | e1000::txd::CMD_IFCS |
                    e1000::txd::CMD_EOP | e1000::txd::CMD_RS) &
                   e1000::txd::DTALEN_MASK) == 0,
                  "the type's bits lie above the 16-bit length, so type + len = type | len");
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
    auto& c = reinterpret_cast<e1000::AdvTxContextDesc&>(descs_[tail]);
    c.vlan_macip_lens = (p.flags & pkt::TX_VLAN ? std::uint32_t{p.vlan} << e1000::txd::VLAN_SHIFT : 0) |
                        std::uint32_t{p.l2_len} << e1000::txd::MACLEN_SHIFT | p.l3_len;
    c.seqnum_seed = 0;
    c.type_tucmd_mlhl = e1000::txd::DTYP_CONTEXT | e1000::txd::CMD_DEXT | (csum ? e1000::txd::TUCMD_IPV4 : 0) |
                        (p.flags & pkt::TX_TCP_CSUM ? e1000::txd::TUCMD_L4T_TCP : 0);
    c.mss_l4len_idx = 0;                 // context 0
    slots_[tail] = Slot{0, 0, nullptr};  // nothing to give back when it completes
    return true;
}

std::uint32_t TxRing::reclaim(std::span<Packet> out) noexcept {
    const std::uint32_t n = std::min<std::uint32_t>(finished(), static_cast<std::uint32_t>(out.size()));
    for (std::uint32_t i = 0; i < n; ++i) {
        const Slot& s = slots_[clean_];
        out.data()[i] = Packet{nullptr, 0, s.len, s.buf, s.pool};
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

std::uint32_t TxRing::drain(std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    while (n < out.size() && in_flight() != 0) {
        const Slot& s = slots_[clean_];
        out.data()[n++] = Packet{nullptr, 0, s.len, s.buf, s.pool};
        clean_ = (clean_ + 1) & mask_;
    }
    return n;
}

}  // namespace bardrive::nic
