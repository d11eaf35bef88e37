#include "umem/nic_pager.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/loopback_engine.hpp"
#include "pci/p2p.hpp"
#include "pci/source.hpp"

namespace bardrive::umem {

namespace {

const std::string kWhat = "umem: open NIC pager";

std::uint32_t frame_data_of(const NicPagerConfig& cfg) {
    if (cfg.frame_data != 0) return cfg.frame_data;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(fixed_page_size(cfg.paging), 8192));
}

// Each queue must hold one page in flight: its frames in RX, two descriptors per frame in TX.
std::uint32_t ring_for(const NicPagerConfig& cfg) {
    std::uint64_t frames = (fixed_page_size(cfg.paging) + frame_data_of(cfg) - 1) / frame_data_of(cfg);
    std::uint32_t ring = cfg.ring;
    while (ring < 2 * frames + 2 && ring < 32768) ring *= 2;
    return ring;
}

}  // namespace

void check_nic_window_path(const pci::Topology& t, const pci::Bdf& nic, const pci::Bdf& window) {
    auto a = t.find(nic), b = t.find(window);
    if (!a || !b) {
        log::warn("umem: NIC pager: ", nic.str(), " or ", window.str(),
                  " is not in this machine's topology; the peer-to-peer path is not checked");
        return;
    }
    pci::P2pReport r = pci::judge_p2p(t, *a, *b);
    std::string reasons;
    for (const pci::Reason& why : r.reasons) {
        if (why.effect == pci::Reason::Effect::ok || why.effect == pci::Reason::Effect::note) continue;
        reasons += std::string(reasons.empty() ? "" : "; ") + why.text;
    }
    if (r.verdict == pci::Verdict::unsupported) {
        throw Error(kWhat, nic.str() + " -> " + window.str(),
                    std::string("pci/ judges peer-to-peer DMA from the NIC into the window unsupported (") +
                        pci::class_name(r.path.cls) + "): " + reasons,
                    "pick a NIC and window with a peer-to-peer path (bardrive topo p2p NIC WINDOW explains), or "
                    "set NicPagerConfig::require_p2p_verdict = false to try anyway");
    }
    if (r.verdict == pci::Verdict::platform_dependent) {
        log::warn("umem: NIC pager: peer-to-peer DMA from ", nic.str(), " into ", window.str(), " (",
                  pci::class_name(r.path.cls), ") depends on the platform: ", reasons);
    }
}

namespace {

const NicPagerConfig& checked(const NicPagerConfig& cfg, const vfio::Device& nic, const dma::PeerWindow& window,
                              const dma::Mapping& store) {
    std::uint32_t shift = check(cfg.paging);  // throws for a bad page size, pool or array
    if (fixed_page_size(cfg.paging) < 4096)
        throw Error(kWhat, log::concat("page_size ", cfg.paging.page_size),
                    "the NIC engine moves pages of 4 KiB and more", "use 4096 or larger");
    if (cfg.queues < 1) throw Error(kWhat, "0 queues", "one queue per worker thread (the engine says how many it has)");
    std::uint64_t page = 1ull << shift, pool = cfg.paging.frames << shift;
    if (cfg.pool_offset % 4096 != 0 || cfg.pool_offset > window.size() || pool > window.size() - cfg.pool_offset) {
        std::uint64_t fit = cfg.pool_offset < window.size() ? (window.size() - cfg.pool_offset) >> shift : 0;
        throw Error(kWhat, window.cpu().name(),
                    log::concat("the window holds ", window.size(), " bytes; a pool of ", cfg.paging.frames,
                                " frames of ", page, " bytes at offset ", cfg.pool_offset, " does not fit"),
                    log::concat("use at most ", fit,
                                " frames (a smaller pool oversubscribes: fine), or map a larger "
                                "window"));
    }
    std::uint64_t pages = page_count(cfg.paging);
    if (store.size() < pages << shift)
        throw Error(kWhat, "backing store",
                    log::concat("the store maps ", store.size(), " bytes; ", pages, " pages of ", page, " take ",
                                pages << shift),
                    "map the store in whole pages (dma::Memory rounds up to its page size)");
    if (cfg.timeout_ms <= 0) throw Error(kWhat, "timeout_ms", "must be positive");
    if (cfg.require_p2p_verdict) {
        pci::LiveSource src;
        check_nic_window_path(pci::read_topology(src), nic.bdf(), window.peer());
    }
    return cfg;
}

std::byte* pool_of(const dma::PeerWindow& window, const NicPagerConfig& cfg) {
    // The CPU's view of the window: what accessors read and write when a page is resident.
    return const_cast<std::byte*>(reinterpret_cast<const volatile std::byte*>(window.cpu().data())) +
           window.bar_offset() + cfg.pool_offset;
}

std::uint64_t next_pager_id() {
    static std::atomic<std::uint64_t> id{1};
    return id.fetch_add(1);
}

}  // namespace

