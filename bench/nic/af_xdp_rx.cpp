#include "bench/nic/af_xdp_rx.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>

#ifdef BARDRIVE_HAVE_LIBXDP
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>
#endif

namespace bardrive::bench {

bool is_pktgen_frame(const std::uint8_t* frame, std::uint32_t len) noexcept {
    constexpr std::uint32_t at = 42;  // Ethernet 14 + IPv4 20 + UDP 8, then pktgen_hdr {magic, seq, ...}
    if (len < at + 4) return false;
    std::uint32_t magic = 0;
    std::memcpy(&magic, frame + at, 4);
    return ntohl(magic) == 0xbe9be955;
}

#ifdef BARDRIVE_HAVE_LIBXDP

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

constexpr std::uint32_t kFrames = 4096;
constexpr std::uint32_t kFrameSize = XSK_UMEM__DEFAULT_FRAME_SIZE;
constexpr std::uint32_t kRing = 2048;

class XskRx final : public AfXdpRx {
public:
    ~XskRx() override {
        if (xsk_) xsk_socket__delete(xsk_);
        if (umem_) xsk_umem__delete(umem_);
        if (area_ != MAP_FAILED) ::munmap(area_, std::size_t{kFrames} * kFrameSize);
    }

    bool init(const std::string& ifname, unsigned queue, Mode mode, std::string& why) {
        const bool zerocopy = mode == Mode::zero_copy;
        area_ = ::mmap(nullptr, std::size_t{kFrames} * kFrameSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (area_ == MAP_FAILED) return fail(why, "mmap of the UMEM", errno);
        xsk_umem_config uc{};
        uc.fill_size = kRing;
        uc.comp_size = kRing;
        uc.frame_size = kFrameSize;
        uc.frame_headroom = 0;
        if (int e = xsk_umem__create(&umem_, area_, std::uint64_t{kFrames} * kFrameSize, &fq_, &cq_, &uc))
            return fail(why, "xsk_umem__create", -e);
        xsk_socket_config sc{};
        sc.rx_size = kRing;
        sc.tx_size = 0;
        sc.xdp_flags = mode == Mode::generic_copy ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
        sc.bind_flags = static_cast<std::uint16_t>((zerocopy ? XDP_ZEROCOPY : XDP_COPY) | XDP_USE_NEED_WAKEUP);
        if (int e = xsk_socket__create(&xsk_, ifname.c_str(), queue, umem_, &rx_, nullptr, &sc))
            return fail(why, zerocopy ? "xsk_socket__create (zero-copy)" : "xsk_socket__create (copy mode)", -e);
        std::uint32_t idx = 0;
        if (xsk_ring_prod__reserve(&fq_, kRing, &idx) != kRing) return fail(why, "filling the fill ring", ENOSPC);
        for (std::uint32_t i = 0; i < kRing; ++i)
            *xsk_ring_prod__fill_addr(&fq_, idx + i) = std::uint64_t{i} * kFrameSize;
        xsk_ring_prod__submit(&fq_, kRing);
        return true;
    }

    RxCount receive(const std::atomic<std::uint64_t>& target, unsigned batch) override {
        RxCount r;
        pollfd pfd{xsk_socket__fd(xsk_), POLLIN, 0};
        std::int64_t last = now_ns();
        while (r.received < target.load()) {
            std::uint32_t idx = 0;
            std::uint32_t n = xsk_ring_cons__peek(&rx_, batch, &idx);
            if (n == 0) {
                if (now_ns() - last > 2'000'000'000) break;
                ::poll(&pfd, 1, 100);
                continue;
            }
            std::uint32_t fidx = 0;
            while (xsk_ring_prod__reserve(&fq_, n, &fidx) != n) {
            }
            for (std::uint32_t i = 0; i < n; ++i) {
                const xdp_desc* d = xsk_ring_cons__rx_desc(&rx_, idx + i);
                std::uint64_t addr = xsk_umem__extract_addr(d->addr);
                if (is_pktgen_frame(static_cast<const std::uint8_t*>(xsk_umem__get_data(area_, d->addr)), d->len))
                    ++r.valid;
                ++r.received;
                *xsk_ring_prod__fill_addr(&fq_, fidx + i) = addr;
            }
            xsk_ring_prod__submit(&fq_, n);
            xsk_ring_cons__release(&rx_, n);
            last = r.last_ns = now_ns();
        }
        return r;
    }

private:
    static bool fail(std::string& why, const char* what, int err) {
        why = std::string(what) + ": " + std::strerror(err);
        return false;
    }
    void* area_ = MAP_FAILED;
    xsk_umem* umem_ = nullptr;
    xsk_socket* xsk_ = nullptr;
    xsk_ring_prod fq_{};
    xsk_ring_cons cq_{};
    xsk_ring_cons rx_{};
};

}  // namespace

std::unique_ptr<AfXdpRx> AfXdpRx::open(const std::string& ifname, unsigned queue, Mode mode, std::string& why) {
    auto rx = std::make_unique<XskRx>();
    if (!rx->init(ifname, queue, mode, why)) return nullptr;
    return rx;
}

#else

std::unique_ptr<AfXdpRx> AfXdpRx::open(const std::string&, unsigned, Mode, std::string& why) {
    why = "built without libxdp/libbpf (install libxdp-dev libbpf-dev and reconfigure)";
    return nullptr;
}

#endif

}  // namespace bardrive::bench
