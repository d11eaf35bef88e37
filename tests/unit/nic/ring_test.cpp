// Ring logic of the igb driver against descriptors this test writes the way the device would,
// including a device that lies: bad lengths, chains, stale DD bits, head indexes out of range.
#include "nic/e1000/ring.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "nic/igb/regs.hpp"

using namespace bardrive::nic;
namespace igb = bardrive::nic::igb;

namespace {

constexpr std::uint32_t kBuf = 2048;

// Fake buffers: CPU addresses into a vector, IOVAs at a recognisable offset.
struct Buffers {
    explicit Buffers(std::uint32_t n) : mem(std::size_t{n} * kBuf) {
        for (std::uint32_t i = 0; i < n; ++i)
            pkts.push_back({mem.data() + std::size_t{i} * kBuf, 0x100000 + std::uint64_t{i} * kBuf, 0, i});
    }
    std::vector<std::uint8_t> mem;
    std::vector<Packet> pkts;
};

// What the device does on receive: fills the write-back format of descriptor `i`.
void device_rx(e1000::AdvRxDesc& d, std::uint16_t len, std::uint32_t status = e1000::rxd::DD | e1000::rxd::EOP) {
    std::memset(&d, 0, sizeof d);
    d.wb.length = len;
    d.wb.status_error = status;
}

}  // namespace

TEST_CASE("ring sizes must be powers of two the device can address") {
    for (std::uint32_t ok : {8u, 16u, 512u, 4096u, 32768u}) CHECK_NOTHROW(check_ring_size(ok, "rx ring"));
    for (std::uint32_t bad : {0u, 1u, 4u, 12u, 100u, 65536u}) {
        INFO(bad);
        CHECK_THROWS_AS(check_ring_size(bad, "rx ring"), bardrive::Error);
    }
    CHECK_THROWS_WITH(check_ring_size(100, "tx ring"), Catch::Matchers::ContainsSubstring("power of two"));
    std::vector<e1000::AdvRxDesc> d(8);
    CHECK_THROWS_WITH(RxRing(d.data(), 8, 32), Catch::Matchers::ContainsSubstring("cannot hold a frame"));
}

TEST_CASE("rx: post fills descriptors in the read format and keeps one slot empty") {
    std::vector<e1000::AdvRxDesc> d(8);
    std::memset(d.data(), 0xff, d.size() * sizeof d[0]);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(16);
    CHECK(ring.free_slots() == 7);
    CHECK(ring.post(b.pkts) == 7);  // head == tail means empty to the device: never fill all 8
    CHECK(ring.tail() == 7);
    CHECK(ring.posted() == 7);
    CHECK(ring.free_slots() == 0);
    for (int i = 0; i < 7; ++i) {
        CHECK(d[i].read.pkt_addr == b.pkts[i].iova);
        CHECK(d[i].read.hdr_addr == 0);  // clears a stale DD in the status word
    }
    CHECK(d[7].read.pkt_addr == ~0ull);  // untouched
    Packet out[4];
    CHECK(ring.poll(out) == 0);  // nothing done yet
}

TEST_CASE("rx: poll harvests done descriptors in order, stops at the first not done") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(7));
    device_rx(d[0], 60);
    device_rx(d[1], 1514);
    device_rx(d[3], 100);  // done out of order: must wait for 2
    Packet out[8];
    REQUIRE(ring.poll(out) == 2);
    CHECK(out[0].len == 60);
    CHECK(out[0].buf == 0);
    CHECK(out[0].data == b.pkts[0].data);
    CHECK(out[1].len == 1514);
    CHECK(out[1].iova == b.pkts[1].iova);
    CHECK(ring.next_to_clean() == 2);
    CHECK(ring.posted() == 5);
    CHECK(ring.counters().packets == 2);
    CHECK(ring.counters().bytes == 1574);
    device_rx(d[2], 64);
    REQUIRE(ring.poll(out) == 2);
    CHECK(out[0].buf == 2);
    CHECK(out[1].buf == 3);
}

TEST_CASE("rx: the batch limit is respected and the rest stays for the next poll") {
    std::vector<e1000::AdvRxDesc> d(16);
    RxRing ring(d.data(), 16, kBuf);
    Buffers b(16);
    ring.post(b.pkts);
    for (int i = 0; i < 10; ++i) device_rx(d[i], 64);
    Packet out[4];
    CHECK(ring.poll(out) == 4);
    CHECK(ring.poll(out) == 4);
    CHECK(ring.poll(out) == 2);
    CHECK(ring.poll(out) == 0);
    CHECK(ring.counters().packets == 10);
}

TEST_CASE("rx: wrap-around over many rings' worth keeps order and recycles buffers") {
    constexpr std::uint32_t n = 8;
    std::vector<e1000::AdvRxDesc> d(n);
    RxRing ring(d.data(), n, kBuf);
    Buffers b(n);
    std::vector<Packet> pool(b.pkts.begin(), b.pkts.end());
    ring.post(std::span(pool).first(n - 1));
    pool.erase(pool.begin(), pool.begin() + (n - 1));
    std::uint32_t device_head = 0;
    std::uint64_t expect_seq = 0;
    for (int round = 0; round < 100; ++round) {
        std::uint32_t k = 1 + round % 5;  // the device finishes k frames
        for (std::uint32_t i = 0; i < k && ((ring.tail() - device_head) & (n - 1)) != 0; ++i) {
            device_rx(d[device_head], static_cast<std::uint16_t>(60 + (expect_seq + i) % 1000));
            device_head = (device_head + 1) % n;
        }
        Packet out[n];
        std::uint32_t got = ring.poll(out);
        for (std::uint32_t i = 0; i < got; ++i) {
            CHECK(out[i].len == 60 + expect_seq % 1000);
            ++expect_seq;
            pool.push_back(out[i]);  // the application is done with it
        }
        std::uint32_t posted = ring.post(pool);
        pool.erase(pool.begin(), pool.begin() + posted);
        CHECK(ring.tail() == (device_head + ring.posted()) % n);
    }
    CHECK(expect_seq > 3 * n);
    CHECK(ring.counters().packets == expect_seq);
}

