#include "nic/e1000e/e1000e.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000/engine.hpp"
#include "nic/e1000/regs.hpp"
#include "nic/e1000e/regs.hpp"

namespace bardrive::nic {

namespace {

using namespace std::chrono_literals;
constexpr std::size_t kPage = 4096;
constexpr std::uint32_t kBatch = 64;
constexpr std::uint32_t kMaxFrame = 1514;
constexpr std::uint32_t kLongestFrame = 9018 - 4;  // the 82574's jumbo frame limit, without CRC
constexpr std::uint32_t kBufSize = 2048;           // RCTL.BSIZE 00: 2048-byte receive buffers
// PSRCTL.BSIZE0 counts in 128 bytes: the smallest header buffer the 82574 offers, for an engine.
constexpr std::uint32_t kEngineHeaderSlot = 128;

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// Ring memory: the RX ring, the TX ring, then (engine) one header slot per descriptor.
std::size_t rx_desc_bytes(const E1000e::Config& c) {
    return c.engine ? sizeof(e1000e::PsRxDesc) : sizeof(e1000e::RxDesc);
}
std::size_t rx_bytes(const E1000e::Config& c) { return round_up(c.port.rx_ring * rx_desc_bytes(c), kPage); }
std::size_t tx_bytes(const E1000e::Config& c) { return round_up(c.port.tx_ring * sizeof(e1000e::TxDesc), kPage); }
std::size_t header_bytes(const E1000e::Config& c) {
    return c.engine ? std::size_t{c.port.rx_ring + c.port.tx_ring} * kEngineHeaderSlot : 0;
}

// Checks the options before anything is allocated for them.
void check_options(const vfio::Device& device, const E1000e::Config& c, const dma::BufferPool* pool) {
    const PortOptions& o = c.port;
    const std::string who = device.bdf().str();
    if (o.rx_queues != 1 || o.tx_queues != 1) {
        throw Error("configure e1000e", who, log::concat(o.rx_queues, " rx / ", o.tx_queues, " tx queues asked"),
                    "nic::E1000e drives one RX and one TX queue of the 82574");
    }
    check_ring_size(o.rx_ring, "rx ring");
    check_ring_size(o.tx_ring, "tx ring");
    if (o.max_frame < ETH_MIN_FRAME || o.max_frame > kLongestFrame || (!c.engine && o.max_frame != kMaxFrame)) {
        throw Error("configure e1000e", who, log::concat("max_frame ", o.max_frame),
                    log::concat("the 82574 takes frames of ", ETH_MIN_FRAME, " to ", kLongestFrame,
                                " bytes; the driver's own rings take ", kMaxFrame));
    }
    if (o.vlan_strip) {
        throw Error("configure e1000e", who, "vlan_strip asked",
                    "nic::E1000e does not strip VLAN tags (features() says what it offers); use igb");
    }
    if (c.engine) return;
    if (!pool) throw Error("configure e1000e", who, "no receive buffer pool", "pass a dma::BufferPool");
    if (pool->buffer_size() < kBufSize || pool->available() < o.rx_ring - 1) {
        throw Error("configure e1000e", who,
                    log::concat("the pool has ", pool->available(), " free buffers of ", pool->buffer_size(),
                                " bytes; the RX ring needs ", o.rx_ring - 1, " of at least ", kBufSize),
                    "make the pool larger or the ring smaller");
    }
}

dma::Memory ring_memory(const vfio::Device& device, const E1000e::Config& c, const dma::BufferPool* pool) {
    check_options(device, c, pool);
    dma::MemoryOptions mem;
    mem.allow_small_pages = true;
    dma::Memory m = dma::Memory::allocate_near(device, rx_bytes(c) + tx_bytes(c) + header_bytes(c), mem);
    std::fill_n(m.data(), m.size(), std::byte{0});
    return m;
}

E1000e::Config engine_config(const vfio::Device& device, const EngineOptions& e) {
    e1000::check_engine_payload(device.bdf().str(), e.payload, kLongestFrame);
    if (e.queues != 1) {
        throw Error("configure loopback engine", device.bdf().str(), log::concat(e.queues, " queues"),
                    "the 82574L (e1000e) serves as an engine with one queue pair: use queues = 1, or an 82576");
    }
    E1000e::Config c;
    c.engine = true;
    c.port.rx_ring = c.port.tx_ring = e.ring;
    c.port.loopback = Loopback::mac;
    c.port.broadcast = false;
    c.port.mac = loopback_engine_mac;
    c.port.max_frame = std::max<std::uint32_t>(kMaxFrame, e.payload + LoopbackQueue::header_bytes);
    c.rx_buffer_bytes = e.payload;  // packet split: the header goes to its own buffer
    c.payload = e.payload;
    return c;
}

}  // namespace

E1000e::E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const PortOptions& o)
    : E1000e(device, iovas, &rx_pool, Config{o}) {}

