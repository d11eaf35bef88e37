#include "nic/e1000/engine.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/rss.hpp"

namespace bardrive::nic::e1000 {

namespace {
// Link-local addresses and a fixed destination port; each queue gets the first source port that RSS
// maps to that queue.
constexpr std::uint32_t kSrcIp = 0xa9fe4201;  // 169.254.66.1
constexpr std::uint32_t kDstIp = 0xa9fe4202;  // 169.254.66.2
constexpr std::uint16_t kDstPort = 0xbd00;
constexpr std::uint16_t kFirstSrcPort = 49152;

// Big-endian (network order) field of `bytes` bytes.
void put(std::uint8_t* p, std::uint32_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (bytes - 1 - i)));
}
}  // namespace

void check_engine_payload(const std::string& who, std::uint32_t payload, std::uint32_t longest_frame) {
    if (payload < 1024 || payload % 1024 != 0 || payload + LoopbackQueue::header_bytes > longest_frame) {
        throw Error("configure loopback engine", who, log::concat(payload, " data bytes per frame"),
                    log::concat("frames carry 1 KiB to ", (longest_frame - LoopbackQueue::header_bytes) / 1024,
                                " KiB of data, in whole KiB"));
    }
}

std::uint16_t engine_udp_port(std::uint16_t queue, std::uint16_t queues) {
    std::uint16_t udp = kFirstSrcPort;
    if (queues > 1) {
        while (rss_queue(rss_hash_ipv4(kSrcIp, kDstIp, udp, kDstPort), queues) != queue) ++udp;
    }
    return udp;
}

// The header template: Ethernet to ourselves from ourselves, IPv4 (20 bytes, don't fragment, TTL 64),
// UDP. Total length, id, checksum and UDP length are filled per frame (LoopbackQueue::write_header).
LoopbackQueue make_engine_queue(const QueuePair& qp, std::uint32_t payload, std::uint16_t udp_port,
                                const MacAddress& mac) {
    LoopbackQueue q{};
    q.qp = qp;
    q.payload = payload;
    q.port = udp_port;
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

}  // namespace bardrive::nic::e1000
