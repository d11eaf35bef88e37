#include "nic/igb/igb.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000/engine.hpp"
#include "nic/igb/regs.hpp"
#include "nic/rss.hpp"

namespace bardrive::nic {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint16_t kSupportedDevices[] = {0x10C9, 0x10E6, 0x10E7, 0x10E8, 0x150A, 0x150D, 0x1518, 0x1526};
constexpr std::size_t kPage = 4096;
constexpr std::size_t kHeadWbStride = 64;  // one cache line per TX queue's head write-back word
constexpr std::uint32_t kRefillBatch = 64;
constexpr std::uint32_t kStandardFrame = 1514;     // 1500-byte MTU + Ethernet header, CRC stripped
constexpr std::uint32_t kLongestFrame = 9728 - 4;  // the 82576's 9.5 KB receive limit, without CRC

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// Engine ports: per queue pair, one header slot per RX and per TX descriptor.
std::size_t header_slots_bytes(const IgbOptions& o, std::uint32_t slot) {
    return std::size_t{o.rx_ring + o.tx_ring} * slot;
}
using e1000::poll_until;

// SRRCTL.BSIZEPACKET for a pool's buffers: whole KiB, at most 127.
std::uint32_t rx_buffer_kib(const dma::BufferPool& pool) {
    return static_cast<std::uint32_t>(std::min<std::size_t>(pool.buffer_size() / 1024, igb::srrctl::BSIZEPKT_MASK));
}

}  // namespace

Igb::Igb(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const IgbOptions& o)
    : Igb(device, iovas, std::array<dma::BufferPool*, 1>{&rx_pool}, o) {}

Igb::Igb(vfio::Device& device, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools,
         const IgbOptions& o)
    : dev_(&device), options_(o) {
    start(Config{o}, iovas, rx_pools);
}

// An engine: MAC loopback, external queues with header split (LoopbackQueue's 64-byte slots), a
// locally administered address nobody sends to, no broadcast.
Igb::Igb(vfio::Device& device, dma::IovaAllocator& iovas, const EngineOptions& e) : dev_(&device) {
    e1000::check_engine_payload(device.bdf().str(), e.payload, kLongestFrame);
    Config c;
    c.engine = true;
    c.port.rx_queues = c.port.tx_queues = e.queues;
    c.port.rx_ring = c.port.tx_ring = e.ring;
    c.port.loopback = Loopback::mac;
    c.port.broadcast = false;
    c.port.mac = loopback_engine_mac;
    c.port.max_frame = std::max<std::uint32_t>(kStandardFrame, e.payload + LoopbackQueue::header_bytes);
    c.rx_header_bytes = LoopbackQueue::header_slot;
    // QEMU's model counts the split header into the buffer when it checks for room: one KiB more.
    c.rx_buffer_bytes = (e.payload + LoopbackQueue::header_bytes + 1023) / 1024 * 1024;
    c.payload = e.payload;
    options_ = c.port;
    start(c, iovas, {});
}

void Igb::start(const Config& c, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools) {
    check_options(c, rx_pools);
    check_identity();
    engine_ = c.engine;
    payload_ = c.payload;
    if (c.rx_header_bytes) header_slot_ = c.rx_header_bytes;
    try {
        init(c, iovas, rx_pools);
    } catch (...) {
        stop();  // a half-initialised device must not keep DMA going into memory about to be freed
        throw;
    }
}

std::unique_ptr<Port> Igb::open(vfio::Device& device, dma::IovaAllocator& iovas,
                                std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    IgbOptions o;
    static_cast<PortOptions&>(o) = options;
    return std::make_unique<Igb>(device, iovas, rx_pools, o);
}

std::unique_ptr<LoopbackEngine> Igb::open_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                 const EngineOptions& options) {
    return std::make_unique<Igb>(device, iovas, options);
}

