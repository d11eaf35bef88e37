// An AF_XDP receiver (libxdp's xsk API) on one queue of an interface left to the kernel's driver: the
// kernel's fastest way to hand frames to userspace, which bardrive's rx_burst is weighed against.
// Built only with libxdp and libbpf (BARDRIVE_HAVE_LIBXDP); without them open() says so.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace bardrive::bench {

struct RxCount {
    std::uint64_t received = 0;
    std::uint64_t valid = 0;   // frames carrying pktgen's header (its magic after the UDP header)
    std::int64_t last_ns = 0;  // steady clock at the last arrival
};

// True when a received frame carries pktgen's header (magic 0xbe9be955 right after the UDP header).
bool is_pktgen_frame(const std::uint8_t* frame, std::uint32_t len) noexcept;

class AfXdpRx {
public:
    enum class Mode {
        zero_copy,     // native XDP, frames land in the socket's memory
        copy,          // native XDP, the kernel copies each frame
        generic_copy,  // generic (skb) XDP, for drivers without native XDP (igbvf)
    };
    // Binds a socket to `queue` of `ifname` in `mode` (libxdp loads its redirect program). Returns null and
    // sets `why` (the error, or that libxdp is missing).
    static std::unique_ptr<AfXdpRx> open(const std::string& ifname, unsigned queue, Mode mode, std::string& why);
    virtual ~AfXdpRx() = default;
    // Receives until `target` frames arrived (the sender sets it once it knows what it sent) or none
    // came for 2 s, taking up to `batch` descriptors per ring peek and sleeping in poll() when the ring
    // is empty.
    virtual RxCount receive(const std::atomic<std::uint64_t>& target, unsigned batch) = 0;
};

}  // namespace bardrive::bench
