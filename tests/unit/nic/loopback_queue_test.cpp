// nic::LoopbackQueue's logic (the loopback DMA engine) against a software stand-in for the device that
// follows the descriptors the way QEMU's igb does in MAC loopback with header split, and that can lie:
// a wrong length, a header not split off, a frame error, a frame from someone else, a TX head out of
// range, no completion at all. The real device is exercised in the lab (tests/lab/nic_igb_test.cpp).
#include "nic/e1000/loopback_queue.hpp"

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "nic/e1000/engine.hpp"
#include "nic/loopback_engine.hpp"
#include "nic/rss.hpp"
#include "support/fake_loopback_port.hpp"

using namespace bardrive::nic;
using bardrive::nic::LoopbackQueue;

namespace {

constexpr std::uint64_t kIovaBase = 0x40000000;
constexpr std::uint32_t kRing = 64;

// The fake device with its rings and 8 MiB of memory it reaches at IOVA kIovaBase.
struct FakePort {
    std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(8 << 20, 0);
    std::vector<e1000::AdvRxDesc> rx = std::vector<e1000::AdvRxDesc>(kRing);
    std::vector<e1000::AdvTxDesc> tx = std::vector<e1000::AdvTxDesc>(kRing);
    std::vector<std::uint8_t> headers = std::vector<std::uint8_t>(2 * kRing * 64);
    std::uint32_t regs[4] = {};
    bardrive::testing::FakeLoopbackPort dev{{rx.data(), tx.data(), headers.data(), regs}, kRing, 0x10000000};
    FakePort() { dev.map(kIovaBase, mem.data(), mem.size()); }
    std::uint8_t* at(std::uint64_t iova) { return mem.data() + (iova - kIovaBase); }
    void run() { dev.run(); }
};

LoopbackQueue queue_on(FakePort& port, std::uint32_t payload = 1024) {
    LoopbackQueue q{};
    q.qp = port.dev.queue_pair();
    q.payload = payload;
    q.port = 49152;
    std::uint8_t tmpl[42] = {2,    0, 0,   0,   0,  1, 2,    0,    0,    0,    0, 1, 0x08, 0x00,
                             0x45, 0, 0,   0,   0,  0, 0x40, 0,    64,   17,   0, 0, 169,  254,
                             66,   1, 169, 254, 66, 2, 0xc0, 0x00, 0xbd, 0x00, 0, 0, 0,    0};
    std::memcpy(q.header, tmpl, sizeof tmpl);
    q.status = LoopbackQueue::Status::ok;
    return q;
}

std::uint64_t iova(std::uint64_t off) { return kIovaBase + off; }

// Copies `size` bytes from offset 0 to offset 2 MiB and runs the device.
bool copy(FakePort& port, LoopbackQueue& q, std::uint32_t size) {
    if (!q.start(iova(2 << 20), iova(0), size)) return false;
    port.run();
    return q.wait(50'000'000);
}

}  // namespace

TEST_CASE("loopback queue: copies land exactly, headers stay in their slots") {
    FakePort port;
    LoopbackQueue q = queue_on(port);
    for (std::size_t i = 0; i < (1 << 20); ++i) port.mem[i] = static_cast<std::uint8_t>(i * 7 + 3);
    for (std::uint32_t size : {23u, 60u, 1023u, 1024u, 1025u, 1041u, 4096u, 10000u, 30000u}) {
        INFO("size " << size);
        std::memset(port.at(iova((2 << 20) - 64)), 0xaa, size + 128);
        REQUIRE(copy(port, q, size));
        CHECK(std::memcmp(port.at(iova(2 << 20)), port.mem.data(), size) == 0);
        CHECK(*port.at(iova((2 << 20) - 1)) == 0xaa);     // nothing before the destination
        CHECK(*port.at(iova((2 << 20) + size)) == 0xaa);  // nor after it
    }
    CHECK(q.copies_done == 9);
    CHECK(q.bytes == 23 + 60 + 1023 + 1024 + 1025 + 1041 + 4096 + 10000 + 30000);
}

