// nic::Igb talking to the kernel's own igb driver on the other NIC of the wire (lab preset `basic` with
// only NIC A bound to vfio-pci): bardrive -> kernel and kernel -> bardrive, every frame byte-exact and
// the counts exact. The kernel side is an AF_PACKET socket on NIC B's interface.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/fd.hpp"
#include "core/file.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/igb.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using nic::Igb;
using nic::Packet;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> words(const char* var) {
    std::vector<std::string> out;
    std::istringstream in(std::getenv(var) ? std::getenv(var) : "");
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// A one-line sysfs attribute, "" when it cannot be read.
std::string read_line(const std::string& path) { return file::try_read_text(path).value_or(""); }

// NIC B's interface under the kernel's igb: brought up (IPv6 off, so the kernel sends nothing of its own),
// with an AF_PACKET socket bound to it for test frames only.
struct KernelPort {
    explicit KernelPort(const std::string& bdf) {
        std::string net = "/sys/bus/pci/devices/" + bdf + "/net";
        REQUIRE(std::filesystem::exists(net));  // still driven by the kernel's igb
        name = std::filesystem::directory_iterator(net)->path().filename();
        std::ofstream(std::string("/proc/sys/net/ipv6/conf/") + name + "/disable_ipv6") << "1";
        sock = UniqueFd(::socket(AF_PACKET, SOCK_RAW, htons(nic::TEST_ETHERTYPE)));
        REQUIRE(sock.valid());
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
        REQUIRE(::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) == 0);
        ifr.ifr_flags |= IFF_UP;
        REQUIRE(::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) == 0);
        ifindex = static_cast<int>(if_nametoindex(name.c_str()));
        sockaddr_ll sll{};
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(nic::TEST_ETHERTYPE);
        sll.sll_ifindex = ifindex;
        REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) == 0);
        int rcvbuf = 8 << 20;
        ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
        mac = nic::MacAddress::parse(read_line("/sys/class/net/" + name + "/address"));
        auto end = Clock::now() + std::chrono::seconds(10);  // the kernel's igb watchdog reports carrier
        while (read_line("/sys/class/net/" + name + "/carrier") != "1" && Clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        REQUIRE(read_line("/sys/class/net/" + name + "/carrier") == "1");
    }
    bool send(const std::uint8_t* frame, std::size_t len) {
        sockaddr_ll to{};
        to.sll_family = AF_PACKET;
        to.sll_ifindex = ifindex;
        to.sll_halen = 6;
        std::memcpy(to.sll_addr, frame, 6);
        return ::sendto(sock.get(), frame, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
               static_cast<ssize_t>(len);
    }
    // One frame into buf, waiting up to timeout_ms; its length, or -1.
    ssize_t recv(std::uint8_t* buf, std::size_t cap, int timeout_ms) {
        pollfd p{sock.get(), POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return -1;
        return ::recv(sock.get(), buf, cap, 0);
    }
    std::string name;
    int ifindex = 0;
    UniqueFd sock;
    nic::MacAddress mac;
};

struct Bed {
    Bed() {
        if (!std::getenv("BARDRIVE_LAB"))
            SKIP("not in a lab guest: run it with lab/lab run basic --bind NIC_A -- <this binary>");
        auto nics = words("BARDRIVE_LAB_NICS"), bound = words("BARDRIVE_LAB_BOUND");
        REQUIRE(nics.size() >= 2);
        if (bound.size() != 1) SKIP("needs exactly NIC A bound to vfio-pci and NIC B left to the kernel's igb");
        std::string a_bdf = bound[0], b_bdf = nics[0] == a_bdf ? nics[1] : nics[0];
        kernel = std::make_unique<KernelPort>(b_bdf);
        domain = std::make_unique<vfio::Domain>();
        a_dev = std::make_unique<vfio::Device>(vfio::Device::open(*domain, pci::Bdf::parse(a_bdf)));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, 2048);
        a = std::make_unique<Igb>(*a_dev, *iovas, *pool);
    }
    std::unique_ptr<KernelPort> kernel;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a_dev;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
    std::unique_ptr<Igb> a;
};

std::uint32_t size_of(std::uint64_t seq) { return 60 + static_cast<std::uint32_t>(seq * 97 % 1455); }

}  // namespace

TEST_CASE("interop: bardrive sends, the kernel's igb receives every frame byte-exact") {
    Bed bed;
    const std::uint64_t n = 2000;
    std::uint64_t sent = 0, got = 0, bad = 0;
    std::vector<std::uint8_t> buf(2048);
    auto idle = Clock::now();
    while (got + bad < n && Clock::now() - idle < std::chrono::seconds(5)) {
        if (sent < n && sent - (got + bad) < 64) {  // a few batches in flight: the socket buffer never fills
            Packet batch[16];
            std::uint32_t k = 0;
            dma::BufferPool::Buffer b;
            while (k < 16 && sent + k < n && bed.pool->alloc(b)) {
                auto* d = reinterpret_cast<std::uint8_t*>(b.data);
                nic::write_test_frame(d, size_of(sent + k), bed.kernel->mac, bed.a->mac(), sent + k);
                batch[k] = Packet{d, b.iova, size_of(sent + k), b.index, bed.pool.get()};
                ++k;
            }
            std::uint16_t took = bed.a->tx_burst(0, std::span(batch, k));
            for (std::uint32_t i = took; i < k; ++i) Igb::release(batch[i]);
            sent += took;
        }
        ssize_t len = bed.kernel->recv(buf.data(), buf.size(), 1);
        if (len > 0) {
            idle = Clock::now();
            auto seq = nic::check_test_frame(buf.data(), static_cast<std::uint32_t>(len));
            if (seq && *seq == got + bad && static_cast<std::uint32_t>(len) == size_of(*seq))
                ++got;
            else
                ++bad;
        }
        bed.a->tx_reclaim(0);
    }
    INFO("sent " << sent << ", kernel got " << got << " intact, " << bad << " wrong");
    CHECK(bad == 0);
    CHECK(got == n);
    CHECK(bed.a->tx_stats(0).packets == n);
    CHECK(bed.a->device_stats().tx_packets == n);
}

TEST_CASE("interop: the kernel's igb sends, bardrive receives every frame byte-exact") {
    Bed bed;
    const std::uint64_t n = 2000;
    std::uint64_t sent = 0, got = 0, bad = 0;
    std::vector<std::uint8_t> frame(2048);
    auto idle = Clock::now();
    while (got + bad < n && Clock::now() - idle < std::chrono::seconds(5)) {
        if (sent < n && sent - (got + bad) < 64) {  // bardrive's ring holds 511: never overrun it
            nic::write_test_frame(frame.data(), size_of(sent), bed.a->mac(), bed.kernel->mac, sent);
            if (bed.kernel->send(frame.data(), size_of(sent))) ++sent;
        }
        Packet rx[32];
        std::uint16_t k = bed.a->rx_burst(0, rx);
        for (std::uint16_t i = 0; i < k; ++i) {
            auto seq = nic::check_test_frame(rx[i].data, rx[i].len);
            if (seq && *seq == got + bad && rx[i].len == size_of(*seq))
                ++got;
            else
                ++bad;
            Igb::release(rx[i]);
        }
        if (k) idle = Clock::now();
    }
    INFO("kernel sent " << sent << ", bardrive got " << got << " intact, " << bad << " wrong");
    CHECK(bad == 0);
    CHECK(got == n);
    CHECK(bed.a->rx_stats(0).packets == n);
    CHECK(bed.a->device_stats().rx_packets == n);
}
