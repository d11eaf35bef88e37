// umem-nic-bench: pages moved into a BAR window by umem's NIC engine (umem::NicPager: the faulting
// threads drive their own igb queue pairs), against, in the same guest and run:
//   cpu-wc     the CPU copying the same pages into the same window through its write-combining mapping
//   cpu-host   the CPU copying them into host memory
//   kernel     the kernel's igb moving the same bytes from NIC B to NIC A over AF_PACKET (jumbo frames)
// for 1..8 threads (one queue pair each), and the NIC engine with one jumbo frame per 4 KiB page against
// four standard frames per page (the choice of nic::loopback_default_payload). Every page is checked.
// Run it in the lab with only the window bound, so both NICs start on the kernel's igb:
//   lab/lab run switch --bind 0000:04:00.0 -- build/bench/umem/umem-nic-bench [--mib 16] [--reps 3]
// Under TCG every device register access and every DMA is emulated: absolute rates are the emulator's,
// the ratios between paths measured here are what to read (bench/results/umem-nic-lab-tcg-*.md).
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/nic/kernel_port.hpp"
#include "bench/p2p/window.hpp"
#include "core/error.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "dma/peer_window.hpp"
#include "examples/common.hpp"
#include "nic/test_frame.hpp"
#include "umem/nic_pager.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kPage = 4096;
const char* kUsage = "umem-nic-bench [--mib 16] [--reps 3] [--threads 1,2,4,8]   (in the lab; see the source's head)";

// Page p's bytes: its index in every word, so a page in the wrong place cannot pass.
void fill_pattern(std::uint64_t* words, std::uint64_t pages) {
    for (std::uint64_t w = 0; w < pages * kPage / 8; ++w)
        words[w] = (w / (kPage / 8)) << 32 | (w * 0x9e3779b9 & 0xffffffff);
}

struct Rate {
    std::uint64_t pages = 0;
    double seconds = 0;
    bool checked = true;  // every page landed as sent
    double pps() const { return seconds > 0 ? static_cast<double>(pages) / seconds : 0; }
    double gbps() const { return pps() * kPage / 1e9; }
};

// The median run of `reps` by rate.
Rate median(std::vector<Rate> runs) {
    std::sort(runs.begin(), runs.end(), [](const Rate& a, const Rate& b) { return a.pps() < b.pps(); });
    Rate m = runs[runs.size() / 2];
    for (const Rate& r : runs) m.checked = m.checked && r.checked;
    return m;
}

// T threads, each taking every T-th page, run `body(page)`; returns the wall time.
double parallel(unsigned threads, std::uint64_t pages, const std::function<void(std::uint64_t)>& body) {
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (std::uint64_t p = t; p < pages; p += threads) body(p);
        });
    for (auto& th : ts) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The kernel's igb: B sends every page as one jumbo AF_PACKET frame to A, which receives it straight
// into its place in `dst` (recvmsg scatters header and page); at most 64 frames in flight.
Rate kernel_path(bench::KernelPort& a, bench::KernelPort& b, const std::uint8_t* src, std::uint8_t* dst,
                 std::uint64_t pages) {
    Rate r;
    std::atomic<std::uint64_t> received{0};
    auto t0 = Clock::now();
    std::thread rx([&] {
        std::uint8_t hdr[14];
        auto idle = Clock::now();
        while (received < pages && Clock::now() - idle < std::chrono::seconds(2)) {
            std::uint64_t p = received;
            iovec iov[2] = {{hdr, sizeof hdr}, {dst + p * kPage, kPage}};
            msghdr m{};
            m.msg_iov = iov;
            m.msg_iovlen = 2;
            ssize_t n = ::recvmsg(a.sock.get(), &m, MSG_DONTWAIT);
            if (n == static_cast<ssize_t>(sizeof hdr + kPage)) {
                received.store(p + 1, std::memory_order_release);
                idle = Clock::now();
            }
        }
    });
    std::uint8_t hdr[14];
    std::memcpy(hdr, a.mac.bytes.data(), 6);
    std::memcpy(hdr + 6, b.mac.bytes.data(), 6);
    hdr[12] = nic::TEST_ETHERTYPE >> 8;
    hdr[13] = nic::TEST_ETHERTYPE & 0xff;
    for (std::uint64_t p = 0; p < pages; ++p) {
        while (p - received.load(std::memory_order_acquire) >= 64 && Clock::now() - t0 < std::chrono::seconds(60))
            std::this_thread::yield();
        iovec iov[2] = {{hdr, sizeof hdr}, {const_cast<std::uint8_t*>(src) + p * kPage, kPage}};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        while (::sendmsg(b.sock.get(), &m, 0) < 0 && errno == ENOBUFS) std::this_thread::yield();
    }
    rx.join();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.pages = received;
    r.checked = r.pages == pages && std::memcmp(dst, src, pages * kPage) == 0;
    return r;
}