TEST_CASE("loopback queue: frames are cut so that none is padded") {
    FakePort port;
    LoopbackQueue q = queue_on(port);
    CHECK(q.frames_for(22) == 0);
    CHECK_FALSE(q.start(iova(2 << 20), iova(0), 22));  // the whole frame would stay in the header buffer
    CHECK(q.frames_for(23) == 1);
    CHECK(q.frames_for(1024) == 1);
    CHECK(q.frames_for(1025) == 2);
    // 1024 + 5: the last two frames share the rest so the last one still carries 23 bytes.
    REQUIRE(copy(port, q, 1029));
    CHECK(q.frames == 2);
    CHECK(port.rx[0].wb.length == 1029 - 23);
    CHECK(port.rx[1].wb.length == 23);
}

TEST_CASE("loopback queue: headers are valid IPv4/UDP with this queue's port and a sequence number") {
    FakePort port;
    LoopbackQueue q = queue_on(port);
    REQUIRE(copy(port, q, 3000));
    for (std::uint32_t f = 0; f < 3; ++f) {
        const std::uint8_t* h = port.headers.data() + f * 64;  // RX header slots
        std::uint32_t sum = 0;
        for (int b = 14; b < 34; b += 2) sum += h[b] << 8 | h[b + 1];
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        CHECK(sum == 0xffff);  // the IPv4 header checksum verifies
        CHECK((h[18] << 8 | h[19]) == static_cast<int>(f));
        CHECK((h[34] << 8 | h[35]) == 49152);
        CHECK((h[16] << 8 | h[17]) == 28 + (f < 2 ? 1024 : 3000 - 2048));
    }
}

TEST_CASE("loopback queue: every lie of the device breaks the queue and stops its receive DMA") {
    struct Case {
        const char* what;
        std::function<void(e1000::AdvRxDesc&, std::uint8_t*)> lie;
        std::uint32_t check;
    };
    const std::vector<Case> cases = {
        {"short length", [](e1000::AdvRxDesc& d, std::uint8_t*) { d.wb.length -= 1; }, LoopbackQueue::check_length},
        {"frame error", [](e1000::AdvRxDesc& d, std::uint8_t*) { d.wb.status_error |= e1000::rxd::ERR_RXE; },
         LoopbackQueue::check_status},
        {"no EOP", [](e1000::AdvRxDesc& d, std::uint8_t*) { d.wb.status_error &= ~e1000::rxd::EOP; },
         LoopbackQueue::check_status},
        {"header not split", [](e1000::AdvRxDesc& d, std::uint8_t*) { d.wb.hdr_info = 0; }, LoopbackQueue::check_split},
        {"someone else's frame", [](e1000::AdvRxDesc&, std::uint8_t* h) { h[35] ^= 1; }, LoopbackQueue::check_header},
        {"a frame out of order", [](e1000::AdvRxDesc&, std::uint8_t* h) { h[19] += 1; }, LoopbackQueue::check_header},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        FakePort port;
        LoopbackQueue q = queue_on(port);
        port.dev.lie = c.lie;
        CHECK_FALSE(copy(port, q, 4000));
        CHECK(q.status == LoopbackQueue::Status::broken);
        CHECK(q.failed_check == c.check);
        CHECK(port.dev.rxdctl() == 0);                      // receive DMA stopped at once
        CHECK_FALSE(q.start(iova(2 << 20), iova(0), 100));  // and the queue stays out of use
    }
}

TEST_CASE("loopback queue: a TX head beyond what was queued, and silence, break it too") {
    {
        FakePort port;
        LoopbackQueue q = queue_on(port);
        REQUIRE(copy(port, q, 2000));
        port.dev.set_tx_head(40);  // nothing was queued there
        CHECK_FALSE(q.start(iova(2 << 20), iova(0), 2000));
        CHECK(q.failed_check == LoopbackQueue::check_head);
    }
    {
        FakePort port;
        port.dev.deaf = true;
        LoopbackQueue q = queue_on(port);
        CHECK_FALSE(copy(port, q, 2000));
        CHECK(q.failed_check == LoopbackQueue::check_timeout);
        CHECK(port.dev.rxdctl() == 0);
    }
}

