// nic-rss: receive-side scaling on bardrive's igb, 1, 2 and 4 RX queues on NIC B with one thread each,
// fed by NIC A (bardrive, one TX queue, its own thread) with IPv4/UDP frames of many flows. In the lab:
//   lab/lab run basic --bind all -- build/bench/nic/nic-rss [FRAMES] [FLOWS]
// (NICs still on the kernel's igb are handed to vfio-pci first, so it also runs after nic-vs-xdp.)
// Each flow's queue is known in advance (nic/rss.hpp: the Toeplitz hash and the redirection table Igb
// programs), so every frame is accounted for per queue: sent to queue q = received on q + the drops the
// driver counted on q, and each received frame must sit in the queue its hash names. The sender keeps
// at most 256 frames in flight (QEMU's igb drops silently, uncounted, what finds no free descriptor).
// Each RX queue refills from its own dma::BufferPool (Igb's per-queue pools), so the threads share no lock.
// Under `lab/lab run --count-instructions` each queue count runs a second time, counted: every receive thread
// pinned to vCPU 1 (the sender stays on vCPU 0), and the guest instructions vCPU 1 executed over the row
// (bench/nic/insn_count.hpp: kernel, interrupts and scheduling included) per frame received, split into the
// polls that received (with the frames' handling) and the empty ones.

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/nic/insn_count.hpp"
#include "bench/nic/kernel_port.hpp"
#include "core/error.hpp"
#include "core/spin.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/port.hpp"
#include "nic/rss.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t kSrcIp = 0x0a000001, kDstIp = 0x0a000002;  // 10.0.0.1 -> 10.0.0.2
constexpr std::uint16_t kDstPort = 9000, kSrcPort0 = 10000;        // flow f: source port 10000 + f
constexpr std::uint32_t kLen = 60;                                 // 64 bytes on the wire
constexpr std::uint32_t kPayload = 42;                             // after Ethernet, IPv4, UDP: flow, seq
constexpr std::uint32_t kBatch = 32;
constexpr std::uint64_t kInFlight = 256;
constexpr unsigned kSendCpu = 0, kRecvCpu = 1;  // the counted rows' vCPUs

