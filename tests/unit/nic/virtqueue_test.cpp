// Split and packed virtqueues against a device this test plays over the same ring memory: chains made
// available and used, wrap-around (of the ring, of the 16-bit indexes, of the packed wrap counters),
// notification suppression with and without VIRTIO_RING_F_EVENT_IDX, and every lie a device can tell
// (a used index past what was made available, a used id not outstanding, a used length above the buffer,
// a packed used descriptor with the wrong wrap bit): a counted fault, a stopped ring.
#include "nic/virtio/virtqueue.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "nic/virtio/pci_transport.hpp"

using namespace bardrive::nic::virtio;

namespace {

// Ring memory for a split queue, zeroed, each part where the device would find it.
struct SplitMem {
    explicit SplitMem(std::uint32_t n)
        : size(n),
          desc(SplitRing::desc_bytes(n) / 8),
          avail((SplitRing::avail_bytes(n) + 7) / 8),
          used((SplitRing::used_bytes(n) + 7) / 8) {}
    vring_desc* d() { return reinterpret_cast<vring_desc*>(desc.data()); }
    vring_avail* a() { return reinterpret_cast<vring_avail*>(avail.data()); }
    vring_used* u() { return reinterpret_cast<vring_used*>(used.data()); }
    std::uint16_t& avail_event() {
        return *reinterpret_cast<std::uint16_t*>(reinterpret_cast<std::byte*>(used.data()) + 4 + 8 * size);
    }
    std::uint16_t used_event() { return a()->ring[size]; }
    std::uint32_t size;
    std::vector<std::uint64_t> desc, avail, used;
};

// The device side of a split queue: takes what the driver made available, writes used entries.
struct SplitDevice {
    SplitMem& m;
    std::uint16_t next_avail = 0;
    std::uint16_t used_idx = 0;
    // The head of the next available chain (the driver must have published it).
    std::uint16_t take() {
        REQUIRE(next_avail != m.a()->idx);
        return m.a()->ring[next_avail++ % m.size];
    }
    void use(std::uint32_t head, std::uint32_t len) {
        m.u()->ring[used_idx % m.size] = vring_used_elem{head, len};
        m.u()->idx = ++used_idx;
    }
};

Segment rx_seg(std::uint64_t addr, std::uint32_t len = 2048) { return Segment{addr, len, VRING_DESC_F_WRITE}; }

// Ring memory for a packed queue.
struct PackedMem {
    explicit PackedMem(std::uint32_t n) : size(n), desc(n) {}
    std::uint32_t size;
    std::vector<vring_packed_desc> desc;
    vring_packed_desc_event driver{}, device{};
};

// The device side of a packed queue (2.8): its own avail position and wrap counter, one used
// descriptor per chain written at its used position.
struct PackedDevice {
    PackedMem& m;
    std::uint16_t avail_at = 0;
    bool avail_wrap = true;
    std::uint16_t used_at = 0;
    bool used_wrap = true;
    static bool is_avail(const vring_packed_desc& d, bool wrap) {
        const bool a = (d.flags >> VRING_PACKED_DESC_F_AVAIL) & 1, u = (d.flags >> VRING_PACKED_DESC_F_USED) & 1;
        return a == wrap && u != wrap;
    }
    // Takes the next available chain: its id and its descriptors.
    std::vector<vring_packed_desc> take() {
        std::vector<vring_packed_desc> chain;
        for (;;) {
            const vring_packed_desc& d = m.desc[avail_at];
            REQUIRE(is_avail(d, avail_wrap));
            chain.push_back(d);
            if (++avail_at == m.size) {
                avail_at = 0;
                avail_wrap = !avail_wrap;
            }
            if (!(d.flags & VRING_DESC_F_NEXT)) return chain;
        }
    }
    void use(std::uint16_t id, std::uint32_t len, std::uint32_t chain, bool wrap) {
        vring_packed_desc& d = m.desc[used_at];
        d.id = id;
        d.len = len;
        d.flags = wrap ? (1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED) : 0;
        used_at = static_cast<std::uint16_t>(used_at + chain);
        if (used_at >= m.size) {
            used_at = static_cast<std::uint16_t>(used_at - m.size);
            used_wrap = !used_wrap;
        }
    }
    void use(std::uint16_t id, std::uint32_t len, std::uint32_t chain) { use(id, len, chain, used_wrap); }
};

}  // namespace

