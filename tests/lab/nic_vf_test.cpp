// nic::Igbvf on an 82576 virtual function while the kernel's igb keeps the PF (lab preset basic, only NIC A
// bound to vfio-pci; NIC B is the PF): the PF makes 2 VFs, bardrive drives VF 0 through nic::open_port, the
// kernel's igbvf drives VF 1 where the guest kernel has it. Frames both ways with NIC A (bardrive's igb, across
// the wire) and with VF 1 (inside the PF's switch), byte-exact and counted; the MAC and the port VLAN the PF
// assigns (ip link set PF vf 0 mac/vlan) are the ones the VF uses; the PF going down and up is seen and
// survived; RX straight into the window from the VF.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/file.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/peer_window.hpp"
#include "lab_env.hpp"
#include "nic/igbvf/igbvf.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"
#include "vfio/sysfs.hpp"

using namespace bardrive;
using nic::Packet;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const nic::MacAddress kVf0Mac = nic::MacAddress::parse("02:00:00:00:0f:00");
const nic::MacAddress kVf1Mac = nic::MacAddress::parse("02:00:00:00:0f:01");

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
std::string read_line(const std::string& path) {
    std::string s = file::try_read_text(path).value_or("");
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}
bool write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    f.flush();
    return f.good();
}
std::string netdev_of(const std::string& bdf) {
    const fs::path net = fs::path("/sys/bus/pci/devices") / bdf / "net";
    if (!fs::exists(net)) return "";
    return fs::directory_iterator(net)->path().filename();
}

// The PF (NIC B on the kernel's igb) with 2 VFs and their MACs set, VF 0 on vfio-pci, VF 1 on igbvf when the
// kernel has it; NIC A and VF 0 open in one IOMMU domain. Undone at the end (VFs removed).
struct Bed {
    // vf1_to_vfio: VF 1 to vfio-pci too (for another process), instead of the kernel's igbvf.
    explicit Bed(bool vf1_to_vfio = false) {
        if (!std::getenv("BARDRIVE_LAB"))
            SKIP("not in a lab guest: run it with lab/lab run basic --bind NIC_A -- <this binary>");
        auto nics = labenv::bdfs("BARDRIVE_LAB_NICS"), bound = labenv::bdfs("BARDRIVE_LAB_BOUND");
        REQUIRE(nics.size() >= 2);
        const bool a_bound = std::find(bound.begin(), bound.end(), nics[0]) != bound.end();
        const bool b_bound = std::find(bound.begin(), bound.end(), nics[1]) != bound.end();
        if (!a_bound || b_bound) SKIP("needs NIC A bound to vfio-pci and NIC B left to the kernel's igb");
        a_bdf = nics[0];
        pf = nics[1].str();
        pf_if = netdev_of(pf);
        if (pf_if.empty()) SKIP("NIC B is not on the kernel's igb (no network interface)");
        const std::string sys = "/sys/bus/pci/devices/" + pf;
        write_text(sys + "/sriov_numvfs", "0");
        // igbvf is not loaded yet (each Bed unloads it), so no driver takes the new VFs before their MACs are set
        // (a VF driver reads its MAC when it binds).
        REQUIRE(write_text(sys + "/sriov_numvfs", "2"));
        REQUIRE(sh("ip link set dev " + pf_if + " up"));
        REQUIRE(sh("ip link set dev " + pf_if + " vf 0 mac " + kVf0Mac.str()));
        REQUIRE(sh("ip link set dev " + pf_if + " vf 1 mac " + kVf1Mac.str()));
        vf0 = pci::Bdf::parse(fs::read_symlink(sys + "/virtfn0").filename().string());
        vf1 = pci::Bdf::parse(fs::read_symlink(sys + "/virtfn1").filename().string());
        vfio::BindOptions bo;
        bo.state_dir = "/tmp/bardrive-vf-test";
        vfio::bind(vfio::Sysfs(), vf1_to_vfio ? std::vector<pci::Bdf>{vf0, vf1} : std::vector<pci::Bdf>{vf0}, bo);
        // VF 1 to the kernel's igbvf, from the guest's module tree (docs/lab.md).
        if (!vf1_to_vfio &&
            sh("/usr/sbin/modprobe -d /.lab/kernel igbvf")) {  // takes VF 1, VF 0 being on vfio-pci already
            labenv::wait_for([&] { return !netdev_of(vf1.str()).empty(); }, std::chrono::seconds(10));
            vf1_if = netdev_of(vf1.str());
        }
        // The PF's link must be up before a VF may reset (the PF answers RSTD then).
        REQUIRE(labenv::wait_for([&] { return read_line("/sys/class/net/" + pf_if + "/carrier") == "1"; },
                                 std::chrono::seconds(10)));
        domain = std::make_unique<vfio::Domain>();
        a_dev = std::make_unique<vfio::Device>(vfio::Device::open(*domain, a_bdf));
        vf_dev = std::make_unique<vfio::Device>(vfio::Device::open(*domain, vf0));
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, 4096);
        a = nic::open_port(*a_dev, *iovas, *pool);
    }
    ~Bed() {
        vf.reset();  // the ports, their buffers, the domain's mappings, then the devices: VF 0 closed before the VFs go
        a.reset();
        pool.reset();
        iovas.reset();
        vf_dev.reset();
        a_dev.reset();
        domain.reset();
        write_text("/sys/bus/pci/devices/" + pf + "/sriov_numvfs", "0");
        sh("/usr/sbin/rmmod igbvf");
    }
    std::unique_ptr<nic::Port> open_vf(nic::PortOptions o = {}) { return nic::open_port(*vf_dev, *iovas, *pool, o); }

    pci::Bdf a_bdf, vf0, vf1;
    std::string pf, pf_if, vf1_if;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a_dev, vf_dev;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
    std::unique_ptr<nic::Port> a, vf;
};

