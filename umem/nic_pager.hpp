// NicPager: umem's paging protocol (pager.hpp) with a NIC as the migration engine. The frame pool lives
// in a peer BAR window (a GPU's BAR1 in production, the lab's ivshmem window here); the backing store is
// DMA-mapped host memory; a fill moves a page from the store into its frame, a write-back moves a dirty
// frame back, both by DMA of an igb (or an e1000e, one queue) in MAC loopback (nic::LoopbackQueue, umem/nic_mover.hpp).
// The threads that fault drive the NIC themselves: each takes a queue pair of its own (up to 8), writes the
// descriptors, rings the doorbells and polls its completions. Same page table and protocol as
// HostPager and GpuPager: access(page, write), flush(), stats().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "../dma/iova_allocator.hpp"
#include "../dma/mapping.hpp"
#include "../dma/peer_window.hpp"
#include "../nic/loopback_engine.hpp"
#include "../pci/topology.hpp"
#include "../vfio/device.hpp"
#include "config.hpp"
#include "host_pager.hpp"
#include "nic_mover.hpp"

namespace bardrive::umem {

struct NicPagerConfig {
    Config paging;             // bytes, page_size, frames (the pool), admission, eviction, prefetch
    std::uint16_t queues = 1;  // NIC queue pairs, one per worker thread: 1..8 (igb), 1 (e1000e)
    // Data bytes per Ethernet frame (1..9 KiB in whole KiB); 0: the page size up to 8 KiB, so a 4 KiB
    // page moves as one jumbo frame (chosen by measurement: umem/README.md).
    std::uint32_t frame_data = 0;
    std::uint32_t ring = 256;         // descriptors per queue
    std::uint64_t pool_offset = 0;    // where in the window the frame pool starts (4 KiB aligned)
    int timeout_ms = 2000;            // a move the NIC has not completed by then fails (and falls back)
    bool require_p2p_verdict = true;  // refuse a NIC/window pair pci/ judges unsupported
};

// Engine counters summed over queues, plus the NIC's own.
struct NicStats {
    std::uint64_t moves = 0, lock_waits = 0, failures = 0, fallbacks = 0;
    std::uint64_t frames = 0, bytes = 0, doorbells = 0;
    std::vector<std::uint64_t> moves_per_queue;
    std::uint32_t broken_queues = 0;
};

// The set-up check NicPager makes with this machine's live topology: throws bardrive::Error when pci/
// judges peer-to-peer DMA from `nic` into `window`'s BAR unsupported (the reasons, what to do), warns
// when it depends on the platform, and warns that it could not check when either is missing.
void check_nic_window_path(const pci::Topology& t, const pci::Bdf& nic, const pci::Bdf& window);

class NicPager {
public:
    using Access = PinnedPage;

    // `nic`: an Intel 82576 (or 82574L: one queue pair) bound to vfio-pci, used by this pager alone (it
    // is reset and put in MAC loopback); `window`: the peer window the frames live in, mapped in the NIC's domain;
    // `store`: the backing store, DMA-mapped in the same domain, at least cfg.paging.bytes rounded up to whole pages.
    // All must outlive the pager. Throws bardrive::Error naming what is wrong and what to do: a window
    // too small for the pool, a store too small, a bad configuration, a device that is neither, a
    // NIC and window that pci/ says cannot do peer-to-peer DMA.
    NicPager(vfio::Device& nic, dma::IovaAllocator& iovas, const dma::PeerWindow& window, const dma::Mapping& store,
             const NicPagerConfig& cfg);
    ~NicPager();
    NicPager(const NicPager&) = delete;
    NicPager& operator=(const NicPager&) = delete;

    // Data path: never throws, never allocates. The calling thread's queue pair is its own while there
    // are no more threads than queues (threads beyond that share queues, taking turns).
    Access access(std::uint64_t page, bool write) noexcept;

    // The queue pair the calling thread drives (assigned round-robin at its first access).
    unsigned queue_of_this_thread() noexcept;

    // Writes every dirty frame back to the store through the NIC. Call with no access in flight.
    void flush() noexcept;

    Stats stats() const noexcept { return tables_.stats(); }
    NicStats nic_stats() const;  // with no access in flight
    PageState state(std::uint64_t page) const noexcept { return tables_.state(page); }
    const PagerView& view() const noexcept { return tables_.view(); }

    // Tests only: make fill number `at` (0-based, counted from now) go wrong the way a device could.
    void inject_fault(NicFault fault, std::uint64_t at) noexcept;

private:
    std::unique_ptr<nic::LoopbackEngine> port_;  // the engine port: first to open, last to go
    HostTables tables_;
    std::vector<nic::LoopbackQueue> queues_;
    std::vector<std::uint32_t> locks_;
    std::vector<std::uint64_t> counters_;
    std::uint64_t fills_ = 0;
    NicEngineView engine_{};
    std::atomic<unsigned> next_queue_{0};
    std::uint64_t id_;
};

}  // namespace bardrive::umem