std::uint16_t ip_checksum(const std::uint8_t* h) {
    std::uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += static_cast<std::uint32_t>(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

void put16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
    put16(p, static_cast<std::uint16_t>(v >> 16));
    put16(p + 2, static_cast<std::uint16_t>(v));
}

void write_udp_frame(std::uint8_t* d, const nic::MacAddress& to, const nic::MacAddress& from, std::uint32_t flow,
                     std::uint32_t seq) {
    std::memset(d, 0, kLen);
    std::memcpy(d, to.bytes.data(), 6);
    std::memcpy(d + 6, from.bytes.data(), 6);
    put16(d + 12, 0x0800);
    std::uint8_t* ip = d + 14;
    ip[0] = 0x45;
    put16(ip + 2, static_cast<std::uint16_t>(kLen - 14));
    put16(ip + 6, 0x4000);  // don't fragment
    ip[8] = 64;
    ip[9] = 17;  // UDP
    put32(ip + 12, kSrcIp);
    put32(ip + 16, kDstIp);
    put16(ip + 10, ip_checksum(ip));
    std::uint8_t* udp = ip + 20;
    put16(udp, static_cast<std::uint16_t>(kSrcPort0 + flow));
    put16(udp + 2, kDstPort);
    put16(udp + 4, static_cast<std::uint16_t>(kLen - 34));  // checksum 0: none (IPv4)
    put32(udp + 8, flow);
    put32(udp + 12, seq);
}

// The flow a received frame belongs to, or -1 when it is not one of ours.
int frame_flow(const std::uint8_t* d, std::uint32_t len, unsigned flows) {
    if (len < kLen || d[12] != 0x08 || d[13] != 0x00 || d[23] != 17) return -1;
    std::uint32_t flow = ntohl([&] {
        std::uint32_t v;
        std::memcpy(&v, d + kPayload, 4);
        return v;
    }());
    std::uint16_t sport = static_cast<std::uint16_t>(d[34] << 8 | d[35]);
    if (flow >= flows || sport != kSrcPort0 + flow) return -1;
    return static_cast<int>(flow);
}

struct QueueCount {
    std::uint64_t expected = 0;     // sent by frames whose hash names this queue
    std::uint64_t received = 0;     // ours, in this queue
    std::uint64_t wrong_queue = 0;  // ours, but the hash names another queue
    std::uint64_t foreign = 0;      // not one of our frames
    std::uint64_t drops = 0;        // the driver's counted drops on this queue
    unsigned flows = 0;
};

// Guest instructions on the receiving vCPU over a counted row (-1: not counted).
struct RecvInsns {
    double all = -1;             // everything vCPU 1 executed from the first send to the last receive thread's end
    double polls_received = -1;  // in rx_bursts that returned frames, with the frames' handling (bucket 0)
    double empty_polls = -1;     // in rx_bursts that returned none, with the yield after them (bucket 1)
};

struct RunResult {
    unsigned queues = 0;
    bool counted = false;  // receive threads pinned to kRecvCpu, instructions counted
    RecvInsns insns;
    std::uint64_t sent = 0, received = 0;
    double seconds = 0;
    std::vector<QueueCount> q;
    nic::DeviceStats dev;
};

bench::InsnCounter insn_counter;

RunResult run(vfio::Domain& domain, dma::IovaAllocator& iovas, nic::Port& a, dma::BufferPool& tx_pool,
              vfio::Device& b_dev, unsigned queues, std::uint64_t count, unsigned flows, bool counted) {
    std::vector<std::unique_ptr<dma::BufferPool>> rx_pools;
    std::vector<dma::BufferPool*> pool_ptrs;
    for (unsigned q = 0; q < queues; ++q) {
        rx_pools.push_back(std::make_unique<dma::BufferPool>(domain, iovas, 2048, 1024));
        pool_ptrs.push_back(rx_pools.back().get());
    }
    nic::PortOptions o;
    o.rx_queues = static_cast<std::uint16_t>(queues);
    auto port_b = nic::open_port(b_dev, iovas, std::span<dma::BufferPool* const>(pool_ptrs), o);
    nic::Port& b = *port_b;
    RunResult r;
    r.queues = queues;
    r.counted = counted;
    r.q.resize(queues);
    std::vector<unsigned> flow_queue(flows);
    for (unsigned f = 0; f < flows; ++f) {
        flow_queue[f] =
            queues == 1
                ? 0
                : nic::rss_queue(
                      nic::rss_hash_ipv4(kSrcIp, kDstIp, static_cast<std::uint16_t>(kSrcPort0 + f), kDstPort), queues);
        ++r.q[flow_queue[f]].flows;
    }
    std::atomic<std::uint64_t> received{0};
    std::atomic<bool> sending{true};
    std::atomic<std::int64_t> last_ns{0};
    std::atomic<unsigned> pinned{0};
    Clock::time_point t0 = Clock::now();
    std::vector<std::thread> threads;
    for (unsigned q = 0; q < queues; ++q)
        threads.emplace_back([&, q] {
            if (counted) bench::pin_thread(kRecvCpu);  // main() counts only with 2 vCPUs or more
            ++pinned;
            QueueCount& c = r.q[q];
            nic::Packet got[kBatch];
            std::uint16_t n = 0;
            Clock::time_point idle = Clock::now();
            for (;;) {
                bench::insn_start();  // bucket 0: a poll that received and its frames' handling, 1: an empty poll
                for (std::uint16_t i = 0; i < n; ++i) nic::Port::release(got[i]);
                n = b.rx_burst(static_cast<std::uint16_t>(q), got);
                Clock::time_point now = Clock::now();
                if (n == 0) {
                    bool done = !sending.load() && received.load() >= r.sent;
                    if (done || now - idle > std::chrono::seconds(2)) break;
                    std::this_thread::yield();  // more threads than vCPUs: let the others run
                    spin_pause();
                    bench::insn_add<1>();
                    continue;
                }
                idle = now;
                for (std::uint16_t i = 0; i < n; ++i) {
                    int f = frame_flow(got[i].data, got[i].len, flows);
                    if (f < 0) {
                        ++c.foreign;
                        continue;
                    }
                    ++c.received;
                    if (flow_queue[static_cast<unsigned>(f)] != q) ++c.wrong_queue;
                }
                received += n;
                last_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0).count();
                bench::insn_add<0>();
            }
            for (std::uint16_t i = 0; i < n; ++i) nic::Port::release(got[i]);
        });
    bench::pin_thread(kSendCpu);
    while (pinned.load() < queues) std::this_thread::yield();
    const std::uint64_t m0 = counted ? insn_counter.mark() : 0;
    std::vector<std::uint32_t> seq(flows, 0);
    std::uint64_t sent = 0;
    Clock::time_point stall = Clock::now();
    while (sent < count) {
        if (sent - received.load() >= kInFlight) {
            if (Clock::now() - stall > std::chrono::seconds(2)) break;  // frames lost: stop, the table shows them
            a.tx_reclaim(0);
            spin_pause();
            continue;
        }
        stall = Clock::now();
        nic::Packet pkts[kBatch];
        std::uint32_t k = 0;
        dma::BufferPool::Buffer buf;
        while (k < kBatch && sent + k < count && sent + k - received.load() < kInFlight && tx_pool.alloc(buf)) {
            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
            unsigned f = static_cast<unsigned>((sent + k) % flows);
            write_udp_frame(d, b.mac(), a.mac(), f, seq[f]++);
            pkts[k++] = nic::Packet{d, buf.iova, kLen, buf.index, &tx_pool};
        }
        std::uint16_t took = a.tx_burst(0, std::span(pkts, k));
        for (std::uint32_t i = took; i < k; ++i) {
            unsigned f = static_cast<unsigned>((sent + i) % flows);
            --seq[f];
            nic::Port::release(pkts[i]);
        }
        for (std::uint32_t i = 0; i < took; ++i) ++r.q[flow_queue[(sent + i) % flows]].expected;
        sent += took;
    }
    r.sent = sent;
    sending = false;
    for (auto& t : threads) t.join();
    if (counted) {
        auto x = insn_counter.get(m0), y = insn_counter.get(insn_counter.mark());
        if (x && y && received.load()) {
            const double frames = static_cast<double>(received.load());
            r.insns.all = static_cast<double>(y->since(*x, kRecvCpu)) / frames;
            r.insns.polls_received = static_cast<double>(y->bucket_since(*x, 0, kRecvCpu)) / frames;
            r.insns.empty_polls = static_cast<double>(y->bucket_since(*x, 1, kRecvCpu)) / frames;
        }
    }
    while (a.tx_reclaim(0)) {
    }
    r.received = received.load();
    r.seconds = static_cast<double>(last_ns.load()) / 1e9;
    for (unsigned q = 0; q < queues; ++q) {
        nic::QueueStats s = b.rx_stats(static_cast<std::uint16_t>(q));
        r.q[q].drops = s.bad_length + s.chained + s.frame_errors;
    }
    r.dev = b.device_stats();
    return r;
}

}  // namespace

