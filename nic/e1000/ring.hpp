// Descriptor rings of the e1000 family, as pure logic over descriptor memory: posting buffers, harvesting
// completions, wrap-around, and checking what the device reports before believing it. The drivers
// (nic::Igb, nic::E1000e) add the doorbells; unit tests drive these classes with descriptors they write.
// Where the parts' formats differ the ring takes the difference as a parameter: TxFormat (the 82576's
// advanced data descriptor or the 82574's extended one; one branch per burst picks the loop compiled for
// it) and the TX completion source (head write-back, or each descriptor's DD bit). RX needs none: the
// 82574's extended receive write-back keeps the 82576's status and error bits (DD, EOP, VP, checksums,
// RXE) at the same places.
//
// Data-path methods never throw and never allocate. A device that lies (a descriptor with an impossible
// length, a head index outside the ring or behind the driver) costs a counted drop, never an access
// outside the ring or outside a buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../../dma/buffer_pool.hpp"
#include "../packet.hpp"
#include "desc.hpp"

namespace bardrive::nic {

// Checks a ring size chosen by the user: a power of two from 8 to 32768 descriptors (RDLEN/TDLEN are
// multiples of 128 bytes, head/tail 16 bits). Throws bardrive::Error naming `what` otherwise.
void check_ring_size(std::uint32_t descriptors, const char* what);

struct RxRingCounters {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t bad_length = 0;    // DD set with a length of 0, below an Ethernet header or above the buffer
    std::uint64_t chained = 0;       // descriptors of frames spanning several buffers (never posted that way)
    std::uint64_t frame_errors = 0;  // the device flagged the frame bad (RXE)
};

static_assert(
    offsetof(Packet, data) == 0 && offsetof(Packet, iova) == 8 && offsetof(Packet, len) == 16 &&
        offsetof(Packet, buf) == 20 && offsetof(Packet, pool) == 24 && offsetof(Packet, flags) == 32 &&
        offsetof(Packet, l2_len) == offsetof(Packet, vlan) + 2 &&
        offsetof(Packet, l3_len) == offsetof(Packet, vlan) + 3,
    "RxRing::harvest copies data, iova, buf, pool as the first 32 bytes and writes vlan, l2_len, l3_len at once; "
    "TxRing::push copies len, buf, pool as 16 bytes");
static_assert(pkt::RX_VLAN == e1000::rxd::VP && pkt::RX_UDP == e1000::rxd::UDPCS &&
                  pkt::RX_L4_CHECKED == e1000::rxd::L4CS && pkt::RX_IP_CHECKED == e1000::rxd::IPCS &&
                  pkt::RX_L4_BAD == e1000::rxd::ERR_L4E && pkt::RX_IP_BAD == e1000::rxd::ERR_IPE,
              "Packet::flags on RX are the descriptor's status/error bits");

class RxRing {
public:
    // `descs` holds `size` descriptors (DMA memory the device reads); every posted buffer holds
    // `buffer_size` bytes. Throws bardrive::Error for a bad size.
    RxRing(e1000::AdvRxDesc* descs, std::uint32_t size, std::uint32_t buffer_size);
    RxRing(RxRing&&) noexcept = default;  // slots_ keeps pointing into the moved storage
    RxRing(const RxRing&) = delete;
    RxRing& operator=(const RxRing&) = delete;

    // Writes up to bufs.size() buffers into free descriptors; returns how many it took.
    std::uint32_t post(std::span<const Packet> bufs) noexcept;
    // Posts buffers taken from `pool` into every free descriptor; returns how many (fewer: the pool ran dry).
    std::uint32_t refill(dma::BufferPool& pool) noexcept;

    // Harvests up to out.size() received frames in ring order, each with its Packet::flags and vlan.
    // Frames the device reported badly are counted and their buffers re-posted at once (so the caller
    // rings the doorbell when tail() moved). Looks at no more descriptors than are posted.
    std::uint32_t poll(std::span<Packet> out) noexcept { return has_work() ? harvest(out) : 0; }
    // poll() for a caller that just saw has_work() (a driver that keeps its empty polls apart).
    std::uint32_t harvest(std::span<Packet> out) noexcept;

