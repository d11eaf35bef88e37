// nic-vs-xdp: bardrive's igb RX alone and TX alone against the kernel's fastest paths on the same NICs,
// in one lab guest (lab/lab run basic --bind 0000:03:00.0 -- build/bench/nic/nic-vs-xdp [FRAMES]):
//   RX on NIC B, one common sender (pktgen on NIC A, burst 32): the kernel's igb with native XDP
//   (`xdp-bench drop -p read-data`), an AF_XDP socket (copy mode; zero-copy when the driver takes it),
//   then bardrive's Igb::rx_burst (B on vfio-pci, A still on the kernel's igb).
//   TX on NIC A, B on the kernel's igb counting: pktgen (burst = batch), `xdp-trafficgen udp` (no size or
//   batch knob: its own frame size), then bardrive's Igb::tx_burst (A on vfio-pci).
// Receivers run on CPU 1 (B's interrupts too), senders on CPU 0 (pktgen's kpktgend_0, A's interrupts).
// Besides the rate, each row gives the CPU time per frame of the side being measured, because under TCG
// the sender often sets the rate: kernel receivers: CPU 1's busy time (user + system + irq + softirq,
// /proc/stat) over the run; bardrive's receiver polls without sleeping, so its time is that of the polls
// that returned frames (empty polls counted apart); senders: CPU 0's busy time. Every receiver reads
// pktgen's header (magic, sequence number) of each frame; "in order" counts consecutive numbers.

#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/nic/af_xdp_rx.hpp"
#include "bench/nic/kernel_port.hpp"
#include "core/error.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/igb.hpp"
#include "nic/test_frame.hpp"
#include "vfio/bind.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;
using bench::KernelPort;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t kSizes[] = {60, 508, 1496};  // 64, 512 and 1500 bytes on the wire with the CRC
constexpr std::uint32_t kBatches[] = {1, 8, 32, 64};
constexpr std::uint32_t kSenderBurst = 32;  // pktgen's burst for every RX row
constexpr unsigned kSendCpu = 0, kRecvCpu = 1;
constexpr int kMaxBatch = 64;

struct Run {
    bool ran = false;
    std::uint64_t received = 0, in_order = 0;
    double seconds = 0;
    double cpu = 0;  // seconds of CPU time of the measured side
    double kpps() const { return ran && seconds > 0 ? static_cast<double>(received) / seconds / 1e3 : 0; }
    double ns_per_frame() const { return ran && received ? cpu * 1e9 / static_cast<double>(received) : 0; }
};

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::uint64_t counter(const std::string& ifname, const char* stat) {
    return std::strtoull(bench::read_line("/sys/class/net/" + ifname + "/statistics/" + stat).c_str(), nullptr, 10);
}

// Waits until interface `ifname` counted `count` received frames since `base`, or none came for 2 s;
// returns the time the count last moved.
Clock::time_point wait_rx(const std::string& ifname, std::uint64_t base, std::uint64_t count, Clock::time_point since) {
    std::uint64_t seen = counter(ifname, "rx_packets") - base;
    Clock::time_point moved = since;
    if (seen) moved = Clock::now();
    while (seen < count && Clock::now() - moved < std::chrono::seconds(2)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::uint64_t now = counter(ifname, "rx_packets") - base;
        if (now != seen) moved = Clock::now();
        seen = now;
    }
    return moved;
}

// A child process (xdp-bench, xdp-trafficgen) pinned to one CPU, its stdout discarded.
pid_t spawn(const std::vector<std::string>& args, unsigned cpu) {
    pid_t pid = ::fork();
    if (pid == 0) {
        bench::pin_thread(cpu);
        std::FILE* null = std::fopen("/dev/null", "w");
        if (null) ::dup2(::fileno(null), 1);
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        std::_Exit(127);
    }
    return pid;
}