TEST_CASE("rx: impossible lengths are counted drops and the buffer goes straight back to the device") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(7));
    device_rx(d[0], 0xffff);    // longer than the buffer
    device_rx(d[1], 0);         // empty
    device_rx(d[2], 13);        // shorter than an Ethernet header
    device_rx(d[3], kBuf + 1);  // one byte past the buffer
    device_rx(d[4], kBuf);      // exactly the buffer: fine
    Packet out[8];
    REQUIRE(ring.poll(out) == 1);
    CHECK(out[0].len == kBuf);
    CHECK(out[0].buf == 4);
    CHECK(ring.counters().bad_length == 4);
    // The four dropped buffers were re-posted at the tail, in the order they were dropped.
    CHECK(ring.tail() == (7 + 4) % 8);
    CHECK(d[7].read.pkt_addr == b.pkts[0].iova);
    CHECK(d[0].read.pkt_addr == b.pkts[1].iova);
    CHECK(d[1].read.pkt_addr == b.pkts[2].iova);
    CHECK(d[2].read.pkt_addr == b.pkts[3].iova);
    CHECK(d[2].read.hdr_addr == 0);
    CHECK(ring.posted() == 6);
}

TEST_CASE("rx: frame errors and multi-descriptor chains are dropped whole") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(7));
    device_rx(d[0], 64, e1000::rxd::DD | e1000::rxd::EOP | e1000::rxd::ERR_RXE);
    device_rx(d[1], kBuf, e1000::rxd::DD);  // chain: 3 descriptors, EOP on the last
    device_rx(d[2], kBuf, e1000::rxd::DD);
    device_rx(d[3], 100, e1000::rxd::DD | e1000::rxd::EOP);
    device_rx(d[4], 64, e1000::rxd::DD | e1000::rxd::EOP | e1000::rxd::ERR_IPE);  // checksum only: delivered
    Packet out[8];
    REQUIRE(ring.poll(out) == 1);
    CHECK(out[0].buf == 4);
    CHECK(ring.counters().frame_errors == 1);
    CHECK(ring.counters().chained == 3);
    CHECK(ring.posted() == 6);
}

TEST_CASE("rx: a device that sets DD on everything cannot keep poll spinning") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(7));
    for (auto& x : d) device_rx(x, 0);
    Packet out[64];
    CHECK(ring.poll(out) == 0);  // returns after at most one lap
    CHECK(ring.counters().bad_length <= 8);
}

TEST_CASE("rx: drain returns every posted buffer") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(5));
    Packet out[8];
    REQUIRE(ring.drain(out) == 5);
    for (std::uint32_t i = 0; i < 5; ++i) CHECK(out[i].buf == i);
    CHECK(ring.posted() == 0);
}

TEST_CASE("tx: push writes advanced data descriptors, report-status on the batch's last") {
    std::vector<e1000::AdvTxDesc> d(8);
    std::uint32_t head = 0;
    TxRing ring(d.data(), 8, &head, kBuf);
    Buffers b(8);
    for (std::uint32_t i = 0; i < 8; ++i) b.pkts[i].len = 60 + i;
    REQUIRE(ring.push(std::span(b.pkts).first(3)) == 3);
    CHECK(ring.tail() == 3);
    for (int i = 0; i < 3; ++i) {
        CHECK(d[i].read.buffer_addr == b.pkts[i].iova);
        std::uint32_t c = d[i].read.cmd_type_len;
        CHECK((c & e1000::txd::DTALEN_MASK) == 60u + i);
        CHECK((c & e1000::txd::DTYP_DATA) == e1000::txd::DTYP_DATA);
        CHECK((c & e1000::txd::CMD_DEXT) != 0);
        CHECK((c & e1000::txd::CMD_EOP) != 0);
        CHECK((c & e1000::txd::CMD_IFCS) != 0);
        CHECK((c & e1000::txd::CMD_RS) == (i == 2 ? e1000::txd::CMD_RS : 0u));
        CHECK(d[i].read.olinfo_status >> e1000::txd::PAYLEN_SHIFT == 60u + i);
    }
    CHECK(ring.counters().packets == 3);
    CHECK(ring.counters().bytes == 183);
}

TEST_CASE("tx: a full ring takes what fits; refused lengths stop the batch and are counted") {
    std::vector<e1000::AdvTxDesc> d(8);
    std::uint32_t head = 0;
    TxRing ring(d.data(), 8, &head, 1514);
    Buffers b(16);
    for (auto& p : b.pkts) p.len = 64;
    CHECK(ring.push(b.pkts) == 7);
    CHECK(ring.free_slots() == 0);
    CHECK(ring.push(b.pkts) == 0);

    std::vector<e1000::AdvTxDesc> d2(8);
    TxRing ring2(d2.data(), 8, &head, 1514);
    b.pkts[2].len = 1515;
    CHECK(ring2.push(std::span(b.pkts).first(5)) == 2);
    CHECK(ring2.counters().bad_length == 1);
    b.pkts[0].len = 0;
    CHECK(ring2.push(std::span(b.pkts).first(1)) == 0);
    CHECK(ring2.counters().bad_length == 2);
}