    // True when the next descriptor to harvest is done (a frame, or a drop to count).
    bool has_work() const noexcept {
        return posted() != 0 && (__atomic_load_n(&descs_[clean_].wb.status_error, __ATOMIC_ACQUIRE) & e1000::rxd::DD);
    }

    std::uint32_t tail() const noexcept { return tail_; }  // the value RDT should hold
    std::uint32_t next_to_clean() const noexcept { return clean_; }
    std::uint32_t posted() const noexcept { return (tail_ - clean_) & mask_; }
    std::uint32_t free_slots() const noexcept {
        return mask_ - posted();
    }  // one slot stays empty: head == tail means empty
    std::uint32_t size() const noexcept { return mask_ + 1; }
    const RxRingCounters& counters() const noexcept { return counters_; }

    // Gives back every posted buffer (device stopped), in ring order; returns how many.
    std::uint32_t drain(std::span<Packet> out) noexcept;

private:
    static constexpr std::uint32_t kWhole = e1000::rxd::DD | e1000::rxd::EOP;  // a whole good frame's bits
    void repost(const Packet& p) noexcept;
    // harvest()'s common case, four descriptors at a time; returns where it stopped (see its definition).
    const e1000::AdvRxDesc* harvest_whole4(const e1000::AdvRxDesc* d, const e1000::AdvRxDesc* end, const Packet*& slot,
                                           std::uintptr_t to_out, std::uint64_t& bytes) const noexcept;
    // Counts and re-posts a done descriptor poll() will not hand out; `whole` and the result as in poll().
    std::uint32_t drop(const Packet& p, std::uint32_t status, std::uint32_t whole) noexcept;

    e1000::AdvRxDesc* descs_;
    std::uint32_t mask_;
    std::uint32_t buffer_size_;
    std::uint32_t tail_ = 0;
    std::uint32_t clean_ = 0;
    bool in_chain_ = false;  // inside a frame the device spread over several descriptors
    std::vector<Packet> storage_;
    Packet* slots_;  // storage_.data(): the hot loops index it without std::vector's checks
    RxRingCounters counters_;
};

struct TxRingCounters {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t bad_length = 0;   // frames refused: empty or longer than max_frame
    std::uint64_t bad_head = 0;     // head write-back outside the ring or beyond what was queued
    std::uint64_t bad_offload = 0;  // frames refused: an offload this format lacks, or header lengths unset
};

// The 16-byte transmit data descriptors both parts share in layout (address, cmd/type/length, status):
// the 82576's advanced one (DTYP 0011, PAYLEN) and the 82574's extended one (DTYP 0001).
enum class TxFormat { igb_advanced, e1000e_extended };

class TxRing {
public:
    // `head_wb` is the 32-bit word the device writes its head index to (TDWBAL/H); null: completions are
    // read from each descriptor's DD bit instead (the 82574 has no head write-back), every descriptor
    // then asks for it. Frames longer than `max_frame` are refused. Throws bardrive::Error for a bad size.
    TxRing(e1000::AdvTxDesc* descs, std::uint32_t size, const std::uint32_t* head_wb, std::uint32_t max_frame,
           TxFormat format = TxFormat::igb_advanced);
    TxRing(TxRing&&) noexcept = default;
    TxRing(const TxRing&) = delete;
    TxRing& operator=(const TxRing&) = delete;

    // Queues frames in order; stops at a full ring or at a frame of impossible length or offload
    // (counted). A frame with pkt::TX_* flags (igb format only) takes a context descriptor before its
    // data descriptor. The last descriptor queued asks for a head write-back. Returns how many were taken.
    std::uint32_t push(std::span<const Packet> pkts) noexcept;

    // Returns up to out.size() descriptors' frames the device has finished with (their buffers are free
    // again), as told by the head write-back, once checked (or by the descriptors' DD bits), each as its
    // pool, buffer index and length (data and iova are not kept). A context descriptor's slot comes back
    // as an empty Packet (no pool).
    std::uint32_t reclaim(std::span<Packet> out) noexcept;
    // The same, but gives every finished buffer straight back to its Packet::pool; returns how many
    // descriptors were finished.
    std::uint32_t reclaim_to_pools() noexcept;

