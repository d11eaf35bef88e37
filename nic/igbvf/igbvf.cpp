#include "nic/igbvf/igbvf.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::nic {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kPage = 4096;
constexpr std::uint32_t kBatch = 64;
constexpr std::uint32_t kLongestFrame = 9728 - 4;  // the 82576's 9.5 KB, without CRC
constexpr int kResetTimeoutMs = 2000;              // the PF's RSTD after a VF reset (TCG is slow)
// The kernel's igb drops a VF's requests while the VF is not clear to send, which a reset of the PF itself (its link
// coming up, say) makes it after it answered the VF's RESET; the VF must reset again, as the kernel's igbvf does
// from its watchdog. Seen in the lab: SET_LPE unanswered right after `ip link set PF up`.
constexpr int kResetAttempts = 3;

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

const char* request_name(std::uint32_t type) {
    switch (type) {
        case igbvf::msg::RESET:
            return "RESET";
        case igbvf::msg::SET_MAC_ADDR:
            return "SET_MAC_ADDR";
        case igbvf::msg::SET_MULTICAST:
            return "SET_MULTICAST";
        case igbvf::msg::SET_VLAN:
            return "SET_VLAN";
        case igbvf::msg::SET_LPE:
            return "SET_LPE";
        default:
            return "request";
    }
}

// The 6 bytes of a MAC in mailbox words 1-2 (little endian, as the PF reads them).
void put_mac(std::uint32_t* words, const MacAddress& mac) {
    words[0] = mac.bytes[0] | mac.bytes[1] << 8 | mac.bytes[2] << 16 | static_cast<std::uint32_t>(mac.bytes[3]) << 24;
    words[1] = mac.bytes[4] | mac.bytes[5] << 8;
}
MacAddress get_mac(const std::uint32_t* words) {
    MacAddress mac;
    for (int i = 0; i < 4; ++i) mac.bytes[i] = static_cast<std::uint8_t>(words[0] >> (8 * i));
    mac.bytes[4] = static_cast<std::uint8_t>(words[1]);
    mac.bytes[5] = static_cast<std::uint8_t>(words[1] >> 8);
    return mac;
}

// A locally administered unicast address, as the kernel's igbvf picks one when the PF assigned none.
MacAddress random_mac() {
    std::random_device rd;
    MacAddress mac;
    for (auto& b : mac.bytes) b = static_cast<std::uint8_t>(rd());
    mac.bytes[0] = static_cast<std::uint8_t>((mac.bytes[0] & 0xfe) | 0x02);
    return mac;
}

template <class F>
bool wait_until(F done, int timeout_ms) {
    const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
        if (Clock::now() >= end) return done();
        std::this_thread::sleep_for(50us);
    }
    return true;
}

}  // namespace

// --- the mailbox ---

std::uint32_t VfMailbox::read_control() noexcept {
    const std::uint32_t v = regs_->read32(igbvf::V2PMAILBOX);
    seen_ |= v & igbvf::mbx::READ_TO_CLEAR;
    return v | seen_;
}

bool VfMailbox::take(std::uint32_t bit) noexcept {
    const bool hit = (read_control() & bit) != 0;
    seen_ &= ~bit;
    return hit;
}

bool VfMailbox::lock() noexcept {
    regs_->write32(igbvf::V2PMAILBOX, igbvf::mbx::VFU);
    return (read_control() & igbvf::mbx::VFU) != 0;
}

bool VfMailbox::pf_reset() noexcept {
    const std::uint32_t v = read_control();
    const bool reset = (v & (igbvf::mbx::RSTI | igbvf::mbx::RSTD)) != 0;
    seen_ &= ~igbvf::mbx::RSTD;
    return reset;
}

bool VfMailbox::wait_reset_done(int timeout_ms) noexcept {
    const bool done = wait_until([&] { return (read_control() & igbvf::mbx::RSTI) == 0; }, timeout_ms);
    seen_ &= ~igbvf::mbx::RSTD;
    return done;
}

