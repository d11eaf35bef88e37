#include "nic/e1000e.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/e1000e_regs.hpp"
#include "nic/igb_regs.hpp"

namespace bardrive::nic {

namespace {

using namespace std::chrono_literals;
constexpr std::size_t kPage = 4096;
constexpr std::uint32_t kBatch = 64;
constexpr std::uint32_t kMaxFrame = 1514;
constexpr std::uint32_t kLongestFrame = 9018 - 4;  // the 82574's jumbo frame limit, without CRC
constexpr std::uint32_t kBufSize = 2048;           // RCTL.BSIZE 00: 2048-byte receive buffers

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// Ring memory: the RX ring, the TX ring, then (external queues) one header slot per descriptor.
std::size_t rx_desc_bytes(const E1000eOptions& o) {
    return o.external_queues ? sizeof(e1000e::PsRxDesc) : sizeof(e1000e::RxDesc);
}
std::size_t rx_bytes(const E1000eOptions& o) { return round_up(o.rx_ring * rx_desc_bytes(o), kPage); }
std::size_t tx_bytes(const E1000eOptions& o) { return round_up(o.tx_ring * sizeof(e1000e::TxDesc), kPage); }
std::size_t header_bytes(const E1000eOptions& o) {
    return o.external_queues ? std::size_t{o.rx_ring + o.tx_ring} * o.rx_header_bytes : 0;
}

// Checks the options before anything is allocated for them.
void check_options(const vfio::Device& device, const E1000eOptions& o) {
    const std::string who = device.bdf().str();
    check_ring_size(o.rx_ring, "rx ring");
    check_ring_size(o.tx_ring, "tx ring");
    if (o.max_frame < ETH_MIN_FRAME || o.max_frame > kLongestFrame ||
        (!o.external_queues && o.max_frame != kMaxFrame)) {
        throw Error("configure e1000e", who, log::concat("max_frame ", o.max_frame),
                    log::concat("the 82574 takes frames of ", ETH_MIN_FRAME, " to ", kLongestFrame,
                                " bytes; the driver's own rings take ", kMaxFrame));
    }
    if (!o.external_queues) {
        if (o.rx_buffer_bytes != 0 || o.rx_header_bytes != 0) {
            throw Error("configure e1000e", who, "rx_buffer_bytes/rx_header_bytes set without external_queues",
                        "the driver's own rings use 2 KiB buffers from the pool");
        }
        return;
    }
    const std::uint32_t h = o.rx_header_bytes, b = o.rx_buffer_bytes;
    if (h == 0 || h % e1000e::PSRCTL_BSIZE0_UNIT != 0 || h / e1000e::PSRCTL_BSIZE0_UNIT > 0x7f || b == 0 ||
        b % 1024 != 0 || b / 1024 > 0x3f) {
        throw Error("configure e1000e", who,
                    log::concat("rx buffers of ", b, " bytes with ", h, "-byte header buffers"),
                    "external queues need a header buffer of 128 to 16256 bytes in steps of 128 and a data "
                    "buffer of 1 to 63 KiB in whole KiB");
    }
}

dma::Memory ring_memory(const vfio::Device& device, const E1000eOptions& o) {
    check_options(device, o);
    dma::MemoryOptions mem;
    mem.allow_small_pages = true;
    dma::Memory m = dma::Memory::allocate_near(device, rx_bytes(o) + tx_bytes(o) + header_bytes(o), mem);
    std::fill_n(m.data(), m.size(), std::byte{0});
    return m;
}

void check_identity(const vfio::Device& device) {
    std::uint16_t vendor = device.config_read16(0x00), id = device.config_read16(0x02);
    if (!E1000e::drives(vendor, id)) {
        char ids[16];
        std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, id);
        throw Error("open e1000e", device.bdf().str(), log::concat("device ", ids, " is not an Intel 82574L"),
                    "nic::E1000e drives 8086:10d3 (QEMU: -device e1000e); check the BDF with lspci -nn");
    }
}

}  // namespace