    std::uint32_t tail() const noexcept { return tail_; }  // the value TDT should hold
    std::uint32_t in_flight() const noexcept { return (tail_ - clean_) & mask_; }
    std::uint32_t free_slots() const noexcept { return mask_ - in_flight(); }
    std::uint32_t size() const noexcept { return mask_ + 1; }
    const TxRingCounters& counters() const noexcept { return counters_; }

    // Gives back every queued frame (device stopped), as reclaim() does; returns how many.
    std::uint32_t drain(std::span<Packet> out) noexcept;

private:
    std::uint32_t finished() noexcept;  // descriptors from clean_ on that the device is done with
    template <bool Advanced>
    [[gnu::always_inline]] std::uint32_t push_frames(const Packet* in, std::uint32_t count) noexcept;
    bool push_context(const Packet& p, std::uint32_t tail) noexcept;
    // push_frames()'s common case, four frames at a time; returns where it stopped (see its definition).
    template <bool Advanced>
    e1000::AdvTxDesc* push_whole4(const Packet*& p, e1000::AdvTxDesc* d, e1000::AdvTxDesc* end, std::uint32_t type,
                                  std::uintptr_t to_slots, std::uint64_t& bytes) const noexcept;
    struct Slot;
    // reclaim_to_pools()'s common case, four slots at a time; returns where it stopped.
    static const Slot* free_whole4(const Slot* s, const Slot* end, dma::BufferPool::Returns& back) noexcept;