void VfMailbox::call(std::span<const std::uint32_t> request, std::span<std::uint32_t> reply, int timeout_ms) {
    const std::uint32_t type = request[0] & igbvf::msg::TYPE_MASK;
    const char* name = request_name(type);
    auto fail = [&](const std::string& what) {
        return MailboxTimeout(
            "ask the PF", who_, std::string(name) + ": " + what,
            "the kernel's igb must drive the PF with its interface up; check dmesg on the host of the PF");
    };
    if (request.size() > igbvf::MAILBOX_WORDS || reply.size() > igbvf::MAILBOX_WORDS)
        throw Error(fail("a message holds at most 16 words"));  // the caller's mistake, not a timeout to retry
    if (!wait_until([&] { return lock(); }, timeout_ms)) throw fail("the PF holds the mailbox");
    take(igbvf::mbx::PFACK);  // what is left of earlier exchanges goes
    take(igbvf::mbx::PFSTS);
    for (std::size_t i = 0; i < request.size(); ++i)
        regs_->write32(igbvf::VMBMEM + 4 * static_cast<std::uint32_t>(i), request[i]);
    regs_->write32(igbvf::V2PMAILBOX, igbvf::mbx::REQ);  // drops VFU, interrupts the PF
    if (!wait_until([&] { return take(igbvf::mbx::PFACK); }, timeout_ms))
        throw fail(log::concat("the PF did not take it within ", timeout_ms, " ms"));
    // The answer: the PF's reply to this request (its unsolicited control messages are skipped).
    const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const int left = static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count()));
        if (!wait_until([&] { return take(igbvf::mbx::PFSTS); }, left))
            throw fail(log::concat("the PF did not answer within ", timeout_ms, " ms"));
        if (!wait_until([&] { return lock(); }, timeout_ms)) throw fail("the PF holds the mailbox");
        for (std::size_t i = 0; i < reply.size(); ++i)
            reply[i] = regs_->read32(igbvf::VMBMEM + 4 * static_cast<std::uint32_t>(i));
        regs_->write32(igbvf::V2PMAILBOX, igbvf::mbx::ACK);  // read; the buffer is the PF's again
        if ((reply[0] & igbvf::msg::TYPE_MASK) == type) return;
    }
}

// --- the port ---

bool Igbvf::drives(std::uint16_t vendor, std::uint16_t device) noexcept {
    return vendor == e1000::VENDOR_INTEL && (device == igbvf::DEVICE_82576_VF || device == igbvf::DEVICE_82576_VF_HV);
}

std::unique_ptr<Port> Igbvf::open(vfio::Device& device, dma::IovaAllocator& iovas,
                                  std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    if (rx_pools.size() != 1 || rx_pools[0] == nullptr) {
        throw Error("configure igbvf", device.bdf().str(), log::concat(rx_pools.size(), " receive pools"),
                    "an 82576 VF has one RX queue here: pass one dma::BufferPool");
    }
    return std::make_unique<Igbvf>(device, iovas, *rx_pools[0], options);
}

Igbvf::Igbvf(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool, const PortOptions& o)
    : dev_(&device), pool_(&rx_pool), options_(o), who_(device.bdf().str()), mailbox_(bar0_, who_) {
    check_options(o);
    e1000::check_identity(device, &Igbvf::drives, "Intel 82576 virtual function",
                          "nic::Igbvf drives 8086:10ca, the VFs the kernel's igb creates on an 82576 (echo N > "
                          "/sys/bus/pci/devices/PF/sriov_numvfs); check the BDF with lspci -nn");
    bar0_ = device.map_bar(0);
    bar0_.require(0, igbvf::BAR0_MIN_SIZE);
    const std::size_t rx_bytes = round_up(o.rx_ring * sizeof(e1000::AdvRxDesc), kPage);
    const std::size_t tx_bytes = round_up(o.tx_ring * sizeof(e1000::AdvTxDesc), kPage);
    dma::MemoryOptions mem;
    mem.allow_small_pages = true;
    ring_memory_ = dma::Memory::allocate_near(device, rx_bytes + tx_bytes, mem);
    ring_mapping_ = dma::Mapping::map(device.domain(), iovas, ring_memory_);
    device.enable_bus_master();
    try {
        init();
    } catch (...) {
        stop();
        throw;
    }
    link_watch_.up = link_up();  // the state set-up left: later changes are events (reset() keeps counting)
    link_watch_.speed_mbps = link_speed_mbps();
}

Igbvf::~Igbvf() { stop(); }