NicPager::NicPager(vfio::Device& nic, dma::IovaAllocator& iovas, const dma::PeerWindow& window,
                   const dma::Mapping& store, const NicPagerConfig& cfg)
    : tables_(checked(cfg, nic, window, store).paging, static_cast<std::byte*>(store.vaddr()), pool_of(window, cfg)),
      id_(next_pager_id()) {
    // The driver refuses more queues than its chip has, a payload beyond its frames, a device it does not take.
    nic::EngineOptions eo;
    eo.queues = cfg.queues;
    eo.ring = ring_for(cfg);
    eo.payload = frame_data_of(cfg);
    port_ = nic::open_loopback_engine(nic, iovas, eo);
    for (std::uint16_t q = 0; q < cfg.queues; ++q) queues_.push_back(port_->engine_queue(q));
    locks_.assign(std::size_t{cfg.queues} * counter_stride, 0);
    counters_.assign(std::size_t{cfg.queues} * counter_stride, 0);
    const PagerView& v = tables_.view();
    engine_ = NicEngineView{queues_.data(),
                            locks_.data(),
                            counters_.data(),
                            cfg.queues,
                            v.host,
                            store.iova(),
                            v.frames,
                            window.iova() + cfg.pool_offset,
                            static_cast<std::uint64_t>(v.frames_n) << v.page_shift,
                            static_cast<std::uint64_t>(cfg.timeout_ms) * 1000000,
                            &fills_,
                            0,
                            NicFault::none};
    log::info("umem: NIC pager on ", port_->driver(), " ", nic.bdf().str(), ": ", cfg.queues, " queue pairs, ",
              frame_data_of(cfg), " data bytes per frame, ", v.frames_n, " frames of ", v.page_size(), " bytes in ",
              window.cpu().name());
}

NicPager::~NicPager() = default;  // the port resets the NIC first: no DMA after

unsigned NicPager::queue_of_this_thread() noexcept {
    // A thread keeps the queue it got first from this pager; threads are handed queues round-robin.
    thread_local std::uint64_t pager = 0;
    thread_local unsigned queue = 0;
    if (pager != id_) {
        pager = id_;
        queue = next_queue_.fetch_add(1, std::memory_order_relaxed) % engine_.n;
    }
    return queue;
}

NicPager::Access NicPager::access(std::uint64_t page, bool write) noexcept {
    ThreadGroup g = ThreadGroup::current();
    NicMover<CpuMover> m{&engine_, queue_of_this_thread(), {}};
    return Access(&tables_.view(), page, acquire(tables_.view(), page, write, g, m), write);
}

void NicPager::flush() noexcept {
    ThreadGroup g{0};
    NicMover<CpuMover> m{&engine_, queue_of_this_thread(), {}};
    flush_all(tables_.view(), g, m);
}

NicStats NicPager::nic_stats() const {
    NicStats s;
    for (std::uint32_t q = 0; q < engine_.n; ++q) {
        const std::uint64_t* c = &counters_[q * counter_stride];
        s.moves += c[nc_moves];
        s.lock_waits += c[nc_lock_waits];
        s.failures += c[nc_failures];
        s.fallbacks += c[nc_fallbacks];
        s.moves_per_queue.push_back(c[nc_moves]);
        s.frames += queues_[q].frames;
        s.bytes += queues_[q].bytes;
        s.doorbells += queues_[q].doorbells;
        if (queues_[q].status != nic::LoopbackQueue::Status::ok) ++s.broken_queues;
    }
    return s;
}

void NicPager::inject_fault(NicFault fault, std::uint64_t at) noexcept {
    engine_.fault = fault;
    engine_.fault_at = atom::load(&fills_) + at;
}

}  // namespace bardrive::umem