    e1000::AdvTxDesc* descs_;
    const std::uint32_t* head_wb_;
    std::uint32_t mask_;
    std::uint32_t max_frame_;
    TxFormat format_;
    std::uint32_t tail_ = 0;
    std::uint32_t clean_ = 0;
    // What giving a frame's buffer back needs, per descriptor (a context descriptor's: no pool): Packet's
    // len, buf and pool in Packet's order, so push copies them in one 16-byte move.
    struct Slot {
        std::uint32_t len;
        std::uint32_t buf;
        dma::BufferPool* pool;
    };
    static_assert(sizeof(Slot) == sizeof(e1000::AdvTxDesc));
    // A descriptor's slot, `to_slots` bytes from it: the loops then move one pointer for both.
    static Slot& slot_of(e1000::AdvTxDesc* d, std::uintptr_t to_slots) noexcept {
        return *reinterpret_cast<Slot*>(reinterpret_cast<std::uintptr_t>(d) + to_slots);
    }
    std::vector<Slot> storage_;
    Slot* slots_;              // storage_.data()
    std::uintptr_t to_slots_;  // slots_ - descs_ in bytes (slot_of)
    // A data descriptor's type and command bits: the format's DTYP, DEXT, IFCS, EOP; without head
    // write-back also RS, each descriptor then reporting its own completion. The length is added per frame.
    std::uint32_t data_type_;
    TxRingCounters counters_;
};

// The data path, inline so that a driver's rx_burst/tx_burst compile into one function with it.

namespace detail {
// The device writes status words by DMA: read them as atomics so the compiler reloads them, and with
// acquire so the rest of the descriptor is read after the DD bit was seen.
// (The builtin, not std::atomic_ref: its alignment assertion would cost a branch per frame.)
inline std::uint32_t load_acquire(const std::uint32_t& word) noexcept {
    return __atomic_load_n(&word, __ATOMIC_ACQUIRE);
}

#if defined(__SSE2__)
// Unsigned 32-bit compares for the four-at-a-time paths: SSE2 compares signed, so both sides have their
// sign bit flipped. A limit is flipped once (`flipped`), each lane of `x` per compare (`above`).
inline __m128i flipped(std::uint32_t limit) noexcept { return _mm_set1_epi32(static_cast<int>(limit ^ 0x80000000u)); }
inline __m128i above(__m128i x, __m128i flipped_limit) noexcept {  // lanes of x > limit, unsigned: all ones
    return _mm_cmpgt_epi32(_mm_xor_si128(x, _mm_set1_epi32(INT32_MIN)), flipped_limit);
}
// The four 32-bit lanes added up; each holds at most a ring's worth of 16-bit lengths (32768 x 65535 < 2^32).
inline std::uint32_t lane_sum(__m128i v) noexcept {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
}
#endif
}  // namespace detail

// The hot loops below walk descriptors and slots by pointer over runs that do not wrap around the
// ring, and keep what they need in locals (their stores could alias any member, which the compiler
// would then reload every frame).

inline std::uint32_t RxRing::refill(dma::BufferPool& pool) noexcept {
    const std::uint32_t* idx;
    const std::uint32_t k = pool.alloc_bulk(free_slots(), idx);
    const dma::BufferPool::Buffer first = pool.at(0);
    const std::size_t stride = pool.stride();
    std::uint32_t tail = tail_;
    for (std::uint32_t left = k; left != 0;) {
        const std::uint32_t run = std::min(left, mask_ + 1 - tail);
        e1000::AdvRxDesc* d = descs_ + tail;
        Packet* slot = slots_ + tail;
        const std::uint32_t* const end = idx + run;
#pragma GCC unroll 4  // the loop's own instructions (three pointers, the test) once per four buffers
        for (; idx != end; ++idx, ++d, ++slot) {
            const std::uint32_t buf = *idx;  // once: the stores below may alias it
            const std::size_t off = std::size_t{buf} * stride;
            const std::uint64_t iova = first.iova + off;
            d->read.pkt_addr = iova;
            d->read.hdr_addr = 0;  // also clears the write-back status word
            slot->data = reinterpret_cast<std::uint8_t*>(first.data + off);
            slot->iova = iova;
            slot->buf = buf;
            slot->pool = &pool;  // the other fields stay 0 (set at construction, post)
        }
        tail = (tail + run) & mask_;
        left -= run;
    }
    tail_ = tail;
    return k;
}

// Whole good frames four at a time, in SSE2 registers: four descriptors loaded and checked together
// (written, EOP, no RXE, a length from an Ethernet header up to the buffer), then four Packets out.
// Stops before the first group of four with anything else in it, or fewer than four left: harvest()'s
// one-at-a-time loop takes it from there with the same checks. Each descriptor's status, length and
// VLAN lie in one aligned 8-byte word, which one load reads whole; a descriptor whose DD it sees set is
// complete (the device writes the frame, then the write-back).
[[gnu::always_inline]] inline const e1000::AdvRxDesc* RxRing::harvest_whole4(const e1000::AdvRxDesc* d,
                                                                             const e1000::AdvRxDesc* const end,
                                                                             const Packet*& slot,
                                                                             const std::uintptr_t to_out,
                                                                             std::uint64_t& bytes) const noexcept {
#if defined(__SSE2__)
    if (end - d < 4) return d;  // a short run: no set-up for nothing
    const __m128i checked = _mm_set1_epi32(static_cast<int>(e1000::rxd::DD | e1000::rxd::EOP | e1000::rxd::ERR_RXE));
    const __m128i whole = _mm_set1_epi32(static_cast<int>(kWhole));
    const __m128i longest = detail::flipped(buffer_size_ - ETH_HEADER_LEN);  // len - 14 above it: too long
    const __m128i eth = _mm_set1_epi32(static_cast<int>(ETH_HEADER_LEN));
    const __m128i low16 = _mm_set1_epi32(0xffff);
    const __m128i rx_mask = _mm_set1_epi32(static_cast<int>(pkt::RX_MASK));
    __m128i sum = _mm_setzero_si128();
    for (std::size_t groups = (end - d) / 4; groups != 0; --groups, d += 4, slot += 4) {
        __asm__ volatile("" ::: "memory");  // the device writes descriptors: load them anew every time
        const __m128i d0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d));
        const __m128i d1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + 1));
        const __m128i d2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + 2));
        const __m128i d3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + 3));
        const __m128i s01 = _mm_unpackhi_epi32(d0, d1);         // status0 status1 length|vlan0 length|vlan1
        const __m128i s23 = _mm_unpackhi_epi32(d2, d3);         // the same for 2 and 3
        const __m128i status = _mm_unpacklo_epi64(s01, s23);    // status0..3
        const __m128i len_vlan = _mm_unpackhi_epi64(s01, s23);  // length | vlan << 16, 0..3
        const __m128i len = _mm_and_si128(len_vlan, low16);
        const __m128i ok = _mm_cmpeq_epi32(_mm_and_si128(status, checked), whole);
        const __m128i too_long = detail::above(_mm_sub_epi32(len, eth), longest);
        sum = _mm_add_epi32(sum, len);  // here, taken back on a break: the sum then stays in one register
        if (_mm_movemask_epi8(_mm_andnot_si128(too_long, ok)) != 0xffff) [[unlikely]] {
            sum = _mm_sub_epi32(sum, len);
            break;
        }
        __asm__ volatile("" ::: "memory");  // acquire: nothing of the frames is read before their DD was seen
        // Packet bytes 32..39 (flags, vlan, l2_len = l3_len = 0): the masked status next to the tag.
        const __m128i flags = _mm_and_si128(status, rx_mask), vlan = _mm_srli_epi32(len_vlan, 16);
        const __m128i fv01 = _mm_unpacklo_epi32(flags, vlan), fv23 = _mm_unpackhi_epi32(flags, vlan);
        const auto emit = [&](int k, std::uint32_t length, __m128i fv, bool high) {
            const Packet* const from = slot + k;
            auto* to = reinterpret_cast<Packet*>(reinterpret_cast<std::uintptr_t>(from) + to_out);
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));      // data, iova
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from) + 1);  // len, buf, pool
            _mm_storeu_si128(reinterpret_cast<__m128i*>(to), a);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(to) + 1, b);
            to->len = length;
            if (high)
                _mm_storeh_pd(reinterpret_cast<double*>(&to->flags), _mm_castsi128_pd(fv));
            else
                _mm_storel_epi64(reinterpret_cast<__m128i*>(&to->flags), fv);
        };
        emit(0, static_cast<std::uint32_t>(_mm_cvtsi128_si32(len)), fv01, false);
        emit(1, static_cast<std::uint32_t>(_mm_extract_epi16(len, 2)), fv01, true);
        emit(2, static_cast<std::uint32_t>(_mm_extract_epi16(len, 4)), fv23, false);
        emit(3, static_cast<std::uint32_t>(_mm_extract_epi16(len, 6)), fv23, true);
    }
    bytes += detail::lane_sum(sum);