void Igbvf::check_options(const PortOptions& o) const {
    if (o.rx_queues != 1 || o.tx_queues != 1) {
        throw Error("configure igbvf", who_, log::concat(o.rx_queues, " rx / ", o.tx_queues, " tx queues asked"),
                    "nic::Igbvf drives one queue pair of the VF (its second has no RSS to spread flows)");
    }
    check_ring_size(o.rx_ring, "rx ring");
    check_ring_size(o.tx_ring, "tx ring");
    if (o.loopback != Loopback::none)
        throw Error("configure igbvf", who_, "loopback asked", "the PF owns the MAC and PHY: a VF has no loopback");
    if (o.promiscuous)
        throw Error("configure igbvf", who_, "promiscuous asked", "the PF grants an 82576 VF no promiscuous mode");
    if (o.vlan_strip)
        throw Error("configure igbvf", who_, "vlan_strip asked",
                    "the PF decides VLAN handling for a VF (ip link set PF vf N vlan ID)");
    if (o.max_frame < ETH_MIN_FRAME || o.max_frame > kLongestFrame) {
        throw Error("configure igbvf", who_, log::concat("max_frame ", o.max_frame),
                    log::concat("the 82576 takes frames of ", ETH_MIN_FRAME, " to ", kLongestFrame, " bytes"));
    }
    const std::uint32_t need = std::max<std::uint32_t>(2048, o.max_frame);
    if (pool_->buffer_size() / 1024 * 1024 < need || pool_->available() < o.rx_ring - 1) {
        throw Error(
            "configure igbvf", who_,
            log::concat("the pool has ", pool_->available(), " free buffers of ", pool_->buffer_size(),
                        " bytes; the RX ring needs ", o.rx_ring - 1, " of at least ", (need + 1023) / 1024 * 1024),
            "make the pool larger or the ring smaller");
    }
}

// Resets the VF and learns its MAC from the PF (82576 7.8.2.9.1; what the kernel's igbvf does), again when the PF
// leaves a request unanswered (kResetAttempts).
void Igbvf::reset_vf() {
    for (int attempt = 1;; ++attempt) {
        try {
            ask_pf_after_reset();
            return;
        } catch (const MailboxTimeout& e) {
            if (attempt == kResetAttempts) throw;
            log::warn("igbvf ", who_, ": ", e.what(), "; resetting the VF again (attempt ", attempt + 1, " of ",
                      kResetAttempts, ")");
        }
    }
}

void Igbvf::ask_pf_after_reset() {
    e1000::require_answering(bar0_, who_, "reset VF");
    bar0_.write32(igbvf::EIMC, ~0u);
    bar0_.write32(igbvf::CTRL, bar0_.read32(igbvf::CTRL) | e1000::ctrl::RST);
    std::this_thread::sleep_for(1ms);
    if (!mailbox_.wait_reset_done(kResetTimeoutMs)) {
        throw Error("reset VF", who_, log::concat("the PF was still resetting (RSTI) after ", kResetTimeoutMs, " ms"),
                    "the kernel's igb must drive the PF, with its interface up (ip link set PF up)");
    }
    pf_reset_ = false;
    std::array<std::uint32_t, 1> reset{igbvf::msg::RESET};
    std::array<std::uint32_t, 3> reply{};
    mailbox_.call(reset, reply);
    const std::uint32_t answer = reply[0] & ~igbvf::msg::CTS;
    std::optional<MacAddress> assigned;
    if (answer == (igbvf::msg::RESET | igbvf::msg::ACK)) assigned = get_mac(&reply[1]);
    MacAddress want = options_.mac ? *options_.mac : assigned ? *assigned : random_mac();
    if (!assigned || want != *assigned) {
        std::array<std::uint32_t, 3> set{igbvf::msg::SET_MAC_ADDR, 0, 0};
        put_mac(&set[1], want);
        mailbox_.call(set, reply);
        if ((reply[0] & ~igbvf::msg::CTS) != (igbvf::msg::SET_MAC_ADDR | igbvf::msg::ACK)) {
            throw Error("set VF MAC address", who_, "the PF refused " + want.str(),
                        assigned ? "an administrator assigned this VF " + assigned->str() +
                                       " (ip link set PF vf N mac ...); use that one or change it there"
                                 : std::string("ask the PF's administrator: ip link set PF vf N mac ADDRESS"));
        }
    }
    mac_ = want;
    // The longest frame the PF lets through to this VF (VMOLR.RLPML), CRC and a VLAN tag included.
    std::array<std::uint32_t, 2> lpe{igbvf::msg::SET_LPE, options_.max_frame + 4 + 4};
    std::array<std::uint32_t, 2> lpe_reply{};
    mailbox_.call(lpe, lpe_reply);
    if (lpe_reply[0] & igbvf::msg::NACK) {
        throw Error("set VF frame size", who_, log::concat("the PF refused frames of ", options_.max_frame, " bytes"),
                    "use a max_frame the PF's MTU allows (ip link set PF mtu ...)");
    }
}

