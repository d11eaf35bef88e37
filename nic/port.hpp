// nic::Port: the one interface a program drives a NIC port through, whatever the chip (igb, e1000e,
// virtio-net, ...). nic::open_port() picks the driver from the device's PCI IDs (nic/drivers.cpp holds
// the table); a driver's own class (nic::Igb, ...) adds what only its chip has.
//
// The shape is ixy's ixy_device and DPDK's eth_dev_ops: bursts of frames per queue, buffers that come
// from and go back to dma::BufferPool, one doorbell per burst. Bursts are virtual calls: one indirect
// call per burst, not per frame.
//
// Contract, for every driver:
// - Set-up (open_port, the constructors) checks the device and the options first and throws
//   bardrive::Error naming what is wrong (an option beyond the chip: its limit) and what to do.
// - rx_burst/tx_burst/tx_reclaim/wait_rx/poll_link never throw and never allocate.
// - A device that reports something impossible (an index outside a ring, a length beyond a buffer) costs
//   a counted drop (QueueStats), never an access outside bardrive's rings or buffers.
// - Each queue is driven by one thread at a time; different queues from different threads need no lock
//   when each RX queue has its own pool (PortOptions: one pool per queue).
// - Destruction stops the device (no DMA after it) and gives every buffer back to its pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "../dma/buffer_pool.hpp"
#include "../dma/iova_allocator.hpp"
#include "../vfio/device.hpp"
#include "mac_address.hpp"
#include "packet.hpp"
#include "stats.hpp"

namespace bardrive::nic {

enum class Loopback {
    none,
    mac,  // frames sent come back to this port's receive path, nothing leaves the port
    phy,  // through the PHY (e1000 family)
};

// Options every driver takes. A driver refuses, with its own limits, what its chip cannot do (more
// queues than it has, a ring size it cannot hold, a loopback mode it lacks).
struct PortOptions {
    std::uint16_t rx_queues = 1;  // more than one: the device spreads flows (RSS) where it can
    std::uint16_t tx_queues = 1;
    std::uint32_t rx_ring = 512;  // descriptors per queue: a power of two the driver accepts (8..32768 on Intel parts)
    std::uint32_t tx_ring = 512;
    bool promiscuous = false;  // accept every unicast and multicast frame
    bool broadcast = true;     // accept broadcast frames
    Loopback loopback = Loopback::none;
    // Interrupts: RX queue q signals rx_fd(q) (wait_rx blocks on it), link changes signal link_fd();
    // otherwise poll only.
    bool interrupts = false;
    int link_timeout_ms = 5000;  // how long set-up waits for link up before it throws
    // Longest frame sent or accepted, without CRC (1514: a 1500-byte MTU). Every received frame lands in
    // one buffer (one Packet): the pools' buffers must hold it (drivers say how much they need).
    std::uint32_t max_frame = 1514;
    // RX offloads where the device has them (features()): checksum status in Packet::flags (pkt::RX_*),
    // VLAN tags stripped into Packet::vlan. TX offloads are asked per frame (pkt::TX_*).
    bool rx_checksum = true;
    bool vlan_strip = false;
    std::optional<MacAddress> mac;  // the station address instead of the device's own
};

// What a port can do beyond plain frames (Port::features()).
namespace feature {
inline constexpr std::uint32_t TX_IP_CSUM = 1u << 0;  // pkt::TX_IP_CSUM
inline constexpr std::uint32_t TX_L4_CSUM = 1u << 1;  // pkt::TX_TCP_CSUM / TX_UDP_CSUM
inline constexpr std::uint32_t TX_VLAN = 1u << 2;     // pkt::TX_VLAN
// RX_CSUM: frames whose checksum the device found right carry pkt::RX_L4_CHECKED. RX_CSUM_ERRORS: besides, the
// device checks every IPv4/TCP/UDP frame: RX_IP_CHECKED, RX_UDP, and RX_*_BAD for a wrong sum (Intel parts;
// virtio-net marks good frames only, so a frame without RX_L4_CHECKED is unknown there, not bad).
inline constexpr std::uint32_t RX_CSUM = 1u << 3;
inline constexpr std::uint32_t RX_VLAN_STRIP = 1u << 4;    // PortOptions::vlan_strip
inline constexpr std::uint32_t RSS = 1u << 5;              // several RX queues spread by flow
inline constexpr std::uint32_t MAC_LOOPBACK = 1u << 6;     // Loopback::mac
inline constexpr std::uint32_t DEVICE_COUNTERS = 1u << 7;  // device_stats() reads the device's own counters
inline constexpr std::uint32_t LINK_SPEED = 1u << 8;       // link_speed_mbps() is the device's word
inline constexpr std::uint32_t JUMBO = 1u << 9;            // PortOptions::max_frame above 1514
inline constexpr std::uint32_t RX_CSUM_ERRORS = 1u << 10;  // see RX_CSUM
}  // namespace feature

class Port {
public:
    virtual ~Port() = default;
    Port() = default;
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;