#else
    (void)end, (void)slot, (void)to_out, (void)bytes;
#endif
    return d;
}

[[gnu::always_inline]] inline std::uint32_t RxRing::harvest(std::span<Packet> out) noexcept {
    // Never more descriptors than are posted: a device that sets DD on stale or unposted descriptors can
    // neither hand a buffer out twice nor keep this loop going past one lap.
    std::uint32_t look = std::min<std::uint32_t>(static_cast<std::uint32_t>(out.size()), posted());
    const std::uint32_t looked_at_most = look;
    std::uint32_t dropped = 0;
    const std::uint32_t longest = buffer_size_ - ETH_HEADER_LEN;
    // What (DD | EOP | RXE) of a frame to hand out reads: DD | EOP. Inside a chain nothing matches, so
    // the rest of the chain goes the slow way with the same single test.
    std::uint32_t whole = in_chain_ ? ~0u : kWhole;
    Packet* o = out.data();
    std::uint32_t clean = clean_;
    std::uint64_t bytes = 0;
    while (look != 0) {
        const std::uint32_t run = std::min(look, mask_ + 1 - clean);
        const e1000::AdvRxDesc* const begin = descs_ + clean;
        const e1000::AdvRxDesc* d = begin;
        const Packet* slot = slots_ + clean;
        // The next Packet out, kept as its distance from the slot: one pointer moves for both, and only a
        // drop moves the distance.
        std::uintptr_t to_out = reinterpret_cast<std::uintptr_t>(o) - reinterpret_cast<std::uintptr_t>(slot);
        const e1000::AdvRxDesc* const end = begin + run;
        if (whole == kWhole) d = harvest_whole4(d, end, slot, to_out, bytes);
        for (; d != end; ++d, ++slot) {
            const std::uint32_t status = detail::load_acquire(d->wb.status_error);
            const std::uint32_t len = d->wb.length;  // read after DD (acquire); used only when DD was set
            // Two tests for every check: written (DD), the frame's last descriptor (EOP), not the rest of a
            // chain, no frame error (RXE); from an Ethernet header up to the buffer's size (len - 14 wraps
            // below 14).
            if ((status & (e1000::rxd::DD | e1000::rxd::EOP | e1000::rxd::ERR_RXE)) != whole ||
                len - ETH_HEADER_LEN > longest) [[unlikely]] {
                if (!(status & e1000::rxd::DD)) break;  // the device has not written it yet
                whole = drop(*slot, status, whole);
                to_out -= sizeof(Packet);
                ++dropped;
                continue;
            }
            Packet& out_pkt = *reinterpret_cast<Packet*>(reinterpret_cast<std::uintptr_t>(slot) + to_out);
            std::memcpy(static_cast<void*>(&out_pkt), slot, offsetof(Packet, flags));  // data, iova, buf, pool
            out_pkt.len = len;
            out_pkt.flags = status & pkt::RX_MASK;
            const std::uint32_t vlan_l2_l3 = d->wb.vlan;  // l2_len and l3_len are 0 on RX: one store for three
            std::memcpy(&out_pkt.vlan, &vlan_l2_l3, sizeof vlan_l2_l3);
            bytes += len;
        }
        o = reinterpret_cast<Packet*>(reinterpret_cast<std::uintptr_t>(slot) + to_out);
        const auto done = static_cast<std::uint32_t>(d - begin);
        clean = (clean + done) & mask_;
        look -= done;
        if (done != run) break;  // stopped at a descriptor the device has not written yet
    }
    const std::uint32_t n = looked_at_most - look - dropped;  // counted: no division by the Packet's 40 bytes
    clean_ = clean;
    in_chain_ = whole != kWhole;
    counters_.packets += n;
    counters_.bytes += bytes;
    return n;
}