TEST_CASE("tx: reclaim follows the head write-back across wrap-around") {
    constexpr std::uint32_t n = 8;
    std::vector<e1000::AdvTxDesc> d(n);
    std::uint32_t head = 0;
    TxRing ring(d.data(), n, &head, kBuf);
    Buffers b(n);
    for (auto& p : b.pkts) p.len = 64;
    std::vector<Packet> pool(b.pkts.begin(), b.pkts.end());
    std::uint64_t sent = 0, back = 0;
    for (int round = 0; round < 50; ++round) {
        std::uint32_t k = std::min<std::uint32_t>(static_cast<std::uint32_t>(pool.size()), 1 + round % 4);
        std::uint32_t pushed = ring.push(std::span(pool).first(k));
        pool.erase(pool.begin(), pool.begin() + pushed);
        sent += pushed;
        head = ring.tail();  // the device sends all queued frames
        Packet out[n];
        std::uint32_t got = ring.reclaim(out);
        back += got;
        pool.insert(pool.end(), out, out + got);
        CHECK(ring.in_flight() == 0);
    }
    CHECK(sent == back);
    CHECK(sent > 3 * n);
    CHECK(pool.size() == n);
    CHECK(ring.counters().bad_head == 0);
}

TEST_CASE("tx: a head write-back out of range or beyond the tail is a counted error, not a reclaim") {
    std::vector<e1000::AdvTxDesc> d(8);
    std::uint32_t head = 0;
    TxRing ring(d.data(), 8, &head, kBuf);
    Buffers b(8);
    for (auto& p : b.pkts) p.len = 64;
    ring.push(std::span(b.pkts).first(3));  // tail 3, clean 0
    Packet out[8];
    head = 8;  // outside an 8-entry ring
    CHECK(ring.reclaim(out) == 0);
    head = 0xdeadbeef;
    CHECK(ring.reclaim(out) == 0);
    head = 5;  // inside the ring, but past what was queued
    CHECK(ring.reclaim(out) == 0);
    CHECK(ring.counters().bad_head == 3);
    CHECK(ring.in_flight() == 3);
    head = 2;  // sane again
    REQUIRE(ring.reclaim(out) == 2);
    CHECK(out[0].buf == 0);
    CHECK(out[1].buf == 1);
    REQUIRE(ring.drain(out) == 1);
    CHECK(out[0].buf == 2);
}

TEST_CASE("tx without head write-back (82574): every descriptor reports, reclaim follows DD in order") {
    std::vector<e1000::AdvTxDesc> d(8);
    TxRing ring(d.data(), 8, nullptr, kBuf, TxFormat::e1000e_extended);
    Buffers b(8);
    for (auto& p : b.pkts) p.len = 100;
    REQUIRE(ring.push(std::span(b.pkts).first(4)) == 4);
    for (int i = 0; i < 4; ++i) {
        std::uint32_t c = d[i].read.cmd_type_len;
        CHECK((c & (0xfu << 20)) == e1000::txd::DTYP_E1000E_DATA);
        CHECK((c & e1000::txd::CMD_RS) != 0);
        CHECK((c & e1000::txd::CMD_DEXT) != 0);
        CHECK(d[i].read.olinfo_status == 0);
    }
    Packet out[8];
    CHECK(ring.reclaim(out) == 0);
    d[0].wb.status = e1000::txd::STA_DD;
    d[2].wb.status = e1000::txd::STA_DD;  // out of order: waits for 1
    REQUIRE(ring.reclaim(out) == 1);
    CHECK(out[0].buf == 0);
    d[1].wb.status = e1000::txd::STA_DD;
    REQUIRE(ring.reclaim(out) == 2);
    CHECK(out[1].buf == 2);
    // A stale DD from the previous lap is cleared when the slot is reused.
    REQUIRE(ring.push(std::span(b.pkts).subspan(4, 4)) == 4);
    d[3].wb.status = e1000::txd::STA_DD;
    REQUIRE(ring.reclaim(out) == 1);
    CHECK(ring.in_flight() == 4);
    CHECK(ring.reclaim(out) == 0);  // slots 4..7 were written with status 0
}

TEST_CASE("rx: each frame carries the device's VLAN and checksum report, nothing else of the status word") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(8);
    ring.post(std::span(b.pkts).first(7));
    const std::uint32_t ok = e1000::rxd::DD | e1000::rxd::EOP;
    device_rx(d[0], 64);
    device_rx(d[1], 64, ok | e1000::rxd::VP | e1000::rxd::IPCS | e1000::rxd::L4CS | e1000::rxd::UDPCS);
    d[1].wb.vlan = 0x2064;
    device_rx(d[2], 64, ok | e1000::rxd::IPCS | e1000::rxd::L4CS | e1000::rxd::ERR_L4E | e1000::rxd::ERR_IPE);
    device_rx(d[3], 64, ok | (1u << 16) | (1u << 9));  // status bits bardrive does not report
    Packet out[8];
    out[0].l2_len = 14;  // stale values in the caller's array are overwritten
    REQUIRE(ring.poll(out) == 4);
    CHECK(out[0].flags == 0);
    CHECK(out[0].l2_len == 0);
    CHECK(out[1].flags == (pkt::RX_VLAN | pkt::RX_IP_CHECKED | pkt::RX_L4_CHECKED | pkt::RX_UDP));
    CHECK(out[1].vlan == 0x2064);
    CHECK(out[2].flags == (pkt::RX_IP_CHECKED | pkt::RX_L4_CHECKED | pkt::RX_L4_BAD | pkt::RX_IP_BAD));
    CHECK(out[3].flags == 0);
    CHECK((out[1].flags & pkt::TX_MASK) == 0);  // a received frame sent on asks for no offload
}