void Igbvf::init() {
    reset_vf();
    setup_rings();
    if (options_.interrupts) setup_interrupts();
    last_.gprc = bar0_.read32(igbvf::VFGPRC);
    last_.gptc = bar0_.read32(igbvf::VFGPTC);
    last_.gorc = bar0_.read32(igbvf::VFGORC);
    last_.gotc = bar0_.read32(igbvf::VFGOTC);
    last_.mprc = bar0_.read32(igbvf::VFMPRC);
    log::info("igbvf ", who_, ": up, MAC ", mac_.str(), link_up() ? ", link up" : ", link down");
}

// As the PF's igb sets up its own queues (82576 4.5.9, 4.5.10), through the VF's queue 0 registers.
void Igbvf::setup_rings() {
    const PortOptions& o = options_;
    const std::size_t rx_bytes = round_up(o.rx_ring * sizeof(e1000::AdvRxDesc), kPage);
    std::fill_n(ring_memory_.data(), ring_memory_.size(), std::byte{0});
    auto* rx_descs = reinterpret_cast<e1000::AdvRxDesc*>(ring_memory_.data());
    auto* tx_descs = reinterpret_cast<e1000::AdvTxDesc*>(ring_memory_.data() + rx_bytes);
    const std::uint32_t kib =
        std::min<std::uint32_t>(static_cast<std::uint32_t>(pool_->buffer_size() / 1024), igbvf::srrctl::BSIZEPKT_MASK);
    rx_.emplace(rx_descs, o.rx_ring, kib * 1024);
    tx_.emplace(tx_descs, o.tx_ring, nullptr, o.max_frame, TxFormat::igb_advanced);

    bar0_.write32(igbvf::RXDCTL, 0);
    const std::uint64_t rx_iova = ring_mapping_.iova_of(rx_descs), tx_iova = ring_mapping_.iova_of(tx_descs);
    bar0_.write32(igbvf::RDBAL, static_cast<std::uint32_t>(rx_iova));
    bar0_.write32(igbvf::RDBAH, static_cast<std::uint32_t>(rx_iova >> 32));
    bar0_.write32(igbvf::RDLEN, o.rx_ring * sizeof(e1000::AdvRxDesc));
    bar0_.write32(igbvf::SRRCTL, kib | igbvf::srrctl::DESCTYPE_ADV_ONEBUF | igbvf::srrctl::DROP_EN);
    bar0_.write32(igbvf::RDH, 0);
    bar0_.write32(igbvf::RDT, 0);
    bar0_.write32(igbvf::RXDCTL, igbvf::QUEUE_ENABLE | 8u | 8u << 8 | 1u << 16);
    if (!wait_until([&] { return (bar0_.read32(igbvf::RXDCTL) & igbvf::QUEUE_ENABLE) != 0; }, 100))
        throw Error("enable rx queue", who_, "RXDCTL.ENABLE did not stick", "reset the VF (or the PF)");
    refill();
    if (rx_->posted() != o.rx_ring - 1)
        throw Error("fill rx ring", who_, "the buffer pool ran dry while filling the ring");
    rx_doorbell_.start(bar0_.reg32(igbvf::RDT), rx_->tail());

    bar0_.write32(igbvf::TXDCTL, 0);
    bar0_.write32(igbvf::TDBAL, static_cast<std::uint32_t>(tx_iova));
    bar0_.write32(igbvf::TDBAH, static_cast<std::uint32_t>(tx_iova >> 32));
    bar0_.write32(igbvf::TDLEN, o.tx_ring * sizeof(e1000::AdvTxDesc));
    bar0_.write32(igbvf::TDH, 0);
    tx_doorbell_.start(bar0_.reg32(igbvf::TDT), 0);
    bar0_.write32(igbvf::TXDCTL, igbvf::QUEUE_ENABLE | 8u | 1u << 8);
    if (!wait_until([&] { return (bar0_.read32(igbvf::TXDCTL) & igbvf::QUEUE_ENABLE) != 0; }, 100))
        throw Error("enable tx queue", who_, "TXDCTL.ENABLE did not stick", "reset the VF (or the PF)");
}

