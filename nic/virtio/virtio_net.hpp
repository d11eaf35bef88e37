// nic::VirtioNet: a userspace driver for virtio-net devices (virtio 1.x, modern PCI transport) over VFIO:
// QEMU's virtio-net-pci, and the NIC of most KVM guests and cloud VMs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../../dma/buffer_pool.hpp"
#include "../../dma/iova_allocator.hpp"
#include "../../dma/mapping.hpp"
#include "../../dma/memory.hpp"
#include "../../vfio/device.hpp"
#include "../mac_address.hpp"
#include "../packet.hpp"
#include "../port.hpp"
#include "pci_transport.hpp"
#include "virtqueue.hpp"

namespace bardrive::nic {

// virtio-net's options: the ones every port takes, and the ring format.
struct VirtioNetOptions : PortOptions {
    bool packed = true;             // packed virtqueues (VIRTIO_F_RING_PACKED) when the device offers them, else split
    bool event_idx = true;          // VIRTIO_RING_F_EVENT_IDX notification suppression when offered
    bool indirect = true;           // TX through indirect descriptors (VIRTIO_RING_F_INDIRECT_DESC) when offered
    int control_timeout_ms = 2000;  // how long a control-queue command (filters, queues, MAC) may take
};

// The port. Set-up (virtio 1.2, 3.1.1): finds the virtio capabilities and maps their BARs, resets the
// device, negotiates features, reads the device configuration, sets up the virtqueues (ring memory from
// dma::Memory, mapped through `iovas`), fills every RX queue from its pool, sets DRIVER_OK, then sends
// what the control queue must carry (queue pairs or RSS, the MAC address, the receive filter) and waits
// for link up. Refusals name what is missing and what to do:
// - always VIRTIO_F_VERSION_1; VIRTIO_F_ACCESS_PLATFORM whenever the domain translates (not no-IOMMU),
//   since without it the device would DMA to guest-physical addresses, bypassing the IOMMU;
// - a device that sets DEVICE_NEEDS_RESET; a device without a MAC (VIRTIO_NET_F_MAC) unless
//   PortOptions::mac is given and VIRTIO_NET_F_CTRL_MAC_ADDR offered;
// - several queue pairs without VIRTIO_NET_F_MQ, fewer RX than TX queues without VIRTIO_NET_F_RSS,
//   max_frame above 1514 without VIRTIO_NET_F_MTU (or above its MTU), promiscuous or no-broadcast
//   without VIRTIO_NET_F_CTRL_RX (_EXTRA), MAC or PHY loopback and VLAN stripping (virtio has none).
// Ring sizes: PortOptions::rx_ring/tx_ring are an upper bound (powers of two); a queue gets the smaller of
// that and the device's maximum (QEMU: 256), as DPDK's virtio driver does. rx_ring_size()/tx_ring_size()
// say what was used.
//
// Frames and the virtio_net_hdr (12 bytes with VERSION_1):
// - RX: every buffer posted holds header + frame (one descriptor of the pool's buffer size; mergeable
//   buffers are not negotiated, so a frame never spans buffers): rx_burst hands out Packet{data = the
//   frame's first byte (buffer + 12), iova likewise, len = frame length}; the pool's buffers must hold
//   12 + max(max_frame, 1514) bytes. With VIRTIO_NET_F_GUEST_CSUM (PortOptions::rx_checksum) a frame the
//   device marks DATA_VALID reports pkt::RX_L4_CHECKED; one marked NEEDS_CSUM (a local sender's partial
//   checksum) gets its checksum completed in software and reports the same.
// - TX: the header goes in a per-chain header slot in ring memory, followed by the frame's own buffer.
//   With VIRTIO_RING_F_INDIRECT_DESC (VirtioNetOptions::indirect) the two are an indirect table in that
//   slot and a frame takes one ring descriptor, so a TX queue of N descriptors holds N frames in flight
//   (the kernel's virtio_net reaches N by pushing the header into the skb's headroom); without it, a
//   2-descriptor chain and N/2 frames. The frame stays
//   where the caller put it (buffer offset 0, no headroom needed). pkt::TX_TCP_CSUM / TX_UDP_CSUM with
//   l2_len/l3_len -> NEEDS_CSUM with csum_start/csum_offset (VIRTIO_NET_F_CSUM; the checksum field holds
//   the pseudo-header's sum, as for the Intel parts); TX_IP_CSUM and TX_VLAN have no virtio equivalent
//   and are refused per frame (bad_length), as are checksums the device does not offer.
// Interrupts (PortOptions::interrupts, MSI-X): vector 0 = configuration changes (link: link_fd()),
// vector 1 + q = RX queue q (rx_fd(q), wait_rx); TX and control queues raise none. Without interrupts
// everything is polled and the device is asked for none.
// A device that lies on a queue (virtqueue.hpp: used index, id, length, wrap bit) stops that queue: the
// lie is counted (bad_head, or bad_length for a length), a warning names it, bursts on the queue return
// 0 from then on (queue_fault() says why) and its buffers stay with the device until the port closes.
// Destruction resets the device (no DMA after) and gives every buffer back to its pool.
class VirtioNet final : public Port {
public:
    VirtioNet(vfio::Device& device, dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools,
              const VirtioNetOptions& options = {});
    VirtioNet(vfio::Device& device, dma::IovaAllocator& iovas, dma::BufferPool& rx_pool,
              const VirtioNetOptions& options = {});
    ~VirtioNet();
    VirtioNet(const VirtioNet&) = delete;
    VirtioNet& operator=(const VirtioNet&) = delete;