TEST_CASE("rx: harvesting across the ring's end keeps every check") {
    std::vector<e1000::AdvRxDesc> d(8);
    RxRing ring(d.data(), 8, kBuf);
    Buffers b(16);
    ring.post(std::span(b.pkts).first(7));
    for (int i = 0; i < 6; ++i) device_rx(d[i], 64);
    Packet out[8];
    REQUIRE(ring.poll(out) == 6);
    ring.post(std::span(b.pkts).subspan(7, 6));  // slots 7, 0..4
    device_rx(d[6], 64);
    device_rx(d[7], 13);  // too short, at the ring's last slot
    device_rx(d[0], 100);
    device_rx(d[1], 0, e1000::rxd::DD);  // a chain across...
    device_rx(d[2], 64);                 // ...ending here
    device_rx(d[3], 200);
    REQUIRE(ring.poll(out) == 3);
    CHECK(out[0].len == 64);
    CHECK(out[1].len == 100);
    CHECK(out[2].len == 200);
    CHECK(ring.counters().bad_length == 1);
    CHECK(ring.counters().chained == 2);
    CHECK(ring.next_to_clean() == 4);
}

TEST_CASE("tx: offloads put a context descriptor before the frame's, with its lengths and tag") {
    std::vector<e1000::AdvTxDesc> d(8);
    std::uint32_t head = 0;
    TxRing ring(d.data(), 8, &head, kBuf);
    Buffers b(8);
    for (auto& p : b.pkts) p.len = 100;
    b.pkts[1].flags = pkt::TX_IP_CSUM | pkt::TX_UDP_CSUM | pkt::TX_VLAN;
    b.pkts[1].vlan = 0x0064;
    b.pkts[1].l2_len = 14;
    b.pkts[1].l3_len = 20;
    b.pkts[2].flags = pkt::TX_TCP_CSUM;
    b.pkts[2].l2_len = 18;
    b.pkts[2].l3_len = 24;
    REQUIRE(ring.push(std::span(b.pkts).first(3)) == 3);
    CHECK(ring.tail() == 5);  // 3 frames, 2 contexts
    CHECK(d[0].read.olinfo_status == 100u << e1000::txd::PAYLEN_SHIFT);
    const auto& c1 = reinterpret_cast<const e1000::AdvTxContextDesc&>(d[1]);
    CHECK(c1.vlan_macip_lens == (0x0064u << 16 | 14u << 9 | 20u));
    CHECK(c1.type_tucmd_mlhl == (e1000::txd::DTYP_CONTEXT | e1000::txd::CMD_DEXT | e1000::txd::TUCMD_IPV4));
    CHECK(c1.mss_l4len_idx == 0);
    CHECK(d[2].read.buffer_addr == b.pkts[1].iova);
    CHECK((d[2].read.cmd_type_len & e1000::txd::CMD_VLE) != 0);
    CHECK(d[2].read.olinfo_status ==
          (100u << e1000::txd::PAYLEN_SHIFT | e1000::txd::POPTS_IXSM | e1000::txd::POPTS_TXSM));
    const auto& c2 = reinterpret_cast<const e1000::AdvTxContextDesc&>(d[3]);
    CHECK(c2.vlan_macip_lens == (18u << 9 | 24u));
    CHECK(c2.type_tucmd_mlhl ==
          (e1000::txd::DTYP_CONTEXT | e1000::txd::CMD_DEXT | e1000::txd::TUCMD_IPV4 | e1000::txd::TUCMD_L4T_TCP));
    CHECK((d[4].read.cmd_type_len & e1000::txd::CMD_VLE) == 0);
    CHECK(d[4].read.olinfo_status == (100u << e1000::txd::PAYLEN_SHIFT | e1000::txd::POPTS_TXSM));
    CHECK((d[4].read.cmd_type_len & e1000::txd::CMD_RS) != 0);
    CHECK((d[2].read.cmd_type_len & e1000::txd::CMD_RS) == 0);
    // Completion gives back the three frames and an empty slot for each context.
    head = 5;
    Packet out[8];
    REQUIRE(ring.reclaim(out) == 5);
    CHECK(out[0].buf == 0);
    CHECK(out[1].pool == nullptr);
    CHECK(out[1].len == 0);
    CHECK(out[2].buf == 1);
    CHECK(out[4].buf == 2);
}