std::uint32_t length_of(std::uint64_t seq) { return 60 + static_cast<std::uint32_t>(seq * 37 % 1455); }

// `count` test frames from tx to rx (to `to`), at most 16 in flight; how many came back byte-exact and in order.
// A frame may arrive with a VLAN tag the PF inserted (`tag`): then it is checked without it.
std::uint64_t exchange(nic::Port& tx, nic::Port& rx, const nic::MacAddress& to, dma::BufferPool& pool,
                       std::uint64_t count, std::uint16_t tag = 0, dma::BufferPool* rx_window = nullptr) {
    std::uint64_t sent = 0, good = 0, seen = 0;
    auto idle = Clock::now();
    std::vector<std::uint8_t> untagged(2048);
    while (seen < count && Clock::now() - idle < std::chrono::seconds(5)) {
        dma::BufferPool::Buffer buf;
        if (sent < count && sent - seen < 16 && pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, length_of(sent), to, tx.mac(), sent);
            Packet p{d, buf.iova, length_of(sent), buf.index, &pool};
            if (tx.tx_burst(0, std::span(&p, 1)) == 1)
                ++sent;
            else
                pool.free(buf.index);
        }
        Packet got[16];
        const std::uint16_t n = rx.rx_burst(0, got);
        for (std::uint16_t i = 0; i < n; ++i, ++seen) {
            const std::uint8_t* f = got[i].data;
            std::uint32_t len = got[i].len;
            if (tag && len >= 18 && f[12] == 0x81 && f[13] == 0x00 && (((f[14] << 8) | f[15]) & 0xfff) == tag) {
                std::memcpy(untagged.data(), f, 12);
                std::memcpy(untagged.data() + 12, f + 16, len - 16);
                f = untagged.data();
                len -= 4;
            } else if (tag) {
                len = 0;  // untagged where the tag was due: wrong
            }
            auto seq = len ? nic::check_test_frame(f, len) : std::nullopt;
            if (seq && *seq == seen && len == length_of(seen)) ++good;
            if (rx_window) CHECK(got[i].pool == rx_window);
            nic::Port::release(got[i]);
        }
        if (n) idle = Clock::now();
        tx.tx_reclaim(0);
    }
    return good;
}

}  // namespace