E1000e::E1000e(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const E1000eOptions& o)
    : dev_(&device),
      pool_(&rx_pool),
      ring_memory_(ring_memory(device, o)),
      ring_mapping_(dma::Mapping::map(device.domain(), iovas, ring_memory_)),
      rx_(reinterpret_cast<e1000e::RxDesc*>(ring_memory_.data()), o.rx_ring, kBufSize),
      tx_(reinterpret_cast<e1000e::TxDesc*>(ring_memory_.data() + rx_bytes(o)), o.tx_ring, nullptr, kMaxFrame,
          TxFormat::e1000e_extended),
      options_(o) {
    const std::string who = device.bdf().str();
    if (o.external_queues) {
        throw Error("configure e1000e", who, "a receive pool given with external_queues",
                    "external queues take no pool: use the constructor without one");
    }
    if (rx_pool.buffer_size() < kBufSize || rx_pool.available() < o.rx_ring - 1) {
        throw Error("configure e1000e", who,
                    log::concat("the pool has ", rx_pool.available(), " free buffers of ", rx_pool.buffer_size(),
                                " bytes; the RX ring needs ", o.rx_ring - 1, " of at least ", kBufSize),
                    "make the pool larger or the ring smaller");
    }
    start(device, o);
}

// External queues: rx_ and tx_ stay empty (the ring memory holds packet split descriptors instead).
E1000e::E1000e(vfio::Device& device, dma::IovaAllocator& iovas, const E1000eOptions& o)
    : dev_(&device),
      pool_(nullptr),
      ring_memory_(ring_memory(device, o)),
      ring_mapping_(dma::Mapping::map(device.domain(), iovas, ring_memory_)),
      rx_(reinterpret_cast<e1000e::RxDesc*>(ring_memory_.data()), o.rx_ring, kBufSize),
      tx_(reinterpret_cast<e1000e::TxDesc*>(ring_memory_.data() + rx_bytes(o)), o.tx_ring, nullptr, kMaxFrame,
          TxFormat::e1000e_extended),
      options_(o) {
    if (!o.external_queues) {
        throw Error("configure e1000e", device.bdf().str(), "no receive buffer pool",
                    "pass a dma::BufferPool or use external_queues");
    }
    start(device, o);
}

E1000e::~E1000e() { stop(); }

void E1000e::start(const vfio::Device& device, const E1000eOptions& o) {
    check_identity(device);
    try {
        init(o);
    } catch (...) {
        stop();  // a half-initialised port leaves no DMA running
        throw;
    }
}

bool E1000e::drives(std::uint16_t vendor, std::uint16_t device) noexcept {
    return vendor == igb::VENDOR_INTEL && device == e1000e::DEVICE_82574L;
}