    // nic::Port (port.hpp says what each guarantees).
    std::uint16_t rx_burst(std::uint16_t queue, std::span<Packet> out) noexcept override;
    std::uint16_t tx_burst(std::uint16_t queue, std::span<const Packet> pkts) noexcept override;
    std::uint32_t tx_reclaim(std::uint16_t queue) noexcept override;
    std::uint32_t rx_free_slots(std::uint16_t queue) const noexcept override;
    std::uint32_t tx_free_slots(std::uint16_t queue) const noexcept override;
    bool wait_rx(std::uint16_t queue, int timeout_ms) noexcept override;
    int rx_fd(std::uint16_t queue) const noexcept override;
    const char* driver() const noexcept override { return "virtio-net"; }
    const vfio::Device& device() const noexcept override { return *dev_; }
    std::uint16_t rx_queues() const noexcept override { return static_cast<std::uint16_t>(rx_.size()); }
    std::uint16_t tx_queues() const noexcept override { return static_cast<std::uint16_t>(tx_.size()); }
    std::uint32_t features() const noexcept override { return port_features_; }
    MacAddress mac() const noexcept override { return mac_; }
    bool link_up() const noexcept override;
    unsigned link_speed_mbps() const noexcept override;
    std::optional<LinkEvent> poll_link() noexcept override;
    int link_fd() const noexcept override { return interrupts_ ? dev_->irq_fd(kConfigVector) : -1; }
    std::uint64_t link_changes() const noexcept override { return link_changes_; }
    // Through the control queue (VIRTIO_NET_F_CTRL_RX); throw bardrive::Error when the device lacks it or
    // refuses. add_multicast() sends the whole multicast table (up to 64 groups).
    void set_promiscuous(bool on) override;
    void add_multicast(const MacAddress& group) override;
    QueueStats rx_stats(std::uint16_t queue) const noexcept override;
    QueueStats tx_stats(std::uint16_t queue) const noexcept override;
    const DeviceStats& device_stats() noexcept override { return device_stats_; }  // virtio-net keeps none

    // 1af4:1041 (virtio-net, modern) and 1af4:1000 (transitional; set-up refuses one without modern caps).
    static bool drives(std::uint16_t vendor, std::uint16_t device) noexcept;
    static std::unique_ptr<Port> open(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options);

    // What was negotiated and set up.
    const VirtioNetOptions& options() const noexcept { return options_; }
    std::uint64_t negotiated_features() const noexcept { return features_; }
    bool packed() const noexcept { return packed_; }
    bool event_idx() const noexcept { return event_idx_; }
    bool indirect() const noexcept { return indirect_; }              // TX frames take one ring descriptor each
    std::uint32_t rx_ring_size() const noexcept { return rx_size_; }  // descriptors per RX queue
    std::uint32_t tx_ring_size() const noexcept { return tx_size_; }  // descriptors per TX queue (see TX above)
    std::uint16_t mtu() const noexcept { return mtu_; }               // the device's (VIRTIO_NET_F_MTU), else 0
    std::uint16_t max_queue_pairs() const noexcept { return max_pairs_; }
    // Why a queue stopped (virtio::Fault::none while it runs).
    virtio::Fault rx_fault(std::uint16_t queue) const noexcept;
    virtio::Fault tx_fault(std::uint16_t queue) const noexcept;

    // A queue's ring memory as the device sees it, for lab tests that make the device lie through it.
    struct RingMemory {
        bool packed = false;
        std::uint32_t size = 0;       // descriptors
        void* desc = nullptr;         // vring_desc[size] or vring_packed_desc[size]
        void* driver = nullptr;       // vring_avail, or the driver's vring_packed_desc_event
        void* device = nullptr;       // vring_used, or the device's vring_packed_desc_event
        std::uint16_t next_used = 0;  // split: the used index the driver harvests next; packed: its slot
        bool used_wrap = false;       // packed: the lap the driver expects there
    };
    RingMemory rx_ring_memory(std::uint16_t queue) const noexcept;
    const virtio::PciTransport& transport() const noexcept { return transport_; }