// MSI-X (the VF has no other kind): RX queue 0 -> vector 0 (rx_fd), the mailbox and link -> vector 1 (link_fd).
void Igbvf::setup_interrupts() {
    if (dev_->irq_info(vfio::IrqType::msix).count < 2) {
        throw Error("enable interrupts", who_, "the VF offers fewer than 2 MSI-X vectors", "use polling mode");
    }
    dev_->enable_irqs(vfio::IrqType::msix, 2);
    bar0_.write32(igbvf::IVAR0, igbvf::IVAR_VALID | 0u);
    bar0_.write32(igbvf::IVAR_MISC, igbvf::IVAR_VALID | 1u);
    bar0_.write32(igbvf::EITR(0), 0);
    (void)bar0_.read32(igbvf::EICR);
    bar0_.write32(igbvf::EIAC, 0x3);  // a cause clears itself when its vector fires
    bar0_.write32(igbvf::EIMS, 0x3);
    interrupts_ = true;
}

void Igbvf::refill() noexcept {
    const std::uint32_t want = rx_->free_slots();
    if (rx_->refill(*pool_) < want) ++no_buffers_;
}

// An empty poll costs a handful of instructions; the frames go through receive() (as nic::Igb).
std::uint16_t Igbvf::rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept {
    if (queue != 0 || pf_reset_) return 0;
    if (rx_->has_work()) return receive(out);
    if (rx_->free_slots() != 0) [[unlikely]]
        refill_and_ring();  // a pool that ran dry may have buffers again
    return 0;
}

std::uint16_t Igbvf::receive(std::span<Packet> out) noexcept {
    const std::uint32_t n = rx_->harvest(out);
    if (rx_->free_slots() >= std::min<std::uint32_t>(kBatch, rx_->size() / 4)) refill();
    rx_doorbell_.ring(rx_->tail());
    return static_cast<std::uint16_t>(n);
}

void Igbvf::refill_and_ring() noexcept {
    refill();
    rx_doorbell_.ring(rx_->tail());
}

std::uint16_t Igbvf::tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept {
    if (queue != 0 || pf_reset_) return 0;
    if (tx_->free_slots() < 2 * pkts.size()) tx_->reclaim_to_pools();
    const std::uint32_t n = tx_->push(pkts);
    tx_doorbell_.ring(tx_->tail());
    return static_cast<std::uint16_t>(n);
}

std::uint32_t Igbvf::tx_reclaim(std::uint16_t queue) noexcept { return queue == 0 ? tx_->reclaim_to_pools() : 0; }
std::uint32_t Igbvf::rx_free_slots(std::uint16_t queue) const noexcept { return queue == 0 ? rx_->free_slots() : 0; }
std::uint32_t Igbvf::tx_free_slots(std::uint16_t queue) const noexcept { return queue == 0 ? tx_->free_slots() : 0; }

bool Igbvf::wait_rx(std::uint16_t queue, int timeout_ms) noexcept {
    if (queue != 0) return false;
    if (rx_->has_work()) return true;
    if (!interrupts_) return false;
    return dev_->wait_irq(0, timeout_ms) > 0;
}

int Igbvf::rx_fd(std::uint16_t queue) const noexcept { return interrupts_ && queue == 0 ? dev_->irq_fd(0) : -1; }

std::uint32_t Igbvf::features() const noexcept { return feature::DEVICE_COUNTERS | feature::LINK_SPEED; }

bool Igbvf::needs_reset() noexcept {
    if (mailbox_.pf_reset()) pf_reset_ = true;
    return pf_reset_;
}

std::optional<LinkEvent> Igbvf::poll_link() noexcept {
    needs_reset();
    const bool up = link_up();
    const unsigned speed = up ? e1000::link_speed_mbps(bar0_) : 0;
    if (up == link_watch_.up && speed == link_watch_.speed_mbps) return std::nullopt;
    if (up != link_watch_.up) ++link_watch_.changes;
    link_watch_.up = up;
    link_watch_.speed_mbps = speed;
    return LinkEvent{up, speed};
}

void Igbvf::reset() {
    stop();
    init();
}

void Igbvf::set_promiscuous(bool on) {
    if (on) throw Error("set promiscuous", who_, "asked of a VF", "the PF grants an 82576 VF no promiscuous mode");
}