[[gnu::always_inline]] inline std::uint32_t TxRing::push(std::span<const Packet> pkts) noexcept {
    const auto count = static_cast<std::uint32_t>(pkts.size());
    return format_ == TxFormat::igb_advanced ? push_frames<true>(pkts.data(), count)
                                             : push_frames<false>(pkts.data(), count);
}

template <bool Advanced>
[[gnu::always_inline]] inline std::uint32_t TxRing::push_frames(const Packet* const in, std::uint32_t count) noexcept {
    const std::uint32_t type = data_type_;
    const std::uint32_t max_frame = max_frame_, first = tail_;  // max_frame <= DTALEN_MASK (constructor)
    std::uint32_t room = free_slots(), tail = first;
    std::uint64_t bytes = 0;
    const std::uintptr_t to_slots = to_slots_;
    const Packet* p = in;
    std::uint32_t left = count;  // frames not taken yet (counted, not a pointer difference: no division by 40)
    while (left != 0 && room != 0) {
        // A run of frames without offloads, up to the batch's end, the room left or the ring's end.
        const std::uint32_t run = std::min(std::min(left, room), mask_ + 1 - tail);
        e1000::AdvTxDesc* const begin = descs_ + tail;
        e1000::AdvTxDesc* const end = begin + run;
        e1000::AdvTxDesc* d = push_whole4<Advanced>(p, begin, end, type, to_slots, bytes);
        for (; d != end; ++p, ++d) {
            // One branch for both: a length from 1 to max_frame (len - 1 wraps for 0), no offload asked.
            const std::uint32_t len = p->len;  // once: the descriptor stores below may alias it
            if (len - 1 >= max_frame || (p->flags & pkt::TX_MASK)) [[unlikely]]
                break;
            d->read.buffer_addr = p->iova;
            d->read.cmd_type_len = type + len;  // = type | len: len < 2^16, type's bits are above (one lea)
            // PAYLEN (igb); 0 on the 82574, whose descriptor has no such field. Also clears a stale DD.
            d->read.olinfo_status = Advanced ? len << e1000::txd::PAYLEN_SHIFT : 0;
            std::memcpy(&slot_of(d, to_slots), &p->len, sizeof(Slot));  // len, buf, pool
            bytes += len;
        }
        const auto done = static_cast<std::uint32_t>(d - begin);
        tail = (tail + done) & mask_;
        room -= done;
        left -= done;
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
        std::uint32_t cmd = type | p->len, olinfo = p->len << e1000::txd::PAYLEN_SHIFT;
        if (p->flags & pkt::TX_VLAN) cmd |= e1000::txd::CMD_VLE;
        if (p->flags & pkt::TX_IP_CSUM) olinfo |= e1000::txd::POPTS_IXSM;
        if (p->flags & (pkt::TX_TCP_CSUM | pkt::TX_UDP_CSUM)) olinfo |= e1000::txd::POPTS_TXSM;
        e1000::AdvTxDesc& data = descs_[tail];
        data.read.buffer_addr = p->iova;
        data.read.cmd_type_len = cmd;
        data.read.olinfo_status = olinfo;
        slots_[tail] = Slot{p->len, p->buf, p->pool};
        bytes += p->len;
        tail = (tail + 1) & mask_;
        room -= 2;
        --left;
        ++p;
    }
    // One head write-back per batch is enough: the head covers every descriptor before it.
    if (tail != first) descs_[(tail - 1) & mask_].read.cmd_type_len |= e1000::txd::CMD_RS;
    const std::uint32_t n = count - left;
    tail_ = tail;
    counters_.packets += n;
    counters_.bytes += bytes;
    return n;
}