TEST_CASE("virtqueue sizes: powers of two that hold whole chains") {
    for (std::uint32_t ok : {2u, 8u, 256u, 32768u}) CHECK_NOTHROW(check_queue_size(ok, 2, "q"));
    for (std::uint32_t bad : {0u, 1u, 6u, 100u, 65536u}) {
        INFO(bad);
        CHECK_THROWS_AS(check_queue_size(bad, 1, "q"), bardrive::Error);
    }
    CHECK_THROWS_WITH(check_queue_size(4, 3, "tx queue 0"), Catch::Matchers::ContainsSubstring("whole chains"));
    CHECK(std::string(fault_text(Fault::wrong_wrap_bit)).find("wrap bit") != std::string::npos);
}

TEST_CASE("split: chains made available, published once, used and harvested in order") {
    SplitMem m(8);
    SplitRing ring(m.d(), m.a(), m.u(), 8, 1, false);
    SplitDevice dev{m};
    CHECK(ring.chains() == 8);
    for (std::uint64_t i = 0; i < 8; ++i) {
        Segment s = rx_seg(0x1000 * (i + 1));
        CHECK(ring.add(&s) == i);
    }
    CHECK(ring.free_chains() == 0);
    CHECK(m.a()->idx == 0);  // nothing visible before publish
    CHECK(ring.publish());   // the device asks for every notification (no NO_NOTIFY)
    CHECK(m.a()->idx == 8);
    CHECK_FALSE(ring.publish());  // nothing new: no doorbell
    for (int i = 0; i < 8; ++i) {
        std::uint16_t head = dev.take();
        CHECK(m.d()[head].addr == 0x1000u * (head + 1));
        CHECK(m.d()[head].flags == VRING_DESC_F_WRITE);
        CHECK(m.d()[head].len == 2048);
    }
    Used u;
    CHECK_FALSE(ring.has_used());
    CHECK_FALSE(ring.pop(u));
    dev.use(3, 100);  // out of order is allowed
    dev.use(0, 2048);
    CHECK(ring.has_used());
    REQUIRE(ring.pop(u));
    CHECK((u.id == 3 && u.len == 100));
    REQUIRE(ring.pop(u));
    CHECK((u.id == 0 && u.len == 2048));
    CHECK_FALSE(ring.pop(u));
    CHECK(ring.free_chains() == 2);
    CHECK(ring.fault() == Fault::none);
}

TEST_CASE("split: two-descriptor chains are linked once and ids name their heads") {
    SplitMem m(8);
    SplitRing ring(m.d(), m.a(), m.u(), 8, 2, false);
    SplitDevice dev{m};
    CHECK(ring.chains() == 4);
    Segment tx[2] = {{0x500, 12, 0}, {0x9000, 60, 0}};
    CHECK(ring.add(tx) == 0);
    CHECK(ring.add(tx) == 1);
    ring.publish();
    CHECK(dev.take() == 0);
    CHECK(dev.take() == 2);  // chain 1 starts at descriptor 2
    CHECK(m.d()[2].flags == VRING_DESC_F_NEXT);
    CHECK(m.d()[2].next == 3);
    CHECK(m.d()[3].flags == 0);
    CHECK(m.d()[3].len == 60);
    dev.use(2, 0);
    Used u;
    REQUIRE(ring.pop(u));
    CHECK(u.id == 1);
    SECTION("a used id in the middle of a chain is not outstanding") {
        dev.use(1, 0);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("a TX chain has no writable bytes: any used length is a lie") {
        dev.use(0, 1);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_len_too_long);
    }
}