void Igb::check_options(const Config& c, std::span<dma::BufferPool* const> rx_pools) const {
    const IgbOptions& o = c.port;
    const std::string who = dev_->bdf().str();
    if (o.rx_queues < 1 || o.rx_queues > igb::MAX_QUEUES || o.tx_queues < 1 || o.tx_queues > igb::MAX_QUEUES) {
        throw Error("configure igb", who,
                    log::concat(o.rx_queues, " rx / ", o.tx_queues, " tx queues asked, the 82576 PF offers 1 to ",
                                igb::MAX_QUEUES, " of each"));
    }
    check_ring_size(o.rx_ring, "rx ring");
    check_ring_size(o.tx_ring, "tx ring");
    if (o.interrupt_interval_us > igb::eitr::INTERVAL_MAX_US) {
        throw Error("configure igb", who, log::concat("interrupt_interval_us ", o.interrupt_interval_us),
                    log::concat("EITR holds 0 to ", igb::eitr::INTERVAL_MAX_US, " microseconds"));
    }
    if (o.max_frame < ETH_MIN_FRAME || o.max_frame > kLongestFrame) {
        throw Error("configure igb", who, log::concat("max_frame ", o.max_frame),
                    log::concat("the 82576 takes frames of ", ETH_MIN_FRAME, " to ", kLongestFrame,
                                " bytes (9.5 KB with CRC)"));
    }
    if (c.engine) return;  // the engine's sizes follow from its payload, checked by the constructor
    if (rx_pools.empty() || std::find(rx_pools.begin(), rx_pools.end(), nullptr) != rx_pools.end()) {
        throw Error("configure igb", who, "no receive buffer pool",
                    "pass a dma::BufferPool (or open a loopback engine)");
    }
    if (rx_pools.size() != 1 && rx_pools.size() != o.rx_queues) {
        throw Error("configure igb", who,
                    log::concat(rx_pools.size(), " receive pools for ", o.rx_queues, " rx queues"),
                    "pass one pool for all queues or one per queue");
    }
    // Every frame in one buffer (no chains to hand out): SRRCTL.BSIZEPACKET counts whole KiB.
    std::uint32_t need = std::max<std::uint32_t>(2048, o.max_frame);
    for (const dma::BufferPool* pool : rx_pools) {
        if (rx_buffer_kib(*pool) * 1024 < need) {
            throw Error("configure igb", who, log::concat("pool buffers of ", pool->buffer_size(), " bytes"),
                        log::concat("receive buffers must hold at least ", (need + 1023) / 1024 * 1024, " bytes (a ",
                                    o.max_frame, "-byte frame in one buffer, in whole KiB)"));
        }
        // A pool filling several rings (shared, or passed twice) must hold all of them.
        std::size_t rings = rx_pools.size() == 1 ? o.rx_queues : std::count(rx_pools.begin(), rx_pools.end(), pool);
        std::size_t ring_bufs = rings * (o.rx_ring - 1);
        if (pool->available() < ring_bufs) {
            throw Error("configure igb", who,
                        log::concat("a pool has ", pool->available(), " free buffers, the ", rings,
                                    " RX ring(s) it fills need ", ring_bufs),
                        "make the pool larger or the rings smaller");
        }
    }
}

void Igb::init(const Config& c, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools) {
    const IgbOptions& o = c.port;
    vfio::Device& device = *dev_;
    const std::string who = device.bdf().str();
    bar0_ = device.map_bar(0);
    bar0_.require(0, igb::BAR0_MIN_SIZE);
    device.enable_bus_master();

    e1000::reset(bar0_, who, igb::EIMC);
    e1000::bring_link_up(bar0_, who, o.loopback, o.link_timeout_ms);
    if (o.mac) e1000::write_mac(bar0_, *o.mac);
    mac_ = e1000::read_mac(bar0_, who);
    link_watch_.poll(bar0_);  // the state init left: later changes are events
    link_watch_.changes = 0;

    // Ring memory: every ring on its own 4 KiB boundary (128 bytes would do), then the head write-back words.
    std::size_t rx_bytes = round_up(o.rx_ring * sizeof(igb::AdvRxDesc), kPage);
    std::size_t tx_bytes = round_up(o.tx_ring * sizeof(igb::AdvTxDesc), kPage);
    std::size_t heads = round_up(o.tx_queues * kHeadWbStride, kPage);
    std::size_t total = o.rx_queues * rx_bytes + o.tx_queues * tx_bytes + heads;
    if (c.engine) total += round_up(std::size_t{o.rx_queues} * header_slots_bytes(o, header_slot_), kPage);
    dma::MemoryOptions mem;
    mem.allow_small_pages = true;  // rings are small: 4 KiB pages are fine when no hugepage is free
    ring_memory_ = dma::Memory::allocate_near(device, total, mem);
    std::fill_n(ring_memory_.data(), ring_memory_.size(), std::byte{0});
    ring_mapping_ = dma::Mapping::map(device.domain(), iovas, ring_memory_);

    if (c.engine) headers_ = ring_memory_.data() + o.rx_queues * rx_bytes + o.tx_queues * tx_bytes + heads;
    setup_rx(c, rx_pools);
    setup_tx(c);
    rx_live_ = rx_;
    tx_live_ = tx_;
    if (o.interrupts) setup_interrupts(o);
    log::info("igb ", who, ": up, MAC ", mac_.str(), ", ", link_speed_mbps(), " Mb/s, ", o.rx_queues, " rx / ",
              o.tx_queues, " tx queues");
}