// An engine: rx_ and tx_ stay empty (the ring memory holds packet split descriptors instead).
E1000e::E1000e(vfio::Device& device, dma::IovaAllocator& iovas, const EngineOptions& o)
    : E1000e(device, iovas, nullptr, engine_config(device, o)) {}

E1000e::E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool* rx_pool, const Config& c)
    : dev_(&device),
      pool_(rx_pool),
      ring_memory_(ring_memory(device, c, rx_pool)),
      ring_mapping_(dma::Mapping::map(device.domain(), iovas, ring_memory_)),
      rx_(reinterpret_cast<e1000e::RxDesc*>(ring_memory_.data()), c.port.rx_ring, kBufSize),
      tx_(reinterpret_cast<e1000e::TxDesc*>(ring_memory_.data() + rx_bytes(c)), c.port.tx_ring, nullptr, kMaxFrame,
          TxFormat::e1000e_extended),
      options_(c.port),
      engine_(c.engine),
      payload_(c.payload) {
    start(device, c);
}

std::unique_ptr<Port> E1000e::open(vfio::Device& device, dma::IovaAllocator& iovas,
                                   std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    if (rx_pools.size() != 1 || rx_pools[0] == nullptr) {
        throw Error("configure e1000e", device.bdf().str(), log::concat(rx_pools.size(), " receive pools"),
                    "the 82574L has one RX queue: pass one dma::BufferPool");
    }
    return std::make_unique<E1000e>(device, iovas, *rx_pools[0], options);
}

std::unique_ptr<LoopbackEngine> E1000e::open_engine(vfio::Device& device, dma::IovaAllocator& iovas,
                                                    const EngineOptions& options) {
    return std::make_unique<E1000e>(device, iovas, options);
}

E1000e::~E1000e() { stop(); }

void E1000e::start(const vfio::Device& device, const Config& c) {
    e1000::check_identity(device, &E1000e::drives, "Intel 82574L",
                          "nic::E1000e drives 8086:10d3 (QEMU: -device e1000e); check the BDF with lspci -nn");
    try {
        init(c);
    } catch (...) {
        stop();  // a half-initialised port leaves no DMA running
        throw;
    }
}

bool E1000e::drives(std::uint16_t vendor, std::uint16_t device) noexcept {
    return vendor == e1000::VENDOR_INTEL && device == e1000e::DEVICE_82574L;
}

