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

class RxRing {
public:
    // `descs` holds `size` descriptors (DMA memory the device reads); every posted buffer holds
    // `buffer_size` bytes. Throws bardrive::Error for a bad size.
    RxRing(igb::AdvRxDesc* descs, std::uint32_t size, std::uint32_t buffer_size);

    // Writes up to bufs.size() buffers into free descriptors; returns how many it took.
    std::uint32_t post(std::span<const Packet> bufs) noexcept;

    // Harvests up to out.size() received frames in ring order. Frames the device reported badly are
    // counted and their buffers re-posted at once (so the caller rings the doorbell when tail() moved).
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

    igb::AdvRxDesc* descs_;
    std::uint32_t mask_;
    std::uint32_t buffer_size_;
    std::uint32_t tail_ = 0;
    std::uint32_t clean_ = 0;
    bool in_chain_ = false;  // inside a frame the device spread over several descriptors
    std::vector<Packet> slots_;
    RxRingCounters counters_;
};

struct TxRingCounters {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t bad_length = 0;  // frames refused: empty or longer than max_frame
    std::uint64_t bad_head = 0;    // head write-back outside the ring or beyond what was queued
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

    // Queues frames in order; stops at a full ring or at a frame of impossible length (counted).
    // The last descriptor queued asks for a head write-back. Returns how many were taken.
    std::uint32_t push(std::span<const Packet> pkts) noexcept;

    // Returns up to out.size() frames the device has finished with (their buffers are free again),
    // as told by the head write-back, once checked (or by the descriptors' DD bits).
    std::uint32_t reclaim(std::span<Packet> out) noexcept;

    std::uint32_t tail() const noexcept { return tail_; }  // the value TDT should hold
    std::uint32_t in_flight() const noexcept { return (tail_ - clean_) & mask_; }
    std::uint32_t free_slots() const noexcept { return mask_ - in_flight(); }
    std::uint32_t size() const noexcept { return mask_ + 1; }
    const TxRingCounters& counters() const noexcept { return counters_; }

    // Gives back every queued frame (device stopped); returns how many.
    std::uint32_t drain(std::span<Packet> out) noexcept;

private:
    igb::AdvTxDesc* descs_;
    const std::uint32_t* head_wb_;
    std::uint32_t mask_;
    std::uint32_t max_frame_;
    TxFormat format_;
    std::uint32_t tail_ = 0;
    std::uint32_t clean_ = 0;
    std::vector<Packet> slots_;
    TxRingCounters counters_;
};

}  // namespace bardrive::nic
