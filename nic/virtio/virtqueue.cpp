#include "nic/virtio/virtqueue.hpp"

#include <cstddef>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic::virtio {

const char* fault_text(Fault f) noexcept {
    switch (f) {
        case Fault::none:
            return "no fault";
        case Fault::used_idx_past_avail:
            return "the device moved the used index past the chains made available";
        case Fault::used_id_not_outstanding:
            return "the device reported a used id that names no chain it holds";
        case Fault::used_len_too_long:
            return "the device reported a used length above the chain's writable bytes";
        case Fault::wrong_wrap_bit:
            return "the device wrote a used descriptor with the other lap's wrap bit";
    }
    return "unknown fault";
}

void check_queue_size(std::uint32_t size, std::uint32_t chain, const char* what) {
    if (size < 2 || size > 32768 || (size & (size - 1)) != 0 || chain == 0 || size % chain != 0 || size < chain) {
        throw Error("set up virtqueue", what, log::concat("a queue of ", size, " descriptors in chains of ", chain),
                    "queue sizes are powers of two from 2 to 32768 that hold whole chains");
    }
}

ChainTable::ChainTable(std::uint32_t size, std::uint32_t chain, const char* what) : size_(size), chain_(chain) {
    check_queue_size(size, chain, what);
    const std::uint32_t n = size / chain;
    free_.resize(n);
    // Ids come out in ascending order on a fresh ring (the top of the stack is the last element).
    for (std::uint32_t i = 0; i < n; ++i) free_[i] = static_cast<std::uint16_t>(n - 1 - i);
    top_ = n;
    out_.assign(n, 0);
    writable_.assign(n, 0);
}

SplitRing::SplitRing(vring_desc* desc, vring_avail* avail, vring_used* used, std::uint32_t size, std::uint32_t chain,
                     bool event_idx, const char* what)
    : ChainTable(size, chain, what),
      desc_(desc),
      avail_(avail),
      used_(used),
      avail_event_(reinterpret_cast<const std::uint16_t*>(reinterpret_cast<const std::byte*>(used) + 4 +
                                                          sizeof(vring_used_elem) * size)),
      mask_(size - 1),
      event_idx_(event_idx) {
    // Each chain's descriptors are linked once, for good.
    for (std::uint32_t i = 0; i < size; ++i) {
        desc_[i].next = static_cast<std::uint16_t>(i + 1 < size ? i + 1 : 0);
        desc_[i].flags = 0;
    }
    avail_->flags = 0;
    avail_->idx = 0;
    used_event() = 0;
}

void SplitRing::set_interrupts(bool on) noexcept {
    if (event_idx_) {
        // An interrupt once the next entry is used; "off": an event already passed (the device checks
        // it only when used.idx crosses it, 65536 entries later).
        detail::store16(used_event(), on ? last_used_ : static_cast<std::uint16_t>(last_used_ - 1));
    } else {
        detail::store16(avail_->flags, on ? 0 : VRING_AVAIL_F_NO_INTERRUPT);
    }
    io::mb();  // the caller checks has_used() next: the store before that load
}

PackedRing::PackedRing(vring_packed_desc* desc, vring_packed_desc_event* driver_event,
                       vring_packed_desc_event* device_event, std::uint32_t size, std::uint32_t chain, bool event_idx,
                       const char* what)
    : ChainTable(size, chain, what),
      desc_(desc),
      driver_event_(driver_event),
      device_event_(device_event),
      event_idx_(event_idx) {
    // Zeroed descriptors (avail = used = 0) read as "used in lap 0", which is not the first lap (1).
    for (std::uint32_t i = 0; i < size; ++i) desc_[i].flags = 0;
    driver_event_->off_wrap = 0;
    driver_event_->flags = VRING_PACKED_EVENT_FLAG_DISABLE;
}

void PackedRing::set_interrupts(bool on) noexcept {
    if (on && event_idx_) {
        driver_event_->off_wrap =
            static_cast<std::uint16_t>(next_used_ | (used_wrap_ ? 1u << VRING_PACKED_EVENT_F_WRAP_CTR : 0));
        detail::store16(driver_event_->flags, VRING_PACKED_EVENT_FLAG_DESC);
    } else {
        detail::store16(driver_event_->flags, on ? VRING_PACKED_EVENT_FLAG_ENABLE : VRING_PACKED_EVENT_FLAG_DISABLE);
    }
    io::mb();
}

}  // namespace bardrive::nic::virtio
