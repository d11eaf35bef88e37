// What every NIC driver counts and reports, whatever the chip: per-queue counters kept by the driver,
// the device's own counters where it has them, and link changes.
#pragma once

#include <cstdint>

namespace bardrive::nic {

// Counters the driver keeps per queue (the data path never touches the device to count).
struct QueueStats {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t doorbells = 0;     // tail writes / notifications: one per batch that moved the ring
    std::uint64_t bad_length = 0;    // rx: impossible length from the device; tx: frames refused
    std::uint64_t chained = 0;       // rx: frames spread over several buffers (dropped)
    std::uint64_t frame_errors = 0;  // rx: the device flagged the frame bad (dropped)
    std::uint64_t no_buffers = 0;    // rx: refills that found the pool empty
    std::uint64_t bad_head = 0;      // tx: a completion index out of range (ignored); rx: a used entry that lied
};

// The device's own counters, accumulated since the port was opened. A driver whose device keeps none
// (virtio-net) leaves them 0 and does not report feature::DEVICE_COUNTERS.
struct DeviceStats {
    std::uint64_t rx_packets = 0;     // good packets received (GPRC)
    std::uint64_t tx_packets = 0;     // good packets sent (GPTC)
    std::uint64_t rx_bytes = 0;       // good octets received, CRC included (GORC)
    std::uint64_t tx_bytes = 0;       // good octets sent, CRC included (GOTC)
    std::uint64_t rx_total = 0;       // every packet received (TPR)
    std::uint64_t tx_total = 0;       // every packet sent (TPT)
    std::uint64_t rx_broadcast = 0;   // BPRC
    std::uint64_t rx_multicast = 0;   // MPRC
    std::uint64_t rx_missed = 0;      // no room in the device (MPC)
    std::uint64_t rx_no_buffers = 0;  // no descriptor posted (RNBC)
    std::uint64_t rx_undersize = 0;   // RUC
    std::uint64_t rx_oversize = 0;    // ROC
    std::uint64_t crc_errors = 0;     // CRCERRS
};

// A change of link state that Port::poll_link() reports.
struct LinkEvent {
    bool up = false;
    unsigned speed_mbps = 0;  // when up: the speed, or 0 where the device does not say (virtio-net)
};

}  // namespace bardrive::nic
