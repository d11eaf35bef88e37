// The page-table entry: one 64-bit word per page, read and written with atomics by CPU threads
// (unit tests, the policy simulation) and by GPU warps alike. It is a device-visible layout:
// the word lives in GPU memory when a kernel runs the protocol, so its bits are fixed here and
// checked below.
#pragma once

#include <cstdint>

#include "hd.hpp"

namespace bardrive::umem {

// Where a page's data is. Transitions (pager.hpp runs them):
//   host --(one filler wins a CAS, no pins)--> migrating --(frame filled)--> resident
//   resident --(CLOCK picks it, no pins)--> evicting --(written back if dirty)--> host
enum class PageState : std::uint64_t {
    host = 0,       // only in host memory; accessors may read or write it there (pinned)
    migrating = 1,  // one filler owns it and is copying it into a frame; others wait
    resident = 2,   // in GPU frame `frame()`; accessors pin it and use the frame
    evicting = 3,   // leaving its frame; others wait until it is host again
};

struct Pte {
    std::uint64_t word;

    // Bit layout of `word`.
    static constexpr std::uint64_t state_mask = 0x3;        // bits 0-1: PageState
    static constexpr std::uint64_t dirty = 1ull << 2;       // written while resident
    static constexpr std::uint64_t referenced = 1ull << 3;  // hit since the CLOCK hand passed
    static constexpr std::uint64_t touched = 1ull << 4;     // read through once (second-touch admission)
    // Bits 5-11: hits since its fill, one bit more per hit (a hit sets the next one with a fetch_or,
    // which needs no answer; racing hits may count once), up to 7.
    static constexpr unsigned hits_shift = 5;
    static constexpr std::uint32_t max_hits = 7;
    static constexpr std::uint64_t hits_mask = 0x7full << hits_shift;
    // Bits 12-30: accessors using the data now (up to 512K), in a frame or reading host memory in
    // place. A pin keeps a resident page in its frame; it does not keep a host page from migrating.
    static constexpr unsigned pin_shift = 12;
    static constexpr std::uint64_t pin_one = 1ull << pin_shift;
    static constexpr std::uint64_t pin_mask = 0x7ffffull << pin_shift;
    // Bit 31: resident with only some of its 1/32-page blocks in the frame (PagerView::sectors says
    // which); accesses look there before they use the frame.
    static constexpr std::uint64_t partial = 1ull << 31;
    // Bits 32-35: accessors writing host memory in place (up to 15): they keep the page from migrating.
    static constexpr unsigned writer_shift = 32;
    static constexpr std::uint64_t writer_one = 1ull << writer_shift;
    static constexpr std::uint64_t writer_mask = 0xfull << writer_shift;
    static constexpr std::uint32_t max_writers = 15;
    static constexpr unsigned frame_shift = 36;  // bits 36-63: frame, when resident/evicting
    static constexpr std::uint64_t frame_mask = 0xfffffffull << frame_shift;
    static constexpr std::uint32_t max_frames = 0xfffffffu;

    UMEM_HD constexpr PageState state() const { return static_cast<PageState>(word & state_mask); }
    UMEM_HD constexpr std::uint32_t frame() const { return static_cast<std::uint32_t>(word >> frame_shift); }
    UMEM_HD constexpr std::uint32_t pins() const { return static_cast<std::uint32_t>((word & pin_mask) >> pin_shift); }
    UMEM_HD constexpr std::uint32_t writers() const {
        return static_cast<std::uint32_t>((word & writer_mask) >> writer_shift);
    }
    UMEM_HD constexpr std::uint32_t hits() const {
        std::uint64_t h = (word & hits_mask) >> hits_shift;  // 0, 1, 11, 111, ...: count the ones
        std::uint32_t n = 0;
        for (; h != 0; h >>= 1) ++n;
        return n;
    }
    // The bit a hit sets: the one above those set.
    UMEM_HD constexpr std::uint64_t next_hit() const { return hits() < max_hits ? (1ull << (hits_shift + hits())) : 0; }
    UMEM_HD constexpr bool is(std::uint64_t flag) const { return (word & flag) != 0; }
};

// The fields must not overlap and must fill exactly one 64-bit word: a GPU kernel and the host
// read the same bytes, and single 64-bit atomics must cover the whole entry.
static_assert(sizeof(Pte) == 8 && alignof(Pte) == 8, "a PTE is one atomically updated 64-bit word");
static_assert((Pte::state_mask & (Pte::dirty | Pte::referenced | Pte::touched | Pte::hits_mask | Pte::pin_mask |
                                  Pte::writer_mask | Pte::frame_mask)) == 0);
static_assert(((Pte::dirty | Pte::referenced | Pte::touched) & Pte::hits_mask) == 0);
static_assert(((Pte::dirty | Pte::referenced | Pte::touched | Pte::hits_mask) &
               (Pte::pin_mask | Pte::writer_mask | Pte::frame_mask)) == 0);
static_assert((Pte::pin_mask & Pte::writer_mask) == 0 && ((Pte::pin_mask | Pte::writer_mask) & Pte::frame_mask) == 0);
static_assert((Pte::partial & (Pte::state_mask | Pte::dirty | Pte::referenced | Pte::touched | Pte::hits_mask |
                               Pte::pin_mask | Pte::writer_mask | Pte::frame_mask)) == 0);
static_assert((Pte::pin_mask >> Pte::pin_shift) + 1 == 1u << 19 && (Pte::pin_mask | Pte::partial) >> 32 == 0 &&
              Pte::writer_mask >> Pte::writer_shift == Pte::max_writers);
static_assert((Pte::frame_mask >> Pte::frame_shift) == Pte::max_frames);

}  // namespace bardrive::umem
