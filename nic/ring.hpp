// Descriptor rings of the 82576, as pure logic over descriptor memory: posting buffers, harvesting
// completions, wrap-around, and checking what the device reports before believing it. The driver
// (nic::Igb) adds the doorbells; unit tests drive these classes with descriptors they write themselves.
//
// Data-path methods never throw and never allocate. A device that lies (a descriptor with an impossible
// length, a head index outside the ring or behind the driver) costs a counted drop, never an access
// outside the ring or outside a buffer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "../dma/buffer_pool.hpp"
#include "igb_desc.hpp"
#include "packet.hpp"

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

static_assert(pkt::RX_VLAN == igb::rxd::VP && pkt::RX_UDP == igb::rxd::UDPCS && pkt::RX_L4_CHECKED == igb::rxd::L4CS &&
                  pkt::RX_IP_CHECKED == igb::rxd::IPCS && pkt::RX_L4_BAD == igb::rxd::ERR_L4E &&
                  pkt::RX_IP_BAD == igb::rxd::ERR_IPE,
              "Packet::flags on RX are the descriptor's status/error bits");

class RxRing {
public:
    // `descs` holds `size` descriptors (DMA memory the device reads); every posted buffer holds
    // `buffer_size` bytes. Throws bardrive::Error for a bad size.
    RxRing(igb::AdvRxDesc* descs, std::uint32_t size, std::uint32_t buffer_size);
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
    std::uint32_t poll(std::span<Packet> out) noexcept;

    // True when the next descriptor to harvest is done (a frame, or a drop to count).
    bool has_work() const noexcept;

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
    void repost(const Packet& p) noexcept;
    bool drop(const Packet& p, std::uint32_t status, bool chain) noexcept;

    igb::AdvRxDesc* descs_;
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
    TxRing(igb::AdvTxDesc* descs, std::uint32_t size, const std::uint32_t* head_wb, std::uint32_t max_frame,
           TxFormat format = TxFormat::igb_advanced);
    TxRing(TxRing&&) noexcept = default;
    TxRing(const TxRing&) = delete;
    TxRing& operator=(const TxRing&) = delete;

    // Queues frames in order; stops at a full ring or at a frame of impossible length or offload
    // (counted). A frame with pkt::TX_* flags (igb format only) takes a context descriptor before its
    // data descriptor. The last descriptor queued asks for a head write-back. Returns how many were taken.
    std::uint32_t push(std::span<const Packet> pkts) noexcept;

    // Returns up to out.size() descriptors' frames the device has finished with (their buffers are free
    // again), as told by the head write-back, once checked (or by the descriptors' DD bits). A context
    // descriptor's slot comes back as an empty Packet (no pool).
    std::uint32_t reclaim(std::span<Packet> out) noexcept;
    // The same, but gives every finished buffer straight back to its Packet::pool; returns how many
    // descriptors were finished.
    std::uint32_t reclaim_to_pools() noexcept;

    std::uint32_t tail() const noexcept { return tail_; }  // the value TDT should hold
    std::uint32_t in_flight() const noexcept { return (tail_ - clean_) & mask_; }
    std::uint32_t free_slots() const noexcept { return mask_ - in_flight(); }
    std::uint32_t size() const noexcept { return mask_ + 1; }
    const TxRingCounters& counters() const noexcept { return counters_; }

    // Gives back every queued frame (device stopped); returns how many.
    std::uint32_t drain(std::span<Packet> out) noexcept;

private:
    std::uint32_t finished() noexcept;  // descriptors from clean_ on that the device is done with
    template <bool Advanced>
    std::uint32_t push_frames(const Packet* in, std::uint32_t count) noexcept;
    bool push_context(const Packet& p, std::uint32_t tail) noexcept;

    igb::AdvTxDesc* descs_;
    const std::uint32_t* head_wb_;
    std::uint32_t mask_;
    std::uint32_t max_frame_;
    TxFormat format_;
    std::uint32_t tail_ = 0;
    std::uint32_t clean_ = 0;
    std::vector<Packet> storage_;
    Packet* slots_;  // storage_.data()
    TxRingCounters counters_;
};

}  // namespace bardrive::nic