Igb::~Igb() { stop(); }

bool Igb::drives(std::uint16_t vendor, std::uint16_t device) noexcept {
    return vendor == igb::VENDOR_INTEL &&
           std::find(std::begin(kSupportedDevices), std::end(kSupportedDevices), device) != std::end(kSupportedDevices);
}

void Igb::check_identity() const {
    e1000::check_identity(*dev_, &Igb::drives, "Intel 82576",
                          "nic::Igb drives 8086:10c9 (QEMU: -device igb); check the BDF with lspci -nn");
}

// 4.5.9 (receive initialization).
void Igb::setup_rx(const Config& c, std::span<dma::BufferPool* const> pools) {
    const IgbOptions& o = c.port;
    bar0_.write32(igb::RCTL, 0);
    for (unsigned i = 0; i < igb::MTA_REGS; ++i) bar0_.write32(igb::MTA(i), 0);
    for (unsigned i = 1; i < 16; ++i) {  // only our own address in the exact filters
        bar0_.write32(igb::RAL(i), 0);
        bar0_.write32(igb::RAH(i), 0);
    }
    std::uint32_t split = c.rx_header_bytes > 0 ? (c.rx_header_bytes / 64) << igb::srrctl::BSIZEHEADER_SHIFT |
                                                      igb::srrctl::DESCTYPE_HDR_SPLIT_ALWAYS
                                                : igb::srrctl::DESCTYPE_ADV_ONEBUF;
    std::size_t rx_bytes = round_up(o.rx_ring * sizeof(igb::AdvRxDesc), kPage);
    rx_.reserve(o.rx_queues);
    for (std::uint16_t q = 0; q < o.rx_queues; ++q) {
        dma::BufferPool* pool = c.engine ? nullptr : pools[pools.size() == 1 ? 0 : q];
        std::uint32_t kib = pool ? rx_buffer_kib(*pool) : c.rx_buffer_bytes / 1024;
        std::uint32_t srrctl = kib | igb::srrctl::DROP_EN | split;
        auto* descs = reinterpret_cast<igb::AdvRxDesc*>(ring_memory_.data() + q * rx_bytes);
        std::uint64_t iova = ring_mapping_.iova_of(descs);
        rx_.push_back(RxQueue{RxRing(descs, o.rx_ring, kib * 1024),
                              pool,
                              std::min<std::uint32_t>(kRefillBatch, o.rx_ring / 4),
                              {},
                              0,
                              descs});
        bar0_.write32(igb::RDBAL(q), static_cast<std::uint32_t>(iova));
        bar0_.write32(igb::RDBAH(q), static_cast<std::uint32_t>(iova >> 32));
        bar0_.write32(igb::RDLEN(q), o.rx_ring * sizeof(igb::AdvRxDesc));
        bar0_.write32(igb::SRRCTL(q), srrctl);
        bar0_.write32(igb::RDH(q), 0);
        bar0_.write32(igb::RDT(q), 0);
        bar0_.write32(igb::RXDCTL(q), igb::rxdctl::ENABLE | 8u << igb::rxdctl::PTHRESH_SHIFT |
                                          8u << igb::rxdctl::HTHRESH_SHIFT | 1u << igb::rxdctl::WTHRESH_SHIFT);
        if (!poll_until([&] { return (bar0_.read32(igb::RXDCTL(q)) & igb::rxdctl::ENABLE) != 0; }, 10ms)) {
            throw Error("enable rx queue", dev_->bdf().str(), log::concat("RXDCTL", q, ".ENABLE did not stick"));
        }
        refill(rx_.back());
        if (!c.engine && rx_.back().ring.posted() != o.rx_ring - 1) {
            throw Error("fill rx ring", dev_->bdf().str(), "the buffer pool ran dry while filling the rings");
        }
    }
    // The descriptor carries the RSS hash (PCSD); with one queue RSS stays off and everything lands in queue 0.
    // Checksum status bits (IPCS/L4CS/UDPCS, IPE/L4E) come with PCSD too; an engine keeps them off
    // (LoopbackQueue takes any error bit for a broken engine).
    bar0_.write32(igb::RXCSUM,
                  igb::rxcsum::PCSD | (o.rx_checksum && !c.engine ? igb::rxcsum::IPOFLD | igb::rxcsum::TUOFLD : 0));
    if (o.rx_queues > 1) {
        for (unsigned i = 0; i < igb::RETA_ENTRIES / 4; ++i) {
            std::uint32_t v = 0;
            for (unsigned b = 0; b < 4; ++b) v |= rss_queue(4 * i + b, o.rx_queues) << (8 * b);
            bar0_.write32(igb::RETA(i), v);
        }
        for (unsigned i = 0; i < igb::RSSRK_REGS; ++i) {
            bar0_.write32(igb::RSSRK(i), rss_key[4 * i] | rss_key[4 * i + 1] << 8 | rss_key[4 * i + 2] << 16 |
                                             static_cast<std::uint32_t>(rss_key[4 * i + 3]) << 24);
        }
        bar0_.write32(igb::MRQC, igb::mrqc::RSS | igb::mrqc::RSS_IPV4 | igb::mrqc::RSS_TCP_IPV4 | igb::mrqc::RSS_IPV6 |
                                     igb::mrqc::RSS_TCP_IPV6 | igb::mrqc::RSS_UDP_IPV4);
    } else {
        bar0_.write32(igb::MRQC, 0);
    }
    // CTRL.VME: received VLAN tags are stripped into the descriptor (a tag inserted on TX needs no VME).
    std::uint32_t ctrl = bar0_.read32(igb::CTRL);
    bar0_.write32(igb::CTRL, o.vlan_strip ? ctrl | igb::ctrl::VME : ctrl & ~igb::ctrl::VME);
    std::uint32_t rctl = igb::rctl::EN | igb::rctl::SECRC;
    if (o.broadcast) rctl |= igb::rctl::BAM;
    if (o.promiscuous) rctl |= igb::rctl::UPE | igb::rctl::MPE;
    if (o.loopback == Loopback::mac) rctl |= igb::rctl::LBM_MAC;
    if (o.max_frame > kStandardFrame) {
        rctl |= igb::rctl::LPE;
        bar0_.write32(igb::RLPML, o.max_frame + 4);  // the limit counts the CRC
    }
    bar0_.write32(igb::RCTL, rctl);
    for (std::uint16_t q = 0; q < o.rx_queues; ++q) rx_[q].doorbell.start(bar0_.reg32(igb::RDT(q)), rx_[q].ring.tail());
}

