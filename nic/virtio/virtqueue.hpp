// Virtqueues (virtio 1.2, 2.7 split and 2.8 packed) as pure logic over ring memory, as nic/e1000/ring.hpp
// is for the Intel parts: making buffer chains available, harvesting used ones, notification
// suppression (VIRTIO_RING_F_EVENT_IDX) and the doorbell decision. The driver (nic::VirtioNet) adds the
// doorbell write and what each chain carries; unit tests play the device over the same memory.
//
// Every chain of a queue has the same number of descriptors (RX: 1, TX: 1 through an indirect table or 2,
// control: 2), so a chain's id
// (what add() returns, what the device reports used) names fixed descriptors: split chain c is descriptors
// c*chain .. c*chain+chain-1, linked once; a packed chain takes the next `chain` ring slots with buffer
// id c. A queue of `size` descriptors holds size / chain chains.
//
// Data-path methods never throw and never allocate. What the device reports is checked before it is
// believed: a used index past what was made available (split), a used id that names no outstanding
// chain, a used length above the chain's writable bytes, a packed used descriptor whose wrap bit is not
// the current lap's. Each is a Fault: counted, the ring stops (add, publish and pop do nothing more),
// and fault_text() says what the device did. Nothing outside the ring memory or the chains' buffers is
// read or written, whatever the device writes.
#pragma once

// The ring layouts and flags from Linux's uapi header (its legacy helpers are C only).
#ifndef VIRTIO_RING_NO_LEGACY
#define VIRTIO_RING_NO_LEGACY
#endif
#include <linux/virtio_ring.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../../core/hd.hpp"

namespace bardrive::nic::virtio {

// One buffer of a chain as the driver makes it available.
struct Segment {
    std::uint64_t addr = 0;  // IOVA
    std::uint32_t len = 0;
    // VRING_DESC_F_WRITE: the device writes it (RX buffers, control acks). VRING_DESC_F_INDIRECT
    // (VIRTIO_RING_F_INDIRECT_DESC): addr/len name a table of descriptors in the driver's memory, which the
    // device reads to find the buffers. Both layouts give the two flags the same bits.
    std::uint16_t flags = 0;
};

// A chain the device has finished with, once checked.
struct Used {
    std::uint16_t id = 0;   // what add() returned
    std::uint32_t len = 0;  // bytes the device says it wrote into the chain's writable segments
};

// What a lying device did; the ring stops at the first one.
enum class Fault : std::uint8_t {
    none,
    used_idx_past_avail,      // split: used.idx moved further than the chains made available
    used_id_not_outstanding,  // a used id that names no chain the device holds
    used_len_too_long,        // a used length above the chain's writable bytes
    wrong_wrap_bit,           // packed: a used descriptor marked for the other lap
};
const char* fault_text(Fault f) noexcept;

// Throws bardrive::Error unless `size` is a power of two from 2 to 32768 and a multiple of `chain`
// (`what` names the queue in the message).
void check_queue_size(std::uint32_t size, std::uint32_t chain, const char* what);

namespace detail {
inline std::uint16_t load16(const std::uint16_t& w) noexcept { return __atomic_load_n(&w, __ATOMIC_ACQUIRE); }
inline void store16(std::uint16_t& w, std::uint16_t v) noexcept { __atomic_store_n(&w, v, __ATOMIC_RELEASE); }
}  // namespace detail

// What both layouts keep per chain: which are outstanding (held by the device or written but not yet
// published), their writable bytes, and a stack of free ids.
class ChainTable {
public:
    std::uint32_t size() const noexcept { return size_; }             // descriptors
    std::uint32_t chain() const noexcept { return chain_; }           // descriptors per chain
    std::uint32_t chains() const noexcept { return size_ / chain_; }  // chains the ring holds
    std::uint32_t in_flight() const noexcept { return chains() - top_; }
    std::uint32_t free_chains() const noexcept { return fault_ == Fault::none ? top_ : 0; }
    // The id the next add() will return (free_chains() > 0): the driver writes what the chain points at
    // (a TX header slot) before add() makes it visible.
    std::uint16_t next_id() const noexcept { return free_[top_ - 1]; }
    bool outstanding(std::uint16_t id) const noexcept { return id < chains() && out_[id] != 0; }
    Fault fault() const noexcept { return fault_; }
    std::uint64_t faults() const noexcept { return faults_; }  // 0 or 1: the ring stops at the first

protected:
    ChainTable(std::uint32_t size, std::uint32_t chain, const char* what);
    std::uint16_t take(std::uint32_t writable) noexcept {
        const std::uint16_t id = free_[--top_];
        out_[id] = 1;
        writable_[id] = writable;
        return id;
    }
    void give(std::uint16_t id) noexcept {
        out_[id] = 0;
        free_[top_++] = id;
    }
    bool stop(Fault f) noexcept {
        if (fault_ == Fault::none) {
            fault_ = f;
            ++faults_;
        }
        return false;
    }
    // Checks a used entry's id and length; false (and the ring stopped) when it lies.
    bool check(std::uint32_t id, std::uint32_t len) noexcept {
        if (id >= chains() || !out_[id]) return stop(Fault::used_id_not_outstanding);
        if (len > writable_[id]) return stop(Fault::used_len_too_long);
        return true;
    }