void E1000e::init(const Config& c) {
    const PortOptions& o = c.port;
    const std::string who = dev_->bdf().str();
    bar0_ = dev_->map_bar(0);
    bar0_.require(0, e1000::BAR0_MIN_SIZE);
    dev_->enable_bus_master();
    e1000::reset(bar0_, who);
    e1000::bring_link_up(bar0_, who, o.loopback, o.link_timeout_ms);
    if (o.mac) e1000::write_mac(bar0_, *o.mac);
    mac_ = e1000::read_mac(bar0_, who);
    link_watch_.poll(bar0_);  // the state init left: later changes are events
    link_watch_.changes = 0;

    // Receive (82574 4.6.5): extended descriptors (packet split ones for external queues), CRC stripped.
    bar0_.write32(e1000::RCTL, 0);
    for (unsigned i = 0; i < e1000::MTA_REGS; ++i) bar0_.write32(e1000::MTA(i), 0);
    std::uint64_t rx_iova = ring_mapping_.iova();
    bar0_.write32(e1000e::RDBAL, static_cast<std::uint32_t>(rx_iova));
    bar0_.write32(e1000e::RDBAH, static_cast<std::uint32_t>(rx_iova >> 32));
    bar0_.write32(e1000e::RDLEN, static_cast<std::uint32_t>(o.rx_ring * rx_desc_bytes(c)));
    bar0_.write32(e1000e::RDH, 0);
    bar0_.write32(e1000e::RDT, 0);
    bar0_.write32(e1000e::RFCTL, bar0_.read32(e1000e::RFCTL) | e1000e::RFCTL_EXTEN);
    std::uint32_t rctl = e1000::rctl::EN | e1000::rctl::SECRC;
    if (c.engine) {
        // Before RCTL: the device takes the buffer sizes when RCTL selects packet split.
        bar0_.write32(e1000e::PSRCTL, kEngineHeaderSlot / e1000e::PSRCTL_BSIZE0_UNIT |
                                          (c.rx_buffer_bytes / 1024) << e1000e::PSRCTL_BSIZE1_SHIFT);
        rctl |= e1000e::RCTL_DTYP_PS;
    } else {
        refill();
        if (rx_.posted() != o.rx_ring - 1)
            throw Error("fill rx ring", who, "the buffer pool ran dry while filling the ring");
    }
    if (o.broadcast) rctl |= e1000::rctl::BAM;
    if (o.max_frame > kMaxFrame) rctl |= e1000e::RCTL_LPE;
    if (o.promiscuous) rctl |= e1000::rctl::UPE | e1000::rctl::MPE;
    if (o.loopback == Loopback::mac) rctl |= e1000::rctl::LBM_MAC;
    bar0_.write32(e1000::RCTL, rctl);
    rx_doorbell_.start(bar0_.reg32(e1000e::RDT), rx_.tail());

    // Transmit (82574 4.6.6).
    std::uint64_t tx_iova = rx_iova + rx_bytes(c);
    bar0_.write32(e1000e::TDBAL, static_cast<std::uint32_t>(tx_iova));
    bar0_.write32(e1000e::TDBAH, static_cast<std::uint32_t>(tx_iova >> 32));
    bar0_.write32(e1000e::TDLEN, o.tx_ring * sizeof(e1000e::TxDesc));
    bar0_.write32(e1000e::TDH, 0);
    tx_doorbell_.start(bar0_.reg32(e1000e::TDT), 0);
    bar0_.write32(e1000::TCTL,
                  e1000::tctl::EN | e1000::tctl::PSP | 15u << e1000::tctl::CT_SHIFT | 63u << e1000::tctl::COLD_SHIFT);
    if (o.interrupts) setup_interrupts();
    log::info("e1000e ", who, ": up, MAC ", mac_.str(), o.interrupts ? ", MSI-X" : ", polling");
}

// 82574 7.4 (interrupts) in MSI-X mode, as Linux's e1000e sets it up: IVAR sends RX queue 0 to vector
// 0 and the other causes (link) to vector 1; EIAC clears a sent cause and, with CTRL_EXT.IAME clear, also
// masks it (IMS), so a busy queue raises one message until wait_rx() unmasks it again. QEMU's model
// sends a message when a cause goes from masked-or-clear to set-and-unmasked, also on the IMS write.
void E1000e::setup_interrupts() {
    if (engine_) {
        throw Error("enable interrupts", dev_->bdf().str(), "interrupts asked for a loopback engine",
                    "an engine's user raises its own (LoopbackEngine::arm_msi)");
    }
    vfio::IrqInfo info = dev_->irq_info(vfio::IrqType::msix);
    if (info.count < 2) {
        throw Error("enable interrupts", dev_->bdf().str(),
                    log::concat("the device offers ", info.count, " MSI-X vectors, RX and link need 2"),
                    "use polling mode");
    }
    dev_->enable_irqs(vfio::IrqType::msix, 2);
    bar0_.write32(e1000e::IVAR, (e1000e::IVAR_ENTRY_VALID | 0u) << e1000e::IVAR_RXQ0_SHIFT |
                                    (e1000e::IVAR_ENTRY_VALID | 1u) << e1000e::IVAR_OTHER_SHIFT);
    bar0_.write32(e1000e::EIAC, e1000e::ICR_RXQ0 | e1000e::ICR_OTHER);
    bar0_.write32(e1000::ICR, ~0u);  // causes left from reset and link-up: pending ones would fire at once
    bar0_.write32(e1000::IMS, e1000e::ICR_RXQ0 | e1000e::ICR_OTHER | e1000::icr::LSC);
    interrupts_ = true;
}