// Frames without offloads four at a time, in SSE2 registers: four lengths checked together (1 to
// max_frame) and four descriptors written whole (address; type + length; PAYLEN on igb, which also clears
// a stale DD), each frame's len, buf and pool copied to its slot. Stops before the first group of four
// with anything else in it, or fewer than four left: push_frames()'s one-at-a-time loop takes it from
// there with the same checks.
template <bool Advanced>
[[gnu::always_inline]] inline e1000::AdvTxDesc* TxRing::push_whole4(const Packet*& p, e1000::AdvTxDesc* d,
                                                                    e1000::AdvTxDesc* const end,
                                                                    const std::uint32_t type,
                                                                    const std::uintptr_t to_slots,
                                                                    std::uint64_t& bytes) const noexcept {
#if defined(__SSE2__)
    if (end - d < 4) return d;  // a short run: no set-up for nothing
    const __m128i one = _mm_set1_epi32(1);
    const __m128i longest = detail::flipped(max_frame_ - 1);  // len - 1 above it (len 0 wraps): refused
    const __m128i types = _mm_set1_epi32(static_cast<int>(type));
    __m128i sum = _mm_setzero_si128();
    const Packet* q = p;
    for (std::size_t groups = (end - d) / 4; groups != 0; --groups, d += 4, q += 4) {
        // Each Packet's len, buf and pool: its slot's 16 bytes, and the lengths to check.
        const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&q[0].len));
        const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&q[1].len));
        const __m128i b2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&q[2].len));
        const __m128i b3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&q[3].len));
        const __m128i len = _mm_unpacklo_epi64(_mm_unpacklo_epi32(b0, b1), _mm_unpacklo_epi32(b2, b3));
        const __m128i bad_len = detail::above(_mm_sub_epi32(len, one), longest);
        const std::uint32_t offloads = (q[0].flags | q[1].flags | q[2].flags | q[3].flags) & pkt::TX_MASK;
        sum = _mm_add_epi32(sum, len);  // here, taken back on a break: the sum then stays in one register
        if (_mm_movemask_epi8(bad_len) != 0 || offloads != 0) [[unlikely]] {
            sum = _mm_sub_epi32(sum, len);
            break;
        }
        // The descriptors' upper halves: cmd_type_len = type + len (type's bits are above 16), olinfo.
        const __m128i cmd = _mm_add_epi32(types, len);
        const __m128i olinfo = Advanced ? _mm_slli_epi32(len, e1000::txd::PAYLEN_SHIFT) : _mm_setzero_si128();
        const __m128d upper01 = _mm_castsi128_pd(_mm_unpacklo_epi32(cmd, olinfo));
        const __m128d upper23 = _mm_castsi128_pd(_mm_unpackhi_epi32(cmd, olinfo));
        const auto write = [&](int k, __m128i slot, __m128d upper, int which) {
            const __m128d iova = _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&q[k].iova)));
            const __m128d desc = which ? _mm_shuffle_pd(iova, upper, 2) : _mm_unpacklo_pd(iova, upper);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k), _mm_castpd_si128(desc));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(&slot_of(d + k, to_slots)), slot);
        };
        write(0, b0, upper01, 0);
        write(1, b1, upper01, 1);
        write(2, b2, upper23, 0);
        write(3, b3, upper23, 1);
    }
    p = q;
    bytes += detail::lane_sum(sum);