TEST_CASE("VF: the driver the IDs call for, the MAC the PF assigned, frames both ways with NIC A across the wire") {
    Bed bed;
    bed.vf = bed.open_vf();
    CHECK(std::string(bed.vf->driver()) == "igbvf");
    CHECK(bed.vf->mac() == kVf0Mac);  // ip link set PF vf 0 mac ...
    CHECK(bed.vf->link_up());
    bed.vf->device_stats();
    const std::uint64_t n = 300;
    CHECK(exchange(*bed.vf, *bed.a, bed.a->mac(), *bed.pool, n) == n);
    CHECK(exchange(*bed.a, *bed.vf, kVf0Mac, *bed.pool, n) == n);
    CHECK(bed.vf->tx_stats(0).packets == n);
    CHECK(bed.vf->rx_stats(0).packets == n);
    CHECK(bed.vf->rx_stats(0).bad_length == 0);
    const nic::DeviceStats& d = bed.vf->device_stats();
    CHECK(d.tx_packets == n);
    CHECK(d.rx_packets == n);
}

TEST_CASE("VF: frames with the kernel's igbvf on VF 1, through the PF's switch, both ways") {
    Bed bed;
    if (bed.vf1_if.empty()) SKIP("the guest kernel has no igbvf module: VF 1 has no kernel driver");
    bed.vf = bed.open_vf();
    REQUIRE(sh("ip link set dev " + bed.vf1_if + " up"));
    CHECK(read_line("/sys/class/net/" + bed.vf1_if + "/address") == kVf1Mac.str());
    UniqueFd sock(::socket(AF_PACKET, SOCK_RAW, htons(nic::TEST_ETHERTYPE)));
    REQUIRE(sock.valid());
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(nic::TEST_ETHERTYPE);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(bed.vf1_if.c_str()));
    REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) == 0);
    labenv::wait_for([&] { return read_line("/sys/class/net/" + bed.vf1_if + "/carrier") == "1"; },
                     std::chrono::seconds(10));
    const std::uint64_t n = 100;
    std::uint64_t got = 0;
    std::vector<std::uint8_t> buf(2048);
    for (std::uint64_t i = 0; i < n; ++i) {  // bardrive's VF 0 -> the kernel's VF 1
        dma::BufferPool::Buffer b;
        REQUIRE(bed.pool->alloc(b));
        nic::write_test_frame(reinterpret_cast<std::uint8_t*>(b.data), length_of(i), kVf1Mac, kVf0Mac, i);
        Packet p{reinterpret_cast<std::uint8_t*>(b.data), b.iova, length_of(i), b.index, bed.pool.get()};
        REQUIRE(bed.vf->tx_burst(0, std::span(&p, 1)) == 1);
        pollfd pf{sock.get(), POLLIN, 0};
        if (::poll(&pf, 1, 2000) > 0) {
            const ssize_t len = ::recv(sock.get(), buf.data(), buf.size(), 0);
            auto seq = nic::check_test_frame(buf.data(), static_cast<std::uint32_t>(len));
            if (seq && *seq == i && static_cast<std::uint32_t>(len) == length_of(i)) ++got;
        }
        bed.vf->tx_reclaim(0);
    }
    CHECK(got == n);
    std::uint64_t back = 0;
    for (std::uint64_t i = 0; i < n; ++i) {  // the kernel's VF 1 -> bardrive's VF 0
        nic::write_test_frame(buf.data(), length_of(i), kVf0Mac, kVf1Mac, i);
        sockaddr_ll to = sll;
        to.sll_halen = 6;
        std::memcpy(to.sll_addr, kVf0Mac.bytes.data(), 6);
        REQUIRE(::sendto(sock.get(), buf.data(), length_of(i), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
                static_cast<ssize_t>(length_of(i)));
        Packet rx[4];
        std::uint16_t k = 0;
        labenv::wait_for([&] { return (k = bed.vf->rx_burst(0, rx)) > 0; }, std::chrono::seconds(2));
        for (std::uint16_t j = 0; j < k; ++j) {
            if (nic::check_test_frame(rx[j].data, rx[j].len) == i && rx[j].len == length_of(i)) ++back;
            nic::Port::release(rx[j]);
        }
    }
    CHECK(back == n);
}