bool E1000e::wait_rx(std::uint16_t queue, int timeout_ms) noexcept {
    if (queue != 0) return false;
    if (rx_.has_work()) return true;
    if (!interrupts_) return false;
    bar0_.write32(e1000::IMS, e1000e::ICR_RXQ0);  // unmask: a frame that landed meanwhile fires at once
    if (rx_.has_work()) return true;
    return dev_->wait_irq(0, timeout_ms) > 0;
}

std::optional<LinkEvent> E1000e::poll_link() noexcept {
    if (interrupts_) {
        // Clear the causes, then unmask: the next change raises vector 1 again; STATUS is read after.
        bar0_.write32(e1000::ICR, e1000::icr::LSC | e1000e::ICR_OTHER);
        bar0_.write32(e1000::IMS, e1000::icr::LSC | e1000e::ICR_OTHER);
    }
    return link_watch_.poll(bar0_);
}

QueuePair E1000e::queue_pair() const {
    if (!engine_) {
        throw Error("hand out queue pair", dev_->bdf().str(), "nic::E1000e drives its rings itself",
                    "open the port as a loopback engine (nic::EngineOptions)");
    }
    const Config c{options_, true};
    const PortOptions& o = options_;
    auto reg = [&](e1000e::Reg r) { return bar0_.reg32(r); };
    auto* base = reinterpret_cast<std::uint8_t*>(ring_memory_.data());
    std::uint8_t* headers = base + rx_bytes(c) + tx_bytes(c);
    return QueuePair{nullptr,
                     o.rx_ring,
                     reinterpret_cast<e1000e::TxDesc*>(base + rx_bytes(c)),
                     o.tx_ring,
                     reg(e1000e::RDT),
                     reg(e1000e::TDT),
                     reg(e1000::RCTL),  // no per-queue enable on the 82574: clearing RCTL stops receive DMA
                     reg(e1000e::TDH),
                     headers,
                     ring_mapping_.iova_of(headers),
                     kEngineHeaderSlot,
                     reinterpret_cast<e1000e::PsRxDesc*>(base)};
}

EngineLimits E1000e::engine_limits() const noexcept {
    // Destinations even: in the packet split write-back the status dword (DD in bit 0) overlays the low
    // half of the data buffer's address. QEMU's model delivers an ICS-raised MSI-X once or twice.
    return EngineLimits{1, (kLongestFrame - LoopbackQueue::header_bytes) / 1024 * 1024, 2, 2};
}

LoopbackQueue E1000e::engine_queue(std::uint16_t queue) const {
    if (queue != 0) {
        throw Error("open loopback DMA engine", dev_->bdf().str(), log::concat("queue ", queue),
                    "the 82574L serves as an engine with queue 0 only");
    }
    return e1000::make_engine_queue(queue_pair(), payload_, e1000::engine_udp_port(0, 1), mac_);
}

// 82574 10.2.4.9: only TX queue 1 (never used here) has a valid IVAR entry, to vector 0. EIAC: the
// cause clears once its message is sent; a cause left pending would be sent again with every other
// interrupt event (seen with QEMU's model: copies fired it).
void E1000e::arm_msi() {
    dev_->enable_irqs(vfio::IrqType::msix, 1);
    bar0_.write32(e1000e::IVAR, (e1000e::IVAR_ENTRY_VALID | 0u) << e1000e::IVAR_TXQ1_SHIFT);
    bar0_.write32(e1000e::EIAC, e1000e::ICR_TXQ1);
    bar0_.write32(e1000::ICR, ~0u);  // causes left from reset and link-up: pending ones get re-sent
    bar0_.write32(e1000::IMS, e1000e::ICR_TXQ1);
    dev_->wait_irq(0, 0);  // nothing may be counted before the first send_msi()
}

