// nic::LoopbackQueue's logic (the loopback DMA engine) against a software stand-in for the device that
// follows the descriptors the way QEMU's igb does in MAC loopback with header split, and that can lie:
// a wrong length, a header not split off, a frame error, a frame from someone else, a TX head out of
// range, no completion at all. The real device is exercised in the lab (tests/lab/nic_igb_test.cpp).
#include "nic/loopback_queue.hpp"

#include <catch2/catch_test_macros.hpp>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "nic/loopback_copy.hpp"
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
    std::vector<igb::AdvRxDesc> rx = std::vector<igb::AdvRxDesc>(kRing);
    std::vector<igb::AdvTxDesc> tx = std::vector<igb::AdvTxDesc>(kRing);
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
        std::function<void(igb::AdvRxDesc&, std::uint8_t*)> lie;
        std::uint32_t check;
    };
    const std::vector<Case> cases = {
        {"short length", [](igb::AdvRxDesc& d, std::uint8_t*) { d.wb.length -= 1; }, LoopbackQueue::check_length},
        {"frame error", [](igb::AdvRxDesc& d, std::uint8_t*) { d.wb.status_error |= igb::rxd::ERR_RXE; },
         LoopbackQueue::check_status},
        {"no EOP", [](igb::AdvRxDesc& d, std::uint8_t*) { d.wb.status_error &= ~igb::rxd::EOP; },
         LoopbackQueue::check_status},
        {"header not split", [](igb::AdvRxDesc& d, std::uint8_t*) { d.wb.hdr_info = 0; }, LoopbackQueue::check_split},
        {"someone else's frame", [](igb::AdvRxDesc&, std::uint8_t* h) { h[35] ^= 1; }, LoopbackQueue::check_header},
        {"a frame out of order", [](igb::AdvRxDesc&, std::uint8_t* h) { h[19] += 1; }, LoopbackQueue::check_header},
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

TEST_CASE("loopback engine: port options ask for what the engine needs, and refuse impossible frames") {
    IgbOptions o = loopback_port_options(4, 256, 4096);
    CHECK(o.rx_queues == 4);
    CHECK(o.tx_queues == 4);
    CHECK(o.external_queues);
    CHECK(o.loopback == Loopback::mac);
    CHECK(o.rx_header_bytes == 64);
    CHECK(o.rx_buffer_bytes >= 4096 + LoopbackQueue::header_bytes);
    CHECK(o.max_frame == 4096 + LoopbackQueue::header_bytes);
    CHECK_FALSE(o.broadcast);
    CHECK(o.mac == loopback_engine_mac);
    CHECK(loopback_port_options(1, 512, 1024).max_frame == 1514);  // standard frames
    CHECK_THROWS_AS(loopback_port_options(1, 512, 1000), bardrive::Error);
    CHECK_THROWS_AS(loopback_port_options(1, 512, 10240), bardrive::Error);
}

TEST_CASE("loopback engine: e1000e port options: packet split with the data buffer exactly one frame's data") {
    bardrive::nic::E1000eOptions o = bardrive::nic::loopback_e1000e_options(1024, 4096);
    CHECK(o.rx_ring == 1024);
    CHECK(o.external_queues);
    CHECK(o.loopback == Loopback::mac);
    CHECK(o.rx_header_bytes == 128);  // PSRCTL.BSIZE0 counts in 128 bytes
    CHECK(o.rx_buffer_bytes == 4096);
    CHECK(o.max_frame == 4096 + LoopbackQueue::header_bytes);
    CHECK_FALSE(o.broadcast);
    CHECK(o.mac == loopback_engine_mac);
    CHECK(bardrive::nic::loopback_e1000e_options(512, 8192).max_frame == 8192 + LoopbackQueue::header_bytes);
    CHECK_THROWS_AS(bardrive::nic::loopback_e1000e_options(512, 9216), bardrive::Error);  // past 9018-byte frames
    CHECK_THROWS_AS(bardrive::nic::loopback_e1000e_options(512, 1000), bardrive::Error);
}