// 4.5.10 (transmit initialization), with head write-back (8.12) so completions cost one word to read.
void Igb::setup_tx(const Config& c) {
    const IgbOptions& o = c.port;
    std::size_t rx_bytes = round_up(o.rx_ring * sizeof(igb::AdvRxDesc), kPage);
    std::size_t tx_bytes = round_up(o.tx_ring * sizeof(igb::AdvTxDesc), kPage);
    std::byte* base = ring_memory_.data() + o.rx_queues * rx_bytes;
    std::byte* wb = base + o.tx_queues * tx_bytes;
    tx_.reserve(o.tx_queues);
    for (std::uint16_t q = 0; q < o.tx_queues; ++q) {
        auto* descs = reinterpret_cast<igb::AdvTxDesc*>(base + q * tx_bytes);
        auto* head = reinterpret_cast<std::uint32_t*>(wb + q * kHeadWbStride);
        std::uint64_t iova = ring_mapping_.iova_of(descs);
        std::uint64_t head_iova = ring_mapping_.iova_of(head);
        tx_.push_back(TxQueue{TxRing(descs, o.tx_ring, head, o.max_frame), head, {}, descs});
        bar0_.write32(igb::TDBAL(q), static_cast<std::uint32_t>(iova));
        bar0_.write32(igb::TDBAH(q), static_cast<std::uint32_t>(iova >> 32));
        bar0_.write32(igb::TDLEN(q), o.tx_ring * sizeof(igb::AdvTxDesc));
        bar0_.write32(igb::TDH(q), 0);
        tx_.back().doorbell.start(bar0_.reg32(igb::TDT(q)), 0);
        bar0_.write32(igb::TDWBAL(q), static_cast<std::uint32_t>(head_iova) | igb::TDWBAL_HEAD_WB_EN);
        bar0_.write32(igb::TDWBAH(q), static_cast<std::uint32_t>(head_iova >> 32));
        bar0_.write32(igb::TXDCTL(q),
                      igb::rxdctl::ENABLE | 8u << igb::rxdctl::PTHRESH_SHIFT | 1u << igb::rxdctl::HTHRESH_SHIFT);
        if (!poll_until([&] { return (bar0_.read32(igb::TXDCTL(q)) & igb::rxdctl::ENABLE) != 0; }, 10ms)) {
            throw Error("enable tx queue", dev_->bdf().str(), log::concat("TXDCTL", q, ".ENABLE did not stick"));
        }
    }
    bar0_.write32(igb::TCTL,
                  igb::tctl::EN | igb::tctl::PSP | 15u << igb::tctl::CT_SHIFT | 63u << igb::tctl::COLD_SHIFT);
}