TEST_CASE("tx: offloads the ring cannot honour are refused and counted, and never overfill it") {
    std::vector<e1000::AdvTxDesc> d(8);
    std::uint32_t head = 0;
    TxRing ring(d.data(), 8, &head, kBuf);
    Buffers b(8);
    for (auto& p : b.pkts) p.len = 100;
    b.pkts[0].flags = pkt::TX_UDP_CSUM;  // no header lengths
    CHECK(ring.push(std::span(b.pkts).first(1)) == 0);
    b.pkts[0].l2_len = 14;
    b.pkts[0].l3_len = 20;
    b.pkts[0].flags = pkt::TX_UDP_CSUM | pkt::TX_TCP_CSUM;  // both
    CHECK(ring.push(std::span(b.pkts).first(1)) == 0);
    CHECK(ring.counters().bad_offload == 2);
    CHECK(ring.tail() == 0);
    // Every frame asks for a tag: 7 free descriptors hold 3 such frames, not 4.
    for (auto& p : b.pkts) p.flags = pkt::TX_VLAN;
    CHECK(ring.push(b.pkts) == 3);
    CHECK(ring.free_slots() == 1);
    CHECK(ring.push(b.pkts) == 0);

    std::vector<e1000::AdvTxDesc> d2(8);
    TxRing e1000e(d2.data(), 8, nullptr, kBuf, TxFormat::e1000e_extended);
    CHECK(e1000e.push(std::span(b.pkts).first(1)) == 0);  // the 82574's context descriptor differs
    CHECK(e1000e.counters().bad_offload == 1);
}

namespace {
// A small fixed-seed generator (xorshift64): the random tests run the same rounds every time.
struct Rng {
    std::uint64_t state;
    std::uint32_t operator()() noexcept {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        return static_cast<std::uint32_t>(state >> 11);
    }
};

// A BufferPool over plain memory: the ring logic of refill and reclaim_to_pools.
struct PlainPool {
    explicit PlainPool(std::uint32_t n) : mem(std::size_t{n} * kBuf), pool(mem, kIova, kBuf, n) {}
    static constexpr std::uint64_t kIova = 0x40000000;
    std::vector<std::byte> mem;
    bardrive::dma::BufferPool pool;
};
}  // namespace

TEST_CASE("rx: refill posts the pool's buffers; frames come out with their addresses, drops go back at the tail") {
    constexpr std::uint32_t n = 8;
    std::vector<e1000::AdvRxDesc> d(n);
    RxRing ring(d.data(), n, kBuf);
    PlainPool p(32);
    REQUIRE(ring.refill(p.pool) == n - 1);
    CHECK(p.pool.available() == 32 - (n - 1));
    std::vector<std::uint32_t> posted_buf(n);
    for (std::uint32_t i = 0; i < n - 1; ++i) {
        CHECK(d[i].read.hdr_addr == 0);
        posted_buf[i] = static_cast<std::uint32_t>((d[i].read.pkt_addr - PlainPool::kIova) / kBuf);
        CHECK(d[i].read.pkt_addr == PlainPool::kIova + std::uint64_t{posted_buf[i]} * kBuf);
    }
    device_rx(d[0], 60);
    device_rx(d[1], 0);  // a lie: dropped, its buffer goes straight back
    device_rx(d[2], 1514, e1000::rxd::DD | e1000::rxd::EOP | e1000::rxd::VP);
    d[2].wb.vlan = 0x1234;
    Packet out[n];
    REQUIRE(ring.poll(out) == 2);
    CHECK(out[0].len == 60);
    CHECK(out[0].buf == posted_buf[0]);
    CHECK(out[0].pool == &p.pool);
    CHECK(out[0].data == reinterpret_cast<std::uint8_t*>(p.mem.data()) + std::size_t{posted_buf[0]} * kBuf);
    CHECK(out[0].iova == PlainPool::kIova + std::uint64_t{posted_buf[0]} * kBuf);
    CHECK(out[0].flags == 0);
    CHECK(out[0].vlan == 0);
    CHECK(out[1].len == 1514);
    CHECK(out[1].buf == posted_buf[2]);
    CHECK(out[1].flags == pkt::RX_VLAN);
    CHECK(out[1].vlan == 0x1234);
    CHECK(out[1].l2_len == 0);
    CHECK(out[1].l3_len == 0);
    CHECK(ring.counters().bad_length == 1);
    CHECK(d[7].read.pkt_addr == PlainPool::kIova + std::uint64_t{posted_buf[1]} * kBuf);  // the dropped buffer
    CHECK(ring.posted() == n - 1 - 2);  // two frames out, the drop's buffer back in
    CHECK(ring.refill(p.pool) == 2);
    CHECK(ring.posted() == n - 1);
    CHECK(p.pool.available() == 32 - (n - 1) - 2);
}

TEST_CASE("rx: a pool that runs dry refills what it can; every buffer is posted or in the pool, once") {
    constexpr std::uint32_t n = 8;
    std::vector<e1000::AdvRxDesc> d(n);
    RxRing ring(d.data(), n, kBuf);
    PlainPool p(n + 1);
    REQUIRE(ring.refill(p.pool) == n - 1);
    for (std::uint32_t i = 0; i < 5; ++i) device_rx(d[i], static_cast<std::uint16_t>(60 + i));
    Packet out[n];
    REQUIRE(ring.poll(out) == 5);
    CHECK(ring.refill(p.pool) == 2);  // only two left
    CHECK(p.pool.available() == 0);
    CHECK(ring.refill(p.pool) == 0);
    for (std::uint32_t i = 0; i < 5; ++i) p.pool.free(out[i].buf);
    CHECK(ring.refill(p.pool) == 3);
    CHECK(ring.posted() == n - 1);
    std::vector<int> seen(n + 1);
    for (std::uint32_t i = 0; i < n - 1; ++i)
        ++seen[(d[(ring.next_to_clean() + i) % n].read.pkt_addr - PlainPool::kIova) / kBuf];
    const std::uint32_t* idx;
    const std::uint32_t left = p.pool.alloc_bulk(n + 1, idx);
    for (std::uint32_t i = 0; i < left; ++i) ++seen[idx[i]];
    for (int s : seen) CHECK(s == 1);
}

