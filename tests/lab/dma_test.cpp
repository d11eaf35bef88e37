// dma/ against a real kernel's VFIO in the lab guest (lab/lab run basic --bind all): hugepage memory
// mapped and unmapped through the IOMMU, buffer pools, and a peer window that a NIC's receive DMA
// lands in, checked from the host's side of the window; after the window is unmapped, a second DMA
// to the same IOVA must not land.
//
// The NICs are driven by the least register programming that moves a frame (82576 datasheet sections
// in nic/igb/regs.hpp), not by nic::Igb: this tests dma/, not the driver.
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "core/error.hpp"
#include "dma/buffer_pool.hpp"
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
using Catch::Matchers::ContainsSubstring;
namespace igb = bardrive::nic::igb;
using labenv::lab_or_skip;
using labenv::wait_for;

namespace {

bool inside_ranges(const vfio::Domain& d, std::uint64_t iova, std::uint64_t size) {
    for (const auto& r : d.iova_ranges())
        if (iova >= r.first && iova + size - 1 <= r.last) return true;
    return false;
}

// NIC A's TX ring and NIC B's RX ring (8 descriptors each, in `mem`), one frame per send().
class Wire {
public:
    static constexpr std::size_t descs = igb::RING_ALIGN_DESCS;

    Wire(const vfio::Mmio& a, const vfio::Mmio& b, const dma::Mapping& rings) : a_(a), b_(b) {
        auto* base = static_cast<std::byte*>(rings.vaddr());
        rx_ = reinterpret_cast<volatile igb::AdvRxDesc*>(base);
        tx_ = reinterpret_cast<volatile igb::AdvTxDesc*>(base + 4096);
        std::memset(base, 0, 8192);
        // 8.10: B's receive queue 0, advanced one-buffer descriptors, 2 KiB buffers.
        b.write32(igb::RCTL, 0);
        b.write32(igb::RDBAL(0), static_cast<std::uint32_t>(rings.iova()));
        b.write32(igb::RDBAH(0), static_cast<std::uint32_t>(rings.iova() >> 32));
        b.write32(igb::RDLEN(0), descs * sizeof(igb::AdvRxDesc));
        b.write32(igb::SRRCTL(0), (2048 >> igb::srrctl::BSIZEPKT_SHIFT) | igb::srrctl::DESCTYPE_ADV_ONEBUF);
        b.write32(igb::RDH(0), 0);
        b.write32(igb::RDT(0), 0);
        b.write32(igb::RXDCTL(0), igb::rxdctl::ENABLE);
        REQUIRE(
            wait_for([&] { return (b.read32(igb::RXDCTL(0)) & igb::rxdctl::ENABLE) != 0; }, std::chrono::seconds(1)));
        b.write32(igb::RCTL, igb::rctl::EN | igb::rctl::BAM | igb::rctl::SECRC);
        // 8.12: A's transmit queue 0.
        a.write32(igb::TDBAL(0), static_cast<std::uint32_t>(rings.iova() + 4096));
        a.write32(igb::TDBAH(0), static_cast<std::uint32_t>((rings.iova() + 4096) >> 32));
        a.write32(igb::TDLEN(0), descs * sizeof(igb::AdvTxDesc));
        a.write32(igb::TDH(0), 0);
        a.write32(igb::TDT(0), 0);
        a.write32(igb::TXDCTL(0), igb::rxdctl::ENABLE);
        REQUIRE(
            wait_for([&] { return (a.read32(igb::TXDCTL(0)) & igb::rxdctl::ENABLE) != 0; }, std::chrono::seconds(1)));
        a.write32(igb::TCTL,
                  igb::tctl::EN | igb::tctl::PSP | (0xf << igb::tctl::CT_SHIFT) | (0x3f << igb::tctl::COLD_SHIFT));
    }