#else
    (void)p, (void)end, (void)type, (void)to_slots, (void)bytes;
#endif
    return d;
}

inline std::uint32_t TxRing::finished() noexcept {
    if (!head_wb_) {
        std::uint32_t n = 0, at = clean_;
        for (std::uint32_t queued = in_flight();
             n < queued && (detail::load_acquire(descs_[at].wb.status) & e1000::txd::STA_DD); ++n)
            at = (at + 1) & mask_;
        return n;
    }
    const std::uint32_t head = detail::load_acquire(*head_wb_);
    const std::uint32_t done = (head - clean_) & mask_;
    if (head > mask_ || done > in_flight()) [[unlikely]] {
        ++counters_.bad_head;
        return 0;
    }
    return done;
}

// Four slots at a time while all four hold buffers of `back`'s pool with indices it has (SSE2): their
// indices go onto the pool's free stack with one store. Stops before the first group of four with
// anything else in it (another pool, a context descriptor's empty slot, a foreign index), or fewer than
// four left: the caller's one-at-a-time loops take it from there. The caller checked the room.
[[gnu::always_inline]] inline const TxRing::Slot* TxRing::free_whole4(const Slot* s, const Slot* const end,
                                                                      dma::BufferPool::Returns& back) noexcept {
#if defined(__SSE2__)
    if (end - s < 4) return s;  // a short run: no set-up for nothing
    static_assert(offsetof(Slot, buf) == 4 && offsetof(Slot, pool) == 8 && sizeof(Slot) == 16);
    const __m128i pool = _mm_set1_epi64x(static_cast<long long>(reinterpret_cast<std::uintptr_t>(&back.pool())));
    const __m128i last = detail::flipped(back.pool().count() - 1);  // an index above it is not the pool's
    for (std::size_t groups = (end - s) / 4; groups != 0; --groups, s += 4) {
        const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 1));
        const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2));
        const __m128i a3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3));
        const __m128i same = _mm_and_si128(_mm_cmpeq_epi32(_mm_unpackhi_epi64(a0, a1), pool),
                                           _mm_cmpeq_epi32(_mm_unpackhi_epi64(a2, a3), pool));
        const __m128i bufs = _mm_unpackhi_epi64(_mm_unpacklo_epi32(a0, a1), _mm_unpacklo_epi32(a2, a3));
        const __m128i foreign = detail::above(bufs, last);
        if (_mm_movemask_epi8(_mm_andnot_si128(foreign, same)) != 0xffff) break;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(back.take_room(4)), bufs);
    }
#else
    (void)end, (void)back;
#endif
    return s;
}

inline std::uint32_t TxRing::reclaim_to_pools() noexcept {
    const std::uint32_t n = finished();
    std::uint32_t clean = clean_;
    for (std::uint32_t left = n; left != 0;) {
        const std::uint32_t run = std::min(left, mask_ + 1 - clean);
        for (const Slot *s = slots_ + clean, *const end = s + run; s != end;) {
            dma::BufferPool* const pool = s->pool;
            if (!pool) {  // a context descriptor's slot has nothing to give back
                ++s;
                continue;
            }
            dma::BufferPool::Returns back(*pool);  // the frames of one pool in a row, in one go
            // As many as the pool has room for without the per-buffer double-free check; more would be
            // double frees, which the checked loop after it drops.
            const Slot* const room_end = s + std::min<std::size_t>(end - s, back.room());
            s = free_whole4(s, room_end, back);
            for (; s != room_end && s->pool == pool; ++s) back.free_in_room(s->buf);
            for (; s != end && s->pool == pool; ++s) back.free(s->buf);
        }
        clean = (clean + run) & mask_;
        left -= run;
    }
    clean_ = clean;
    return n;
}

}  // namespace bardrive::nic