TEST_CASE("indirect: a chain of one descriptor naming the driver's table, in both layouts, never writable") {
    // What VirtioNet's TX does with VIRTIO_RING_F_INDIRECT_DESC: one ring descriptor per frame.
    const Segment table{0x7000, 32, VRING_DESC_F_INDIRECT};
    {
        SplitMem m(4);
        SplitRing ring(m.d(), m.a(), m.u(), 4, 1, false);
        SplitDevice dev{m};
        CHECK(ring.chains() == 4);
        for (std::uint16_t i = 0; i < 4; ++i) CHECK(ring.add(&table) == i);
        CHECK(ring.publish());
        const std::uint16_t head = dev.take();
        CHECK(m.d()[head].addr == 0x7000);
        CHECK(m.d()[head].len == 32);
        CHECK(m.d()[head].flags == VRING_DESC_F_INDIRECT);  // no NEXT, no WRITE
        dev.use(head, 1);  // a device that claims to have written into a read-only chain lies
        Used u;
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_len_too_long);
    }
    {
        PackedMem m(4);
        PackedRing ring(m.desc.data(), &m.driver, &m.device, 4, 1, false);
        PackedDevice dev{m};
        CHECK(ring.chains() == 4);
        CHECK(ring.add(&table) == 0);
        CHECK(ring.publish());
        auto c = dev.take();
        REQUIRE(c.size() == 1);
        CHECK(c[0].addr == 0x7000);
        CHECK(c[0].len == 32);
        CHECK((c[0].flags & (VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT | VRING_DESC_F_WRITE)) == VRING_DESC_F_INDIRECT);
        dev.use(c[0].id, 0, 1);
        Used u;
        REQUIRE(ring.pop(u));
        CHECK((u.id == 0 && u.len == 0));
        CHECK(ring.fault() == Fault::none);
    }
}

TEST_CASE("split: many laps wrap the ring and the 16-bit indexes") {
    for (bool event_idx : {false, true}) {
        INFO("event_idx " << event_idx);
        SplitMem m(8);
        SplitRing ring(m.d(), m.a(), m.u(), 8, 1, event_idx);
        SplitDevice dev{m};
        std::uint64_t popped = 0;
        for (std::uint32_t round = 0; round < 70000 / 5; ++round) {
            while (ring.free_chains() > 3) {
                Segment s = rx_seg(0x1000);
                ring.add(&s);
            }
            ring.publish();
            for (int k = 0; k < 5; ++k) dev.use(dev.take(), 64);
            Used u;
            while (ring.pop(u)) ++popped;
        }
        CHECK(popped == 70000 / 5 * 5);
        CHECK(ring.fault() == Fault::none);
        CHECK(ring.last_used() == static_cast<std::uint16_t>(popped));
    }
}

TEST_CASE("split: notifications only when the device wants them") {
    SECTION("VRING_USED_F_NO_NOTIFY") {
        SplitMem m(8);
        SplitRing ring(m.d(), m.a(), m.u(), 8, 1, false);
        Segment s = rx_seg(0x1000);
        m.u()->flags = VRING_USED_F_NO_NOTIFY;
        ring.add(&s);
        CHECK_FALSE(ring.publish());
        m.u()->flags = 0;
        ring.add(&s);
        CHECK(ring.publish());
    }
    SECTION("EVENT_IDX: avail_event names the index the device waits for") {
        SplitMem m(16);
        SplitRing ring(m.d(), m.a(), m.u(), 16, 1, true);
        Segment s = rx_seg(0x1000);
        m.u()->flags = VRING_USED_F_NO_NOTIFY;  // ignored with EVENT_IDX
        m.avail_event() = 0;                    // wants a kick when entry 0 is made available
        for (int i = 0; i < 3; ++i) ring.add(&s);
        CHECK(ring.publish());  // 0..2 published: crosses 0
        m.avail_event() = 5;
        ring.add(&s);
        CHECK_FALSE(ring.publish());  // 3 published: not yet 5
        ring.add(&s);
        CHECK_FALSE(ring.publish());  // 4
        ring.add(&s);
        ring.add(&s);
        CHECK(ring.publish());  // 5 and 6 in one batch: one doorbell
        m.avail_event() = 3;    // an event already passed: no doorbell until the indexes wrap
        ring.add(&s);
        CHECK_FALSE(ring.publish());
    }
    SECTION("interrupt suppression: flags, or used_event with EVENT_IDX") {
        SplitMem m(8);
        SplitRing plain(m.d(), m.a(), m.u(), 8, 1, false);
        plain.set_interrupts(false);
        CHECK(m.a()->flags == VRING_AVAIL_F_NO_INTERRUPT);
        plain.set_interrupts(true);
        CHECK(m.a()->flags == 0);
        SplitMem e(8);
        SplitRing ev(e.d(), e.a(), e.u(), 8, 1, true);
        SplitDevice dev{e};
        Segment s = rx_seg(0x1000);
        ev.add(&s);
        ev.add(&s);
        ev.publish();
        dev.use(dev.take(), 10);
        Used u;
        REQUIRE(ev.pop(u));
        ev.set_interrupts(true);
        CHECK(e.used_event() == 1);  // interrupt when entry 1 is used
        ev.set_interrupts(false);
        CHECK(e.used_event() == 0);  // already passed
        CHECK(e.a()->flags == 0);
    }
}

