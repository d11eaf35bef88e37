#include "bench/p2p/nic.hpp"

#include <chrono>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "dma/peer_window.hpp"
#include "nic/port.hpp"
#include "nic/test_frame.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

namespace bardrive::bench {

NicPair parse_nics(std::string_view text) {
    auto comma = text.find(',');
    const char* form = "write TX,RX, two PCI addresses, e.g. 0000:01:00.0,0000:02:00.0";
    if (comma == std::string_view::npos) throw Error("parse NICs", std::string(text), "needs two NICs", form);
    auto tx = pci::Bdf::try_parse(text.substr(0, comma)), rx = pci::Bdf::try_parse(text.substr(comma + 1));
    if (!tx || !rx) throw Error("parse NICs", std::string(text), "not two PCI addresses", form);
    if (*tx == *rx) throw Error("parse NICs", std::string(text), "TX and RX are the same NIC", form);
    return {*tx, *rx};
}

namespace {

constexpr std::uint64_t frames_per_run = 16384;
constexpr std::uint32_t burst = 32;

// What one timed run saw: frames that arrived intact and in order, and those that did not.
struct RunResult {
    double seconds = 0;
    std::uint64_t good = 0;
    std::uint64_t bad = 0;
};

// Sends frames_per_run frames of `len` bytes from tx to rx and receives them, checking each.
// Stops early when nothing arrives for two seconds (lost frames).
RunResult send_frames(nic::Port& tx, nic::Port& rx, dma::BufferPool& tx_pool, std::uint32_t len, std::uint64_t& seq) {
    RunResult r;
    std::uint64_t sent = 0;
    const std::uint64_t first = seq;
    auto start = std::chrono::steady_clock::now();
    auto idle_since = start;
    while (r.good + r.bad < frames_per_run) {
        if (sent < frames_per_run) {
            nic::Packet out[burst];
            std::uint32_t k = 0;
            dma::BufferPool::Buffer buf;
            while (k < burst && sent + k < frames_per_run && tx_pool.alloc(buf)) {
                auto* data = reinterpret_cast<std::uint8_t*>(buf.data);
                nic::write_test_frame(data, len, rx.mac(), tx.mac(), first + sent + k);
                out[k++] = nic::Packet{data, buf.iova, len, buf.index, &tx_pool};
            }
            std::uint16_t took = tx.tx_burst(0, std::span<const nic::Packet>(out, k));
            for (std::uint32_t i = took; i < k; ++i) tx_pool.free(out[i].buf);
            sent += took;
        }
        nic::Packet in[burst];
        std::uint16_t n = rx.rx_burst(0, in);
        for (std::uint16_t i = 0; i < n; ++i) {
            auto got = nic::check_test_frame(in[i].data, in[i].len);
            if (got && *got == first + r.good + r.bad && in[i].len == len)
                ++r.good;
            else
                ++r.bad;
            nic::Port::release(in[i]);
        }
        tx.tx_reclaim(0);
        auto now = std::chrono::steady_clock::now();
        if (n) idle_since = now;
        if (now - idle_since > std::chrono::seconds(2)) break;
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seq = first + frames_per_run;
    return r;
}

// Where NIC B receives: its own RX buffer pool, and the row the figures go to.
struct Target {
    PathResult* row;
    dma::BufferPool* pool;
    std::vector<double> rates;
};

// Both rows over the frame sizes, alternating host and window run by run so that both see the
// same machine (the lab shares its cores); NIC B is set up afresh on the other pool each time,
// outside the timed part. A lost or wrong frame fails the row.
void measure(std::vector<Target>& targets, vfio::Device& rx_dev, nic::Port& tx, dma::IovaAllocator& iovas,
             dma::BufferPool& tx_pool, const SweepConfig& cfg, Progress& progress) {
    std::uint64_t seq = 0;
    for (std::uint32_t len : nic_frame_sizes) {
        progress.step("nic " + format_size(len) + " frames");
        for (auto& t : targets) t.rates.clear();
        for (int i = 0; i < cfg.warmup + cfg.repetitions; ++i)
            for (auto& t : targets) {
                auto rx = nic::open_port(rx_dev, iovas, *t.pool);
                RunResult r = send_frames(tx, *rx, tx_pool, len, seq);
                if (r.good != frames_per_run && t.row->failure.empty())
                    t.row->failure = log::concat(frames_per_run - r.good, " of ", frames_per_run, " frames of ", len,
                                                 " bytes lost or wrong (", r.bad, " arrived wrong or out of order)");
                if (i >= cfg.warmup && r.seconds > 0)
                    t.rates.push_back(static_cast<double>(r.good) * len / r.seconds / 1e9);
            }
        for (auto& t : targets) {
            Point p;
            p.bytes = len;
            p.gbps = median(t.rates);
            if (&t != &targets.front()) p.ref_gbps = targets.front().row->points.back().gbps;
            t.row->points.push_back(p);
        }
    }
}

}  // namespace

std::vector<PathResult> run_nic_paths(const std::optional<NicPair>& nics, const std::optional<WindowSpec>& window,
                                      const SweepConfig& cfg, Progress& progress) {
    std::vector<PathResult> rows;
    if (!cfg.wants("nic")) return rows;
    rows.push_back(make_path("nic", "nic", "host", false));
    rows.push_back(make_path("nic", "nic", "bar", false));
    PathResult& host = rows[0];
    PathResult& bar = rows[1];
    if (!nics) {
        for (auto& r : rows)
            r.reason =
                "no NICs given (--nics TX,RX: two NICs bardrive drives on one link, bound to vfio-pci; the lab's basic "
                "preset has them)";
        return rows;
    }
    host.src_bdf = bar.src_bdf = nics->rx.str();
    host.reference = "none (the NIC's own rate into host memory)";
    bar.reference = "the same NIC into host memory, same run";
    if (!window) bar.reason = "no window given (--window BDF/BAR)";
    try {
        vfio::Domain domain;
        vfio::Device a = vfio::Device::open(domain, nics->tx);
        vfio::Device b = vfio::Device::open(domain, nics->rx);
        dma::IovaAllocator iovas(domain);
        dma::BufferPool tx_pool(domain, iovas, 2048, 4096);
        dma::BufferPool rx_host(domain, iovas, 2048, 4096);
        auto tx = nic::open_port(a, iovas, tx_pool);  // any NICs bardrive drives
        std::vector<Target> targets{{&host, &rx_host, {}}};
        // The window: a peer BAR in the same IOMMU domain, NIC B's receive buffers carved from it.
        std::unique_ptr<vfio::Device> w;
        std::optional<dma::PeerWindow> pw;
        std::optional<dma::BufferPool> rx_window;
        if (window) {
            try {
                w = std::make_unique<vfio::Device>(vfio::Device::open(domain, window->bdf));
                pw.emplace(dma::PeerWindow::map(domain, iovas, *w, static_cast<unsigned>(window->bar)));
                rx_window.emplace(*pw, 2048);
                bar.dst_bdf = window->bdf.str();
                targets.push_back({&bar, &*rx_window, {}});
            } catch (const Error& e) {
                bar.reason = e.what();
            }
        }
        progress.add_total(static_cast<int>(std::size(nic_frame_sizes)));
        measure(targets, b, *tx, iovas, tx_pool, cfg, progress);
    } catch (const Error& e) {
        for (auto& r : rows)
            if (r.available() && r.points.empty()) r.reason = e.what();
    }
    return rows;
}

}  // namespace bardrive::bench
