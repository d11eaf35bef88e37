// umem-nic: an array in host memory paged into frames in another device's BAR window (a GPU's BAR1 in
// production, the lab's ivshmem BAR2 here), each page moved by an igb's DMA that the faulting thread
// drives itself (umem::NicPager). First the topology picks the NIC/window pair with the best peer-to-peer
// class; then `--threads` threads make random reads and writes through the pager with the pool smaller
// than the array, every value read is checked, and after flush() every word of the store is checked.
// With --expect-dir the frames that still hold pages are written as expect-window0@OFFSET.bin (the lab
// runner compares them with the window's backing file from the host); with --store-dir the store and
// what it must hold are written for the host to compare.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/mapping.hpp"
#include "dma/memory.hpp"
#include "dma/peer_window.hpp"
#include "examples/common.hpp"
#include "pci/p2p.hpp"
#include "pci/source.hpp"
#include "umem/nic_pager.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

static const char* kUsage =
    "umem-nic [--nic BDF] [--window BDF] [--bar 2] [--mib 8] [--pool 25] [--threads 4] [--accesses 400]\n"
    "         [--expect-dir DIR] [--store-dir DIR]\n"
    "  --nic: an igb bound to vfio-pci (default: the one with the best path to the window)\n"
    "  --window: the device whose BAR holds the frames (in the lab: BARDRIVE_LAB_WINDOWS)\n"
    "  --pool: frame pool as a percentage of the array; --threads: workers, one NIC queue pair each (1..8)";

namespace {

constexpr std::uint64_t kPage = 4096;

std::uint64_t word_value(std::uint64_t w, std::uint64_t version) { return w << 24 | version; }

// The topology's verdicts for every igb bound to vfio-pci into the window's device, best first.
pci::Bdf pick_nic(const pci::Bdf& window) {
    pci::LiveSource src;
    pci::Topology t = pci::read_topology(src);
    auto target = t.find(window);
    if (!target) throw Error("pick NIC", window.str(), "not on this machine's PCI bus", kUsage);
    std::vector<std::size_t> nics;
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        const pci::Device& d = t.devices[i];
        if (d.vendor_id == 0x8086 && d.device_id == 0x10c9 && d.driver == "vfio-pci") nics.push_back(i);
    }
    if (nics.empty())
        throw Error("pick NIC", "igb (8086:10c9)", "none is bound to vfio-pci", "bardrive bind BDF, or pass --nic");
    auto ranked = pci::rank_p2p_pairs(t, nics, {*target});
    std::printf("umem-nic: NIC -> window pairs by the topology (best first):\n");
    for (const auto& r : ranked)
        std::printf("  %s -> %s  %-4s %s\n", t.devices[r.initiator].bdf.str().c_str(), window.str().c_str(),
                    pci::class_name(r.path.cls), pci::verdict_name(r.verdict));
    return t.devices[ranked.front().initiator].bdf;
}