TEST_CASE("VF: a port VLAN the PF sets (ip link set PF vf 0 vlan 100) tags every frame the VF sends") {
    Bed bed;
    REQUIRE(sh("ip link set dev " + bed.pf_if + " vf 0 vlan 100"));
    bed.vf = bed.open_vf();
    const std::uint64_t n = 50;
    // NIC A sees each frame tagged 100 (it strips nothing); frames to the VF must carry the tag to reach it.
    CHECK(exchange(*bed.vf, *bed.a, bed.a->mac(), *bed.pool, n, 100) == n);
    sh("ip link set dev " + bed.pf_if + " vf 0 vlan 0");
}

TEST_CASE("VF: the PF going down is seen (link down, then a reset to take), and the VF works again after") {
    Bed bed;
    bed.vf = bed.open_vf();
    auto* vf = dynamic_cast<nic::Igbvf*>(bed.vf.get());
    REQUIRE(vf);
    CHECK(exchange(*bed.vf, *bed.a, bed.a->mac(), *bed.pool, 20) == 20);
    CHECK_FALSE(vf->poll_link());
    REQUIRE(sh("ip link set dev " + bed.pf_if + " down"));
    std::optional<nic::LinkEvent> down;
    CHECK(labenv::wait_for([&] { return (down = vf->poll_link()).has_value(); }, std::chrono::seconds(10)));
    REQUIRE(down);
    CHECK_FALSE(down->up);
    REQUIRE(sh("ip link set dev " + bed.pf_if + " up"));
    REQUIRE(labenv::wait_for([&] { return read_line("/sys/class/net/" + bed.pf_if + "/carrier") == "1"; },
                             std::chrono::seconds(10)));
    // The PF reset its VFs on the way down and up: the driver says so, reset() takes the VF up again.
    if (vf->needs_reset()) vf->reset();
    std::optional<nic::LinkEvent> up;
    CHECK(labenv::wait_for([&] { return (up = vf->poll_link()).has_value(); }, std::chrono::seconds(10)));
    CHECK(vf->link_up());
    CHECK(vf->mac() == kVf0Mac);
    CHECK(exchange(*bed.vf, *bed.a, bed.a->mac(), *bed.pool, 20) == 20);
    CHECK(exchange(*bed.a, *bed.vf, kVf0Mac, *bed.pool, 20) == 20);
    CHECK(vf->link_changes() >= 2);
}

TEST_CASE("VF: RX straight into the window's BAR (p2p from a VF)") {
    Bed bed;
    auto windows = labenv::bdfs("BARDRIVE_LAB_WINDOWS");
    REQUIRE(!windows.empty());
    auto win_dev = vfio::Device::open(*bed.domain, windows[0]);
    if (bed.domain->backend() != vfio::Backend::type1) {  // iommufd maps no BAR by its user address
        CHECK_THROWS_WITH(dma::PeerWindow::map(*bed.domain, *bed.iovas, win_dev, 2),
                          Catch::Matchers::ContainsSubstring("by design"));
        SKIP("peer windows need the type1 backend; " << vfio::to_string(bed.domain->backend())
                                                     << " refused, as it should");
    }
    auto window = dma::PeerWindow::map(*bed.domain, *bed.iovas, win_dev, 2);
    dma::BufferPool win_pool(window, 2048);
    bed.vf = nic::open_port(*bed.vf_dev, *bed.iovas, win_pool);
    CHECK(exchange(*bed.a, *bed.vf, kVf0Mac, *bed.pool, 200, 0, &win_pool) == 200);
    bed.vf.reset();
}

TEST_CASE("VF: what the PF does not grant is refused with the reason") {
    Bed bed;
    using Catch::Matchers::ContainsSubstring;
    nic::PortOptions promisc;
    promisc.promiscuous = true;
    CHECK_THROWS_WITH(bed.open_vf(promisc), ContainsSubstring("no promiscuous mode"));
    nic::PortOptions two;
    two.rx_queues = 2;
    CHECK_THROWS_WITH(bed.open_vf(two), ContainsSubstring("one queue pair"));
    // A MAC other than the one the administrator assigned: the PF refuses it, the error names both.
    nic::PortOptions other;
    other.mac = nic::MacAddress::parse("02:00:00:00:0e:0e");
    CHECK_THROWS_WITH(bed.open_vf(other),
                      ContainsSubstring("refused 02:00:00:00:0e:0e") && ContainsSubstring(kVf0Mac.str()));
    bed.vf = bed.open_vf();  // and the VF still comes up after the refusals
    CHECK(bed.vf->mac() == kVf0Mac);
}