    // --- Data path ---
    // Up to out.size() received frames of RX queue `queue`, refilling its ring from its pool and ringing
    // one doorbell. Each Packet's buffer is the caller's until release() or tx_burst() hands it back.
    virtual std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept = 0;
    // Queues frames in order on TX queue `queue` (one doorbell); returns how many it took. Taken frames'
    // buffers go back to their pools once sent; the rest stay the caller's (release them or retry).
    virtual std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept = 0;
    // Gives finished TX buffers back to their pools without sending; how many it freed.
    virtual std::uint32_t tx_reclaim(std::uint16_t queue) noexcept = 0;
    virtual std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept = 0;
    virtual std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept = 0;
    // With interrupts: true when RX queue `queue` has (or may have) work, false after timeout_ms without.
    // Without: whether a frame is there now.
    virtual bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept = 0;
    // The eventfd RX queue `queue` signals (for your epoll), -1 without interrupts.
    virtual int rx_fd(std::uint16_t queue) const noexcept = 0;
    // Gives a received frame's buffer back to its pool.
    static void release(const Packet& p) noexcept {
        if (p.pool) p.pool->free(p.buf);
    }

    // --- What it is ---
    virtual const char* driver() const noexcept = 0;  // "igb", "e1000e", "virtio-net"
    virtual const vfio::Device& device() const noexcept = 0;
    virtual std::uint16_t rx_queues() const noexcept = 0;
    virtual std::uint16_t tx_queues() const noexcept = 0;
    virtual std::uint32_t features() const noexcept = 0;  // feature::*
    virtual MacAddress mac() const noexcept = 0;

    // --- Link ---
    virtual bool link_up() const noexcept = 0;
    virtual unsigned link_speed_mbps() const noexcept = 0;  // 0 when down or unknown (feature::LINK_SPEED)
    // A link change since the last call (set-up leaves the link up). With interrupts it also re-arms
    // the link interrupt, whose eventfd link_fd() gives (-1 without interrupts).
    virtual std::optional<LinkEvent> poll_link() noexcept = 0;
    virtual int link_fd() const noexcept = 0;
    virtual std::uint64_t link_changes() const noexcept = 0;

    // --- Filters ---
    virtual void set_promiscuous(bool on) = 0;
    virtual void add_multicast(const MacAddress& group) = 0;

    // --- Statistics ---
    virtual QueueStats rx_stats(std::uint16_t queue) const noexcept = 0;
    virtual QueueStats tx_stats(std::uint16_t queue) const noexcept = 0;
    // Reads the device's counters (clear-on-read on some chips: one reader, the port's owner thread),
    // adds them up since set-up, returns the totals. All 0 without feature::DEVICE_COUNTERS.
    virtual const DeviceStats& device_stats() noexcept = 0;
};

// Opens `device` (bound to vfio-pci, opened in a vfio::Domain) with the driver its PCI IDs call for.
// rx_pools: one pool for every RX queue, or one per queue (a thread per queue then needs no lock); a
// pool over a dma::PeerWindow receives straight into another device's BAR. Throws bardrive::Error
// naming the IDs and the drivers bardrive has when no driver takes the device, and whatever the
// driver's set-up refuses.
std::unique_ptr<Port> open_port(vfio::Device& device, dma::IovaAllocator& iovas,
                                std::span<dma::BufferPool* const> rx_pools, const PortOptions& options = {});
std::unique_ptr<Port> open_port(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool,
                                const PortOptions& options = {});

}  // namespace bardrive::nic