// 7.3 (interrupts), MSI-X mode: RX queue q -> EICR bit q -> MSI-X vector q -> eventfd q.
void Igb::setup_interrupts(const IgbOptions& o) {
    vfio::IrqInfo info = dev_->irq_info(vfio::IrqType::msix);
    if (info.count < o.rx_queues + 1u) {
        throw Error("enable interrupts", dev_->bdf().str(),
                    log::concat("the device offers ", info.count, " MSI-X vectors, ", o.rx_queues,
                                " RX queues need one each and link changes one more"),
                    "use fewer queues or polling mode");
    }
    dev_->enable_irqs(vfio::IrqType::msix, o.rx_queues + 1u);
    bar0_.write32(igb::GPIE, igb::gpie::MSIX_MODE | igb::gpie::PBA | igb::gpie::NSICR);
    std::uint32_t mask = 0;
    for (unsigned q = 0; q < o.rx_queues; ++q) {
        std::uint32_t ivar = bar0_.read32(igb::IVAR(igb::ivar_index(q)));
        ivar &= ~(0xffu << igb::ivar_rx_shift(q));
        ivar |= (igb::IVAR_VALID | q) << igb::ivar_rx_shift(q);
        bar0_.write32(igb::IVAR(igb::ivar_index(q)), ivar);
        bar0_.write32(igb::EITR(q), o.interrupt_interval_us << igb::eitr::INTERVAL_SHIFT);
        mask |= 1u << q;
    }
    // Link changes (ICR.LSC, an "other" cause) raise the vector after the RX ones; poll_link re-arms it.
    const unsigned link = o.rx_queues;
    bar0_.write32(igb::IVAR_MISC, (igb::IVAR_VALID | link) << igb::IVAR_MISC_OTHER_SHIFT);
    bar0_.write32(igb::EITR(link), 0);  // link changes are rare: never held back
    mask |= 1u << link;
    bar0_.write32(igb::ICR, ~0u);  // the LSC of init's link-up: a cause left set would hide the next one
    bar0_.write32(igb::IMS, igb::icr::LSC);
    bar0_.write32(igb::EIAC, mask);  // the cause bit clears itself when its vector fires
    bar0_.write32(igb::EIMS, mask);
    interrupts_ = true;
}

void Igb::refill(RxQueue& q) noexcept {
    if (!q.pool) return;  // external queues: their driver posts buffers
    const std::uint32_t want = q.ring.free_slots();
    if (q.ring.refill(*q.pool) < want) ++q.no_buffers;
}