    std::uint32_t size_;
    std::uint32_t chain_;
    std::vector<std::uint16_t> free_;
    std::uint32_t top_ = 0;
    std::vector<std::uint8_t> out_;
    std::vector<std::uint32_t> writable_;
    Fault fault_ = Fault::none;
    std::uint64_t faults_ = 0;
};

// A split virtqueue (virtio 1.2, 2.7): descriptor table, driver (available) ring, device (used) ring.
class SplitRing : public ChainTable {
public:
    // Bytes of each part (event index words included); alignment: 16, 2 and 4 bytes.
    static std::size_t desc_bytes(std::uint32_t size) noexcept { return sizeof(vring_desc) * size; }
    static std::size_t avail_bytes(std::uint32_t size) noexcept { return 6 + 2 * std::size_t{size}; }
    static std::size_t used_bytes(std::uint32_t size) noexcept { return 6 + sizeof(vring_used_elem) * size; }

    // Takes the zeroed memory of a queue of `size` descriptors in chains of `chain`; with event_idx the
    // used_event/avail_event words are used instead of the flags. Throws bardrive::Error for a bad size.
    SplitRing(vring_desc* desc, vring_avail* avail, vring_used* used, std::uint32_t size, std::uint32_t chain,
              bool event_idx, const char* what = "virtqueue");

    // Writes a chain of chain() segments and puts it in the available ring (not yet visible to the
    // device: publish()). Requires free_chains() > 0. Returns its id.
    std::uint16_t add(const Segment* segs) noexcept;
    // Makes every added chain visible (avail.idx) and says whether the device wants a notification
    // for them (VRING_USED_F_NO_NOTIFY, or avail_event with EVENT_IDX). False when nothing was added.
    bool publish() noexcept;
    // The next used chain, checked; false when there is none (or the ring stopped: fault()).
    bool pop(Used& out) noexcept;
    bool has_used() const noexcept { return fault_ == Fault::none && detail::load16(used_->idx) != last_used_; }
    // Interrupts for used chains: on (after the next one used, with EVENT_IDX) or off.
    void set_interrupts(bool on) noexcept;

    std::uint16_t last_used() const noexcept { return last_used_; }
    std::uint16_t avail_idx() const noexcept { return avail_idx_; }

private:
    std::uint16_t& used_event() const noexcept { return avail_->ring[size_]; }
    const std::uint16_t& avail_event() const noexcept { return *avail_event_; }

    vring_desc* desc_;
    vring_avail* avail_;
    vring_used* used_;
    const std::uint16_t* avail_event_;  // the word after the used ring (EVENT_IDX)
    std::uint32_t mask_;
    bool event_idx_;
    std::uint16_t avail_idx_ = 0;  // avail.idx after the chains added so far
    std::uint16_t published_ = 0;  // what avail.idx holds
    std::uint16_t last_used_ = 0;  // used entries harvested
    std::uint16_t seen_used_ = 0;  // used.idx as last read
};

// A packed virtqueue (virtio 1.2, 2.8): one descriptor ring both sides write, with wrap counters, and
// the driver's and the device's event suppression structures.
class PackedRing : public ChainTable {
public:
    static std::size_t desc_bytes(std::uint32_t size) noexcept { return sizeof(vring_packed_desc) * size; }
    static constexpr std::size_t event_bytes = sizeof(vring_packed_desc_event);