    static constexpr std::uint32_t header_bytes = 12;  // struct virtio_net_hdr_v1
    static constexpr unsigned kConfigVector = 0;

private:
    struct RxQueue {
        std::optional<virtio::SplitRing> split;
        std::optional<virtio::PackedRing> packed;
        dma::BufferPool* pool = nullptr;
        std::vector<Packet> slots;  // per chain id: the buffer posted (data and iova at its start)
        std::uint16_t vq = 0;
        std::size_t notify = 0;
        std::uint32_t buf_len = 0;
        std::uint32_t refill_at = 0;
        QueueStats stats;
        bool fault_reported = false;
        std::byte* mem = nullptr;  // ring memory: descriptors, then driver and device areas
    };
    struct TxSlot {
        dma::BufferPool* pool;
        std::uint32_t buf;
    };
    struct TxQueue {
        std::optional<virtio::SplitRing> split;
        std::optional<virtio::PackedRing> packed;
        std::vector<TxSlot> slots;     // per chain id
        std::byte* headers = nullptr;  // one virtio_net_hdr slot per chain id
        std::uint64_t headers_iova = 0;
        std::uint16_t vq = 0;
        std::size_t notify = 0;
        QueueStats stats;
        bool fault_reported = false;
    };
    struct Control {
        std::optional<virtio::SplitRing> split;
        std::optional<virtio::PackedRing> packed;
        std::byte* buf = nullptr;  // command, then the ack byte at kAckOffset
        std::uint64_t iova = 0;
        std::uint16_t vq = 0;
        std::size_t notify = 0;
        bool broken = false;
    };

    void check_options(std::span<dma::BufferPool* const> rx_pools) const;
    void init(dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools);
    void negotiate();
    void read_config();
    void setup_queues(dma::IovaAllocator& iovas, std::span<dma::BufferPool* const> rx_pools);
    void configure_device();
    void wait_link();
    // Sends one control command (class, command, data) and waits for the device's ack; throws when the
    // device lacks a control queue, does not answer within control_timeout_ms, lies, or refuses.
    void control(std::uint8_t cls, std::uint8_t cmd, std::span<const std::byte> data, const char* what);
    void send_mac_table();
    void stop() noexcept;

    template <class R>
    std::uint16_t rx_on(std::uint16_t queue, RxQueue& q, R& ring, std::span<Packet> out) noexcept;
    template <class R>
    std::uint16_t tx_on(std::uint16_t queue, TxQueue& q, R& ring, std::span<const Packet> pkts) noexcept;
    template <class R>
    std::uint32_t reclaim_on(std::uint16_t queue, TxQueue& q, R& ring) noexcept;
    template <class R>
    void refill(RxQueue& q, R& ring) noexcept;
    void report_fault(const char* dir, std::uint16_t queue, virtio::Fault f, QueueStats& stats,
                      bool& reported) noexcept;
    bool has(unsigned feature) const noexcept { return features_ & virtio::bit(feature); }

    vfio::Device* dev_;
    VirtioNetOptions options_;
    virtio::PciTransport transport_;
    dma::Memory ring_memory_;
    dma::Mapping ring_mapping_;  // after ring_memory_: leaves the IOMMU first
    std::vector<RxQueue> rx_;
    std::vector<TxQueue> tx_;
    Control ctrl_;
    std::uint64_t offered_ = 0;
    std::uint64_t features_ = 0;
    std::uint32_t port_features_ = 0;
    bool packed_ = false;
    bool event_idx_ = false;
    bool indirect_ = false;
    bool interrupts_ = false;
    std::uint32_t rx_size_ = 0;
    std::uint32_t tx_size_ = 0;
    std::uint16_t max_pairs_ = 1;
    std::uint16_t mtu_ = 0;
    std::uint32_t max_frame_ = 1514;
    MacAddress mac_;
    std::vector<MacAddress> multicast_;
    bool promiscuous_ = false;
    bool link_up_ = true;
    std::uint64_t link_changes_ = 0;
    bool needs_reset_reported_ = false;
    DeviceStats device_stats_;
};

// The driver table's entry (nic/drivers.cpp): VirtioNet with PortOptions and VirtioNetOptions' defaults.
std::unique_ptr<Port> open_virtio_net(vfio::Device& device, dma::IovaAllocator& iovas,
                                      std::span<dma::BufferPool* const> rx_pools, const PortOptions& options);

}  // namespace bardrive::nic