void E1000e::init(const E1000eOptions& o) {
    const std::string who = dev_->bdf().str();
    bar0_ = dev_->map_bar(0);
    bar0_.require(0, igb::BAR0_MIN_SIZE);
    dev_->enable_bus_master();
    e1000x::reset(bar0_, who, false);
    e1000x::bring_link_up(bar0_, who, o.loopback, o.link_timeout_ms);
    if (o.mac) e1000x::write_mac(bar0_, *o.mac);
    mac_ = e1000x::read_mac(bar0_, who);
    link_watch_.poll(bar0_);  // the state init left: later changes are events
    link_watch_.changes = 0;

    // Receive (82574 4.6.5): extended descriptors (packet split ones for external queues), CRC stripped.
    bar0_.write32(igb::RCTL, 0);
    for (unsigned i = 0; i < igb::MTA_REGS; ++i) bar0_.write32(igb::MTA(i), 0);
    std::uint64_t rx_iova = ring_mapping_.iova();
    bar0_.write32(e1000e::RDBAL, static_cast<std::uint32_t>(rx_iova));
    bar0_.write32(e1000e::RDBAH, static_cast<std::uint32_t>(rx_iova >> 32));
    bar0_.write32(e1000e::RDLEN, static_cast<std::uint32_t>(o.rx_ring * rx_desc_bytes(o)));
    bar0_.write32(e1000e::RDH, 0);
    bar0_.write32(e1000e::RDT, 0);
    bar0_.write32(e1000e::RFCTL, bar0_.read32(e1000e::RFCTL) | e1000e::RFCTL_EXTEN);
    std::uint32_t rctl = igb::rctl::EN | igb::rctl::SECRC;
    if (o.external_queues) {
        // Before RCTL: the device takes the buffer sizes when RCTL selects packet split.
        bar0_.write32(e1000e::PSRCTL, o.rx_header_bytes / e1000e::PSRCTL_BSIZE0_UNIT |
                                          (o.rx_buffer_bytes / 1024) << e1000e::PSRCTL_BSIZE1_SHIFT);
        rctl |= e1000e::RCTL_DTYP_PS;
    } else {
        refill();
        if (rx_.posted() != o.rx_ring - 1)
            throw Error("fill rx ring", who, "the buffer pool ran dry while filling the ring");
    }
    if (o.broadcast) rctl |= igb::rctl::BAM;
    if (o.max_frame > kMaxFrame) rctl |= e1000e::RCTL_LPE;
    if (o.promiscuous) rctl |= igb::rctl::UPE | igb::rctl::MPE;
    if (o.loopback == Loopback::mac) rctl |= igb::rctl::LBM_MAC;
    bar0_.write32(igb::RCTL, rctl);
    vfio::wmb();
    bar0_.write32(e1000e::RDT, rx_.tail());
    rx_tail_ = rx_.tail();

    // Transmit (82574 4.6.6).
    std::uint64_t tx_iova = rx_iova + rx_bytes(o);
    bar0_.write32(e1000e::TDBAL, static_cast<std::uint32_t>(tx_iova));
    bar0_.write32(e1000e::TDBAH, static_cast<std::uint32_t>(tx_iova >> 32));
    bar0_.write32(e1000e::TDLEN, o.tx_ring * sizeof(e1000e::TxDesc));
    bar0_.write32(e1000e::TDH, 0);
    bar0_.write32(e1000e::TDT, 0);
    bar0_.write32(igb::TCTL,
                  igb::tctl::EN | igb::tctl::PSP | 15u << igb::tctl::CT_SHIFT | 63u << igb::tctl::COLD_SHIFT);
    if (o.interrupts) setup_interrupts();
    log::info("e1000e ", who, ": up, MAC ", mac_.str(), o.interrupts ? ", MSI-X" : ", polling");
}