TEST_CASE("loopback queue: rings and the copy FIFO refuse what does not fit, and wrap around") {
    FakePort port;
    LoopbackQueue q = queue_on(port);
    // 63 usable RX slots, 31 frames of two TX descriptors each.
    CHECK_FALSE(q.start(iova(2 << 20), iova(0), 32 * 1024));
    REQUIRE(q.start(iova(2 << 20), iova(0), 31 * 1024));
    CHECK_FALSE(q.start(iova(3 << 20), iova(0), 1024));  // TX ring full until completions come back
    port.run();
    REQUIRE(q.wait(50'000'000));
    for (int lap = 0; lap < 20; ++lap) REQUIRE(copy(port, q, 7 * 1024 + 100));
    CHECK(q.frames == 31 + 20 * 8);
    for (std::uint32_t i = 0; i < LoopbackQueue::max_copies; ++i) {
        REQUIRE(q.start(iova(2 << 20), iova(0), 23));
        port.run();  // landed, but not harvested yet
    }
    CHECK_FALSE(q.start(iova(2 << 20), iova(0), 23));  // the copy FIFO is full
    CHECK(q.wait(50'000'000));
    CHECK(q.start(iova(2 << 20), iova(0), 23));
}

TEST_CASE("rss: Toeplitz matches the specification's IPv4/UDP verification vector") {
    // Microsoft RSS verification suite: 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178
    // with ports, 0x323e8fc2 without.
    CHECK(rss_hash_ipv4(0x420995bb, 0xa18e6450, 2794, 1766) == 0x51ccc178);
    const std::uint8_t addrs[8] = {66, 9, 149, 187, 161, 142, 100, 80};
    CHECK(toeplitz_hash(rss_key, addrs) == 0x323e8fc2);
    CHECK(rss_queue(0x51ccc178, 4) == (0x78 % 128) % 4);
}

TEST_CASE("loopback engine: payloads from 1 KiB in whole KiB up to what the chip's frames hold") {
    using bardrive::nic::e1000::check_engine_payload;
    CHECK_NOTHROW(check_engine_payload("igb", 1024, 9724));
    CHECK_NOTHROW(check_engine_payload("igb", 9216, 9724));
    CHECK_THROWS_AS(check_engine_payload("igb", 1000, 9724), bardrive::Error);   // not whole KiB
    CHECK_THROWS_AS(check_engine_payload("igb", 10240, 9724), bardrive::Error);  // past the 82576's 9.5 KB
    CHECK_NOTHROW(check_engine_payload("e1000e", 8192, 9014));
    CHECK_THROWS_AS(check_engine_payload("e1000e", 9216, 9014), bardrive::Error);  // past 9018-byte frames
}

TEST_CASE("loopback engine: each queue's UDP source port is one RSS sends back to that queue") {
    using namespace bardrive::nic::e1000;
    for (std::uint16_t queues : {1, 2, 4, 8}) {
        for (std::uint16_t q = 0; q < queues; ++q) {
            LoopbackQueue e = make_engine_queue(QueuePair{}, 4096, engine_udp_port(q, queues), loopback_engine_mac);
            CHECK(e.port == engine_udp_port(q, queues));
            CHECK(e.payload == 4096);
            // The header's source port, then the hash of the 4-tuple, give queue q.
            const std::uint16_t sport = static_cast<std::uint16_t>(e.header[34] << 8 | e.header[35]);
            CHECK(sport == e.port);
            if (queues > 1) CHECK(rss_queue(rss_hash_ipv4(0xa9fe4201, 0xa9fe4202, sport, 0xbd00), queues) == q);
            CHECK(std::equal(e.header, e.header + 6, loopback_engine_mac.bytes.begin()));
        }
    }
}