    // Sends `len` bytes at frame_iova from A; B receives them at rx_iova. Returns B's written length
    // (0 if B reported nothing). Both descriptors complete even when the IOMMU drops B's data write.
    std::uint32_t send(std::uint64_t frame_iova, std::uint32_t len, std::uint64_t rx_iova) {
        const std::size_t i = next_++;
        rx_[i].read.pkt_addr = rx_iova;
        rx_[i].read.hdr_addr = 0;
        vfio::wmb();
        b_.write32(igb::RDT(0), static_cast<std::uint32_t>(i + 1));
        tx_[i].read.buffer_addr = frame_iova;
        tx_[i].read.cmd_type_len =
            len | igb::txd::DTYP_DATA | igb::txd::CMD_EOP | igb::txd::CMD_IFCS | igb::txd::CMD_RS | igb::txd::CMD_DEXT;
        tx_[i].read.olinfo_status = len << igb::txd::PAYLEN_SHIFT;
        vfio::wmb();
        a_.write32(igb::TDT(0), static_cast<std::uint32_t>(i + 1));
        REQUIRE(wait_for([&] { return (tx_[i].wb.status & igb::txd::STA_DD) != 0; }, std::chrono::seconds(5)));
        if (!wait_for([&] { return (rx_[i].wb.status_error & igb::rxd::DD) != 0; }, std::chrono::seconds(5))) return 0;
        vfio::rmb();
        return rx_[i].wb.length;
    }

private:
    const vfio::Mmio& a_;
    const vfio::Mmio& b_;
    volatile igb::AdvRxDesc* rx_ = nullptr;
    volatile igb::AdvTxDesc* tx_ = nullptr;
    std::size_t next_ = 0;
};

// A broadcast frame with an experimental EtherType and random payload: no stale bytes can match.
void make_frame(std::byte* f, std::size_t len, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < len; ++i) f[i] = std::byte(rng() & 0xff);
    std::memset(f, 0xff, 6);
    std::memcpy(f + 6, "\x52\x54\x00\x12\x34\x10", 6);
    f[12] = std::byte{0x88};
    f[13] = std::byte{0xb5};
}

}  // namespace

TEST_CASE("hugepage memory maps and unmaps through the IOMMU", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    dma::IovaAllocator iovas(domain);
    // The container reports the IOMMU's page-size bitmap; iommufd only the smallest IOVA alignment.
    if (domain.backend() == vfio::Backend::iommufd)
        CHECK(domain.page_sizes() == 4096);
    else
        CHECK((domain.page_sizes() & dma::page_2m) != 0);

    dma::Memory mem = dma::Memory::allocate_near(nic, 3 * dma::page_2m);
    CHECK(mem.page_size() == dma::page_2m);
    CHECK(mem.numa_node() == nic.numa_node());
    std::uint64_t first_iova;
    {
        dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
        first_iova = map.iova();
        CHECK(map.size() == mem.size());
        CHECK(map.iova() % dma::page_2m == 0);  // aligned like the pages, so the IOMMU can use 2 MiB entries
        CHECK(inside_ranges(domain, map.iova(), map.size()));
        CHECK(map.iova_of(mem.data() + 12345) == map.iova() + 12345);
        dma::Mapping moved = std::move(map);
        CHECK_FALSE(static_cast<bool>(map));
        CHECK_THROWS_WITH(dma::Mapping::map(domain, mem.data(), dma::page_2m, moved.iova() + dma::page_2m),
                          ContainsSubstring("overlaps the existing mapping"));
    }
    // Unmapped and its IOVA returned: the same range maps again, at the same IOVA.
    dma::Mapping again = dma::Mapping::map(domain, iovas, mem);
    CHECK(again.iova() == first_iova);
    dma::Mapping fixed = dma::Mapping::map(domain, mem.data(), dma::page_2m, 0x40000000);
    CHECK(fixed.iova() == 0x40000000);
}

TEST_CASE("1 GiB pages the guest lacks give an error, or 4 KiB pages by opt-in", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    dma::IovaAllocator iovas(domain);
    dma::MemoryOptions opt;
    opt.page_size = dma::page_1g;
    CHECK_THROWS_WITH(dma::Memory::allocate(dma::page_1g, opt),
                      ContainsSubstring("hugepages-1048576kB") && ContainsSubstring("allow_small_pages"));
    opt.allow_small_pages = true;
    dma::Memory small = dma::Memory::allocate(64 * 1024, opt);
    CHECK(small.page_size() == dma::page_4k);
    dma::Mapping map = dma::Mapping::map(domain, iovas, small);
    CHECK(map.iova() % dma::page_4k == 0);
    CHECK(inside_ranges(domain, map.iova(), map.size()));
}

TEST_CASE("a buffer pool hands out distinct DMA buffers without allocating", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device nic = vfio::Device::open(domain, lab.nics[0]);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2000, 512);
    CHECK(pool.stride() == 2048);
    CHECK(pool.available() == 512);
    std::set<std::uint64_t> seen;
    dma::BufferPool::Buffer b;
    for (std::uint32_t i = 0; i < 512; ++i) {
        REQUIRE(pool.alloc(b));
        CHECK(b.iova == pool.mapping().iova() + std::uint64_t{b.index} * 2048);
        CHECK(b.data == static_cast<std::byte*>(pool.mapping().vaddr()) + std::size_t{b.index} * 2048);
        seen.insert(b.iova);
    }
    CHECK(seen.size() == 512);
    CHECK_FALSE(pool.alloc(b));
    pool.free(7);
    REQUIRE(pool.alloc(b));
    CHECK(b.index == 7);
}