void stop(pid_t pid) {
    if (pid <= 0) return;
    ::kill(pid, SIGINT);
    for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

bool has_xdp(const std::string& ifname) {
    std::string cmd = "ip link show dev " + ifname + " 2>/dev/null";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return false;
    char buf[512];
    bool found = false;
    while (std::fgets(buf, sizeof buf, p))
        if (std::strstr(buf, "xdp")) found = true;
    ::pclose(p);
    return found;
}

bool wait_xdp(const std::string& ifname, pid_t pid) {
    for (int i = 0; i < 300; ++i) {
        if (has_xdp(ifname)) return true;
        if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// pktgen on `a` sends `count` frames of `len` bytes to `to` while `receive` runs on CPU 1; the
// receiver's CPU time is CPU 1's busy time.
template <class Receive>
Run rx_with_pktgen(const std::string& a, const nic::MacAddress& to, std::uint32_t len, std::uint64_t count,
                   Receive receive) {
    Run r;
    Clock::time_point last{};
    double cpu0 = bench::cpu_busy_seconds(kRecvCpu);
    std::thread rx([&] {
        bench::pin_thread(kRecvCpu);
        last = receive(r);  // the time of the last arrival
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the receiver is polling
    Clock::time_point t0 = Clock::now();
    bench::Pktgen::send(a, to, len, kSenderBurst, count);
    rx.join();
    r.cpu = bench::cpu_busy_seconds(kRecvCpu) - cpu0;
    r.ran = true;
    r.seconds = last > t0 ? secs(t0, last) : 0;
    return r;
}

void count_seq(Run& r, const std::uint8_t* frame, std::uint32_t len, std::uint32_t& expect) {
    std::uint32_t seq = 0;
    if (bench::pktgen_seq(frame, len, seq)) {
        if (r.received == 0 || seq == expect) ++r.in_order;
        expect = seq + 1;
    }
    ++r.received;
}

struct Tables {
    // [size][batch]
    Run xdp_drop[3], afxdp[3][4], afxdp_zc[3][4], bard_rx[3][4];
    Run pktgen_tx[3][4], trafficgen, bard_tx[3][4];
    std::uint64_t tx_rx[3][4][2] = {};  // B's count: pktgen, bardrive
    std::uint64_t trafficgen_rx = 0;
    std::uint32_t trafficgen_len = 0;
    std::string zc_note, afxdp_note, xdp_note, trafficgen_note;
};

void kernel_rx(Tables& t, KernelPort& a, KernelPort& b, std::uint64_t count) {
    // (a) native XDP dropping every frame after reading it
    pid_t xb = spawn({"xdp-bench", "drop", "-p", "read-data", "-i", "1", b.name}, kSendCpu);
    if (!wait_xdp(b.name, xb)) {
        t.xdp_note = "xdp-bench drop did not attach to " + b.name;
    } else {
        for (int s = 0; s < 3; ++s) {
            std::uint64_t base = counter(b.name, "rx_packets");
            t.xdp_drop[s] = rx_with_pktgen(a.name, b.mac, kSizes[s], count, [&](Run& r) {
                std::this_thread::sleep_for(std::chrono::milliseconds(40));
                Clock::time_point last = wait_rx(b.name, base, count, Clock::now());
                r.received = counter(b.name, "rx_packets") - base;
                r.in_order = r.received;  // XDP counts, it does not report sequence numbers
                return last;
            });
        }
    }
    stop(xb);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // (b) AF_XDP on queue 0 (B has one channel): zero-copy when offered, then copy mode
    for (bool zc : {true, false}) {
        std::string why;
        auto sock = bench::AfXdpRx::open(b.name, 0, zc, why);
        if (!sock) {
            (zc ? t.zc_note : t.afxdp_note) = why;
            continue;
        }
        for (int s = 0; s < 3; ++s)
            for (int k = 0; k < 4; ++k)
                (zc ? t.afxdp_zc : t.afxdp)[s][k] =
                    rx_with_pktgen(a.name, b.mac, kSizes[s], count, [&](Run& r) {
                        bench::RxCount c = sock->receive(count, kBatches[k]);
                        r.received = c.received;
                        r.in_order = c.in_order;
                        return Clock::time_point(std::chrono::nanoseconds(c.last_ns));
                    });
        sock.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

void kernel_tx(Tables& t, KernelPort& a, KernelPort& b, std::uint64_t count) {
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k) {
            Run& r = t.pktgen_tx[s][k];
            std::uint64_t base = counter(b.name, "rx_packets");
            double cpu0 = bench::cpu_busy_seconds(kSendCpu);
            double pps = bench::Pktgen::send(a.name, b.mac, kSizes[s], kBatches[k], count);
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            wait_rx(b.name, base, count, Clock::now());
            r.ran = pps > 0;
            r.received = r.in_order = count;  // sent, by pktgen's count
            r.seconds = pps > 0 ? static_cast<double>(count) / pps : 0;
            t.tx_rx[s][k][0] = counter(b.name, "rx_packets") - base;
        }
    // xdp-trafficgen: XDP frames built and sent from the kernel (BPF_PROG_RUN live frames). Its rate is
    // read from A's tx_packets, polled from CPU 1 while it runs on CPU 0.
    bench::pin_thread(kRecvCpu);
    for (int attempt = 0; attempt < 2 && !t.trafficgen.ran; ++attempt) {
        pid_t helper = 0;
        if (attempt == 1) {  // some drivers only transmit XDP frames while an XDP program is attached
            helper = spawn({"xdp-bench", "pass", a.name}, kSendCpu);
            if (!wait_xdp(a.name, helper)) break;
        }
        std::uint64_t tx0 = counter(a.name, "tx_packets"), rx0 = counter(b.name, "rx_packets"),
                      bytes0 = counter(b.name, "rx_bytes");
        pid_t tg = spawn({"xdp-trafficgen", "udp", "-m", b.mac.str(), "-n", std::to_string(count), a.name}, kSendCpu);
        std::optional<Clock::time_point> first;
        Clock::time_point last = Clock::now(), deadline = last + std::chrono::seconds(60);
        double cpu_first = 0, cpu_last = 0;
        std::uint64_t sent = 0;
        bool exited = false;
        while (Clock::now() < deadline) {
            std::uint64_t now = counter(a.name, "tx_packets") - tx0;
            if (now && !first) {
                first = Clock::now();
                cpu_first = bench::cpu_busy_seconds(kSendCpu);
            }
            if (now != sent) {
                last = Clock::now();
                cpu_last = bench::cpu_busy_seconds(kSendCpu);
            }
            sent = now;
            if (sent >= count || exited) break;
            exited = ::waitpid(tg, nullptr, WNOHANG) == tg;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        stop(tg);
        wait_rx(b.name, rx0, count, Clock::now());
        stop(helper);
        if (first && sent > 1) {
            Run& r = t.trafficgen;
            r.ran = true;
            r.received = r.in_order = sent;
            r.seconds = secs(*first, last) * static_cast<double>(sent) / static_cast<double>(sent - 1);
            r.cpu = cpu_last - cpu_first;
            t.trafficgen_rx = counter(b.name, "rx_packets") - rx0;
            if (t.trafficgen_rx)
                t.trafficgen_len = static_cast<std::uint32_t>((counter(b.name, "rx_bytes") - bytes0) / t.trafficgen_rx);
            if (attempt == 1) t.trafficgen_note = "with `xdp-bench pass` attached to A";
        } else {
            t.trafficgen_note = "xdp-trafficgen sent nothing on " + a.name;
        }
    }
    bench::pin_thread(kSendCpu);
}

void bardrive_tx(Tables& t, nic::Igb& a, dma::BufferPool& pool, const KernelPort& b, std::uint64_t count) {
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k) {
            Run& r = t.bard_tx[s][k];
            const std::uint32_t len = kSizes[s], batch = kBatches[k];
            std::uint64_t base = counter(b.name, "rx_packets");
            double cpu0 = bench::cpu_busy_seconds(kSendCpu);
            Clock::time_point t0 = Clock::now();
            std::uint64_t sent = 0;
            while (sent < count) {
                nic::Packet pkts[kMaxBatch];
                std::uint32_t n = 0;
                dma::BufferPool::Buffer buf;
                while (n < batch && sent + n < count && pool.alloc(buf)) {
                    auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                    nic::write_test_frame(d, len, b.mac, a.mac(), sent + n);
                    pkts[n++] = nic::Packet{d, buf.iova, len, buf.index, &pool};
                }
                std::uint16_t took = a.tx_burst(0, std::span(pkts, n));
                for (std::uint32_t i = took; i < n; ++i) nic::Igb::release(pkts[i]);
                sent += took;
            }
            // done when the device has finished with every descriptor
            while (a.tx_free_slots(0) + 1 < a.options().tx_ring && Clock::now() - t0 < std::chrono::seconds(30))
                a.tx_reclaim(0);
            Clock::time_point t1 = Clock::now();
            a.tx_reclaim(0);
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            r.ran = true;
            r.received = r.in_order = sent;
            r.seconds = secs(t0, t1);
            wait_rx(b.name, base, count, Clock::now());
            t.tx_rx[s][k][1] = counter(b.name, "rx_packets") - base;
        }
}

void bardrive_rx(Tables& t, const KernelPort& a, nic::Igb& b, std::uint64_t count) {
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k) {
            std::uint64_t busy_ns = 0;
            t.bard_rx[s][k] = rx_with_pktgen(a.name, b.mac(), kSizes[s], count, [&](Run& r) {
                nic::Packet got[kMaxBatch];
                std::uint32_t expect = 0;
                Clock::time_point last = Clock::now();
                while (r.received < count) {
                    Clock::time_point p0 = Clock::now();
                    std::uint16_t n = b.rx_burst(0, std::span(got, kBatches[k]));
                    if (n == 0) {
                        if (p0 - last > std::chrono::seconds(2)) break;
                        continue;
                    }
                    for (std::uint16_t i = 0; i < n; ++i) {
                        count_seq(r, got[i].data, got[i].len, expect);
                        nic::Igb::release(got[i]);
                    }
                    last = Clock::now();
                    busy_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(last - p0).count());
                }
                return last;
            });
            t.bard_rx[s][k].cpu = static_cast<double>(busy_ns) / 1e9;  // the polls that found frames
        }
}

void use_vfio(const std::vector<pci::Bdf>& bdfs) {
    vfio::BindOptions bo;
    bo.force = true;
    vfio::bind(vfio::Sysfs(), bdfs, bo);
}

void back_to_kernel(const pci::Bdf& bdf) {
    vfio::unbind(vfio::Sysfs(), {bdf}, true, vfio::BindOptions{});
    const std::string net = "/sys/bus/pci/devices/" + bdf.str() + "/net";
    for (int i = 0; i < 200 && !std::filesystem::exists(net); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

std::string cell(const Run& r) {
    if (!r.ran) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", r.kpps());
    return buf;
}
std::string ns(const Run& r) {
    if (!r.ran || !r.received) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", r.ns_per_frame());
    return buf;
}
std::string got(const Run& r) {
    if (!r.ran) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%llu (%llu)", static_cast<unsigned long long>(r.received),
                  static_cast<unsigned long long>(r.in_order));
    return buf;
}

void print(const Tables& t, std::uint64_t count) {
    std::printf("\n## RX alone on NIC B (sender: pktgen on NIC A, burst %u, %llu frames per row)\n\n", kSenderBurst,
                static_cast<unsigned long long>(count));
    if (!t.xdp_note.empty()) std::printf("XDP drop: SKIPPED (%s)\n", t.xdp_note.c_str());
    if (!t.afxdp_note.empty()) std::printf("AF_XDP copy mode: SKIPPED (%s)\n", t.afxdp_note.c_str());
    std::printf("AF_XDP zero-copy: %s\n\n",
                t.zc_note.empty() ? "offered by the guest's igb (rows below)" : ("not offered: " + t.zc_note).c_str());
    std::printf(
        "| frame (wire) | batch | XDP drop kpps | AF_XDP copy kpps | AF_XDP zc kpps | bardrive kpps | rate ratio vs best "
        "kernel | CPU ns/frame XDP / AF_XDP / zc / bardrive | CPU ratio (best kernel / bardrive) | received (in order): "
        "XDP / AF_XDP / zc / bardrive |\n|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n");
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k) {
            const Run* kern[] = {&t.xdp_drop[s], &t.afxdp[s][k], &t.afxdp_zc[s][k]};
            double best = 0, best_ns = 0;
            for (const Run* r : kern) {
                best = std::max(best, r->kpps());
                if (r->ran && r->received && (best_ns == 0 || r->ns_per_frame() < best_ns)) best_ns = r->ns_per_frame();
            }
            const Run& b = t.bard_rx[s][k];
            std::printf("| %u | %u | %s | %s | %s | %s | %.2fx | %s / %s / %s / %s | %.2fx | %s / %s / %s / %s |\n",
                        kSizes[s] + 4, kBatches[k], cell(t.xdp_drop[s]).c_str(), cell(t.afxdp[s][k]).c_str(),
                        cell(t.afxdp_zc[s][k]).c_str(), cell(b).c_str(), best > 0 ? b.kpps() / best : 0,
                        ns(t.xdp_drop[s]).c_str(), ns(t.afxdp[s][k]).c_str(), ns(t.afxdp_zc[s][k]).c_str(),
                        ns(b).c_str(), b.ns_per_frame() > 0 ? best_ns / b.ns_per_frame() : 0,
                        got(t.xdp_drop[s]).c_str(), got(t.afxdp[s][k]).c_str(), got(t.afxdp_zc[s][k]).c_str(),
                        got(b).c_str());
        }
    std::printf("\n## TX alone on NIC A (receiver: the kernel's igb on NIC B counting, %llu frames per row)\n\n",
                static_cast<unsigned long long>(count));
    if (t.trafficgen.ran)
        std::printf("xdp-trafficgen udp: its own %u-byte frames (%u on the wire), no batch knob: shown in the 64-byte rows%s%s\n\n",
                    t.trafficgen_len, t.trafficgen_len + 4, t.trafficgen_note.empty() ? "" : "; ",
                    t.trafficgen_note.c_str());
    else
        std::printf("xdp-trafficgen: SKIPPED (%s)\n\n", t.trafficgen_note.c_str());
    std::printf(
        "| frame (wire) | batch | pktgen kpps | xdp-trafficgen kpps | bardrive kpps | rate ratio vs best kernel | CPU "
        "ns/frame pktgen / trafficgen / bardrive | B received: pktgen / trafficgen / bardrive |\n"
        "|---:|---:|---:|---:|---:|---:|---|---|\n");
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k) {
            const Run none;
            const Run& tg = s == 0 ? t.trafficgen : none;
            double best = std::max(t.pktgen_tx[s][k].kpps(), tg.kpps());
            const Run& b = t.bard_tx[s][k];
            std::printf("| %u | %u | %s | %s | %s | %.2fx | %s / %s / %s | %llu / %s / %llu |\n", kSizes[s] + 4,
                        kBatches[k], cell(t.pktgen_tx[s][k]).c_str(), cell(tg).c_str(), cell(b).c_str(),
                        best > 0 ? b.kpps() / best : 0, ns(t.pktgen_tx[s][k]).c_str(), ns(tg).c_str(), ns(b).c_str(),
                        static_cast<unsigned long long>(t.tx_rx[s][k][0]),
                        s == 0 && tg.ran ? std::to_string(t.trafficgen_rx).c_str() : "-",
                        static_cast<unsigned long long>(t.tx_rx[s][k][1]));
        }
}

}  // namespace

int main(int argc, char** argv) try {
    std::uint64_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 10000;
    auto nics = bench::lab_nics();
    if (nics.size() < 2 || !std::filesystem::exists("/sys/bus/pci/devices/" + nics[0].str() + "/net") ||
        !std::filesystem::exists("/sys/bus/pci/devices/" + nics[1].str() + "/net")) {
        std::fprintf(stderr,
                     "nic-vs-xdp: SKIPPED: needs two igb NICs on one wire, both on the kernel's igb: run it in the lab "
                     "(lab/lab run basic --bind 0000:03:00.0 -- build/bench/nic/nic-vs-xdp [FRAMES])\n");
        return 77;
    }
    if (!bench::pin_thread(kRecvCpu) || !bench::pin_thread(kSendCpu)) {
        std::fprintf(stderr, "nic-vs-xdp: SKIPPED: needs 2 CPUs (a sender's and a receiver's)\n");
        return 77;
    }
    if (!bench::Pktgen::load()) {
        std::fprintf(stderr, "nic-vs-xdp: SKIPPED: cannot load pktgen, the common sender\n");
        return 77;
    }
    // libxdp keeps its dispatcher state in bpffs
    ::mkdir("/sys/fs/bpf", 0755);
    ::mount("bpf", "/sys/fs/bpf", "bpf", 0, nullptr);
    Tables t;
    const pci::Bdf A = nics[0], B = nics[1];
    {  // 1. the kernel on both NICs
        KernelPort a(A), b(B);
        if (!bench::set_channels(b.name, 1)) std::fprintf(stderr, "nic-vs-xdp: %s keeps its channels\n", b.name.c_str());
        KernelPort b1(B);  // carrier again after the channel change
        bench::pin_irqs(a.name, kSendCpu);
        bench::pin_irqs(b.name, kRecvCpu);
        std::fprintf(stderr, "nic-vs-xdp: kernel RX on %s\n", b.name.c_str());
        kernel_rx(t, a, b, count);
        std::fprintf(stderr, "nic-vs-xdp: kernel TX on %s\n", a.name.c_str());
        kernel_tx(t, a, b, count);
    }
    {  // 2. bardrive TX on A; B stays the kernel's
        use_vfio({A});
        KernelPort b(B);
        vfio::Domain domain;
        auto dev = vfio::Device::open(domain, A);
        dma::IovaAllocator iovas(domain);
        dma::BufferPool pool(domain, iovas, 2048, 4096);
        nic::Igb a(dev, iovas, pool);
        std::fprintf(stderr, "nic-vs-xdp: bardrive TX\n");
        bardrive_tx(t, a, pool, b, count);
    }
    {  // 3. bardrive RX on B; A back on the kernel's igb with pktgen
        back_to_kernel(A);
        use_vfio({B});
        KernelPort a(A);
        bench::pin_irqs(a.name, kSendCpu);
        vfio::Domain domain;
        auto dev = vfio::Device::open(domain, B);
        dma::IovaAllocator iovas(domain);
        dma::BufferPool pool(domain, iovas, 2048, 4096);
        nic::Igb b(dev, iovas, pool);
        std::fprintf(stderr, "nic-vs-xdp: bardrive RX\n");
        bardrive_rx(t, a, b, count);
    }
    print(t, count);
    bool ok = true;
    for (int s = 0; s < 3; ++s)
        for (int k = 0; k < 4; ++k)
            ok = ok && t.bard_rx[s][k].received == count && t.bard_tx[s][k].received == count;
    return ok ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "nic-vs-xdp: error: %s\n", e.what());
    return 2;
}