TEST_CASE("tx: reclaim_to_pools gives each buffer back to its own pool once, a double free is dropped") {
    constexpr std::uint32_t n = 16;
    std::vector<e1000::AdvTxDesc> d(n);
    std::uint32_t head = 0;
    TxRing ring(d.data(), n, &head, kBuf);
    PlainPool a(8), b(8);
    std::vector<Packet> pkts;
    for (std::uint32_t i = 0; i < 3; ++i) {
        for (PlainPool* p : {&a, &a, &b}) {
            bardrive::dma::BufferPool::Buffer buf;
            REQUIRE(p->pool.alloc(buf));
            pkts.push_back({reinterpret_cast<std::uint8_t*>(buf.data), buf.iova, 60, buf.index, &p->pool});
        }
    }
    REQUIRE(ring.push(pkts) == 9);
    CHECK(a.pool.available() == 2);
    CHECK(b.pool.available() == 5);
    head = 5;  // the device finished five
    CHECK(ring.reclaim_to_pools() == 5);
    CHECK(a.pool.available() == 2 + 4);  // a, a, b, a, a
    CHECK(b.pool.available() == 5 + 1);
    head = 9;
    CHECK(ring.reclaim_to_pools() == 4);
    CHECK(a.pool.available() == 8);
    CHECK(b.pool.available() == 8);
}

TEST_CASE("buffer pool over caller's memory: as many as fit, or a clear error") {
    std::vector<std::byte> mem(10 * kBuf + 100);
    bardrive::dma::BufferPool all(mem, 0x1000, kBuf);
    CHECK(all.count() == 10);
    CHECK(all.at(3).iova == 0x1000 + 3 * kBuf);
    CHECK(all.at(3).data == mem.data() + 3 * kBuf);
    CHECK_THROWS_WITH(bardrive::dma::BufferPool(mem, 0x1000, kBuf, 11),
                      Catch::Matchers::ContainsSubstring("do not fit"));
    CHECK_THROWS_WITH(bardrive::dma::BufferPool(mem, 0x1000, 0), Catch::Matchers::ContainsSubstring("do not fit"));
}

