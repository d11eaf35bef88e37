// The lab bed is real: an igb opened through VFIO answers its registers, a hugepage buffer maps for
// DMA, and a frame NIC A transmits lands, through NIC B's receive DMA and the IOMMU, in the ivshmem
// window; the runner then reads the window's backing file on the host (expect-window0@...).
// Runs inside `lab/lab run basic --bind all` (tests/lab/meson.build); elsewhere it SKIPs.
//
// The NICs are driven by the least register programming that moves one frame (82576 datasheet
// sections cited in nic/igb/regs.hpp), not by nic::Igb: a broken driver must not look like a broken lab.
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "dma/peer_window.hpp"
#include "lab_env.hpp"
#include "nic/e1000/desc.hpp"
#include "nic/igb/regs.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
namespace igb = bardrive::nic::igb;

namespace {

constexpr std::size_t ring_descs = igb::RING_ALIGN_DESCS;  // the smallest ring the device accepts
constexpr std::uint64_t window_offset = 0x1000;            // where NIC B's receive buffer sits in the window
constexpr std::size_t frame_len = 128;

}  // namespace

TEST_CASE("an igb opened through VFIO answers CTRL and STATUS", "[lab]") {
    labenv::Lab lab = labenv::lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    CHECK(nic.config_read16(0x00) == igb::VENDOR_INTEL);
    CHECK(nic.config_read16(0x02) == igb::DEVICE_82576);
    nic.enable_bus_master();
    vfio::Mmio regs = nic.map_bar(0);
    REQUIRE(regs.size() >= igb::BAR0_MIN_SIZE);
    labenv::igb_reset_and_link(regs);
    CHECK((regs.read32(igb::CTRL) & igb::ctrl::SLU) != 0);
    CHECK((regs.read32(igb::STATUS) & igb::status::LU) != 0);
}

TEST_CASE("a hugepage buffer maps for DMA inside the domain's IOVA ranges", "[lab]") {
    labenv::Lab lab = labenv::lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    dma::IovaAllocator iovas(domain);
    dma::Memory mem = dma::Memory::allocate(dma::page_2m);  // the lab reserves 64 x 2 MiB
    CHECK(mem.page_size() == dma::page_2m);
    dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
    CHECK(map.size() == dma::page_2m);
    CHECK(map.iova() % dma::page_2m == 0);
    bool inside = false;
    for (const vfio::IovaRange& r : domain.iova_ranges())
        inside = inside || (map.iova() >= r.first && map.iova() + map.size() - 1 <= r.last);
    CHECK(inside);
}