// An empty poll costs a handful of instructions (no frames path set up, no registers saved); the frames
// go through receive().
std::uint16_t Igb::rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept {
    if (queue >= rx_live_.size()) return 0;
    RxQueue& q = rx_live_.data()[queue];
    if (q.ring.has_work()) return receive(q, out);
    if (q.ring.free_slots() != 0) [[unlikely]]
        refill_and_ring(q);  // a pool that ran dry may have buffers
    return 0;
}

std::uint16_t Igb::receive(RxQueue& q, std::span<Packet> out) noexcept {
    const std::uint32_t n = q.ring.harvest(out);
    // Refill in bulk once a batch's worth of descriptors is free.
    if (q.ring.free_slots() >= q.refill_at) refill(q);
    q.doorbell.ring(q.ring.tail());
    return static_cast<std::uint16_t>(n);
}

void Igb::refill_and_ring(RxQueue& q) noexcept {
    refill(q);
    q.doorbell.ring(q.ring.tail());
}

std::uint32_t Igb::rx_free_slots(std::uint16_t queue) const noexcept {
    return queue < rx_.size() ? rx_[queue].ring.free_slots() : 0;
}

std::uint32_t Igb::tx_free_slots(std::uint16_t queue) const noexcept {
    return queue < tx_.size() ? tx_[queue].ring.free_slots() : 0;
}

std::uint32_t Igb::tx_reclaim(std::uint16_t queue) noexcept {
    if (queue >= tx_live_.size()) return 0;
    return tx_live_.data()[queue].ring.reclaim_to_pools();
}

std::uint16_t Igb::tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept {
    if (queue >= tx_live_.size()) return 0;
    TxQueue& q = tx_live_.data()[queue];
    // Completions are collected in bulk, only when the ring runs short (an offloaded frame takes a
    // context descriptor too).
    if (q.ring.free_slots() < 2 * pkts.size()) q.ring.reclaim_to_pools();
    std::uint32_t n = q.ring.push(pkts);
    q.doorbell.ring(q.ring.tail());
    return static_cast<std::uint16_t>(n);
}

bool Igb::wait_rx(std::uint16_t queue, int timeout_ms) noexcept {
    if (queue >= rx_.size()) return false;
    if (rx_[queue].ring.has_work()) return true;
    if (!interrupts_) return false;
    return dev_->wait_irq(queue, timeout_ms) > 0;
}

int Igb::rx_fd(std::uint16_t queue) const noexcept {
    return interrupts_ && queue < rx_.size() ? dev_->irq_fd(queue) : -1;
}

std::uint32_t Igb::features() const noexcept {
    return feature::TX_IP_CSUM | feature::TX_L4_CSUM | feature::TX_VLAN | feature::RX_CSUM | feature::RX_CSUM_ERRORS |
           feature::RX_VLAN_STRIP | feature::RSS | feature::MAC_LOOPBACK | feature::DEVICE_COUNTERS |
           feature::LINK_SPEED | feature::JUMBO;
}

bool Igb::link_up() const noexcept { return e1000::link_up(bar0_); }

unsigned Igb::link_speed_mbps() const noexcept { return e1000::link_speed_mbps(bar0_); }

std::optional<LinkEvent> Igb::poll_link() noexcept {
    if (interrupts_) bar0_.write32(igb::ICR, igb::icr::LSC);  // cleared before STATUS is read: no change is lost
    return link_watch_.poll(bar0_);
}

int Igb::link_fd() const noexcept { return interrupts_ ? dev_->irq_fd(static_cast<unsigned>(rx_.size())) : -1; }

void Igb::set_promiscuous(bool on) noexcept {
    std::uint32_t rctl = bar0_.read32(igb::RCTL);
    rctl = on ? rctl | igb::rctl::UPE | igb::rctl::MPE : rctl & ~(igb::rctl::UPE | igb::rctl::MPE);
    bar0_.write32(igb::RCTL, rctl);
}

void Igb::add_multicast(const MacAddress& group) noexcept { e1000::add_multicast(bar0_, group); }