void E1000e::send_msi() noexcept {
    // Sending cleared the cause and masked it (EIAC): unmask it again, then set it.
    bar0_.write32(e1000::IMS, e1000e::ICR_TXQ1);
    bar0_.write32(e1000::ICS, e1000e::ICR_TXQ1);
}

void E1000e::refill() noexcept {
    if (!pool_) return;  // an engine: its driver posts buffers
    const std::uint32_t want = rx_.free_slots();
    if (rx_.refill(*pool_) < want) ++no_buffers_;
}

// An empty poll costs a handful of instructions; the frames go through receive() (as nic::Igb).
std::uint16_t E1000e::rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept {
    if (queue != 0) return 0;
    if (rx_.has_work()) return receive(out);
    if (rx_.free_slots() != 0) [[unlikely]]
        refill_and_ring();  // a pool that ran dry may have buffers again
    return 0;
}

std::uint16_t E1000e::receive(std::span<Packet> out) noexcept {
    const std::uint32_t n = rx_.harvest(out);
    if (rx_.free_slots() >= std::min<std::uint32_t>(kBatch, rx_.size() / 4)) refill();
    rx_doorbell_.ring(rx_.tail());
    return static_cast<std::uint16_t>(n);
}

void E1000e::refill_and_ring() noexcept {
    refill();
    rx_doorbell_.ring(rx_.tail());
}

std::uint32_t E1000e::tx_reclaim(std::uint16_t queue) noexcept { return queue == 0 ? tx_.reclaim_to_pools() : 0; }

std::uint16_t E1000e::tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept {
    if (queue != 0) return 0;
    if (tx_.free_slots() < pkts.size()) tx_reclaim(0);
    std::uint32_t n = tx_.push(pkts);
    tx_doorbell_.ring(tx_.tail());
    return static_cast<std::uint16_t>(n);
}

QueueStats E1000e::rx_stats(std::uint16_t queue) const noexcept {
    if (queue != 0) return {};
    QueueStats s = rx_queue_stats(rx_.counters());
    s.doorbells = rx_doorbell_.rings;
    s.no_buffers = no_buffers_;
    return s;
}

QueueStats E1000e::tx_stats(std::uint16_t queue) const noexcept {
    if (queue != 0) return {};
    QueueStats s = tx_queue_stats(tx_.counters());
    s.doorbells = tx_doorbell_.rings;
    return s;
}

std::uint32_t E1000e::rx_free_slots(std::uint16_t queue) const noexcept { return queue == 0 ? rx_.free_slots() : 0; }
std::uint32_t E1000e::tx_free_slots(std::uint16_t queue) const noexcept { return queue == 0 ? tx_.free_slots() : 0; }
int E1000e::rx_fd(std::uint16_t queue) const noexcept { return interrupts_ && queue == 0 ? dev_->irq_fd(0) : -1; }

std::uint32_t E1000e::features() const noexcept {
    return feature::MAC_LOOPBACK | feature::DEVICE_COUNTERS | feature::LINK_SPEED;
}

void E1000e::set_promiscuous(bool on) noexcept {
    std::uint32_t rctl = bar0_.read32(e1000::RCTL);
    const std::uint32_t bits = e1000::rctl::UPE | e1000::rctl::MPE;
    bar0_.write32(e1000::RCTL, on ? rctl | bits : rctl & ~bits);
}

void E1000e::add_multicast(const MacAddress& group) noexcept { e1000::add_multicast(bar0_, group); }

const DeviceStats& E1000e::device_stats() noexcept {
    e1000::accumulate(bar0_, device_stats_);
    return device_stats_;
}

void E1000e::stop() noexcept {
    RxRing* rx[] = {&rx_};
    TxRing* tx[] = {&tx_};
    e1000::stop_port(bar0_, *dev_, 0, rx, tx);
}

}  // namespace bardrive::nic
