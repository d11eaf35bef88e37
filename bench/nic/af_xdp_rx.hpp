// An AF_XDP receiver (libxdp's xsk API) on one queue of an interface left to the kernel's driver: the
// kernel's fastest way to hand frames to userspace, which bardrive's rx_burst is weighed against.
// Built only with libxdp and libbpf (BARDRIVE_HAVE_LIBXDP); without them open() says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace bardrive::bench {

struct RxCount {
    std::uint64_t received = 0;
    std::uint64_t in_order = 0;  // pktgen sequence numbers 0, 1, 2, ... in arrival order
    std::int64_t last_ns = 0;    // steady clock at the last arrival
};

// Reads pktgen's header in a received frame: true when it carries pktgen's magic; `seq` its number.
bool pktgen_seq(const std::uint8_t* frame, std::uint32_t len, std::uint32_t& seq) noexcept;

class AfXdpRx {
public:
    // Binds a socket to `queue` of `ifname` in native XDP mode (libxdp loads its redirect program),
    // copy mode or zero-copy. Returns null and sets `why` (the error, or that libxdp is missing).
    static std::unique_ptr<AfXdpRx> open(const std::string& ifname, unsigned queue, bool zerocopy, std::string& why);
    virtual ~AfXdpRx() = default;
    // Receives until `count` frames arrived or none came for 2 s, taking up to `batch` descriptors per
    // ring peek and sleeping in poll() when the ring is empty.
    virtual RxCount receive(std::uint64_t count, unsigned batch) = 0;
};

}  // namespace bardrive::bench
