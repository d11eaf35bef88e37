// nic::VirtioNet on the virtio preset's two virtio-net-pci NICs (both bound to vfio-pci, bardrive on
// both ends): frames both ways byte-exact and counted at 64 and 1514 bytes with every ring format the
// device offers (split always; packed where offered: lab/lab run virtio --virtio-net packed=on), with and
// without EVENT_IDX; interrupts per RX queue; the host pulling NIC A's cable (QMP set_link) seen by
// poll_link and the configuration vector; a used ring poisoned in DMA memory (every lie virtqueue.hpp
// checks) costing one counted error and a stopped queue, the buffers back in the pool at close; set-up
// refusals; several queue pairs where the device offers them.
#include <poll.h>
#include <unistd.h>

// Linux's uapi header names a field `class` (struct virtio_net_ctrl_hdr): renamed for C++.
#define class class_
#include <linux/virtio_net.h>
#undef class

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "lab_env.hpp"
#include "nic/test_frame.hpp"
#include "nic/virtio/pci_transport.hpp"
#include "nic/virtio/virtio_net.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using nic::Packet;
using nic::VirtioNet;
using nic::VirtioNetOptions;
using nic::virtio::Fault;

namespace {

constexpr std::uint32_t kBuffers = 1000;  // 2 MiB of 2 KiB buffers: one hugepage, so no-IOMMU mode can map it

struct Bed {
    Bed() {
        if (!std::getenv("BARDRIVE_LAB"))
            SKIP("not in a lab guest: run it with lab/lab run virtio [--virtio-net packed=on] --bind all -- <this>");
        nics = labenv::bdfs("BARDRIVE_LAB_NICS");
        REQUIRE(nics.size() >= 2);
        domain = std::make_unique<vfio::Domain>();
        a = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[0]));
        b = std::make_unique<vfio::Device>(vfio::Device::open(*domain, nics[1]));
        if (a->config_read16(0) != nic::virtio::VENDOR_VIRTIO) SKIP("the preset's NICs are not virtio-net");
        iovas = std::make_unique<dma::IovaAllocator>(*domain);
        pool = std::make_unique<dma::BufferPool>(*domain, *iovas, 2048, kBuffers);
        // What the device offers, read before any port resets it.
        offered = nic::virtio::PciTransport(*a).device_features();
    }
    std::unique_ptr<VirtioNet> open(vfio::Device& d, const VirtioNetOptions& o) {
        return std::make_unique<VirtioNet>(d, *iovas, *pool, o);
    }
    bool offers(unsigned f) const { return offered & nic::virtio::bit(f); }
    std::vector<pci::Bdf> nics;
    std::unique_ptr<vfio::Domain> domain;
    std::unique_ptr<vfio::Device> a, b;
    std::unique_ptr<dma::IovaAllocator> iovas;
    std::unique_ptr<dma::BufferPool> pool;
    std::uint64_t offered = 0;
};

// The ring formats to run: split always, packed where the device offers it.
std::vector<bool> formats(const Bed& bed) {
    std::vector<bool> f{false};
    if (bed.offers(VIRTIO_F_RING_PACKED)) f.push_back(true);
    return f;
}

// `count` test frames of `len` bytes from tx (queue tx_q) to rx (queue rx_q), at most 32 in flight; how many arrived
// byte-exact and in order. Every received buffer goes back to the pool.
std::uint64_t exchange(nic::Port& tx, nic::Port& rx, dma::BufferPool& pool, std::uint64_t count, std::uint32_t len,
                       std::uint16_t tx_q = 0, std::uint16_t rx_q = 0) {
    std::uint64_t sent = 0, good = 0, seen = 0;
    auto idle = std::chrono::steady_clock::now();
    while (seen < count && std::chrono::steady_clock::now() - idle < std::chrono::seconds(5)) {
        Packet batch[8];
        std::uint16_t k = 0;
        dma::BufferPool::Buffer buf;
        while (k < 8 && sent + k < count && sent + k - seen < 32 && pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            nic::write_test_frame(d, len, rx.mac(), tx.mac(), sent + k);
            batch[k++] = Packet{d, buf.iova, len, buf.index, &pool};
        }
        const std::uint16_t taken = tx.tx_burst(tx_q, std::span(batch, k));
        for (std::uint16_t i = taken; i < k; ++i) pool.free(batch[i].buf);
        sent += taken;
        Packet got[32];
        const std::uint16_t n = rx.rx_burst(rx_q, got);
        for (std::uint16_t i = 0; i < n; ++i, ++seen) {
            auto seq = nic::check_test_frame(got[i].data, got[i].len);
            if (seq && *seq == seen && got[i].len == len) ++good;
            nic::Port::release(got[i]);
        }
        if (n) idle = std::chrono::steady_clock::now();
        tx.tx_reclaim(tx_q);
    }
    return good;
}