// harvest() takes whole good frames four at a time and anything else one at a time; this checks both
// against a one-at-a-time model of the rules, over random write-backs: good frames with random offload
// bits and tags, bad lengths at both edges, frame errors, chains, descriptors not written yet, batch
// sizes that cut groups of four, and the ring's end.
TEST_CASE("rx: harvest agrees with a one-at-a-time model over random write-backs") {
    constexpr std::uint32_t n = 64;
    std::vector<e1000::AdvRxDesc> d(n);
    RxRing ring(d.data(), n, kBuf);
    Buffers b(n);
    ring.post(std::span(b.pkts).first(n - 1));
    std::vector<std::uint32_t> model_buf(n);  // the buffer in each descriptor, as the model tracks it
    for (std::uint32_t i = 0; i < n - 1; ++i) model_buf[i] = i;
    struct Written {
        std::uint32_t status;
        std::uint16_t len, vlan;
    };
    std::vector<Written> written(n);
    std::uint32_t device = 0, model_clean = 0, model_tail = n - 1;
    bool model_chain = false;
    RxRingCounters expect;
    Rng rnd{0x9e3779b97f4a7c15ull};
    std::uint64_t fast_path_frames = 0;
    for (int round = 0; round < 4000; ++round) {
        // The device writes some of the descriptors posted to it, mostly whole good frames.
        const std::uint32_t writable = (ring.tail() - device) & (n - 1);
        const std::uint32_t k = std::min(writable, rnd() % 14);
        for (std::uint32_t i = 0; i < k; ++i, device = (device + 1) & (n - 1)) {
            std::uint32_t status = e1000::rxd::DD | e1000::rxd::EOP | (rnd() & 0x0ff7f07cu);  // offload and other bits
            std::uint16_t len = static_cast<std::uint16_t>(ETH_HEADER_LEN + rnd() % (kBuf - ETH_HEADER_LEN + 1));
            switch (rnd() % 16) {
                case 0:
                    len = static_cast<std::uint16_t>(rnd() % 2 ? ETH_HEADER_LEN - 1 : kBuf + 1);
                    break;
                case 1:
                    len = rnd() % 2 ? 0 : 0xffff;
                    break;
                case 2:
                    status |= e1000::rxd::ERR_RXE;
                    break;
                case 3:
                    status &= ~e1000::rxd::EOP;
                    break;  // a chain: dropped through its EOP descriptor
                default:
                    break;
            }
            written[device] = {status, len, static_cast<std::uint16_t>(rnd())};
            device_rx(d[device], len, status);
            d[device].wb.vlan = written[device].vlan;
        }
        // The model: at most min(batch, posted) descriptors looked at, stopping at one not written.
        const std::uint32_t batch = 1 + rnd() % 40;
        std::vector<Packet> want;
        std::uint32_t look = std::min(batch, (model_tail - model_clean) & (n - 1));
        for (; look != 0 && d[model_clean].wb.status_error & e1000::rxd::DD; --look) {
            const Written w = written[model_clean];
            const bool eop = w.status & e1000::rxd::EOP;
            const std::uint32_t buf = model_buf[model_clean];
            if (model_chain || !eop || (w.status & e1000::rxd::ERR_RXE) || w.len < ETH_HEADER_LEN || w.len > kBuf) {
                if (model_chain || !eop)
                    ++expect.chained;
                else if (w.status & e1000::rxd::ERR_RXE)
                    ++expect.frame_errors;
                else
                    ++expect.bad_length;
                model_chain = (model_chain || !eop) && !eop;
                model_buf[model_tail] = buf;  // straight back to the device
                model_tail = (model_tail + 1) & (n - 1);
            } else {
                want.push_back(b.pkts[buf]);
                want.back().len = w.len;
                want.back().flags = w.status & pkt::RX_MASK;
                want.back().vlan = w.vlan;
                ++expect.packets;
                expect.bytes += w.len;
            }
            model_clean = (model_clean + 1) & (n - 1);
        }
        std::vector<Packet> out(batch + 1, Packet{nullptr, 1, 2, 3, nullptr, 4, 5, 6, 7});
        const std::uint32_t got = ring.poll(std::span(out).first(batch));
        INFO("round " << round << " batch " << batch);
        REQUIRE(got == want.size());
        for (std::uint32_t i = 0; i < got; ++i) {
            INFO("frame " << i);
            CHECK(out[i].data == want[i].data);
            CHECK(out[i].iova == want[i].iova);
            CHECK(out[i].buf == want[i].buf);
            CHECK(out[i].pool == nullptr);
            CHECK(out[i].len == want[i].len);
            CHECK(out[i].flags == want[i].flags);
            CHECK(out[i].vlan == want[i].vlan);
            CHECK(out[i].l2_len == 0);
            CHECK(out[i].l3_len == 0);
        }
        CHECK(out[got].buf == 3);  // nothing written past the frames handed out
        REQUIRE(ring.next_to_clean() == model_clean);
        REQUIRE(ring.tail() == model_tail);
        if (got >= 4) fast_path_frames += got;
        // The application gives every frame back.
        for (std::uint32_t i = 0; i < got; ++i) model_buf[(model_tail + i) & (n - 1)] = out[i].buf;
        REQUIRE(ring.post(std::span(out).first(got)) == got);
        model_tail = (model_tail + got) & (n - 1);
    }
    CHECK(ring.counters().packets == expect.packets);
    CHECK(ring.counters().bytes == expect.bytes);
    CHECK(ring.counters().bad_length == expect.bad_length);
    CHECK(ring.counters().chained == expect.chained);
    CHECK(ring.counters().frame_errors == expect.frame_errors);
    CHECK(expect.bad_length > 100);
    CHECK(expect.chained > 100);
    CHECK(expect.frame_errors > 100);
    CHECK(fast_path_frames > 1000);
}

// reclaim_to_pools() frees runs of one pool four at a time and anything else one at a time; over random
// mixes of two pools, context descriptors (offloaded frames) and completions that cut groups of four,
// every buffer must come back to its own pool exactly once.
TEST_CASE("tx: reclaim_to_pools returns every buffer to its own pool once over random mixes") {
    constexpr std::uint32_t n = 64;
    std::vector<e1000::AdvTxDesc> d(n);
    std::uint32_t head = 0;
    TxRing ring(d.data(), n, &head, kBuf);
    PlainPool a(96), b(96);
    Rng rnd{0x2545f4914f6cdd1dull};
    std::uint32_t device_head = 0;
    std::uint64_t pushed = 0;
    for (int round = 0; round < 3000; ++round) {
        std::vector<Packet> pkts;
        PlainPool* from = rnd() % 4 ? &a : &b;
        for (std::uint32_t k = rnd() % 24; k != 0; --k) {
            if (rnd() % 8 == 0) from = from == &a ? &b : &a;  // runs of one pool, now and then the other
            bardrive::dma::BufferPool::Buffer buf;
            if (!from->pool.alloc(buf)) break;
            pkts.push_back({reinterpret_cast<std::uint8_t*>(buf.data), buf.iova, 60, buf.index, &from->pool});
            if (rnd() % 10 == 0) {  // an offloaded frame: a context descriptor before it
                pkts.back().flags = pkt::TX_IP_CSUM;
                pkts.back().l2_len = 14;
                pkts.back().l3_len = 20;
            }
        }
        const std::uint32_t taken = ring.push(pkts);
        for (std::uint32_t i = taken; i < pkts.size(); ++i) pkts[i].pool->free(pkts[i].buf);  // did not fit
        pushed += taken;
        // The device finishes some of what is queued.
        const std::uint32_t queued = (ring.tail() - device_head) & (n - 1);
        device_head = (device_head + (queued == 0 ? 0 : rnd() % (queued + 1))) & (n - 1);
        head = device_head;
        ring.reclaim_to_pools();
        INFO("round " << round);
        REQUIRE(a.pool.available() <= 96);  // nothing freed twice
        REQUIRE(b.pool.available() <= 96);
    }
    head = ring.tail();
    ring.reclaim_to_pools();
    CHECK(ring.in_flight() == 0);
    CHECK(pushed > 10000);
    for (PlainPool* p : {&a, &b}) {
        REQUIRE(p->pool.available() == 96);
        const std::uint32_t* idx;
        REQUIRE(p->pool.alloc_bulk(96, idx) == 96);
        std::vector<int> seen(96);
        for (std::uint32_t i = 0; i < 96; ++i) ++seen[idx[i]];
        for (int s : seen) CHECK(s == 1);
    }
}