    PackedRing(vring_packed_desc* desc, vring_packed_desc_event* driver_event, vring_packed_desc_event* device_event,
               std::uint32_t size, std::uint32_t chain, bool event_idx, const char* what = "virtqueue");

    // Writes a chain of chain() segments into the next ring slots, its first descriptor's flags last:
    // the device may take it from then on. Requires free_chains() > 0. Returns its id.
    std::uint16_t add(const Segment* segs) noexcept;
    // Whether the device wants a notification for the chains added since the last call (its event
    // suppression structure: enabled, disabled, or a descriptor position with EVENT_IDX).
    bool publish() noexcept;
    bool pop(Used& out) noexcept;
    bool has_used() const noexcept {
        if (fault_ != Fault::none || in_flight() == 0) return false;
        const std::uint16_t f = detail::load16(desc_[next_used_].flags);
        return ((f >> VRING_PACKED_DESC_F_AVAIL) & 1) == ((f >> VRING_PACKED_DESC_F_USED) & 1);
    }
    void set_interrupts(bool on) noexcept;

    std::uint16_t next_avail() const noexcept { return next_avail_; }
    std::uint16_t next_used() const noexcept { return next_used_; }
    bool avail_wrap() const noexcept { return avail_wrap_; }
    bool used_wrap() const noexcept { return used_wrap_; }

private:
    vring_packed_desc* desc_;
    vring_packed_desc_event* driver_event_;
    vring_packed_desc_event* device_event_;
    bool event_idx_;
    std::uint16_t next_avail_ = 0;
    bool avail_wrap_ = true;
    std::uint16_t next_used_ = 0;
    bool used_wrap_ = true;
    std::uint16_t added_ = 0;  // descriptors added since the last publish()
};

// --- Data path, inline ---

inline std::uint16_t SplitRing::add(const Segment* segs) noexcept {
    std::uint32_t writable = 0;
    for (std::uint32_t j = 0; j < chain_; ++j) writable += (segs[j].flags & VRING_DESC_F_WRITE) ? segs[j].len : 0;
    const std::uint16_t id = take(writable);
    const std::uint32_t head = std::uint32_t{id} * chain_;
    vring_desc* d = desc_ + head;
    for (std::uint32_t j = 0; j < chain_; ++j, ++d) {
        d->addr = segs[j].addr;
        d->len = segs[j].len;
        d->flags = static_cast<std::uint16_t>((j + 1 < chain_ ? VRING_DESC_F_NEXT : 0) | segs[j].flags);
        // d->next was linked at construction
    }
    avail_->ring[avail_idx_ & mask_] = static_cast<std::uint16_t>(head);
    ++avail_idx_;
    return id;
}

inline bool SplitRing::publish() noexcept {
    if (fault_ != Fault::none || avail_idx_ == published_) return false;
    const std::uint16_t old = published_;
    // The ring entries and descriptors before the index (release), the index before the device's
    // suppression word is read (a full barrier: a store then a load).
    detail::store16(avail_->idx, avail_idx_);
    published_ = avail_idx_;
    io::mb();
    if (event_idx_) return vring_need_event(detail::load16(avail_event()), avail_idx_, old);
    return !(detail::load16(used_->flags) & VRING_USED_F_NO_NOTIFY);
}

inline bool SplitRing::pop(Used& out) noexcept {
    if (fault_ != Fault::none) return false;
    if (last_used_ == seen_used_) {
        seen_used_ = detail::load16(used_->idx);  // acquire: the entries are read after the index
        // Never more entries than chains were published and not yet harvested.
        if (static_cast<std::uint16_t>(seen_used_ - last_used_) > static_cast<std::uint16_t>(published_ - last_used_))
            return stop(Fault::used_idx_past_avail);
        if (seen_used_ == last_used_) return false;
    }
    const vring_used_elem& e = used_->ring[last_used_ & mask_];
    const std::uint32_t head = e.id, len = e.len;
    if (head % chain_ != 0) return stop(Fault::used_id_not_outstanding);
    const std::uint32_t id = head / chain_;
    if (!check(id, len)) return false;
    give(static_cast<std::uint16_t>(id));
    ++last_used_;
    out = Used{static_cast<std::uint16_t>(id), len};
    return true;
}

inline std::uint16_t PackedRing::add(const Segment* segs) noexcept {
    std::uint32_t writable = 0;
    for (std::uint32_t j = 0; j < chain_; ++j) writable += (segs[j].flags & VRING_DESC_F_WRITE) ? segs[j].len : 0;
    const std::uint16_t id = take(writable);
    // avail = the lap's wrap counter, used = its inverse (2.8.1).
    const auto lap_flags = [](bool wrap) -> std::uint16_t {
        return wrap ? std::uint16_t{1u << VRING_PACKED_DESC_F_AVAIL} : std::uint16_t{1u << VRING_PACKED_DESC_F_USED};
    };
    const std::uint16_t head = next_avail_;
    std::uint16_t head_flags = 0;
    std::uint32_t at = next_avail_;
    bool wrap = avail_wrap_;
    for (std::uint32_t j = 0; j < chain_; ++j) {
        vring_packed_desc& d = desc_[at];
        d.addr = segs[j].addr;
        d.len = segs[j].len;
        d.id = id;
        const auto flags =
            static_cast<std::uint16_t>(lap_flags(wrap) | (j + 1 < chain_ ? VRING_DESC_F_NEXT : 0) | segs[j].flags);
        if (j == 0)
            head_flags = flags;
        else
            d.flags = flags;
        if (++at == size_) {
            at = 0;
            wrap = !wrap;
        }
    }
    detail::store16(desc_[head].flags, head_flags);  // release: the chain is complete before the device sees it
    next_avail_ = static_cast<std::uint16_t>(at);
    avail_wrap_ = wrap;
    added_ = static_cast<std::uint16_t>(added_ + chain_);
    return id;
}

inline bool PackedRing::publish() noexcept {
    if (fault_ != Fault::none || added_ == 0) return false;
    const std::uint16_t added = added_;
    added_ = 0;
    io::mb();  // the descriptors' flags before the device's suppression structure is read
    const std::uint16_t flags = detail::load16(device_event_->flags);
    if (flags != VRING_PACKED_EVENT_FLAG_DESC || !event_idx_) return flags != VRING_PACKED_EVENT_FLAG_DISABLE;
    // Positions on one line modulo 2^16: an event in the other lap lies one ring size back.
    const std::uint16_t off_wrap = detail::load16(device_event_->off_wrap);
    const bool event_wrap = (off_wrap >> VRING_PACKED_EVENT_F_WRAP_CTR) & 1;
    auto event = static_cast<std::uint16_t>(off_wrap & ~(1u << VRING_PACKED_EVENT_F_WRAP_CTR));
    if (event_wrap != avail_wrap_) event = static_cast<std::uint16_t>(event - size_);
    const std::uint16_t now = next_avail_;
    return vring_need_event(event, now, static_cast<std::uint16_t>(now - added));
}

inline bool PackedRing::pop(Used& out) noexcept {
    if (fault_ != Fault::none || in_flight() == 0) return false;
    const vring_packed_desc& d = desc_[next_used_];
    const std::uint16_t f = detail::load16(d.flags);  // acquire: id and len after the flags
    const bool avail = (f >> VRING_PACKED_DESC_F_AVAIL) & 1, used = (f >> VRING_PACKED_DESC_F_USED) & 1;
    if (avail != used) return false;  // still the device's
    // The slot holds a chain of this lap: a used descriptor of the other lap's colour cannot be.
    if (used != used_wrap_) return stop(Fault::wrong_wrap_bit);
    const std::uint32_t id = d.id, len = d.len;
    if (!check(id, len)) return false;
    give(static_cast<std::uint16_t>(id));
    std::uint32_t at = next_used_ + chain_;  // the device wrote one used descriptor for the whole chain
    if (at >= size_) {
        at -= size_;
        used_wrap_ = !used_wrap_;
    }
    next_used_ = static_cast<std::uint16_t>(at);
    out = Used{static_cast<std::uint16_t>(id), len};
    return true;
}

}  // namespace bardrive::nic::virtio