// Frames that may still arrive (sent while a queue was stopped or the link down) go back to the pool.
void drain(nic::Port& p, int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    Packet got[32];
    while (std::chrono::steady_clock::now() < end) {
        const std::uint16_t n = p.rx_burst(0, got);
        for (std::uint16_t i = 0; i < n; ++i) nic::Port::release(got[i]);
        if (!n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

int wait_fd(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return 0;
    std::uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == sizeof n ? static_cast<int>(n) : 0;
}

template <class T>
void store_release(T& word, T v) {
    __atomic_store_n(&word, v, __ATOMIC_RELEASE);
}

}  // namespace

TEST_CASE("virtio: frames both ways byte-exact and counted, 64 and 1514 bytes, each ring format and TX layout") {
    Bed bed;
    for (bool packed : formats(bed)) {
        // each feature on and off, in two sections (a lap of every ring costs TCG time)
        for (auto [event_idx, indirect] : {std::pair{true, true}, {false, false}}) {
            DYNAMIC_SECTION((packed ? "packed" : "split") << (event_idx ? ", event idx" : ", no event idx")
                                                          << (indirect ? ", indirect TX" : ", 2-descriptor TX")) {
                VirtioNetOptions o;
                o.packed = packed;
                o.event_idx = event_idx;
                o.indirect = indirect;
                auto a = bed.open(*bed.a, o);
                auto b = bed.open(*bed.b, o);
                CHECK(a->packed() == packed);
                CHECK(a->event_idx() == (event_idx && bed.offers(VIRTIO_RING_F_EVENT_IDX)));
                CHECK(a->indirect() == (indirect && bed.offers(VIRTIO_RING_F_INDIRECT_DESC)));
                // a full TX ring holds a frame per descriptor with indirect tables, else one per two
                a->tx_reclaim(0);
                CHECK(a->tx_free_slots(0) == a->tx_ring_size() / (a->indirect() ? 1 : 2));
                CHECK(std::string(a->driver()) == "virtio-net");
                CHECK(a->link_up());
                CHECK(a->mac() != b->mac());
                CHECK(a->mac() == nic::MacAddress::parse("52:54:00:12:34:10"));  // the preset's mac= for NIC A
                INFO("rings of " << a->rx_ring_size() << " rx / " << a->tx_ring_size() << " tx descriptors");
                const std::uint64_t laps = 3ull * a->rx_ring_size();  // wrap every ring (and packed's wrap counters)
                for (std::uint32_t len : {64u, 1514u}) {
                    INFO("frames of " << len << " bytes");
                    const nic::QueueStats a_tx = a->tx_stats(0), b_rx = b->rx_stats(0);
                    CHECK(exchange(*a, *b, *bed.pool, laps, len) == laps);
                    CHECK(a->tx_stats(0).packets - a_tx.packets == laps);
                    CHECK(a->tx_stats(0).bytes - a_tx.bytes == laps * len);
                    CHECK(b->rx_stats(0).packets - b_rx.packets == laps);
                    CHECK(b->rx_stats(0).bytes - b_rx.bytes == laps * len);
                    const nic::QueueStats b_tx = b->tx_stats(0), a_rx = a->rx_stats(0);
                    CHECK(exchange(*b, *a, *bed.pool, laps, len) == laps);
                    CHECK(b->tx_stats(0).packets - b_tx.packets == laps);
                    CHECK(a->rx_stats(0).packets - a_rx.packets == laps);
                    CHECK(a->rx_stats(0).bytes - a_rx.bytes == laps * len);
                }
                // One doorbell at most per burst, and none where the device said it needs none.
                CHECK(a->tx_stats(0).doorbells >= 1);
                CHECK(a->tx_stats(0).doorbells <= a->tx_stats(0).packets);
                for (auto* p : {a.get(), b.get()}) {
                    CHECK(p->rx_stats(0).bad_head == 0);
                    CHECK(p->rx_stats(0).bad_length == 0);
                    CHECK(p->tx_stats(0).bad_head == 0);
                    CHECK(p->rx_fault(0) == Fault::none);
                }
            }
        }
    }
    CHECK(bed.pool->available() == kBuffers);  // every buffer back once the ports closed
}

TEST_CASE("virtio: interrupts: RX queue 0 on its vector, none while idle") {
    Bed bed;
    for (bool packed : formats(bed)) {
        DYNAMIC_SECTION((packed ? "packed" : "split")) {
            VirtioNetOptions o;
            o.packed = packed;
            auto a = bed.open(*bed.a, o);
            o.interrupts = true;
            auto b = bed.open(*bed.b, o);
            REQUIRE(b->rx_fd(0) >= 0);
            REQUIRE(b->link_fd() >= 0);
            CHECK(b->rx_fd(0) != b->link_fd());
            CHECK(a->rx_fd(0) == -1);
            CHECK_FALSE(b->wait_rx(0, 200));  // nothing sent: no interrupt
            for (std::uint64_t i = 0; i < 20; ++i) {
                dma::BufferPool::Buffer buf;
                REQUIRE(bed.pool->alloc(buf));
                auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                nic::write_test_frame(d, 128, b->mac(), a->mac(), i);
                Packet p{d, buf.iova, 128, buf.index, bed.pool.get()};
                REQUIRE(a->tx_burst(0, std::span(&p, 1)) == 1);
                REQUIRE(b->wait_rx(0, 5000));
                Packet got[4];
                std::uint16_t n = 0;
                labenv::wait_for([&] { return (n = b->rx_burst(0, got)) > 0; }, std::chrono::seconds(2));
                REQUIRE(n == 1);
                CHECK(nic::check_test_frame(got[0].data, got[0].len) == i);
                nic::Port::release(got[0]);
                a->tx_reclaim(0);
            }
        }
    }
}

TEST_CASE("virtio: the host pulls NIC A's cable and puts it back: poll_link and the configuration vector") {
    Bed bed;
    VirtioNetOptions o;
    o.interrupts = true;
    auto a = bed.open(*bed.a, o);
    auto b = bed.open(*bed.b, VirtioNetOptions{});
    if (!(a->negotiated_features() & nic::virtio::bit(VIRTIO_NET_F_STATUS)))
        SKIP("the device offers no link status (VIRTIO_NET_F_STATUS)");
    const int fd = a->link_fd();
    REQUIRE(fd >= 0);
    CHECK_FALSE(a->poll_link());
    CHECK(wait_fd(fd, 300) == 0);

    REQUIRE(labenv::host_set_link(0, false) == "ok");
    CHECK(wait_fd(fd, 5000) >= 1);  // the configuration-change message
    auto down = a->poll_link();
    REQUIRE(down);
    CHECK_FALSE(down->up);
    CHECK_FALSE(a->link_up());

    REQUIRE(labenv::host_set_link(0, true) == "ok");
    CHECK(wait_fd(fd, 5000) >= 1);
    auto up = a->poll_link();
    REQUIRE(up);
    CHECK(up->up);
    CHECK(a->link_changes() == 2);
    drain(*b, 200);
    CHECK(exchange(*a, *b, *bed.pool, 20, 200) == 20);  // and frames flow again
}

TEST_CASE("virtio: a used ring that lies, poisoned in DMA memory: one counted error, a stopped queue") {
    Bed bed;
    for (bool packed : formats(bed)) {
        // An index past what was made available is split's lie, a wrong wrap bit packed's.
        for (Fault lie : {packed ? Fault::wrong_wrap_bit : Fault::used_idx_past_avail, Fault::used_id_not_outstanding,
                          Fault::used_len_too_long}) {
            DYNAMIC_SECTION((packed ? "packed: " : "split: ") << nic::virtio::fault_text(lie)) {
                VirtioNetOptions o;
                o.packed = packed;
                auto a = bed.open(*bed.a, o);
                auto b = bed.open(*bed.b, o);
                CHECK(exchange(*b, *a, *bed.pool, 10, 100) == 10);  // the queue works first
                b->tx_reclaim(0);
                const VirtioNet::RingMemory m = a->rx_ring_memory(0);
                REQUIRE(m.packed == packed);
                if (!packed) {
                    auto* avail = static_cast<vring_avail*>(m.driver);
                    auto* used = static_cast<vring_used*>(m.device);
                    const std::uint16_t at = m.next_used;
                    if (lie == Fault::used_idx_past_avail) {
                        store_release<std::uint16_t>(used->idx, static_cast<std::uint16_t>(at + m.size + 1));
                    } else {
                        // A chain the device holds (posted, not used): its head is in the available ring.
                        const std::uint16_t held = avail->ring[static_cast<std::uint16_t>(avail->idx - 1) % m.size];
                        used->ring[at % m.size] = lie == Fault::used_id_not_outstanding
                                                      ? vring_used_elem{m.size + 3, 100}
                                                      : vring_used_elem{held, 1u << 20};
                        store_release<std::uint16_t>(used->idx, static_cast<std::uint16_t>(at + 1));
                    }
                } else {
                    auto* desc = static_cast<vring_packed_desc*>(m.desc);
                    vring_packed_desc& d = desc[m.next_used];
                    const std::uint16_t this_lap = 1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED;
                    std::uint16_t flags = m.used_wrap ? this_lap : 0;
                    if (lie == Fault::wrong_wrap_bit) flags = m.used_wrap ? 0 : this_lap;
                    if (lie == Fault::used_id_not_outstanding) d.id = 0x7fff;
                    if (lie == Fault::used_len_too_long) d.len = 1u << 20;  // d.id: the chain posted there
                    store_release(d.flags, flags);
                }
                Packet got[8];
                CHECK(a->rx_burst(0, got) == 0);
                CHECK(a->rx_fault(0) == lie);
                const nic::QueueStats s = a->rx_stats(0);
                CHECK(s.bad_head + s.bad_length == 1);
                CHECK((lie == Fault::used_len_too_long ? s.bad_length : s.bad_head) == 1);
                CHECK(a->rx_free_slots(0) == 0);  // nothing more is posted
                // Stopped: frames sent now are never handed out, nothing more is counted.
                for (int i = 0; i < 5; ++i) {
                    dma::BufferPool::Buffer buf;
                    REQUIRE(bed.pool->alloc(buf));
                    auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                    nic::write_test_frame(d, 100, a->mac(), b->mac(), i);
                    Packet p{d, buf.iova, 100, buf.index, bed.pool.get()};
                    CHECK(b->tx_burst(0, std::span(&p, 1)) == 1);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                CHECK(a->rx_burst(0, got) == 0);
                CHECK(a->rx_stats(0).bad_head + a->rx_stats(0).bad_length == 1);
                CHECK(a->rx_stats(0).packets == s.packets);
                // The other direction still works: one queue stopped, not the port.
                CHECK(exchange(*a, *b, *bed.pool, 10, 100) == 10);
            }
        }
    }
    CHECK(bed.pool->available() == kBuffers);  // the reset at close gives the stopped queue's buffers back
}

TEST_CASE("virtio: set-up refuses what the device or virtio cannot do, saying what") {
    Bed bed;
    auto refuses = [&](VirtioNetOptions o, const char* what) {
        INFO(what);
        CHECK_THROWS_WITH(bed.open(*bed.a, o), Catch::Matchers::ContainsSubstring(what));
        CHECK(bed.pool->available() == kBuffers);
    };
    // A device that would bypass the IOMMU is refused whenever the domain translates (lab-nic-virtio-bypass:
    // iommu_platform=off), before anything else.
    if (!bed.domain->iova_is_physical() && !bed.offers(VIRTIO_F_ACCESS_PLATFORM)) {
        refuses(VirtioNetOptions{}, "VIRTIO_F_ACCESS_PLATFORM");
        return;
    }
    VirtioNetOptions o;
    o.loopback = nic::Loopback::mac;
    refuses(o, "no loopback");
    o = {};
    o.vlan_strip = true;
    refuses(o, "VLAN stripping");
    if (!bed.offers(VIRTIO_NET_F_MTU)) {  // jumbo frames need the device's MTU, whatever the buffers hold
        dma::BufferPool big(*bed.domain, *bed.iovas, 9216, 16);
        o = {};
        o.max_frame = 9014;
        CHECK_THROWS_WITH(VirtioNet(*bed.a, *bed.iovas, big, o), Catch::Matchers::ContainsSubstring("host_mtu"));
    }
    o = {};
    o.rx_queues = o.tx_queues = 2;
    if (!bed.offers(VIRTIO_NET_F_MQ)) refuses(o, "VIRTIO_NET_F_MQ");
    o = {};
    o.rx_ring = 100;
    refuses(o, "powers of two");
    // Not a virtio-net device: the window.
    auto windows = labenv::bdfs("BARDRIVE_LAB_WINDOWS");
    if (!windows.empty()) {
        vfio::Device w = vfio::Device::open(*bed.domain, windows[0]);
        CHECK_THROWS_WITH(VirtioNet(w, *bed.iovas, *bed.pool), Catch::Matchers::ContainsSubstring("not a virtio-net"));
    }
    // And with the defaults it opens, its rings no larger than the device allows.
    auto a = bed.open(*bed.a, VirtioNetOptions{});
    CHECK(a->rx_ring_size() <= 512);
    CHECK(a->tx_ring_size() <= 512);
}

TEST_CASE("virtio: several queue pairs where the device offers them") {
    Bed bed;
    if (!bed.offers(VIRTIO_NET_F_MQ))
        SKIP("the device offers no multiqueue (lab/lab run virtio --virtio-net mq=on,...)");
    if (bed.open(*bed.a, VirtioNetOptions{})->max_queue_pairs() < 2)
        SKIP("the device's network has one queue (max_virtqueue_pairs 1: a -netdev of one queue)");
    VirtioNetOptions o;
    o.rx_queues = o.tx_queues = 2;
    auto a = bed.open(*bed.a, o);
    auto b = bed.open(*bed.b, VirtioNetOptions{});
    CHECK(a->tx_queues() == 2);
    for (std::uint16_t q = 0; q < 2; ++q) {
        INFO("tx queue " << q);
        CHECK(exchange(*a, *b, *bed.pool, 50, 200, q, 0) == 50);
    }
}
