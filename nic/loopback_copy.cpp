#include "nic/loopback_copy.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/rss.hpp"

namespace bardrive::nic {

namespace {
// Link-local addresses and a fixed destination port; each queue gets the first source port that RSS
// (as Igb programs it) maps to that queue.
constexpr std::uint32_t kSrcIp = 0xa9fe4201;  // 169.254.66.1
constexpr std::uint32_t kDstIp = 0xa9fe4202;  // 169.254.66.2
constexpr std::uint16_t kDstPort = 0xbd00;
constexpr std::uint16_t kFirstSrcPort = 49152;
// PSRCTL.BSIZE0 counts in 128 bytes: the smallest header buffer the 82574 offers.
constexpr std::uint32_t kE1000eHeaderSlot = 128;

std::uint32_t round_up(std::uint32_t v, std::uint32_t a) { return (v + a - 1) / a * a; }

// Big-endian (network order) field of `bytes` bytes.
void put(std::uint8_t* p, std::uint32_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (bytes - 1 - i)));
}

// Data bytes per frame a port was opened for, 0 if it was not opened as an engine port.
std::uint32_t payload_of(const IgbOptions& o) {
    if (o.loopback != Loopback::mac || !o.external_queues || o.rx_header_bytes != LoopbackQueue::header_slot ||
        o.promiscuous)
        return 0;
    std::uint32_t by_frame = o.max_frame - LoopbackQueue::header_bytes;
    std::uint32_t by_buffer = o.rx_buffer_bytes - LoopbackQueue::header_bytes;  // QEMU counts the header in
    return std::min(by_frame, by_buffer) / 1024 * 1024;
}

// Data bytes per frame an e1000e port was opened for, 0 if it was not opened as an engine port.
std::uint32_t payload_of(const E1000eOptions& o) {
    if (o.loopback != Loopback::mac || !o.external_queues || o.rx_header_bytes != kE1000eHeaderSlot || o.promiscuous)
        return 0;
    return std::min(o.max_frame - LoopbackQueue::header_bytes, o.rx_buffer_bytes) / 1024 * 1024;
}

void check_payload(std::uint32_t payload, std::uint32_t limit) {
    if (payload < 1024 || payload % 1024 != 0 || payload + LoopbackQueue::header_bytes > limit) {
        throw Error("configure loopback engine", log::concat(payload, " data bytes per frame"),
                    log::concat("frames carry 1 KiB to ", (limit - LoopbackQueue::header_bytes) / 1024,
                                " KiB of data, in whole KiB"));
    }
}

// The engine's fixed part: the payload, the UDP source port, and the header template: Ethernet to
// ourselves from ourselves, IPv4 (20 bytes, don't fragment, TTL 64), UDP. Total length, id, checksum
// and UDP length are filled per frame (LoopbackQueue::write_header).
LoopbackQueue engine(const QueuePair& qp, std::uint32_t payload, std::uint16_t port, const MacAddress& mac) {
    LoopbackQueue q{};
    q.qp = qp;
    q.payload = payload;
    q.port = port;
    std::uint8_t* h = q.header;
    std::copy(mac.bytes.begin(), mac.bytes.end(), h);
    std::copy(mac.bytes.begin(), mac.bytes.end(), h + 6);
    put(h + 12, 0x0800, 2);
    h[14] = 0x45;
    put(h + 20, 0x4000, 2);
    h[22] = 64;
    h[23] = 17;
    put(h + 26, kSrcIp, 4);
    put(h + 30, kDstIp, 4);
    put(h + 34, q.port, 2);
    put(h + 36, kDstPort, 2);
    q.status = LoopbackQueue::Status::ok;
    return q;
}
}  // namespace

IgbOptions loopback_port_options(std::uint16_t queues, std::uint32_t ring, std::uint32_t payload) {
    check_payload(payload, 9724);
    IgbOptions o;
    o.rx_queues = o.tx_queues = queues;
    o.rx_ring = o.tx_ring = ring;
    o.loopback = Loopback::mac;
    o.broadcast = false;
    o.mac = loopback_engine_mac;
    o.external_queues = true;
    o.rx_header_bytes = LoopbackQueue::header_slot;
    // QEMU's model counts the split header into the buffer when it checks for room: one KiB more.
    o.rx_buffer_bytes = round_up(payload + LoopbackQueue::header_bytes, 1024);
    o.max_frame = std::max<std::uint32_t>(1514, payload + LoopbackQueue::header_bytes);
    return o;
}

E1000eOptions loopback_e1000e_options(std::uint32_t ring, std::uint32_t payload) {
    check_payload(payload, 9014);
    E1000eOptions o;
    o.rx_ring = o.tx_ring = ring;
    o.loopback = Loopback::mac;
    o.broadcast = false;
    o.mac = loopback_engine_mac;
    o.external_queues = true;
    o.rx_header_bytes = kE1000eHeaderSlot;
    o.rx_buffer_bytes = payload;  // packet split: the header goes to its own buffer
    o.max_frame = std::max<std::uint32_t>(1514, payload + LoopbackQueue::header_bytes);
    return o;
}

LoopbackQueue make_loopback_queue(const Igb& port, std::uint16_t queue) {
    const IgbOptions& o = port.options();
    std::uint32_t payload = payload_of(o);
    if (payload == 0) {
        throw Error("open loopback DMA engine", port.device().bdf().str(),
                    "the port is not open as an engine (MAC loopback, external queues, header split)",
                    "open the nic::Igb with nic::loopback_port_options()");
    }
    QueuePair qp = port.queue_pair(queue);  // throws for a queue the port does not have
    std::uint16_t udp = kFirstSrcPort;
    if (o.rx_queues > 1) {
        while (rss_queue(rss_hash_ipv4(kSrcIp, kDstIp, udp, kDstPort), o.rx_queues) != queue) ++udp;
    }
    return engine(qp, payload, udp, port.mac());
}

LoopbackQueue make_loopback_queue(const E1000e& port) {
    std::uint32_t payload = payload_of(port.options());
    if (payload == 0) {
        throw Error("open loopback DMA engine", port.device().bdf().str(),
                    "the port is not open as an engine (MAC loopback, external queues, packet split)",
                    "open the nic::E1000e with nic::loopback_e1000e_options()");
    }
    return engine(port.queue_pair(), payload, kFirstSrcPort, port.mac());  // one queue: no RSS to steer
}

LoopbackCopy::LoopbackCopy(Igb& port, std::uint16_t queue) : q_(make_loopback_queue(port, queue)) {}
LoopbackCopy::LoopbackCopy(E1000e& port) : q_(make_loopback_queue(port)) {}

}  // namespace bardrive::nic