TEST_CASE("VF: two processes drive the two VFs of one PF at once, each in its own IOMMU group and domain") {
    Bed bed(true);
    const std::uint64_t n = 100;
    int ready[2], done[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(done) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // VF 1 in a process of its own: its own container, device, pool and port
        int status = 1;
        try {
            vfio::Domain domain;
            auto dev = vfio::Device::open(domain, bed.vf1);
            dma::IovaAllocator iovas(domain);
            dma::BufferPool pool(domain, iovas, 2048, 1024);
            auto port = nic::open_port(dev, iovas, pool);
            const char c = port->mac() == kVf1Mac ? 'y' : 'n';
            if (::write(ready[1], &c, 1) != 1) ::_exit(3);
            std::uint64_t good = 0, seen = 0;
            const auto end = Clock::now() + std::chrono::seconds(30);
            while (seen < n && Clock::now() < end) {
                Packet got[16];
                const std::uint16_t k = port->rx_burst(0, got);
                for (std::uint16_t i = 0; i < k; ++i, ++seen) {
                    if (nic::check_test_frame(got[i].data, got[i].len) == seen && got[i].len == length_of(seen)) ++good;
                    nic::Port::release(got[i]);
                }
            }
            status = good == n ? 0 : 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "VF 1 process: %s\n", e.what());
            status = 2;
        }
        const char c = static_cast<char>('0' + status);
        if (::write(done[1], &c, 1) != 1) ::_exit(3);
        ::_exit(status);  // no destructors of the parent's objects here
    }
    char c = 0;
    pollfd pr{ready[0], POLLIN, 0};
    REQUIRE(::poll(&pr, 1, 30000) == 1);
    REQUIRE(::read(ready[0], &c, 1) == 1);
    CHECK(c == 'y');  // VF 1 got the MAC the PF assigned it
    bed.vf = bed.open_vf();
    // NIC A sends n frames to each VF, interleaved; this process receives VF 0's, the other VF 1's.
    std::uint64_t good0 = 0, seen0 = 0, sent = 0;
    auto idle = Clock::now();
    while ((sent < 2 * n || seen0 < n) && Clock::now() - idle < std::chrono::seconds(10)) {
        dma::BufferPool::Buffer b;
        if (sent < 2 * n && bed.pool->alloc(b)) {
            const std::uint64_t seq = sent / 2;
            const nic::MacAddress& to = sent % 2 == 0 ? kVf0Mac : kVf1Mac;
            nic::write_test_frame(reinterpret_cast<std::uint8_t*>(b.data), length_of(seq), to, bed.a->mac(), seq);
            Packet p{reinterpret_cast<std::uint8_t*>(b.data), b.iova, length_of(seq), b.index, bed.pool.get()};
            if (bed.a->tx_burst(0, std::span(&p, 1)) == 1) {
                ++sent;
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            } else {
                bed.pool->free(b.index);
            }
        }
        Packet got[16];
        const std::uint16_t k = bed.vf->rx_burst(0, got);
        for (std::uint16_t i = 0; i < k; ++i, ++seen0) {
            if (nic::check_test_frame(got[i].data, got[i].len) == seen0 && got[i].len == length_of(seen0)) ++good0;
            nic::Port::release(got[i]);
        }
        if (k) idle = Clock::now();
        bed.a->tx_reclaim(0);
    }
    CHECK(good0 == n);
    pollfd pd{done[0], POLLIN, 0};
    REQUIRE(::poll(&pd, 1, 40000) == 1);
    REQUIRE(::read(done[0], &c, 1) == 1);
    CHECK(c == '0');  // every frame to VF 1 arrived in the other process, byte-exact and in order
    int st = 0;
    ::waitpid(child, &st, 0);
    CHECK(WIFEXITED(st));
}