int main(int argc, char** argv) try {
    std::uint64_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 40000;
    unsigned flows = argc > 2 ? static_cast<unsigned>(std::strtoul(argv[2], nullptr, 0)) : 64;
    auto nics = bench::lab_nics();
    if (nics.size() < 2) {
        std::fprintf(stderr,
                     "nic-rss: SKIPPED: needs two igb NICs on one wire: run it in the lab (lab/lab run basic "
                     "--bind all -- build/bench/nic/nic-rss [FRAMES] [FLOWS])\n");
        return 77;
    }
    if (flows == 0 || flows > 50000) throw Error("nic-rss", "flows", std::to_string(flows), "give 1..50000 flows");
    std::vector<pci::Bdf> to_bind;
    for (int i = 0; i < 2; ++i) {
        std::error_code ec;
        auto link = std::filesystem::read_symlink("/sys/bus/pci/devices/" + nics[i].str() + "/driver", ec);
        if (ec || link.filename() != "vfio-pci") to_bind.push_back(nics[i]);
    }
    if (!to_bind.empty()) {
        vfio::BindOptions bo;
        bo.force = true;
        vfio::bind(vfio::Sysfs(), to_bind, bo);
    }
    vfio::Domain domain;
    auto a_dev = vfio::Device::open(domain, nics[0]);
    auto b_dev = vfio::Device::open(domain, nics[1]);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool tx_pool(domain, iovas, 2048, 2048);
    dma::BufferPool a_rx_pool(domain, iovas, 2048, 1024);
    auto a = nic::open_port(a_dev, iovas, a_rx_pool);
    std::vector<RunResult> results;
    for (unsigned queues : {1u, 2u, 4u})
        results.push_back(run(domain, iovas, *a, tx_pool, b_dev, queues, count, flows, false));
    if (insn_counter.available() && std::thread::hardware_concurrency() > kRecvCpu)
        for (unsigned queues : {1u, 2u, 4u})
            results.push_back(run(domain, iovas, *a, tx_pool, b_dev, queues, count, flows, true));

    std::printf(
        "\n## RSS on NIC B: %llu IPv4/UDP frames of 64 bytes (wire) per run, %u flows, sender NIC A (bardrive, one "
        "thread, batch %u, at most %llu in flight)\n\n",
        static_cast<unsigned long long>(count), flows, kBatch, static_cast<unsigned long long>(kInFlight));
    std::printf(
        "| RX queues (threads) | kpps | vs 1 queue | sent | received | per queue: flows, expected / received / "
        "counted drops / wrong queue / foreign | accounted |\n|---:|---:|---:|---:|---:|---|---|\n");
    bool ok = true;
    double base = 0;
    bool counted_header = false;
    for (const auto& r : results) {
        double kpps = r.seconds > 0 ? static_cast<double>(r.received) / r.seconds / 1e3 : 0;
        if (r.queues == 1 && !r.counted) base = kpps;
        std::string per;
        bool accounted = true;
        std::uint64_t got = 0;
        for (unsigned q = 0; q < r.queues; ++q) {
            const QueueCount& c = r.q[q];
            char buf[160];
            std::snprintf(buf, sizeof buf, "%sq%u: %u, %llu / %llu / %llu / %llu / %llu", q ? "; " : "", q, c.flows,
                          static_cast<unsigned long long>(c.expected), static_cast<unsigned long long>(c.received),
                          static_cast<unsigned long long>(c.drops), static_cast<unsigned long long>(c.wrong_queue),
                          static_cast<unsigned long long>(c.foreign));
            per += buf;
            accounted = accounted && c.expected == c.received + c.drops && c.wrong_queue == 0 && c.foreign == 0;
            got += c.received;
        }
        accounted = accounted && r.sent == count && got == r.received;
        ok = ok && accounted;
        if (r.counted) {
            if (!counted_header) {
                std::printf(
                    "\n## Guest instructions on the receiving vCPU: every receive thread pinned to vCPU %u, the sender "
                    "on vCPU %u (QEMU's insn_count plugin; per frame received)\n\n"
                    "| RX queues (threads) | kpps | received | accounted | vCPU %u: all | in polls that received | "
                    "in empty polls | rest (kernel, interrupts, scheduling) |\n"
                    "|---:|---:|---:|---|---:|---:|---:|---:|\n",
                    kRecvCpu, kSendCpu, kRecvCpu);
                counted_header = true;
            }
            const RecvInsns& i = r.insns;
            if (i.all < 0) {
                std::printf("| %u | %.1f | %llu | %s | - | - | - | - |\n", r.queues, kpps,
                            static_cast<unsigned long long>(r.received), accounted ? "yes" : "NO");
                continue;
            }
            std::printf("| %u | %.1f | %llu | %s | %.1f | %.1f | %.1f | %.1f |\n", r.queues, kpps,
                        static_cast<unsigned long long>(r.received), accounted ? "yes" : "NO", i.all, i.polls_received,
                        i.empty_polls, i.all - i.polls_received - i.empty_polls);
            continue;
        }
        std::printf("| %u | %.1f | %.2fx | %llu | %llu | %s | %s |\n", r.queues, kpps, base > 0 ? kpps / base : 0,
                    static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.received), per.c_str(),
                    accounted ? "yes" : "NO");
        std::printf("|  |  |  |  |  | device: GPRC %llu, missed (MPC) %llu, no buffer (RNBC) %llu |  |\n",
                    static_cast<unsigned long long>(r.dev.rx_packets), static_cast<unsigned long long>(r.dev.rx_missed),
                    static_cast<unsigned long long>(r.dev.rx_no_buffers));
    }
    return ok ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "nic-rss: error: %s\n", e.what());
    return 2;
}