// 82574 7.4 (interrupts) in MSI-X mode, as Linux's e1000e sets it up: IVAR sends RX queue 0 to vector
// 0 and the other causes (link) to vector 1; EIAC clears a sent cause and, with CTRL_EXT.IAME clear, also
// masks it (IMS), so a busy queue raises one message until wait_rx() unmasks it again. QEMU's model
// sends a message when a cause goes from masked-or-clear to set-and-unmasked, also on the IMS write.
void E1000e::setup_interrupts() {
    if (options_.external_queues) {
        throw Error("enable interrupts", dev_->bdf().str(), "interrupts asked with external_queues",
                    "the driver of external queues raises its own (nic::MemcpyDriver does)");
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
    bar0_.write32(igb::ICR, ~0u);  // causes left from reset and link-up: pending ones would fire at once
    bar0_.write32(igb::IMS, e1000e::ICR_RXQ0 | e1000e::ICR_OTHER | igb::icr::LSC);
    interrupts_ = true;
}

bool E1000e::wait_rx(int timeout_ms) noexcept {
    if (rx_.has_work()) return true;
    if (!interrupts_) return false;
    bar0_.write32(igb::IMS, e1000e::ICR_RXQ0);  // unmask: a frame that landed meanwhile fires at once
    if (rx_.has_work()) return true;
    return dev_->wait_irq(0, timeout_ms) > 0;
}

std::optional<LinkEvent> E1000e::poll_link() noexcept {
    if (interrupts_) {
        // Clear the causes, then unmask: the next change raises vector 1 again; STATUS is read after.
        bar0_.write32(igb::ICR, igb::icr::LSC | e1000e::ICR_OTHER);
        bar0_.write32(igb::IMS, igb::icr::LSC | e1000e::ICR_OTHER);
    }
    return link_watch_.poll(bar0_);
}

QueuePair E1000e::queue_pair() const {
    if (!options_.external_queues) {
        throw Error("hand out queue pair", dev_->bdf().str(), "nic::E1000e drives its rings itself",
                    "open the port with E1000eOptions::external_queues");
    }
    const E1000eOptions& o = options_;
    auto reg = [&](e1000e::Reg r) { return reinterpret_cast<volatile std::uint32_t*>(bar0_.data() + r); };
    auto* base = reinterpret_cast<std::uint8_t*>(ring_memory_.data());
    std::uint8_t* headers = base + rx_bytes(o) + tx_bytes(o);
    return QueuePair{nullptr,
                     o.rx_ring,
                     reinterpret_cast<e1000e::TxDesc*>(base + rx_bytes(o)),
                     o.tx_ring,
                     reg(e1000e::RDT),
                     reg(e1000e::TDT),
                     reg(igb::RCTL),  // no per-queue enable on the 82574: clearing RCTL stops receive DMA
                     reg(e1000e::TDH),
                     headers,
                     ring_mapping_.iova_of(headers),
                     o.rx_header_bytes,
                     reinterpret_cast<e1000e::PsRxDesc*>(base)};
}

void E1000e::refill() noexcept {
    if (!pool_) return;  // external queues: their driver posts buffers
    Packet bufs[kBatch];
    while (rx_.free_slots() != 0) {
        std::uint32_t want = std::min(rx_.free_slots(), kBatch), k = 0;
        dma::BufferPool::Buffer b;
        while (k < want && pool_->alloc(b))
            bufs[k++] = Packet{reinterpret_cast<std::uint8_t*>(b.data), b.iova, 0, b.index, pool_};
        rx_.post(std::span(bufs, k));
        if (k < want) break;
    }
}

std::uint16_t E1000e::rx_burst(std::span<Packet> out) noexcept {
    std::uint32_t n = rx_.poll(out);
    if (rx_.free_slots() >= std::min<std::uint32_t>(kBatch, rx_.size() / 4) || n == 0) refill();
    if (rx_.tail() != rx_tail_) {
        vfio::wmb();
        bar0_.write32(e1000e::RDT, rx_.tail());
        rx_tail_ = rx_.tail();
    }
    return static_cast<std::uint16_t>(n);
}

std::uint32_t E1000e::tx_reclaim() noexcept {
    Packet done[kBatch];
    std::uint32_t total = 0, n;
    do {
        n = tx_.reclaim(done);
        for (std::uint32_t i = 0; i < n; ++i) {
            if (done[i].pool) done[i].pool->free(done[i].buf);
        }
        total += n;
    } while (n == kBatch);
    return total;
}

std::uint16_t E1000e::tx_burst(std::span<const Packet> pkts) noexcept {
    if (tx_.free_slots() < pkts.size()) tx_reclaim();
    std::uint32_t n = tx_.push(pkts);
    if (tx_.tail() != tx_tail_) {
        vfio::wmb();
        bar0_.write32(e1000e::TDT, tx_.tail());
        tx_tail_ = tx_.tail();
    }
    return static_cast<std::uint16_t>(n);
}

QueueStats E1000e::rx_stats() const noexcept { return rx_queue_stats(rx_.counters()); }

QueueStats E1000e::tx_stats() const noexcept { return tx_queue_stats(tx_.counters()); }

const DeviceStats& E1000e::device_stats() noexcept {
    e1000x::accumulate(bar0_, device_stats_);
    return device_stats_;
}

void E1000e::stop() noexcept {
    if (bar0_) {
        bar0_.write32(igb::RCTL, 0);
        bar0_.write32(igb::TCTL, 0);
        bar0_.write32(igb::IMC, ~0u);
        if (interrupts_) dev_->disable_irqs();
        bar0_.write32(igb::CTRL, bar0_.read32(igb::CTRL) | igb::ctrl::RST);
        std::this_thread::sleep_for(1ms);
        e1000x::poll_until([&] { return !(bar0_.read32(igb::CTRL) & igb::ctrl::RST); }, 100ms);
    }
    Packet bufs[kBatch];
    for (std::uint32_t n; (n = rx_.drain(bufs)) != 0;) {
        for (std::uint32_t i = 0; i < n; ++i) pool_->free(bufs[i].buf);
    }
    for (std::uint32_t n; (n = tx_.drain(bufs)) != 0;) {
        for (std::uint32_t i = 0; i < n; ++i) {
            if (bufs[i].pool) bufs[i].pool->free(bufs[i].buf);
        }
    }
}

}  // namespace bardrive::nic