QueueStats Igb::rx_stats(std::uint16_t queue) const noexcept {
    if (queue >= rx_.size()) return {};
    const RxQueue& q = rx_[queue];
    QueueStats s = rx_queue_stats(q.ring.counters());
    s.no_buffers = q.no_buffers;
    s.doorbells = q.doorbell.rings;
    return s;
}

QueueStats Igb::tx_stats(std::uint16_t queue) const noexcept {
    if (queue >= tx_.size()) return {};
    const TxQueue& q = tx_[queue];
    QueueStats s = tx_queue_stats(q.ring.counters());
    s.doorbells = q.doorbell.rings;
    return s;
}

const DeviceStats& Igb::device_stats() noexcept {
    e1000::accumulate(bar0_, device_stats_);
    return device_stats_;
}

std::span<igb::AdvRxDesc> Igb::rx_descriptors(std::uint16_t queue) const noexcept {
    if (queue >= rx_.size()) return {};
    return {rx_[queue].descs, rx_[queue].ring.size()};
}

std::uint32_t Igb::rx_next_to_clean(std::uint16_t queue) const noexcept {
    return queue < rx_.size() ? rx_[queue].ring.next_to_clean() : 0;
}

std::uint32_t* Igb::tx_head_writeback(std::uint16_t queue) const noexcept {
    return queue < tx_.size() ? tx_[queue].head_wb : nullptr;
}

QueuePair Igb::queue_pair(std::uint16_t queue) const {
    if (!engine_ || queue >= rx_.size() || queue >= tx_.size()) {
        throw Error("hand out queue pair", dev_->bdf().str(),
                    log::concat("queue ", queue, " of ", rx_.size(), " rx / ", tx_.size(), " tx queues",
                                engine_ ? "" : " that nic::Igb drives itself"),
                    "open the port as a loopback engine (nic::EngineOptions) with enough queues");
    }
    auto reg = [&](igb::Reg r) { return bar0_.reg32(r); };
    auto* headers = reinterpret_cast<std::uint8_t*>(headers_ + queue * header_slots_bytes(options_, header_slot_));
    return QueuePair{rx_[queue].descs,
                     rx_[queue].ring.size(),
                     tx_[queue].descs,
                     tx_[queue].ring.size(),
                     reg(igb::RDT(queue)),
                     reg(igb::TDT(queue)),
                     reg(igb::RXDCTL(queue)),
                     tx_[queue].head_wb,
                     headers,
                     ring_mapping_.iova_of(headers),
                     header_slot_,
                     nullptr};
}

EngineLimits Igb::engine_limits() const noexcept {
    return EngineLimits{igb::MAX_QUEUES, kLongestFrame - LoopbackQueue::header_bytes, 1, 1};
}

LoopbackQueue Igb::engine_queue(std::uint16_t queue) const {
    QueuePair qp = queue_pair(queue);  // throws unless an engine with that queue
    return e1000::make_engine_queue(qp, payload_, e1000::engine_udp_port(queue, rx_queues()), mac_);
}

// 82576 8.8.15: one EICR bit per vector in MSI-X mode; vector 0's cause (EICS bit 0) is raised only by
// send_msi(): no RX queue's IVAR entry is valid on an engine port.
void Igb::arm_msi() {
    dev_->enable_irqs(vfio::IrqType::msix, 1);
    bar0_.write32(igb::GPIE, igb::gpie::MSIX_MODE | igb::gpie::PBA);
    bar0_.write32(igb::EIAC, 1);  // the cause clears once its message is sent
    bar0_.write32(igb::EIMS, 1);
    dev_->wait_irq(0, 0);  // nothing may be counted before the first send_msi()
}

void Igb::send_msi() noexcept { bar0_.write32(igb::EICS, 1); }

void Igb::stop() noexcept {
    std::vector<RxRing*> rx;
    std::vector<TxRing*> tx;
    try {  // destruction never throws: without room for the lists the rings are still stopped, not drained
        for (auto& q : rx_) rx.push_back(&q.ring);
        for (auto& q : tx_) tx.push_back(&q.ring);
    } catch (...) {
        rx.clear();
        tx.clear();
    }
    e1000::stop_port(bar0_, *dev_, igb::EIMC, rx, tx);
}

}  // namespace bardrive::nic