void write_file(const std::string& path, const void* data, std::size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!f.good()) throw Error("write", path, "could not write the file");
}

}  // namespace

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    const pci::Bdf win_bdf = opt.bdf("window", "BARDRIVE_LAB_WINDOWS", 0);
    const pci::Bdf nic_bdf = opt.has("nic") ? pci::Bdf::parse(opt.str("nic", "")) : pick_nic(win_bdf);
    const std::uint64_t pages = opt.num("mib", 8) * (1 << 20) / kPage;
    const std::uint64_t frames = std::max<std::uint64_t>(1, pages * opt.num("pool", 25) / 100);
    const auto threads = static_cast<unsigned>(opt.num("threads", 4));
    const auto accesses = static_cast<unsigned>(opt.num("accesses", 400));
    if (pages == 0 || threads == 0 || threads > 8)
        throw Error("check arguments", "--mib/--threads", "an array of at least 1 MiB, 1 to 8 threads", kUsage);

    vfio::Domain domain;
    auto nic = vfio::Device::open(domain, nic_bdf);
    auto win_dev = vfio::Device::open(domain, win_bdf);
    dma::IovaAllocator iovas(domain);
    auto window = dma::PeerWindow::map(domain, iovas, win_dev, static_cast<unsigned>(opt.num("bar", 2)));
    auto store = dma::Memory::allocate_near(nic, pages * kPage);
    auto store_map = dma::Mapping::map(domain, iovas, store);
    auto* words = reinterpret_cast<std::uint64_t*>(store.data());
    const std::uint64_t n_words = pages * kPage / 8;
    for (std::uint64_t w = 0; w < n_words; ++w) words[w] = word_value(w, 0);

    umem::NicPagerConfig cfg;
    cfg.paging.bytes = pages * kPage;
    cfg.paging.frames = frames;
    cfg.queues = static_cast<std::uint16_t>(threads);
    umem::NicPager pager(nic, iovas, window, store_map, cfg);
    std::printf(
        "umem-nic: %lu pages of 4 KiB in host memory, %lu frames in %s BAR%lu, paged by %s with %u threads "
        "on %u queue pairs\n",
        static_cast<unsigned long>(pages), static_cast<unsigned long>(frames), win_bdf.str().c_str(), opt.num("bar", 2),
        nic_bdf.str().c_str(), threads, threads);

    // Each thread writes only the words it owns (word % threads) and reads any; every value read must be
    // the right word at a version its owner wrote.
    std::vector<std::atomic<std::uint64_t>> published(n_words);
    std::atomic<std::uint64_t> wrong{0}, checked{0};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            std::mt19937_64 rng(t + 1);
            std::uint64_t bad = 0, seen = 0, version = 0;
            for (unsigned i = 0; i < accesses; ++i) {
                std::uint64_t page = rng() % pages, first = page * kPage / 8;
                bool write = rng() % 3 == 0;
                std::uint64_t lo[8], idx[8];
                for (int k = 0; k < 8; ++k) lo[k] = published[idx[k] = first + rng() % (kPage / 8)].load();
                auto a = pager.access(page, write);
                auto* data = reinterpret_cast<volatile std::uint64_t*>(a.data());
                for (int k = 0; k < 8; ++k) {
                    std::uint64_t v = data[idx[k] - first], hi = published[idx[k]].load();
                    bad += (v >> 24) != idx[k] || (v & 0xffffff) < lo[k] || (v & 0xffffff) > hi;
                    ++seen;
                }
                if (!write) continue;
                ++version;
                for (std::uint64_t w = first + (t + threads - first % threads) % threads; w < first + kPage / 8;
                     w += threads) {
                    data[w - first] = word_value(w, version);
                    published[w].store(version);
                }
            }
            wrong += bad;
            checked += seen;
        });
    }
    for (auto& th : ts) th.join();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pager.flush();

    umem::Stats s = pager.stats();
    umem::NicStats n = pager.nic_stats();
    std::printf(
        "umem-nic: %u accesses in %.2f s: %lu faults, %lu fills, %lu evictions, %lu write-backs, %lu read "
        "in place\n",
        threads * accesses, secs, static_cast<unsigned long>(s[umem::c_faults]),
        static_cast<unsigned long>(s[umem::c_fills]), static_cast<unsigned long>(s[umem::c_evictions]),
        static_cast<unsigned long>(s[umem::c_writebacks]), static_cast<unsigned long>(s[umem::c_read_through]));
    std::printf(
        "umem-nic: the NIC moved %lu pages (%lu frames, %lu doorbells, %.1f MB) for the faulting threads; "
        "%lu fell back to the CPU; per queue:",
        static_cast<unsigned long>(n.moves), static_cast<unsigned long>(n.frames),
        static_cast<unsigned long>(n.doorbells), static_cast<double>(n.bytes) / 1e6,
        static_cast<unsigned long>(n.fallbacks));
    for (auto m : n.moves_per_queue) std::printf(" %lu", static_cast<unsigned long>(m));
    std::printf("\n");

    // The store after flush(): every word at its owner's last version.
    std::vector<std::uint64_t> expect(n_words);
    std::uint64_t store_wrong = 0;
    for (std::uint64_t w = 0; w < n_words; ++w) {
        expect[w] = word_value(w, published[w].load());
        store_wrong += words[w] != expect[w];
    }
    std::printf("umem-nic: %lu of %lu values read were wrong; %lu of %lu words in the store are not the last write\n",
                static_cast<unsigned long>(wrong.load()), static_cast<unsigned long>(checked.load()),
                static_cast<unsigned long>(store_wrong), static_cast<unsigned long>(n_words));

    if (opt.has("expect-dir")) {  // each frame still holding a page must hold that page's final words
        const umem::PagerView& v = pager.view();
        std::vector<std::int64_t> page_in(v.frames_n, -1);
        for (std::uint64_t page = 0; page < pages; ++page) {
            umem::Pte e{v.pte[page]};
            if (e.state() == umem::PageState::resident) page_in[e.frame()] = static_cast<std::int64_t>(page);
        }
        std::size_t files = 0, held = 0;
        for (std::uint32_t f = 0; f < v.frames_n;) {  // one file per run of consecutive frames holding pages
            if (page_in[f] < 0) {
                ++f;
                continue;
            }
            std::vector<std::uint64_t> image;
            std::uint32_t first = f;
            for (; f < v.frames_n && page_in[f] >= 0; ++f, ++held) {
                auto* words_of = expect.data() + static_cast<std::uint64_t>(page_in[f]) * kPage / 8;
                image.insert(image.end(), words_of, words_of + kPage / 8);
            }
            std::uint64_t off = window.bar_offset() + cfg.pool_offset + std::uint64_t{first} * kPage;
            write_file(opt.str("expect-dir", ".") + "/expect-window0@" + std::to_string(off) + ".bin", image.data(),
                       image.size() * 8);
            ++files;
        }
        std::printf("umem-nic: %zu frames holding pages written as %zu expectations for the host to compare\n", held,
                    files);
    }
    if (opt.has("store-dir")) {
        write_file(opt.str("store-dir", ".") + "/store.bin", words, pages * kPage);
        write_file(opt.str("store-dir", ".") + "/expect-store.bin", expect.data(), pages * kPage);
    }
    return wrong == 0 && store_wrong == 0 && n.fallbacks == 0 ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "umem-nic: error: %s\n", e.what());
    return 2;
}
