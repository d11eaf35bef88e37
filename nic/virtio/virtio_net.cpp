#include "nic/virtio/virtio_net.hpp"

// Linux's uapi header names a field `class` (struct virtio_net_ctrl_hdr, unused here): renamed for C++.
#define class class_
#include <linux/virtio_net.h>
#undef class

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>
#include <type_traits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/rss.hpp"

namespace bardrive::nic {

using virtio::bit;
using virtio::Fault;
using virtio::PackedRing;
using virtio::Segment;
using virtio::SplitRing;
using virtio::Used;

namespace {

using Clock = std::chrono::steady_clock;

static_assert(sizeof(virtio_net_hdr_v1) == VirtioNet::header_bytes);

constexpr std::uint32_t kStandardFrame = 1514;
constexpr std::uint32_t kRefillBatch = 32;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kAlign = 64;
// Per TX chain: one virtio_net_hdr_v1, 16-byte aligned, then with indirect descriptors the chain's table of two
// (header, frame).
constexpr std::size_t kHeaderSlot = 16;
constexpr std::size_t kIndirectSlot = kHeaderSlot + 2 * sizeof(vring_desc);
static_assert(sizeof(vring_desc) == sizeof(vring_packed_desc));
constexpr std::uint32_t kControlQueue = 16;
constexpr std::size_t kControlBuffer = 2048;
constexpr std::size_t kAckOffset = 1024;  // commands up to 1 KiB, then the ack byte
constexpr std::size_t kMaxMulticast = 64;
constexpr std::uint16_t kMaxPairs = 256;  // more than any device offers today (QEMU: 1024 queues)

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

std::uint32_t floor_pow2(std::uint32_t v) {
    std::uint32_t p = 1;
    while (p * 2 <= v) p *= 2;
    return v ? p : 0;
}

// Where a queue's three areas lie inside its block of ring memory, and the block's size.
struct QueueLayout {
    std::size_t desc = 0, driver = 0, device = 0, headers = 0, bytes = 0;
};
QueueLayout layout(bool packed, std::uint32_t size, std::size_t header_bytes) {
    QueueLayout l;
    std::size_t at = packed ? PackedRing::desc_bytes(size) : SplitRing::desc_bytes(size);
    l.driver = round_up(at, kAlign);
    at = l.driver + (packed ? PackedRing::event_bytes : SplitRing::avail_bytes(size));
    l.device = round_up(at, kAlign);
    at = l.device + (packed ? PackedRing::event_bytes : SplitRing::used_bytes(size));
    l.headers = round_up(at, kAlign);
    l.bytes = round_up(l.headers + header_bytes, kPage);
    return l;
}

std::string hex64(std::uint64_t v) {
    char s[24];
    std::snprintf(s, sizeof s, "0x%016llx", static_cast<unsigned long long>(v));
    return s;
}

// The device's configuration fields bardrive reads (struct virtio_net_config).
constexpr std::uint32_t kCfgMac = offsetof(virtio_net_config, mac);
constexpr std::uint32_t kCfgStatus = offsetof(virtio_net_config, status);
constexpr std::uint32_t kCfgMaxPairs = offsetof(virtio_net_config, max_virtqueue_pairs);
constexpr std::uint32_t kCfgMtu = offsetof(virtio_net_config, mtu);
constexpr std::uint32_t kCfgSpeed = offsetof(virtio_net_config, speed);
constexpr std::uint32_t kCfgRssKey = offsetof(virtio_net_config, rss_max_key_size);
constexpr std::uint32_t kCfgRssTable = offsetof(virtio_net_config, rss_max_indirection_table_length);
constexpr std::uint32_t kCfgHashTypes = offsetof(virtio_net_config, supported_hash_types);

// The checksum a NEEDS_CSUM frame lacks (a local sender's partial checksum): the ones' complement sum
// from csum_start to the end, the field's pseudo-header sum included, stored folded and inverted.
void complete_checksum(std::uint8_t* frame, std::uint32_t len, std::uint32_t start, std::uint32_t offset) noexcept {
    if (start + offset + 2 > len || offset < 6) return;  // a header that points outside the frame: left alone
    std::uint64_t sum = 0;
    std::uint32_t i = start;
    for (; i + 1 < len; i += 2) sum += static_cast<std::uint32_t>(frame[i] << 8 | frame[i + 1]);
    if (i < len) sum += static_cast<std::uint32_t>(frame[i] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    std::uint16_t c = static_cast<std::uint16_t>(~sum);
    if (c == 0) c = 0xffff;  // UDP's "no checksum" is 0: a computed 0 is sent as its other form
    frame[start + offset] = static_cast<std::uint8_t>(c >> 8);
    frame[start + offset + 1] = static_cast<std::uint8_t>(c);
}

vfio::Device& identity_checked(vfio::Device& device) {
    const std::uint16_t vendor = device.config_read16(0x00), id = device.config_read16(0x02);
    if (!VirtioNet::drives(vendor, id)) {
        char ids[16];
        std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, id);
        throw Error("open virtio-net port", device.bdf().str(),
                    std::string("device ") + ids + " is not a virtio-net NIC",
                    "nic::VirtioNet drives 1af4:1041 (QEMU: -device virtio-net-pci); check the BDF with lspci -nn");
    }
    // The transitional ID is every legacy virtio device's: its subsystem ID says which (1: network).
    if (id == virtio::DEVICE_NET_TRANSITIONAL && device.config_read16(0x2e) != 1) {
        throw Error("open virtio-net port", device.bdf().str(),
                    "a transitional virtio device (1af4:1000) whose subsystem ID is not network (1)",
                    "check the BDF with lspci -nn");
    }
    return device;
}

}  // namespace

VirtioNet::VirtioNet(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool,
                     const VirtioNetOptions& options)
    : VirtioNet(device, iovas, std::array<dma::BufferPool*, 1>{&rx_pool}, options) {}

VirtioNet::VirtioNet(vfio::Device& device, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools,
                     const VirtioNetOptions& options)
    : dev_(&device), options_(options), transport_(identity_checked(device)) {
    check_options(rx_pools);
    try {
        init(iovas, rx_pools);
    } catch (...) {
        transport_.fail();
        stop();  // no DMA into memory about to be freed
        throw;
    }
}

VirtioNet::~VirtioNet() { stop(); }

bool VirtioNet::drives(std::uint16_t vendor, std::uint16_t device) noexcept {
    return vendor == virtio::VENDOR_VIRTIO &&
           (device == virtio::DEVICE_NET_MODERN || device == virtio::DEVICE_NET_TRANSITIONAL);
}

std::unique_ptr<Port> VirtioNet::open(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    VirtioNetOptions o;
    static_cast<PortOptions&>(o) = options;
    return std::make_unique<VirtioNet>(device, iovas, rx_pools, o);
}

void VirtioNet::check_options(std::span<dma::BufferPool* const> rx_pools) const {
    const VirtioNetOptions& o = options_;
    const std::string& who = transport_.who();
    if (o.rx_queues < 1 || o.tx_queues < 1 || o.rx_queues > kMaxPairs || o.tx_queues > kMaxPairs) {
        throw Error(
            "configure virtio-net", who, log::concat(o.rx_queues, " rx / ", o.tx_queues, " tx queues asked"),
            log::concat("ask for 1 to ", kMaxPairs, " of each (the device's max_virtqueue_pairs is the limit)"));
    }
    virtio::check_queue_size(o.rx_ring, 1, "rx ring");
    virtio::check_queue_size(o.tx_ring, 2, "tx ring");
    if (o.loopback != Loopback::none) {
        throw Error("configure virtio-net", who, "MAC or PHY loopback asked",
                    "virtio-net has no loopback mode; loop frames through a second port on the same network");
    }
    if (o.vlan_strip) {
        throw Error("configure virtio-net", who, "VLAN stripping asked", "virtio-net has no VLAN stripping");
    }
    if (o.max_frame < ETH_MIN_FRAME || o.max_frame > 65535 - header_bytes) {
        throw Error("configure virtio-net", who, log::concat("max_frame ", o.max_frame),
                    log::concat("frames of ", ETH_MIN_FRAME, " to ", 65535 - header_bytes, " bytes"));
    }
    if (o.control_timeout_ms <= 0) {
        throw Error("configure virtio-net", who, log::concat("control_timeout_ms ", o.control_timeout_ms),
                    "give the control queue a positive time to answer");
    }
    if (rx_pools.empty() || std::find(rx_pools.begin(), rx_pools.end(), nullptr) != rx_pools.end()) {
        throw Error("configure virtio-net", who, "no receive buffer pool", "pass a dma::BufferPool");
    }
    if (rx_pools.size() != 1 && rx_pools.size() != o.rx_queues) {
        throw Error("configure virtio-net", who,
                    log::concat(rx_pools.size(), " receive pools for ", o.rx_queues, " rx queues"),
                    "pass one pool for all queues or one per queue");
    }
    const std::size_t need = header_bytes + std::max(o.max_frame, kStandardFrame);
    for (const dma::BufferPool* pool : rx_pools) {
        if (pool->buffer_size() < need) {
            throw Error("configure virtio-net", who, log::concat("pool buffers of ", pool->buffer_size(), " bytes"),
                        log::concat("receive buffers must hold the ", header_bytes, "-byte virtio-net header and a ",
                                    std::max(o.max_frame, kStandardFrame), "-byte frame: at least ", need, " bytes"));
        }
    }
}

void VirtioNet::init(dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools) {
    // virtio 1.2, 3.1.1: reset, ACKNOWLEDGE, DRIVER, features, FEATURES_OK, queues, DRIVER_OK.
    transport_.reset();
    transport_.add_status(VIRTIO_CONFIG_S_ACKNOWLEDGE);
    transport_.add_status(VIRTIO_CONFIG_S_DRIVER);
    negotiate();
    read_config();
    setup_queues(iovas, rx_pools);
    transport_.add_status(VIRTIO_CONFIG_S_DRIVER_OK);
    if (transport_.status() & VIRTIO_CONFIG_S_NEEDS_RESET) {
        throw Error("start virtio-net", transport_.who(), "the device set DEVICE_NEEDS_RESET right after DRIVER_OK",
                    "the device met an error it cannot recover from (QEMU logs why); reopen the port");
    }
    // 3.1.1: the device is notified only from DRIVER_OK on.
    for (auto& q : rx_) {
        const bool kick = packed_ ? q.packed->publish() : q.split->publish();
        if (kick) {
            transport_.notify(q.notify, q.vq);
            ++q.stats.doorbells;
        }
    }
    configure_device();
    wait_link();
    log::info("virtio-net ", transport_.who(), ": up, MAC ", mac_.str(), ", ", rx_.size(), " rx / ", tx_.size(),
              " tx queues of ", rx_size_, "/", tx_size_, " descriptors, ", packed_ ? "packed" : "split", " rings",
              event_idx_ ? ", event idx" : "", ", features ", hex64(features_));
}

void VirtioNet::negotiate() {
    const VirtioNetOptions& o = options_;
    const std::string& who = transport_.who();
    offered_ = transport_.device_features();
    log::debug("virtio-net ", who, ": the device offers ", hex64(offered_));
    auto offered = [&](unsigned f) { return (offered_ & bit(f)) != 0; };
    if (!offered(VIRTIO_F_VERSION_1)) {
        throw Error("negotiate virtio features", who, "the device does not offer VIRTIO_F_VERSION_1 (a legacy device)",
                    "bardrive speaks virtio 1.x only; QEMU: a virtio-net-pci with disable-modern off");
    }
    const bool translated = !dev_->domain().iova_is_physical();
    if (translated && !offered(VIRTIO_F_ACCESS_PLATFORM)) {
        throw Error("negotiate virtio features", who,
                    "the device does not offer VIRTIO_F_ACCESS_PLATFORM: it would DMA to guest-physical addresses, "
                    "bypassing the IOMMU that translates bardrive's IOVAs",
                    "QEMU: -device virtio-net-pci,iommu_platform=on (with -device intel-iommu); or no-IOMMU mode, "
                    "where IOVAs are physical addresses");
    }
    std::uint64_t want = bit(VIRTIO_F_VERSION_1);
    auto take = [&](unsigned f, bool wanted = true) {
        if (wanted && offered(f)) want |= bit(f);
        return (want & bit(f)) != 0;
    };
    take(VIRTIO_F_ACCESS_PLATFORM);  // offered: accepted (a device may refuse FEATURES_OK without it)
    packed_ = take(VIRTIO_F_RING_PACKED, o.packed);
    event_idx_ = take(VIRTIO_RING_F_EVENT_IDX, o.event_idx);
    indirect_ = take(VIRTIO_RING_F_INDIRECT_DESC, o.indirect);
    take(VIRTIO_NET_F_MAC);
    take(VIRTIO_NET_F_STATUS);
    take(VIRTIO_NET_F_MTU);
    take(VIRTIO_NET_F_SPEED_DUPLEX);
    take(VIRTIO_NET_F_CSUM);
    take(VIRTIO_NET_F_GUEST_CSUM, o.rx_checksum);
    const bool ctrl = take(VIRTIO_NET_F_CTRL_VQ);
    const bool ctrl_rx = take(VIRTIO_NET_F_CTRL_RX, ctrl);
    take(VIRTIO_NET_F_CTRL_RX_EXTRA, ctrl_rx);
    take(VIRTIO_NET_F_CTRL_MAC_ADDR, ctrl);
    const std::uint16_t pairs = std::max(o.rx_queues, o.tx_queues);
    if (pairs > 1) {
        if (!take(VIRTIO_NET_F_MQ, ctrl)) {
            throw Error("negotiate virtio features", who,
                        log::concat(pairs, " queue pairs asked; the device offers no multiqueue (VIRTIO_NET_F_MQ",
                                    ctrl ? ")" : " with a control queue)"),
                        "QEMU: -device virtio-net-pci,mq=on,vectors=2N+2 with a -netdev of queues=N; or one queue");
        }
        take(VIRTIO_NET_F_RSS, o.rx_queues > 1);
    }
    if (o.rx_queues < o.tx_queues && !(want & bit(VIRTIO_NET_F_RSS))) {
        throw Error(
            "negotiate virtio features", who,
            log::concat(o.rx_queues, " rx queues for ", o.tx_queues,
                        " tx queues: without VIRTIO_NET_F_RSS the device steers flows to every pair's rx queue"),
            "ask for as many rx queues as tx queues, or a device with RSS (QEMU: rss=on)");
    }
    if (o.promiscuous && !ctrl_rx) {
        throw Error("negotiate virtio features", who,
                    "promiscuous mode asked; the device offers no receive filter control (VIRTIO_NET_F_CTRL_RX)",
                    "QEMU: ctrl_vq=on,ctrl_rx=on (the default)");
    }
    if (!o.broadcast && !(want & bit(VIRTIO_NET_F_CTRL_RX_EXTRA))) {
        throw Error("negotiate virtio features", who,
                    "broadcast filtering asked; the device offers no VIRTIO_NET_F_CTRL_RX_EXTRA",
                    "QEMU: ctrl_rx_extra=on (the default); or accept broadcast");
    }
    if (o.mac && !(want & bit(VIRTIO_NET_F_CTRL_MAC_ADDR))) {
        throw Error("negotiate virtio features", who,
                    "a station address asked; the device cannot take one (no VIRTIO_NET_F_CTRL_MAC_ADDR)",
                    "use the device's own MAC (leave PortOptions::mac unset); QEMU: -device virtio-net-pci,mac=...");
    }
    if (!o.mac && !(want & bit(VIRTIO_NET_F_MAC))) {
        throw Error("negotiate virtio features", who, "the device has no MAC address (no VIRTIO_NET_F_MAC)",
                    "give one in PortOptions::mac (the device must offer VIRTIO_NET_F_CTRL_MAC_ADDR)");
    }
    log::debug("virtio-net ", who, ": bardrive takes ", hex64(want));
    transport_.set_features(want);
    features_ = want;
}

void VirtioNet::read_config() {
    const VirtioNetOptions& o = options_;
    const std::string& who = transport_.who();
    if (has(VIRTIO_NET_F_MAC)) transport_.require_device_config(kCfgMac, 6, "mac");
    if (has(VIRTIO_NET_F_STATUS)) transport_.require_device_config(kCfgStatus, 2, "status");
    if (offered_ & bit(VIRTIO_NET_F_MQ)) transport_.require_device_config(kCfgMaxPairs, 2, "max_virtqueue_pairs");
    if (has(VIRTIO_NET_F_MTU)) transport_.require_device_config(kCfgMtu, 2, "mtu");
    if (has(VIRTIO_NET_F_SPEED_DUPLEX)) transport_.require_device_config(kCfgSpeed, 4, "speed");
    if (has(VIRTIO_NET_F_RSS)) transport_.require_device_config(kCfgHashTypes, 4, "supported_hash_types");
    // 4.1.4.3.1: fields wider than 32 bits (the MAC) are read until the generation holds still.
    std::uint8_t gen;
    do {
        gen = transport_.config_generation();
        if (has(VIRTIO_NET_F_MAC)) {
            for (unsigned i = 0; i < 6; ++i) mac_.bytes[i] = transport_.config8(kCfgMac + i);
        }
        // Read whenever offered, so that max_queue_pairs() tells a one-queue port what more it could have.
        max_pairs_ =
            (offered_ & bit(VIRTIO_NET_F_MQ)) ? std::max<std::uint16_t>(1, transport_.config16(kCfgMaxPairs)) : 1;
        mtu_ = has(VIRTIO_NET_F_MTU) ? transport_.config16(kCfgMtu) : 0;
    } while (gen != transport_.config_generation());

    const std::uint16_t pairs = std::max(o.rx_queues, o.tx_queues);
    if (pairs > max_pairs_) {
        throw Error("configure virtio-net", who,
                    log::concat(pairs, " queue pairs asked, the device offers ", max_pairs_, " (max_virtqueue_pairs)"),
                    "use fewer queues (QEMU: -netdev ...,queues=N and mq=on for more)");
    }
    max_frame_ = std::max(o.max_frame, kStandardFrame);
    if (o.max_frame > kStandardFrame) {
        if (!has(VIRTIO_NET_F_MTU) || o.max_frame > std::uint32_t{mtu_} + ETH_HEADER_LEN) {
            throw Error(
                "configure virtio-net", who, log::concat("max_frame ", o.max_frame),
                has(VIRTIO_NET_F_MTU)
                    ? log::concat("the device's MTU is ", mtu_, ": frames up to ", mtu_ + ETH_HEADER_LEN, " bytes")
                    : std::string("the device advertises no MTU (VIRTIO_NET_F_MTU) above 1500; QEMU: host_mtu=N"));
        }
    }
    if (has(VIRTIO_NET_F_MTU)) {
        port_features_ |= mtu_ > 1500 ? feature::JUMBO : 0;
    }
    if (has(VIRTIO_NET_F_CSUM)) port_features_ |= feature::TX_L4_CSUM;
    if (has(VIRTIO_NET_F_GUEST_CSUM)) port_features_ |= feature::RX_CSUM;
    if (has(VIRTIO_NET_F_RSS)) port_features_ |= feature::RSS;
    if (has(VIRTIO_NET_F_SPEED_DUPLEX)) port_features_ |= feature::LINK_SPEED;
}

void VirtioNet::setup_queues(dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools) {
    const VirtioNetOptions& o = options_;
    const std::string& who = transport_.who();
    const std::uint16_t pairs = std::max(o.rx_queues, o.tx_queues);
    // 5.1.2: the control queue follows the max_virtqueue_pairs pairs when MQ is negotiated, else pair 0.
    const std::uint16_t ctrl_vq = has(VIRTIO_NET_F_MQ) ? static_cast<std::uint16_t>(2 * max_pairs_) : 2;
    const bool ctrl = has(VIRTIO_NET_F_CTRL_VQ);
    const std::uint16_t needed = ctrl ? ctrl_vq + 1 : 2 * pairs;
    if (transport_.num_queues() < needed) {
        throw Error("set up virtqueues", who,
                    log::concat("the device has ", transport_.num_queues(), " virtqueues, ", needed, " needed"));
    }
    // One size for every queue of a kind: the option, at most the smallest device maximum (a power of two).
    std::uint32_t rx_max = 32768, tx_max = 32768;
    for (std::uint16_t q = 0; q < o.rx_queues; ++q)
        rx_max = std::min<std::uint32_t>(rx_max, transport_.queue_max_size(2 * q));
    for (std::uint16_t q = 0; q < o.tx_queues; ++q)
        tx_max = std::min<std::uint32_t>(tx_max, transport_.queue_max_size(static_cast<std::uint16_t>(2 * q + 1)));
    rx_size_ = std::min(o.rx_ring, floor_pow2(rx_max));
    tx_size_ = std::min(o.tx_ring, floor_pow2(tx_max));
    if (rx_size_ < 2 || tx_size_ < 2) {
        throw Error("set up virtqueues", who,
                    log::concat("the device allows ", rx_max, " rx / ", tx_max, " tx descriptors per queue"),
                    "a virtio-net device offers at least 2 (QEMU: rx_queue_size/tx_queue_size)");
    }
    if (rx_size_ < o.rx_ring || tx_size_ < o.tx_ring) {
        log::info("virtio-net ", who, ": queues of ", rx_size_, " rx / ", tx_size_,
                  " tx descriptors (the device's most)");
    }
    std::uint32_t ctrl_size = 0;
    if (ctrl) {
        ctrl_size = std::min(kControlQueue, floor_pow2(transport_.queue_max_size(ctrl_vq)));
        if (ctrl_size < 2) throw Error("set up virtqueues", who, "the control queue holds fewer than 2 descriptors");
    }
    // A pool filling several rings (shared, or passed twice) must hold all of them.
    for (const dma::BufferPool* pool : rx_pools) {
        const std::size_t rings =
            rx_pools.size() == 1 ? o.rx_queues : std::count(rx_pools.begin(), rx_pools.end(), pool);
        if (pool->available() < rings * rx_size_) {
            throw Error("configure virtio-net", who,
                        log::concat("a pool has ", pool->available(), " free buffers, the ", rings, " RX queue(s) of ",
                                    rx_size_, " it fills need ", rings * rx_size_),
                        "make the pool larger or the rings smaller (PortOptions::rx_ring)");
        }
    }

    // Interrupts first: the vectors written into the queues must exist.
    if (o.interrupts) {
        const vfio::IrqInfo info = dev_->irq_info(vfio::IrqType::msix);
        if (info.count < 1u + o.rx_queues) {
            throw Error("enable interrupts", who,
                        log::concat("the device offers ", info.count, " MSI-X vectors; link changes need one and ",
                                    o.rx_queues, " RX queues one each"),
                        "use fewer queues or polling mode (QEMU: vectors=2N+2)");
        }
        dev_->enable_irqs(vfio::IrqType::msix, 1u + o.rx_queues);
        transport_.set_config_vector(kConfigVector);
        interrupts_ = true;
    } else {
        transport_.set_config_vector(VIRTIO_MSI_NO_VECTOR);
    }

    // Ring memory: one page-aligned block per queue (descriptors, driver area, device area, TX header slots).
    const QueueLayout rx_l = layout(packed_, rx_size_, 0);
    const std::uint32_t tx_chain = indirect_ ? 1 : 2;
    const std::size_t tx_slot = indirect_ ? kIndirectSlot : kHeaderSlot;
    const QueueLayout tx_l = layout(packed_, tx_size_, (tx_size_ / tx_chain) * tx_slot);
    const QueueLayout ctrl_l = layout(packed_, ctrl ? ctrl_size : 2, kControlBuffer);
    const std::size_t total = o.rx_queues * rx_l.bytes + o.tx_queues * tx_l.bytes + (ctrl ? ctrl_l.bytes : 0);
    dma::MemoryOptions mem;
    mem.allow_small_pages = true;  // rings are small: 4 KiB pages do when no hugepage is free
    ring_memory_ = dma::Memory::allocate_near(*dev_, total, mem);
    std::fill_n(ring_memory_.data(), ring_memory_.size(), std::byte{0});
    ring_mapping_ = dma::Mapping::map(dev_->domain(), iovas, ring_memory_);

    std::byte* at = ring_memory_.data();
    auto program = [&](std::uint16_t vq, const QueueLayout& l, std::uint32_t size, std::uint32_t chain,
                       std::uint16_t vector, auto& split, auto& packed, const char* what) {
        transport_.setup_queue(vq, static_cast<std::uint16_t>(size), ring_mapping_.iova_of(at + l.desc),
                               ring_mapping_.iova_of(at + l.driver), ring_mapping_.iova_of(at + l.device), vector);
        if (packed_) {
            packed.emplace(reinterpret_cast<vring_packed_desc*>(at + l.desc),
                           reinterpret_cast<vring_packed_desc_event*>(at + l.driver),
                           reinterpret_cast<vring_packed_desc_event*>(at + l.device), size, chain, event_idx_, what);
        } else {
            split.emplace(reinterpret_cast<vring_desc*>(at + l.desc), reinterpret_cast<vring_avail*>(at + l.driver),
                          reinterpret_cast<vring_used*>(at + l.device), size, chain, event_idx_, what);
        }
        return transport_.notify_offset(vq);
    };

    rx_.resize(o.rx_queues);
    for (std::uint16_t q = 0; q < o.rx_queues; ++q) {
        RxQueue& r = rx_[q];
        r.vq = static_cast<std::uint16_t>(2 * q);
        r.pool = rx_pools[rx_pools.size() == 1 ? 0 : q];
        r.buf_len = static_cast<std::uint32_t>(std::min<std::size_t>(r.pool->buffer_size(), 65535));
        r.refill_at = std::min(kRefillBatch, rx_size_ / 4 ? rx_size_ / 4 : 1);
        r.slots.assign(rx_size_, Packet{});
        r.mem = at;
        r.notify = program(r.vq, rx_l, rx_size_, 1,
                           interrupts_ ? static_cast<std::uint16_t>(1 + q) : std::uint16_t{VIRTIO_MSI_NO_VECTOR},
                           r.split, r.packed, "rx queue");
        if (packed_) {
            r.packed->set_interrupts(interrupts_);
            refill(r, *r.packed);
        } else {
            r.split->set_interrupts(interrupts_);
            refill(r, *r.split);
        }
        if ((packed_ ? r.packed->free_chains() : r.split->free_chains()) != 0) {
            throw Error("fill rx ring", who, "the buffer pool ran dry while filling the rings");
        }
        transport_.enable_queue(r.vq);
        at += rx_l.bytes;
    }
    tx_.resize(o.tx_queues);
    for (std::uint16_t q = 0; q < o.tx_queues; ++q) {
        TxQueue& t = tx_[q];
        t.vq = static_cast<std::uint16_t>(2 * q + 1);
        t.slots.assign(tx_size_ / tx_chain, TxSlot{nullptr, 0});
        t.headers = at + tx_l.headers;
        t.headers_iova = ring_mapping_.iova_of(t.headers);
        t.notify = program(t.vq, tx_l, tx_size_, tx_chain, VIRTIO_MSI_NO_VECTOR, t.split, t.packed, "tx queue");
        if (packed_)
            t.packed->set_interrupts(false);
        else
            t.split->set_interrupts(false);
        transport_.enable_queue(t.vq);
        at += tx_l.bytes;
    }
    if (ctrl) {
        ctrl_.vq = ctrl_vq;
        ctrl_.buf = at + ctrl_l.headers;
        ctrl_.iova = ring_mapping_.iova_of(ctrl_.buf);
        ctrl_.notify =
            program(ctrl_vq, ctrl_l, ctrl_size, 2, VIRTIO_MSI_NO_VECTOR, ctrl_.split, ctrl_.packed, "control queue");
        if (packed_)
            ctrl_.packed->set_interrupts(false);
        else
            ctrl_.split->set_interrupts(false);
        transport_.enable_queue(ctrl_vq);
    }
}

// After DRIVER_OK: queue pairs (or RSS), the station address, the receive filter.
void VirtioNet::configure_device() {
    const VirtioNetOptions& o = options_;
    const std::uint16_t pairs = std::max(o.rx_queues, o.tx_queues);
    if (has(VIRTIO_NET_F_RSS)) {
        // virtio 1.2, 5.1.6.5.7.1: hash types, indirection table over the RX queues asked for, TX queues, key.
        transport_.require_device_config(kCfgRssTable, 2, "rss_max_indirection_table_length");
        transport_.require_device_config(kCfgRssKey, 1, "rss_max_key_size");
        const std::uint32_t table =
            floor_pow2(std::min<std::uint32_t>(rss_reta_entries, transport_.config16(kCfgRssTable)));
        const std::uint32_t key = std::min<std::uint32_t>(sizeof rss_key, transport_.config8(kCfgRssKey));
        const std::uint32_t types =
            transport_.config32(kCfgHashTypes) &
            (VIRTIO_NET_RSS_HASH_TYPE_IPv4 | VIRTIO_NET_RSS_HASH_TYPE_TCPv4 | VIRTIO_NET_RSS_HASH_TYPE_UDPv4 |
             VIRTIO_NET_RSS_HASH_TYPE_IPv6 | VIRTIO_NET_RSS_HASH_TYPE_TCPv6 | VIRTIO_NET_RSS_HASH_TYPE_UDPv6);
        if (table == 0 || key == 0) {
            throw Error("configure RSS", transport_.who(),
                        log::concat("the device takes ", table, " indirection entries and keys of ", key, " bytes"));
        }
        std::vector<std::byte> cmd;
        auto put16 = [&](std::uint32_t v) {
            cmd.push_back(std::byte(v & 0xff));
            cmd.push_back(std::byte(v >> 8 & 0xff));
        };
        put16(types & 0xffff);
        put16(types >> 16);
        put16(table - 1);                                                        // indirection_table_mask
        put16(0);                                                                // unclassified_queue: RX queue 0
        for (std::uint32_t i = 0; i < table; ++i) put16(2 * (i % o.rx_queues));  // entries are virtqueue indexes
        put16(pairs);                                                            // max_tx_vq
        cmd.push_back(std::byte(key));
        for (std::uint32_t i = 0; i < key; ++i) cmd.push_back(std::byte(rss_key[i]));
        control(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_RSS_CONFIG, cmd, "RSS configuration");
    } else if (pairs > 1) {
        const std::array<std::byte, 2> cmd{std::byte(pairs & 0xff), std::byte(pairs >> 8)};
        control(VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, cmd, "queue pairs");
    }
    if (o.mac) {
        control(VIRTIO_NET_CTRL_MAC, VIRTIO_NET_CTRL_MAC_ADDR_SET, std::as_bytes(std::span(o.mac->bytes)),
                "MAC address");
        mac_ = *o.mac;
    }
    if (has(VIRTIO_NET_F_CTRL_RX)) {
        set_promiscuous(o.promiscuous);
        const std::array<std::byte, 1> off{std::byte{0}};
        control(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_ALLMULTI, off, "all-multicast off");
        if (has(VIRTIO_NET_F_CTRL_RX_EXTRA)) {
            const std::array<std::byte, 1> nobcast{std::byte{o.broadcast ? std::uint8_t{0} : std::uint8_t{1}}};
            control(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_NOBCAST, nobcast, "broadcast filter");
        }
    } else {
        log::info("virtio-net ", transport_.who(),
                  ": no receive filter control (VIRTIO_NET_F_CTRL_RX): the device filters as it likes");
    }
    if (transport_.status() & VIRTIO_CONFIG_S_NEEDS_RESET) {
        throw Error("start virtio-net", transport_.who(), "the device set DEVICE_NEEDS_RESET during set-up",
                    "the device met an error it cannot recover from (QEMU logs why); reopen the port");
    }
}

void VirtioNet::wait_link() {
    link_up_ = true;
    if (!has(VIRTIO_NET_F_STATUS)) return;  // 5.1.4.2: without STATUS the link is assumed up
    const auto end = Clock::now() + std::chrono::milliseconds(options_.link_timeout_ms);
    while (!(transport_.config16(kCfgStatus) & VIRTIO_NET_S_LINK_UP)) {
        if (Clock::now() >= end) {
            throw Error("bring link up", transport_.who(),
                        log::concat("link still down after ", options_.link_timeout_ms, " ms (virtio-net status)"),
                        "check the device's network (QEMU: set_link NAME on) or raise PortOptions::link_timeout_ms");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void VirtioNet::control(std::uint8_t cls, std::uint8_t cmd, std::span<const std::byte> data, const char* what) {
    const std::string& who = transport_.who();
    if (!has(VIRTIO_NET_F_CTRL_VQ)) {
        throw Error("virtio-net control command", who, std::string(what) + ": the device has no control queue",
                    "QEMU: ctrl_vq=on (the default)");
    }
    if (ctrl_.broken) {
        throw Error("virtio-net control command", who,
                    std::string(what) + ": the control queue stopped after an earlier command failed",
                    "reopen the port");
    }
    if (data.size() + 2 > kAckOffset) {
        throw Error("virtio-net control command", who, std::string(what) + ": command too long");
    }
    ctrl_.buf[0] = std::byte{cls};
    ctrl_.buf[1] = std::byte{cmd};
    std::memcpy(ctrl_.buf + 2, data.data(), data.size());
    ctrl_.buf[kAckOffset] = std::byte{0xff};  // neither OK nor ERR until the device writes it
    const Segment segs[2] = {{ctrl_.iova, static_cast<std::uint32_t>(2 + data.size()), 0},
                             {ctrl_.iova + kAckOffset, 1, VRING_DESC_F_WRITE}};
    auto run = [&](auto& ring) {
        ring.add(segs);
        if (ring.publish()) transport_.notify(ctrl_.notify, ctrl_.vq);
        const auto end = Clock::now() + std::chrono::milliseconds(options_.control_timeout_ms);
        Used u;
        while (!ring.pop(u)) {
            if (ring.fault() != Fault::none) {
                ctrl_.broken = true;
                throw Error("virtio-net control command", who,
                            std::string(what) + ": control queue: " + virtio::fault_text(ring.fault()),
                            "reopen the port");
            }
            if (Clock::now() >= end) {
                ctrl_.broken = true;  // the chain is still the device's
                throw Error(
                    "virtio-net control command", who,
                    log::concat(what, ": no answer within ", options_.control_timeout_ms, " ms"),
                    "the device does not serve its control queue; raise control_timeout_ms under slow emulation");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    };
    if (packed_)
        run(*ctrl_.packed);
    else
        run(*ctrl_.split);
    const auto ack =
        unsigned{__atomic_load_n(reinterpret_cast<std::uint8_t*>(ctrl_.buf + kAckOffset), __ATOMIC_ACQUIRE)};
    if (ack != VIRTIO_NET_OK) {
        throw Error("virtio-net control command", who,
                    log::concat(what, " (class ", unsigned{cls}, ", command ", unsigned{cmd},
                                ") refused by the device (ack ", ack, ")"));
    }
}

void VirtioNet::set_promiscuous(bool on) {
    if (!has(VIRTIO_NET_F_CTRL_RX)) {
        throw Error("set promiscuous mode", transport_.who(),
                    "the device offers no receive filter control (VIRTIO_NET_F_CTRL_RX)",
                    "QEMU: ctrl_vq=on,ctrl_rx=on (the default)");
    }
    const std::array<std::byte, 1> v{std::byte{on ? std::uint8_t{1} : std::uint8_t{0}}};
    control(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_PROMISC, v, "promiscuous mode");
    promiscuous_ = on;
}

void VirtioNet::add_multicast(const MacAddress& group) {
    if (!has(VIRTIO_NET_F_CTRL_RX)) {
        throw Error("add multicast group", transport_.who(),
                    "the device offers no receive filter control (VIRTIO_NET_F_CTRL_RX)",
                    "QEMU: ctrl_vq=on,ctrl_rx=on (the default); or promiscuous mode");
    }
    if (std::find(multicast_.begin(), multicast_.end(), group) != multicast_.end()) return;
    if (multicast_.size() >= kMaxMulticast) {
        throw Error("add multicast group", transport_.who(),
                    log::concat("already ", kMaxMulticast, " groups in the table"), "use promiscuous mode");
    }
    multicast_.push_back(group);
    try {
        send_mac_table();
    } catch (...) {
        multicast_.pop_back();
        throw;
    }
}

// VIRTIO_NET_CTRL_MAC_TABLE_SET: an empty unicast table (the station address filters on its own), then
// the multicast groups.
void VirtioNet::send_mac_table() {
    std::vector<std::byte> cmd(4, std::byte{0});
    const auto n = static_cast<std::uint32_t>(multicast_.size());
    for (unsigned i = 0; i < 4; ++i) cmd.push_back(std::byte(n >> (8 * i) & 0xff));
    for (const MacAddress& m : multicast_)
        for (std::uint8_t b : m.bytes) cmd.push_back(std::byte{b});
    control(VIRTIO_NET_CTRL_MAC, VIRTIO_NET_CTRL_MAC_TABLE_SET, cmd, "multicast table");
}

// --- Data path ---

template <class R>
void VirtioNet::refill(RxQueue& q, R& ring) noexcept {
    const std::uint32_t want = ring.free_chains();
    if (want == 0) return;
    const std::uint32_t* idx;
    const std::uint32_t k = q.pool->alloc_bulk(want, idx);
    const dma::BufferPool::Buffer first = q.pool->at(0);
    const std::size_t stride = q.pool->stride();
    for (std::uint32_t i = 0; i < k; ++i) {
        const std::size_t off = std::size_t{idx[i]} * stride;
        const Segment s{first.iova + off, q.buf_len, VRING_DESC_F_WRITE};
        const std::uint16_t id = ring.add(&s);
        Packet& slot = q.slots[id];
        slot.data = reinterpret_cast<std::uint8_t*>(first.data + off);
        slot.iova = first.iova + off;
        slot.buf = idx[i];
        slot.pool = q.pool;
    }
    if (k < want) ++q.stats.no_buffers;
}

void VirtioNet::report_fault(const char* dir, std::uint16_t queue, Fault f, QueueStats& stats,
                             bool& reported) noexcept {
    if (reported) return;
    reported = true;
    if (f == Fault::used_len_too_long)
        ++stats.bad_length;
    else
        ++stats.bad_head;
    try {
        log::warn("virtio-net ", transport_.who(), ": ", dir, " queue ", queue, " stopped: ", virtio::fault_text(f),
                  "; its buffers stay with the device until the port is closed (reopen it to use the queue again)");
    } catch (...) {
    }
}

template <class R>
std::uint16_t VirtioNet::rx_on(std::uint16_t queue, RxQueue& q, R& ring, std::span<Packet> out) noexcept {
    std::uint32_t n = 0;
    std::uint64_t bytes = 0;
    const bool csum = has(VIRTIO_NET_F_GUEST_CSUM);
    Used u;
    while (n < out.size() && ring.pop(u)) {
        Packet p = q.slots[u.id];
        if (u.len < header_bytes + ETH_HEADER_LEN) [[unlikely]] {
            ++q.stats.bad_length;  // not even a header and an Ethernet header: the buffer goes back at once
            const Segment s{p.iova, q.buf_len, VRING_DESC_F_WRITE};
            q.slots[ring.add(&s)] = p;
            continue;
        }
        std::uint32_t flags = 0;
        const std::uint32_t len = u.len - header_bytes;
        if (csum) {
            const auto* h = reinterpret_cast<const virtio_net_hdr_v1*>(p.data);
            if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
                complete_checksum(p.data + header_bytes, len, h->csum_start, h->csum_offset);
                flags = pkt::RX_L4_CHECKED;
            } else if (h->flags & VIRTIO_NET_HDR_F_DATA_VALID) {
                flags = pkt::RX_L4_CHECKED;
            }
        }
        p.data += header_bytes;
        p.iova += header_bytes;
        p.len = len;
        p.flags = flags;
        out[n++] = p;
        bytes += len;
    }
    if (ring.fault() != Fault::none) [[unlikely]]
        report_fault("rx", queue, ring.fault(), q.stats, q.fault_reported);
    q.stats.packets += n;
    q.stats.bytes += bytes;
    const std::uint32_t free = ring.free_chains();
    if (free >= q.refill_at || (n == 0 && free != 0)) refill(q, ring);
    if (ring.publish()) {
        transport_.notify(q.notify, q.vq);
        ++q.stats.doorbells;
    }
    return static_cast<std::uint16_t>(n);
}

std::uint16_t VirtioNet::rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept {
    if (queue >= rx_.size()) return 0;
    RxQueue& q = rx_[queue];
    return packed_ ? rx_on(queue, q, *q.packed, out) : rx_on(queue, q, *q.split, out);
}

template <class R>
std::uint32_t VirtioNet::reclaim_on(std::uint16_t queue, TxQueue& q, R& ring) noexcept {
    std::uint32_t n = 0;
    Used u;
    while (ring.pop(u)) {
        const TxSlot& s = q.slots[u.id];
        if (s.pool) s.pool->free(s.buf);
        ++n;
    }
    if (ring.fault() != Fault::none) [[unlikely]]
        report_fault("tx", queue, ring.fault(), q.stats, q.fault_reported);
    return n;
}

template <class R>
std::uint16_t VirtioNet::tx_on(std::uint16_t queue, TxQueue& q, R& ring, std::span<const Packet> pkts) noexcept {
    if (ring.free_chains() < pkts.size()) reclaim_on(queue, q, ring);
    const bool csum = has(VIRTIO_NET_F_CSUM);
    constexpr std::uint32_t l4 = pkt::TX_TCP_CSUM | pkt::TX_UDP_CSUM;
    std::uint32_t n = 0;
    std::uint64_t bytes = 0;
    for (const Packet& p : pkts) {
        if (ring.free_chains() == 0) break;
        const std::uint32_t len = p.len;
        if (len - 1 >= max_frame_) [[unlikely]] {
            ++q.stats.bad_length;
            break;
        }
        const std::uint16_t id = ring.next_id();
        std::byte* slot = q.headers + std::size_t{id} * (indirect_ ? kIndirectSlot : kHeaderSlot);
        const std::uint64_t slot_iova = q.headers_iova + std::size_t{id} * (indirect_ ? kIndirectSlot : kHeaderSlot);
        auto* h = reinterpret_cast<virtio_net_hdr_v1*>(slot);
        std::memset(h, 0, sizeof *h);
        if (p.flags & pkt::TX_MASK) [[unlikely]] {
            // Only the L4 checksum has a virtio form (NEEDS_CSUM), one of TCP or UDP, inside the frame.
            const std::uint32_t start = std::uint32_t{p.l2_len} + p.l3_len;
            const std::uint32_t field = (p.flags & pkt::TX_TCP_CSUM) ? 16 : 6;
            if (!csum || (p.flags & pkt::TX_MASK & ~l4) || (p.flags & l4) == l4 || p.l2_len == 0 || p.l3_len == 0 ||
                start + field + 2 > len) {
                ++q.stats.bad_length;
                break;
            }
            h->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
            h->csum_start = static_cast<std::uint16_t>(start);
            h->csum_offset = static_cast<std::uint16_t>(field);
        }
        if (indirect_) {
            // The table: header then frame; split tables link with NEXT, packed ones are read in order.
            if constexpr (std::is_same_v<R, virtio::PackedRing>) {
                auto* table = reinterpret_cast<vring_packed_desc*>(slot + kHeaderSlot);
                table[0] = vring_packed_desc{slot_iova, header_bytes, 0, 0};
                table[1] = vring_packed_desc{p.iova, len, 0, 0};
            } else {
                auto* table = reinterpret_cast<vring_desc*>(slot + kHeaderSlot);
                table[0] = vring_desc{slot_iova, header_bytes, VRING_DESC_F_NEXT, 1};
                table[1] = vring_desc{p.iova, len, 0, 0};
            }
            const Segment seg{slot_iova + kHeaderSlot, 2 * sizeof(vring_desc), VRING_DESC_F_INDIRECT};
            ring.add(&seg);
        } else {
            const Segment segs[2] = {{slot_iova, header_bytes, 0}, {p.iova, len, 0}};
            ring.add(segs);
        }
        q.slots[id] = TxSlot{p.pool, p.buf};
        ++n;
        bytes += len;
    }
    if (ring.publish()) {
        transport_.notify(q.notify, q.vq);
        ++q.stats.doorbells;
    }
    q.stats.packets += n;
    q.stats.bytes += bytes;
    return static_cast<std::uint16_t>(n);
}

std::uint16_t VirtioNet::tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept {
    if (queue >= tx_.size()) return 0;
    TxQueue& q = tx_[queue];
    return packed_ ? tx_on(queue, q, *q.packed, pkts) : tx_on(queue, q, *q.split, pkts);
}

std::uint32_t VirtioNet::tx_reclaim(std::uint16_t queue) noexcept {
    if (queue >= tx_.size()) return 0;
    TxQueue& q = tx_[queue];
    return packed_ ? reclaim_on(queue, q, *q.packed) : reclaim_on(queue, q, *q.split);
}

std::uint32_t VirtioNet::rx_free_slots(std::uint16_t queue) const noexcept {
    if (queue >= rx_.size()) return 0;
    return packed_ ? rx_[queue].packed->free_chains() : rx_[queue].split->free_chains();
}

std::uint32_t VirtioNet::tx_free_slots(std::uint16_t queue) const noexcept {
    if (queue >= tx_.size()) return 0;
    return packed_ ? tx_[queue].packed->free_chains() : tx_[queue].split->free_chains();
}

bool VirtioNet::wait_rx(std::uint16_t queue, int timeout_ms) noexcept {
    if (queue >= rx_.size()) return false;
    RxQueue& q = rx_[queue];
    auto ready = [&] { return packed_ ? q.packed->has_used() : q.split->has_used(); };
    if (ready()) return true;
    if (!interrupts_) return false;
    // Ask for an interrupt at the next used buffer, then look again: a frame that landed in between
    // is seen here, not lost.
    if (packed_)
        q.packed->set_interrupts(true);
    else
        q.split->set_interrupts(true);
    if (ready()) return true;
    return dev_->wait_irq(1u + queue, timeout_ms) > 0 || ready();
}

int VirtioNet::rx_fd(std::uint16_t queue) const noexcept {
    return interrupts_ && queue < rx_.size() ? dev_->irq_fd(1u + queue) : -1;
}

bool VirtioNet::link_up() const noexcept {
    if (transport_.status() & VIRTIO_CONFIG_S_NEEDS_RESET) return false;
    return !has(VIRTIO_NET_F_STATUS) || (transport_.config16(kCfgStatus) & VIRTIO_NET_S_LINK_UP);
}

unsigned VirtioNet::link_speed_mbps() const noexcept {
    if (!has(VIRTIO_NET_F_SPEED_DUPLEX) || !link_up()) return 0;
    const std::uint32_t speed = transport_.config32(kCfgSpeed);
    return speed <= 0x7fffffff ? speed : 0;  // anything else: unknown
}

std::optional<LinkEvent> VirtioNet::poll_link() noexcept {
    if ((transport_.status() & VIRTIO_CONFIG_S_NEEDS_RESET) && !needs_reset_reported_) {
        needs_reset_reported_ = true;
        try {
            log::warn("virtio-net ", transport_.who(),
                      ": the device set DEVICE_NEEDS_RESET: it met an error it cannot recover from; reopen the port");
        } catch (...) {
        }
    }
    const bool up = link_up();
    if (up == link_up_) return std::nullopt;
    link_up_ = up;
    ++link_changes_;
    return LinkEvent{up, up ? link_speed_mbps() : 0};
}

QueueStats VirtioNet::rx_stats(std::uint16_t queue) const noexcept {
    return queue < rx_.size() ? rx_[queue].stats : QueueStats{};
}

QueueStats VirtioNet::tx_stats(std::uint16_t queue) const noexcept {
    return queue < tx_.size() ? tx_[queue].stats : QueueStats{};
}

Fault VirtioNet::rx_fault(std::uint16_t queue) const noexcept {
    if (queue >= rx_.size()) return Fault::none;
    return packed_ ? rx_[queue].packed->fault() : rx_[queue].split->fault();
}

Fault VirtioNet::tx_fault(std::uint16_t queue) const noexcept {
    if (queue >= tx_.size()) return Fault::none;
    return packed_ ? tx_[queue].packed->fault() : tx_[queue].split->fault();
}

VirtioNet::RingMemory VirtioNet::rx_ring_memory(std::uint16_t queue) const noexcept {
    if (queue >= rx_.size()) return {};
    const RxQueue& q = rx_[queue];
    const QueueLayout l = layout(packed_, rx_size_, 0);
    RingMemory m{packed_, rx_size_, q.mem + l.desc, q.mem + l.driver, q.mem + l.device, 0, false};
    if (packed_) {
        m.next_used = q.packed->next_used();
        m.used_wrap = q.packed->used_wrap();
    } else {
        m.next_used = q.split->last_used();
    }
    return m;
}

void VirtioNet::stop() noexcept {
    // Reset: the device stops every queue and all DMA (4.1.4.3.2: once device_status reads 0).
    const bool stopped = transport_.reset_noexcept();
    dev_->disable_irqs();
    interrupts_ = false;
    if (!stopped) {
        try {
            log::warn(
                "virtio-net ", transport_.who(),
                ": the device did not finish its reset; its buffers are not given back (it may still write them)");
        } catch (...) {
        }
        return;
    }
    for (auto& q : rx_) {
        const std::uint32_t chains = rx_size_;
        for (std::uint32_t id = 0; id < chains; ++id) {
            const bool held = packed_ ? (q.packed && q.packed->outstanding(static_cast<std::uint16_t>(id)))
                                      : (q.split && q.split->outstanding(static_cast<std::uint16_t>(id)));
            if (held && q.slots[id].pool) q.slots[id].pool->free(q.slots[id].buf);
        }
    }
    for (auto& q : tx_) {
        for (std::uint32_t id = 0; id < q.slots.size(); ++id) {
            const bool held = packed_ ? (q.packed && q.packed->outstanding(static_cast<std::uint16_t>(id)))
                                      : (q.split && q.split->outstanding(static_cast<std::uint16_t>(id)));
            if (held && q.slots[id].pool) q.slots[id].pool->free(q.slots[id].buf);
        }
    }
    rx_.clear();
    tx_.clear();
}

std::unique_ptr<Port> open_virtio_net(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options) {
    return VirtioNet::open(device, iovas, rx_pools, options);
}

}  // namespace bardrive::nic