TEST_CASE("a frame NIC A sends lands in the window through NIC B's RX DMA", "[lab]") {
    labenv::Lab lab = labenv::lab_or_skip();
    vfio::Domain domain;
    vfio::Device a = vfio::Device::open(domain, lab.nics[0]);
    vfio::Device b = vfio::Device::open(domain, lab.nics[1]);
    vfio::Device win = vfio::Device::open(domain, lab.windows[0]);
    a.enable_bus_master();
    b.enable_bus_master();
    win.enable_bus_master();
    vfio::Mmio ra = a.map_bar(0);
    vfio::Mmio rb = b.map_bar(0);
    labenv::igb_reset_and_link(ra);
    labenv::igb_reset_and_link(rb);

    dma::IovaAllocator iovas(domain);
    dma::Memory mem = dma::Memory::allocate(dma::page_2m);
    std::memset(mem.data(), 0, mem.size());
    dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
    dma::PeerWindow window = dma::PeerWindow::map(domain, iovas, win, 2);  // ivshmem-plain: BAR2 is the memory
    REQUIRE(window.size() >= window_offset + 2048);

    // Host memory layout: RX ring, TX ring, the frame.
    auto* rx_ring = reinterpret_cast<volatile igb::AdvRxDesc*>(mem.data());
    std::byte* tx_mem = mem.data() + 4096;
    auto* tx_ring = reinterpret_cast<volatile igb::AdvTxDesc*>(tx_mem);
    std::byte* frame = mem.data() + 8192;

    // A broadcast frame (no MAC set-up needed on B) with a per-run nonce, so no stale bytes can pass.
    std::mt19937_64 rng(std::random_device{}());
    for (std::size_t i = 0; i < frame_len; ++i) frame[i] = std::byte(rng() & 0xff);
    std::memset(frame, 0xff, 6);                            // destination: broadcast
    std::memcpy(frame + 6, "\x52\x54\x00\x12\x34\x10", 6);  // source: NIC A's MAC in the preset
    frame[12] = std::byte{0x88};                            // EtherType 0x88b5: local experimental
    frame[13] = std::byte{0xb5};

    // NIC B: one advanced one-buffer RX descriptor pointing into the window (7.1.5, 8.10).
    rb.write32(igb::RCTL, 0);
    rx_ring[0].read.pkt_addr = window.iova() + window_offset;
    rx_ring[0].read.hdr_addr = 0;
    rb.write32(igb::RDBAL(0), static_cast<std::uint32_t>(map.iova_of(mem.data())));
    rb.write32(igb::RDBAH(0), static_cast<std::uint32_t>(map.iova_of(mem.data()) >> 32));
    rb.write32(igb::RDLEN(0), ring_descs * sizeof(igb::AdvRxDesc));
    rb.write32(igb::SRRCTL(0), (2048 >> igb::srrctl::BSIZEPKT_SHIFT) | igb::srrctl::DESCTYPE_ADV_ONEBUF);
    rb.write32(igb::RDH(0), 0);
    rb.write32(igb::RDT(0), 0);
    rb.write32(igb::RXDCTL(0), igb::rxdctl::ENABLE);
    REQUIRE(labenv::wait_for([&] { return (rb.read32(igb::RXDCTL(0)) & igb::rxdctl::ENABLE) != 0; },
                             std::chrono::seconds(1)));
    rb.write32(igb::RCTL, igb::rctl::EN | igb::rctl::BAM | igb::rctl::SECRC);
    vfio::wmb();
    rb.write32(igb::RDT(0), 1);

    // NIC A: one advanced data descriptor (7.2.2.3), descriptor done written back (RS).
    tx_ring[0].read.buffer_addr = map.iova_of(frame);
    tx_ring[0].read.cmd_type_len = static_cast<std::uint32_t>(frame_len) | igb::txd::DTYP_DATA | igb::txd::CMD_EOP |
                                   igb::txd::CMD_IFCS | igb::txd::CMD_RS | igb::txd::CMD_DEXT;
    tx_ring[0].read.olinfo_status = static_cast<std::uint32_t>(frame_len) << igb::txd::PAYLEN_SHIFT;
    ra.write32(igb::TDBAL(0), static_cast<std::uint32_t>(map.iova_of(tx_mem)));
    ra.write32(igb::TDBAH(0), static_cast<std::uint32_t>(map.iova_of(tx_mem) >> 32));
    ra.write32(igb::TDLEN(0), ring_descs * sizeof(igb::AdvTxDesc));
    ra.write32(igb::TDH(0), 0);
    ra.write32(igb::TDT(0), 0);
    ra.write32(igb::TXDCTL(0), igb::rxdctl::ENABLE);
    REQUIRE(labenv::wait_for([&] { return (ra.read32(igb::TXDCTL(0)) & igb::rxdctl::ENABLE) != 0; },
                             std::chrono::seconds(1)));
    ra.write32(igb::TCTL,
               igb::tctl::EN | igb::tctl::PSP | (0xf << igb::tctl::CT_SHIFT) | (0x3f << igb::tctl::COLD_SHIFT));

    // Nothing in the window yet (a fresh backing file per run).
    const vfio::Mmio& cpu = window.cpu();
    for (std::size_t i = 0; i < frame_len; i += 4) REQUIRE(cpu.read32(window.bar_offset() + window_offset + i) == 0);

    vfio::wmb();
    ra.write32(igb::TDT(0), 1);
    REQUIRE(labenv::wait_for([&] { return (tx_ring[0].wb.status & igb::txd::STA_DD) != 0; }, std::chrono::seconds(5)));
    REQUIRE(
        labenv::wait_for([&] { return (rx_ring[0].wb.status_error & igb::rxd::DD) != 0; }, std::chrono::seconds(5)));
    vfio::rmb();
    CHECK((rx_ring[0].wb.status_error & igb::rxd::EOP) != 0);
    CHECK((rx_ring[0].wb.status_error & igb::rxd::ERR_RXE) == 0);
    REQUIRE(rx_ring[0].wb.length == frame_len);

    // The guest's view of the window holds the frame ...
    std::vector<std::byte> seen(frame_len);
    for (std::size_t i = 0; i < frame_len; ++i) seen[i] = std::byte(cpu.read8(window.bar_offset() + window_offset + i));
    CHECK(std::memcmp(seen.data(), frame, frame_len) == 0);

    // ... and the host checks its backing file after the guest is gone (lab/lab: expect-window<N>@<offset>.bin).
    std::ofstream expect(lab.out + "/expect-window0@" + std::to_string(window.bar_offset() + window_offset) + ".bin",
                         std::ios::binary);
    expect.write(reinterpret_cast<const char*>(frame), frame_len);
    REQUIRE(expect.good());
}