// The PF takes the multicast table's hash (destination bits 47:36, as nic::Igb computes it) for this VF.
void Igbvf::add_multicast(const MacAddress& group) {
    multicast_.push_back(static_cast<std::uint16_t>(((group.bytes[5] << 8 | group.bytes[4]) >> 4) & 0xfff));
    if (multicast_.size() > 30) {
        multicast_.pop_back();
        throw Error("add multicast group", who_, group.str() + ": a VF's list holds 30 groups", "use fewer groups");
    }
    std::array<std::uint32_t, igbvf::MAILBOX_WORDS> m{};
    m[0] = igbvf::msg::SET_MULTICAST | static_cast<std::uint32_t>(multicast_.size()) << igbvf::msg::INFO_SHIFT;
    for (std::size_t i = 0; i < multicast_.size(); ++i)
        m[1 + i / 2] |= static_cast<std::uint32_t>(multicast_[i]) << (16 * (i % 2));
    std::array<std::uint32_t, 1> reply{};
    mailbox_.call(m, reply);
    if (reply[0] & igbvf::msg::NACK)
        throw Error("add multicast group", who_, "the PF refused " + group.str(), "check the PF's dmesg");
}

void Igbvf::add_vlan(std::uint16_t vlan_id) {
    std::array<std::uint32_t, 2> m{igbvf::msg::SET_VLAN | 1u << igbvf::msg::INFO_SHIFT, vlan_id & 0xfffu};
    std::array<std::uint32_t, 2> reply{};
    mailbox_.call(m, reply);
    if (reply[0] & igbvf::msg::NACK) {
        throw Error("add VLAN", who_, log::concat("the PF refused VLAN ", vlan_id),
                    "an administrator set a port VLAN on this VF (ip link set PF vf N vlan ...): the PF tags for it");
    }
}

QueueStats Igbvf::rx_stats(std::uint16_t queue) const noexcept {
    if (queue != 0) return {};
    QueueStats s = rx_queue_stats(rx_->counters());
    s.doorbells = rx_doorbell_.rings;
    s.no_buffers = no_buffers_;
    return s;
}

QueueStats Igbvf::tx_stats(std::uint16_t queue) const noexcept {
    if (queue != 0) return {};
    QueueStats s = tx_queue_stats(tx_->counters());
    s.doorbells = tx_doorbell_.rings;
    return s;
}

const DeviceStats& Igbvf::device_stats() noexcept {
    auto delta = [&](igbvf::Reg reg, std::uint32_t& last) {
        const std::uint32_t now = bar0_.read32(reg);
        const std::uint32_t d = now - last;  // running 32-bit counters: wrap-around is a plain subtraction
        last = now;
        return std::uint64_t{d};
    };
    device_stats_.rx_packets += delta(igbvf::VFGPRC, last_.gprc);
    device_stats_.tx_packets += delta(igbvf::VFGPTC, last_.gptc);
    device_stats_.rx_bytes += delta(igbvf::VFGORC, last_.gorc);
    device_stats_.tx_bytes += delta(igbvf::VFGOTC, last_.gotc);
    device_stats_.rx_multicast += delta(igbvf::VFMPRC, last_.mprc);
    return device_stats_;
}

// Queues off, interrupts masked and disabled, the VF reset (no DMA after it), every buffer back to its pool.
void Igbvf::stop() noexcept {
    if (bar0_) {
        bar0_.write32(igbvf::RXDCTL, 0);
        bar0_.write32(igbvf::TXDCTL, 0);
        bar0_.write32(igbvf::EIMC, ~0u);
        dev_->disable_irqs();
        interrupts_ = false;
        bar0_.write32(igbvf::CTRL, bar0_.read32(igbvf::CTRL) | e1000::ctrl::RST);
        std::this_thread::sleep_for(1ms);
    }
    Packet bufs[kBatch];
    auto give_back = [&](std::uint32_t n) {
        for (std::uint32_t i = 0; i < n; ++i) Port::release(bufs[i]);
    };
    if (rx_) {
        for (std::uint32_t n; (n = rx_->drain(bufs)) != 0;) give_back(n);
    }
    if (tx_) {
        for (std::uint32_t n; (n = tx_->drain(bufs)) != 0;) give_back(n);
    }
}

}  // namespace bardrive::nic