TEST_CASE("a NIC's DMA lands in a peer window, and nothing lands once it is unmapped", "[lab]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    vfio::Device a = vfio::Device::open(domain, lab.nics[0]);
    vfio::Device b = vfio::Device::open(domain, lab.nics[1]);
    vfio::Device win = vfio::Device::open(domain, lab.windows[0]);
    a.enable_bus_master();
    b.enable_bus_master();
    vfio::Mmio ra = a.map_bar(0);
    vfio::Mmio rb = b.map_bar(0);
    labenv::igb_reset_and_link(ra);
    labenv::igb_reset_and_link(rb);

    dma::IovaAllocator iovas(domain);
    dma::Memory mem = dma::Memory::allocate(dma::page_2m);
    dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
    Wire wire(ra, rb, map);
    std::byte* frame1 = mem.data() + 8192;
    std::byte* frame2 = mem.data() + 12288;
    constexpr std::uint32_t len = 256;
    make_frame(frame1, len, std::random_device{}());
    make_frame(frame2, len, std::random_device{}());

    // A 1 MiB window 1 MiB into the 64 MiB BAR; bad windows are refused first.
    CHECK_THROWS_WITH(dma::PeerWindow::map(domain, iovas, win, 2, 0x100, 0x1000),
                      ContainsSubstring("multiples of 4 KiB"));
    CHECK_THROWS_WITH(dma::PeerWindow::map(domain, iovas, win, 2, 0, std::uint64_t{1} << 40),
                      ContainsSubstring("outside the BAR"));
    CHECK_THROWS_WITH(dma::PeerWindow::map(domain, iovas, win, 0),
                      ContainsSubstring("BAR0"));    // ivshmem BAR0: 256-byte registers
    if (domain.backend() != vfio::Backend::type1) {  // iommufd maps no BAR by its user address
        CHECK_THROWS_WITH(dma::PeerWindow::map(domain, iovas, win, 2), ContainsSubstring("by design"));
        SKIP("peer windows need the type1 backend; " << vfio::to_string(domain.backend()) << " refused, as it should");
    }
    constexpr std::uint64_t bar_off = 0x100000, rx_off = 0x800;
    vfio::Mmio cpu = win.map_bar(2);  // the CPU's own view, kept after the window is gone
    std::uint64_t window_iova;
    {
        dma::PeerWindow window = dma::PeerWindow::map(domain, iovas, win, 2, bar_off, 0x100000);
        window_iova = window.iova();
        CHECK(window.size() == 0x100000);
        CHECK(inside_ranges(domain, window.iova(), window.size()));
        for (std::uint32_t i = 0; i < len; i += 4) REQUIRE(cpu.read32(bar_off + rx_off + i) == 0);

        REQUIRE(wire.send(map.iova_of(frame1), len, window.iova() + rx_off) == len);
        for (std::uint32_t i = 0; i < len; ++i) REQUIRE(cpu.read8(bar_off + rx_off + i) == std::uint8_t(frame1[i]));
    }
    // The window's IOVA is now unmapped: the IOMMU must drop B's write (the model still completes the
    // descriptor, so only the bytes tell). The window keeps frame 1.
    wire.send(map.iova_of(frame2), len, window_iova + rx_off);
    for (std::uint32_t i = 0; i < len; ++i) REQUIRE(cpu.read8(bar_off + rx_off + i) == std::uint8_t(frame1[i]));

    // The host checks its backing file once the guest is gone: frame 1, not frame 2.
    std::ofstream expect(lab.out + "/expect-window0@" + std::to_string(bar_off + rx_off) + ".bin", std::ios::binary);
    expect.write(reinterpret_cast<const char*>(frame1), len);
    REQUIRE(expect.good());
}

TEST_CASE("memory allocated near a device lands on the device's NUMA node", "[lab][numa]") {
    auto lab = lab_or_skip();
    vfio::Domain domain;
    for (const auto& bdf : lab.nics) {
        vfio::Device nic = vfio::Device::open(domain, bdf);
        const int node = nic.numa_node();
        if (node <= 0) continue;  // -1: unknown; node 0 would pass without any binding
        dma::Memory mem = dma::Memory::allocate_near(nic, 2 * dma::page_2m);
        CHECK(mem.numa_node() == node);
        // move_pages(2) with no target nodes reports the node each page is on.
        void* pages[2] = {mem.data(), mem.data() + dma::page_2m};
        int status[2] = {-1, -1};
        REQUIRE(::syscall(SYS_move_pages, 0, 2, pages, nullptr, status, 0) == 0);
        CHECK(status[0] == node);
        CHECK(status[1] == node);
        dma::IovaAllocator iovas(domain);
        dma::Mapping map = dma::Mapping::map(domain, iovas, mem);
        CHECK(map.size() == mem.size());
        return;
    }
    SKIP("no NIC of this preset sits on a NUMA node other than 0: run it in the numa preset");
}