std::vector<unsigned> parse_list(const std::string& s) {
    std::vector<unsigned> out;
    std::stringstream in(s);
    for (std::string x; std::getline(in, x, ',');) out.push_back(static_cast<unsigned>(std::stoul(x)));
    return out;
}

}  // namespace

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    if (!std::getenv("BARDRIVE_LAB")) {
        std::fprintf(stderr, "umem-nic-bench: run it in the lab: %s\n", kUsage);
        return 77;
    }
    const pci::Bdf a_bdf = opt.bdf("nic", "BARDRIVE_LAB_NICS", 0), b_bdf = opt.bdf("peer", "BARDRIVE_LAB_NICS", 1);
    const pci::Bdf win_bdf = opt.bdf("window", "BARDRIVE_LAB_WINDOWS", 0);
    const std::uint64_t pages = opt.num("mib", 16) * (1 << 20) / kPage;
    const unsigned reps = static_cast<unsigned>(opt.num("reps", 3));
    const std::vector<unsigned> threads = parse_list(opt.str("threads", "1,2,4,8"));

    auto src_mem = dma::Memory::allocate(pages * kPage), dst_mem = dma::Memory::allocate(pages * kPage);
    auto* src = reinterpret_cast<std::uint8_t*>(src_mem.data());
    auto* dst = reinterpret_cast<std::uint8_t*>(dst_mem.data());
    fill_pattern(reinterpret_cast<std::uint64_t*>(src), pages);

    // 1. The kernel's igb on both NICs, jumbo frames.
    std::vector<Rate> kernel;
    {
        bench::KernelPort a(a_bdf), b(b_bdf);
        a.set_mtu(9000);
        b.set_mtu(9000);
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the MTU change resets igb: let the link settle
        for (unsigned i = 0; i < reps; ++i) {
            std::memset(dst, 0, pages * kPage);
            kernel.push_back(kernel_path(a, b, src, dst, pages));
        }
        a.set_up(false);
        b.set_up(false);
    }

    // 2. The CPU into the window through its write-combining sysfs mapping, and into host memory. Before
    // anything opens the window through VFIO: once vfio-pci claims the BAR, a kernel with
    // IO_STRICT_DEVMEM (Debian's) revokes sysfs mappings of it.
    auto cpu_copy = [&](unsigned t, std::uint8_t* to, bool fence) {
        std::memset(to, 0, pages * kPage);
        Rate r;
        r.seconds = parallel(t, pages, [&](std::uint64_t p) {
            std::memcpy(to + p * kPage, src + p * kPage, kPage);
            if (fence) vfio::wmb();  // drain the write-combining buffers, as a DMA engine would have landed
        });
        r.pages = pages;
        r.checked = std::memcmp(to, src, pages * kPage) == 0;
        return r;
    };
    std::map<unsigned, Rate> cpu_wc, cpu_host;
    {
        bench::BarMapping wc("/sys/bus/pci/devices/" + win_bdf.str() + "/resource2_wc", pages * kPage);
        for (unsigned t : threads) {
            std::vector<Rate> w, h;
            for (unsigned i = 0; i < reps; ++i) {
                w.push_back(cpu_copy(t, wc.data(), true));
                h.push_back(cpu_copy(t, dst, false));
            }
            cpu_wc[t] = median(w);
            cpu_host[t] = median(h);
        }
    }

    // 3. NIC A handed to vfio-pci: the NIC engine into the same window.
    vfio::BindOptions bo;
    bo.force = true;
    vfio::bind(vfio::Sysfs(), {a_bdf}, bo);
    vfio::Domain domain;
    auto nic = vfio::Device::open(domain, a_bdf);
    auto win_dev = vfio::Device::open(domain, win_bdf);
    dma::IovaAllocator iovas(domain);
    auto window = dma::PeerWindow::map(domain, iovas, win_dev, 2);
    auto store = dma::Mapping::map(domain, iovas, src_mem);
    if (pages * kPage > window.size())
        throw Error("check sizes", "--mib", "the array must fit the window (all pages resident)", kUsage);
    const auto* win = const_cast<const std::uint8_t*>(window.cpu().data() + window.bar_offset());

    // Fills every page once through a NicPager with the whole array fitting the pool (every access a
    // fill, every fill a NIC move), `t` threads on `t` queues; checks each page's first and last word as
    // the thread reads them and the whole window afterwards.
    auto nic_fill = [&](unsigned t, std::uint32_t frame_data) {
        umem::NicPagerConfig cfg;
        cfg.paging.bytes = pages * kPage;
        cfg.paging.frames = pages;
        cfg.paging.admission = umem::Admission::migrate;
        cfg.queues = static_cast<std::uint16_t>(t);
        cfg.frame_data = frame_data;
        std::memset(const_cast<std::uint8_t*>(win), 0, pages * kPage);
        umem::NicPager pager(nic, iovas, window, store, cfg);
        std::atomic<std::uint64_t> bad{0};
        Rate r;
        r.seconds = parallel(t, pages, [&](std::uint64_t p) {
            auto acc = pager.access(p, false);
            auto* w = reinterpret_cast<const volatile std::uint64_t*>(acc.data());
            const auto* s = reinterpret_cast<const std::uint64_t*>(src + p * kPage);
            bad += w[0] != s[0] || w[kPage / 8 - 1] != s[kPage / 8 - 1];
        });
        r.pages = pager.nic_stats().moves;
        // Every page where the page table says it is: its frame in the window.
        for (std::uint64_t p = 0; p < pages; ++p) {
            umem::Pte e{pager.view().pte[p]};
            bad += e.state() != umem::PageState::resident ||
                   std::memcmp(win + std::uint64_t{e.frame()} * kPage, src + p * kPage, kPage) != 0;
        }
        r.checked = bad == 0 && r.pages == pages && pager.nic_stats().fallbacks == 0;
        return r;
    };
    struct Row {
        unsigned threads;
        Rate nic, nic_std_frames, wc, host;
    };
    std::vector<Row> rows;
    for (unsigned t : threads) {
        std::vector<Rate> n, s;
        for (unsigned i = 0; i < reps; ++i) {
            n.push_back(nic_fill(t, 4096));
            s.push_back(nic_fill(t, 1024));
        }
        rows.push_back({t, median(n), median(s), cpu_wc[t], cpu_host[t]});
    }

    Rate k = median(kernel);
    std::printf(
        "umem-nic-bench: %lu pages of 4 KiB into %s BAR2 (ivshmem) by %s, median of %u; kernel path: %s -> %s\n",
        static_cast<unsigned long>(pages), win_bdf.str().c_str(), a_bdf.str().c_str(), reps, b_bdf.str().c_str(),
        a_bdf.str().c_str());
    std::printf(
        "| threads = queues | NIC fill (1 jumbo frame/page) pages/s | GB/s | NIC, 4 std frames/page | CPU -> window "
        "(WC) | CPU -> host memory | kernel igb AF_PACKET | NIC / WC | NIC / host | NIC / kernel |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    bool ok = k.checked;
    for (const Row& r : rows) {
        std::printf("| %u | %.0f | %.3f | %.0f | %.0f | %.0f | %.0f | %.2fx | %.2fx | %.2fx |\n", r.threads,
                    r.nic.pps(), r.nic.gbps(), r.nic_std_frames.pps(), r.wc.pps(), r.host.pps(), k.pps(),
                    r.nic.pps() / r.wc.pps(), r.nic.pps() / r.host.pps(), r.nic.pps() / k.pps());
        for (auto [what, rate] : {std::pair{"NIC fill", r.nic},
                                  {"NIC fill, std frames", r.nic_std_frames},
                                  {"CPU -> window", r.wc},
                                  {"CPU -> host", r.host}}) {
            if (!rate.checked) std::printf("umem-nic-bench: %s with %u threads: pages not as sent\n", what, r.threads);
            ok = ok && rate.checked;
        }
    }
    std::printf("umem-nic-bench: every page checked: %s (kernel path received %lu of %lu pages)\n", ok ? "yes" : "NO",
                static_cast<unsigned long>(k.pages), static_cast<unsigned long>(pages));
    return ok ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "umem-nic-bench: error: %s\n", e.what());
    return 2;
}