TEST_CASE("split: a device that lies stops the ring, counted, and is never believed") {
    SplitMem m(8);
    SplitRing ring(m.d(), m.a(), m.u(), 8, 1, false);
    SplitDevice dev{m};
    for (int i = 0; i < 4; ++i) {
        Segment s = rx_seg(0x1000 * (i + 1), 1500);
        ring.add(&s);
    }
    ring.publish();
    Segment extra = rx_seg(0x9000);
    ring.add(&extra);  // added, not published: the device cannot use it yet
    Used u;
    SECTION("used idx past what was made available") {
        m.u()->idx = 5;  // 4 published
        CHECK(ring.has_used());
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_idx_past_avail);
    }
    SECTION("used idx far ahead (a wild index)") {
        m.u()->ring[0] = vring_used_elem{0, 10};
        m.u()->idx = 0x8000;
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_idx_past_avail);
    }
    SECTION("used id outside the ring") {
        dev.use(8, 10);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("used id not outstanding (already harvested)") {
        dev.use(1, 10);
        REQUIRE(ring.pop(u));
        dev.use(1, 10);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("used id 5: free, never made available") {
        dev.use(5, 10);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("used length above the buffer") {
        dev.use(2, 1501);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_len_too_long);
    }
    // Whatever the lie: counted once, nothing more is harvested, added or published.
    CHECK(ring.faults() == 1);
    dev.use(0, 10);
    CHECK_FALSE(ring.pop(u));
    CHECK_FALSE(ring.has_used());
    CHECK(ring.free_chains() == 0);
    CHECK_FALSE(ring.publish());
    CHECK(ring.faults() == 1);
    CHECK(ring.outstanding(0));  // buffers the device may still hold stay the device's
}

TEST_CASE("packed: chains written with the lap's wrap bits, the head's flags last") {
    PackedMem m(8);
    PackedRing ring(m.desc.data(), &m.driver, &m.device, 8, 2, false);
    PackedDevice dev{m};
    CHECK(m.driver.flags == VRING_PACKED_EVENT_FLAG_DISABLE);
    Segment tx[2] = {{0x500, 12, 0}, {0x9000, 60, 0}};
    CHECK(ring.add(tx) == 0);
    CHECK(ring.add(tx) == 1);
    CHECK(ring.publish());  // device event flags 0 = ENABLE
    auto c0 = dev.take();
    REQUIRE(c0.size() == 2);
    CHECK(c0[0].addr == 0x500);
    CHECK(c0[1].len == 60);
    CHECK(c0[1].id == 0);
    auto c1 = dev.take();
    CHECK(c1[1].id == 1);
    Used u;
    CHECK_FALSE(ring.pop(u));
    dev.use(1, 0, 2);  // the second chain first: its used descriptor goes to slot 0
    CHECK(ring.has_used());
    REQUIRE(ring.pop(u));
    CHECK(u.id == 1);
    dev.use(0, 0, 2);
    REQUIRE(ring.pop(u));
    CHECK(u.id == 0);
    CHECK(ring.next_used() == 4);
    CHECK(ring.fault() == Fault::none);
}

TEST_CASE("packed: many laps flip both wrap counters") {
    for (std::uint32_t chain : {1u, 2u}) {
        INFO("chain " << chain);
        PackedMem m(8);
        PackedRing ring(m.desc.data(), &m.driver, &m.device, 8, chain, true);
        PackedDevice dev{m};
        std::uint64_t popped = 0;
        Segment segs[2] = {rx_seg(0x1000, 100), rx_seg(0x2000, 100)};
        for (int round = 0; round < 1000; ++round) {
            while (ring.free_chains() > 1) ring.add(segs);
            ring.publish();
            for (int k = 0; k < 3 && dev.avail_at != ring.next_avail(); ++k) {
                auto c = dev.take();
                REQUIRE(c.size() == chain);
                dev.use(c.back().id, 50, chain);
            }
            Used u;
            while (ring.pop(u)) {
                CHECK(u.len == 50);
                ++popped;
            }
        }
        CHECK(popped > 2000);
        CHECK(ring.fault() == Fault::none);
        CHECK(ring.used_wrap() == dev.used_wrap);
    }
}

TEST_CASE("packed: notification suppression") {
    PackedMem m(16);
    Segment s = rx_seg(0x1000);
    SECTION("disabled and enabled") {
        PackedRing ring(m.desc.data(), &m.driver, &m.device, 16, 1, false);
        m.device.flags = VRING_PACKED_EVENT_FLAG_DISABLE;
        ring.add(&s);
        CHECK_FALSE(ring.publish());
        m.device.flags = VRING_PACKED_EVENT_FLAG_ENABLE;
        ring.add(&s);
        CHECK(ring.publish());
        CHECK_FALSE(ring.publish());  // nothing added since
    }
    SECTION("EVENT_IDX: a descriptor position and its wrap counter") {
        PackedRing ring(m.desc.data(), &m.driver, &m.device, 16, 1, true);
        m.device.flags = VRING_PACKED_EVENT_FLAG_DESC;
        m.device.off_wrap = 3 | 1u << 15;  // position 3 of lap 1
        ring.add(&s);
        ring.add(&s);
        CHECK_FALSE(ring.publish());  // 0, 1
        ring.add(&s);
        ring.add(&s);
        CHECK(ring.publish());  // 2, 3: crosses 3
        // Go round: lap 0 begins at position 0 again.
        PackedDevice dev{m};
        Used u;
        for (int i = 0; i < 4; ++i) dev.use(dev.take().back().id, 1, 1);
        while (ring.pop(u)) {
        }
        for (int i = 0; i < 12; ++i) ring.add(&s);  // positions 4..15
        m.device.off_wrap = 1;                      // position 1 of lap 0 (the next lap)
        CHECK_FALSE(ring.publish());
        for (int i = 0; i < 12; ++i) dev.use(dev.take().back().id, 1, 1);
        while (ring.pop(u)) {
        }
        ring.add(&s);  // position 0, lap 0
        CHECK_FALSE(ring.publish());
        ring.add(&s);  // position 1, lap 0
        CHECK(ring.publish());
        CHECK_FALSE(ring.avail_wrap());
    }
    SECTION("interrupts: the driver's structure") {
        PackedRing ring(m.desc.data(), &m.driver, &m.device, 16, 1, true);
        ring.set_interrupts(true);
        CHECK(m.driver.flags == VRING_PACKED_EVENT_FLAG_DESC);
        CHECK(m.driver.off_wrap == (0 | 1u << 15));
        ring.set_interrupts(false);
        CHECK(m.driver.flags == VRING_PACKED_EVENT_FLAG_DISABLE);
        PackedRing plain(m.desc.data(), &m.driver, &m.device, 16, 1, false);
        plain.set_interrupts(true);
        CHECK(m.driver.flags == VRING_PACKED_EVENT_FLAG_ENABLE);
    }
}

TEST_CASE("packed: a device that lies stops the ring, counted, and is never believed") {
    PackedMem m(8);
    PackedRing ring(m.desc.data(), &m.driver, &m.device, 8, 1, false);
    PackedDevice dev{m};
    Segment s = rx_seg(0x1000, 1500);
    for (int i = 0; i < 4; ++i) ring.add(&s);
    ring.publish();
    for (int i = 0; i < 4; ++i) dev.take();
    Used u;
    SECTION("a used descriptor with the other lap's wrap bit") {
        dev.use(0, 10, 1, false);  // lap 1, written as lap 0's
        CHECK(ring.has_used());    // it looks used ...
        CHECK_FALSE(ring.pop(u));  // ... and is refused
        CHECK(ring.fault() == Fault::wrong_wrap_bit);
    }
    SECTION("used id not outstanding") {
        dev.use(6, 10, 1);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("used id outside the ring") {
        dev.use(0xffff, 10, 1);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("the same id used twice") {
        dev.use(2, 10, 1);
        REQUIRE(ring.pop(u));
        dev.use(2, 10, 1);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_id_not_outstanding);
    }
    SECTION("used length above the buffer") {
        dev.use(1, 1501, 1);
        CHECK_FALSE(ring.pop(u));
        CHECK(ring.fault() == Fault::used_len_too_long);
    }
    CHECK(ring.faults() == 1);
    CHECK_FALSE(ring.pop(u));
    CHECK_FALSE(ring.has_used());
    CHECK(ring.free_chains() == 0);
    CHECK_FALSE(ring.publish());
}

TEST_CASE("packed: nothing outstanding, nothing read") {
    PackedMem m(8);
    PackedRing ring(m.desc.data(), &m.driver, &m.device, 8, 1, false);
    // A device writing "used" into slots it was never given cannot make the ring hand anything out.
    for (auto& d : m.desc) d.flags = 1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED;
    Used u;
    CHECK_FALSE(ring.has_used());
    CHECK_FALSE(ring.pop(u));
    CHECK(ring.fault() == Fault::none);
}

TEST_CASE("pci transport: virtio capabilities found in config space, walks that lie end") {
    std::vector<std::uint8_t> cfg(256, 0);
    cfg[0x06] = 0x10;  // capability list
    cfg[0x34] = 0x40;
    auto put_cap = [&](std::size_t at, std::uint8_t next, std::uint8_t type, std::uint8_t bar, std::uint32_t off,
                       std::uint32_t len, std::uint8_t cap_len = 16) {
        cfg[at] = PCI_CAP_ID_VENDOR;
        cfg[at + 1] = next;
        cfg[at + 2] = cap_len;
        cfg[at + 3] = type;
        cfg[at + 4] = bar;
        std::memcpy(&cfg[at + 8], &off, 4);
        std::memcpy(&cfg[at + 12], &len, 4);
    };
    put_cap(0x40, 0x50, VIRTIO_PCI_CAP_COMMON_CFG, 4, 0x0, 0x1000);
    put_cap(0x50, 0x60, VIRTIO_PCI_CAP_ISR_CFG, 4, 0x1000, 0x1000);
    put_cap(0x60, 0x70, VIRTIO_PCI_CAP_DEVICE_CFG, 4, 0x2000, 0x1000);
    put_cap(0x70, 0x84, VIRTIO_PCI_CAP_NOTIFY_CFG, 4, 0x3000, 0x1000, 20);
    std::uint32_t mult = 4;
    std::memcpy(&cfg[0x70 + 16], &mult, 4);
    put_cap(0x84, 0x00, VIRTIO_PCI_CAP_COMMON_CFG, 2, 0x0, 0x100);  // a second common: the first wins
    PciCaps caps = find_pci_caps(cfg);
    CHECK(caps.common.present);
    CHECK(caps.common.bar == 4);
    CHECK(caps.isr.offset == 0x1000);
    CHECK(caps.device.offset == 0x2000);
    CHECK(caps.notify.offset == 0x3000);
    CHECK(caps.notify_off_multiplier == 4);
    SECTION("a loop ends the walk") {
        cfg[0x84 + 1] = 0x40;
        CHECK(find_pci_caps(cfg).notify.present);
    }
    SECTION("a notify capability too short for its multiplier is not taken") {
        cfg[0x70 + 2] = 16;
        CHECK_FALSE(find_pci_caps(cfg).notify.present);
    }
    SECTION("a BAR index past 5 is not taken") {
        cfg[0x60 + 4] = 6;
        CHECK_FALSE(find_pci_caps(cfg).device.present);
    }
    SECTION("truncated config space") {
        PciCaps t = find_pci_caps(std::span<const std::uint8_t>(cfg).first(0x58));
        CHECK(t.common.present);
        CHECK_FALSE(t.device.present);
    }
    SECTION("no capability list") {
        cfg[0x06] = 0;
        CHECK_FALSE(find_pci_caps(cfg).common.present);
    }
}