// push() writes frames without offloads four at a time and anything else one at a time; this checks
// every descriptor and slot it writes against a one-at-a-time model, over random batches: lengths at and
// beyond both limits, offloaded frames (a context descriptor first), a ring that fills up, its end, for
// both descriptor formats (igb with head write-back, the 82574's with a report per descriptor).
TEST_CASE("tx: push agrees with a one-at-a-time model over random batches") {
    for (const TxFormat format : {TxFormat::igb_advanced, TxFormat::e1000e_extended}) {
        const bool advanced = format == TxFormat::igb_advanced;
        INFO((advanced ? "igb" : "82574"));
        constexpr std::uint32_t n = 64, max_frame = 1514;
        std::vector<e1000::AdvTxDesc> d(n);
        std::uint32_t head = 0;
        TxRing ring(d.data(), n, advanced ? &head : nullptr, max_frame, format);
        PlainPool pool(n);
        const std::uint32_t type = (advanced ? e1000::txd::DTYP_DATA : e1000::txd::DTYP_E1000E_DATA) |
                                   e1000::txd::CMD_DEXT | e1000::txd::CMD_IFCS | e1000::txd::CMD_EOP |
                                   (advanced ? 0 : e1000::txd::CMD_RS);
        Rng rnd{0xd1b54a32d192ed03ull};
        std::uint32_t model_tail = 0;
        std::uint64_t frames = 0, bad_length = 0, bad_offload = 0;
        std::vector<Packet> slot(n);  // what each descriptor's slot should give back
        for (int round = 0; round < 3000; ++round) {
            std::vector<Packet> pkts(rnd() % 24);
            for (Packet& p : pkts) {
                p = {nullptr, 0x7000000000ull + rnd(), 1 + rnd() % max_frame, rnd() % n, &pool.pool};
                switch (rnd() % 24) {
                    case 0:
                        p.len = rnd() % 2 ? 0 : max_frame + 1 + rnd() % 100;
                        break;
                    case 1:
                    case 2:
                        p.flags = pkt::TX_IP_CSUM | (rnd() % 2 ? pkt::TX_UDP_CSUM : 0);
                        p.l2_len = 14;
                        p.l3_len = rnd() % 8 ? 20 : 0;  // now and then lengths the offload cannot use
                        break;
                    default:
                        break;
                }
            }
            // The model: frames in order until the ring is full or a frame is refused.
            std::uint32_t room = n - 1 - ((model_tail - head) & (n - 1)), want = 0, last = model_tail;
            std::vector<std::uint32_t> data_desc;
            for (const Packet& p : pkts) {
                if (room == 0) break;
                if (p.len == 0 || p.len > max_frame) {
                    ++bad_length;
                    break;
                }
                if (p.flags) {
                    if (!advanced || p.l3_len < 20) {
                        ++bad_offload;
                        break;
                    }
                    if (room < 2) break;
                    slot[model_tail] = Packet{};
                    model_tail = (model_tail + 1) & (n - 1);
                    --room;
                }
                data_desc.push_back(model_tail);
                slot[model_tail] = p;
                last = model_tail;
                model_tail = (model_tail + 1) & (n - 1);
                --room;
                ++want;
            }
            const std::uint32_t taken = ring.push(pkts);
            INFO("round " << round);
            REQUIRE(taken == want);
            REQUIRE(ring.tail() == model_tail);
            for (std::uint32_t i = 0; i < taken; ++i) {
                const Packet& p = pkts[i];
                const e1000::AdvTxDesc& x = d[data_desc[i]];
                CHECK(x.read.buffer_addr == p.iova);
                std::uint32_t cmd = type | p.len | (data_desc[i] == last ? e1000::txd::CMD_RS : 0);
                std::uint32_t olinfo = advanced ? p.len << e1000::txd::PAYLEN_SHIFT : 0;
                if (p.flags)
                    olinfo |= e1000::txd::POPTS_IXSM | (p.flags & pkt::TX_UDP_CSUM ? e1000::txd::POPTS_TXSM : 0);
                CHECK(x.read.cmd_type_len == cmd);
                CHECK(x.read.olinfo_status == olinfo);
            }
            frames += taken;
            // The device finishes everything; the slots give back what the model says, in ring order.
            if (advanced)
                head = ring.tail();
            else
                for (std::uint32_t i = 0; i < ring.in_flight(); ++i)
                    d[(ring.tail() - 1 - i) & (n - 1)].wb.status |= e1000::txd::STA_DD;
            std::vector<Packet> back(n);
            const std::uint32_t start = (ring.tail() - ring.in_flight()) & (n - 1);
            const std::uint32_t got = ring.reclaim(back);
            for (std::uint32_t i = 0; i < got; ++i) {
                const Packet& s = slot[(start + i) & (n - 1)];
                CHECK(back[i].pool == s.pool);
                CHECK(back[i].buf == s.buf);
                CHECK(back[i].len == s.len);
            }
            if (!advanced) head = ring.tail();
        }
        CHECK(ring.counters().packets == frames);
        CHECK(ring.counters().bad_length == bad_length);
        CHECK(ring.counters().bad_offload == bad_offload);
        CHECK(frames > 10000);
    }
}
