// nic-vs-xdp: bardrive's RX alone and TX alone on one NIC against the kernel's fastest paths on the same NIC,
// in one lab guest, for any NIC bardrive drives (nic::open_port picks the driver):
//   lab/lab run basic --bind 0000:03:00.0 -- build/bench/nic/nic-vs-xdp [--vf] [FRAMES]    (igb, 82576)
//   lab/lab run virtio --bind 0000:03:00.0 -- build/bench/nic/nic-vs-xdp [FRAMES]          (virtio-net)
// The measured NIC is B (the lab's second NIC); A, on the kernel's driver, is the other end of the wire. With
// --vf, B's PF (the kernel's igb) gets two VFs: the kernel's rows run on VF 1 (igbvf), bardrive's on VF 0.
//   RX on B, one common sender (pktgen on A, burst 32, each frame reused: pktgen's clone_skb): the kernel's
//   driver with XDP (`xdp-bench drop -p read-data`, native where the driver has it, else generic), an AF_XDP
//   socket (copy mode; zero-copy when the driver takes it), then bardrive's rx_burst (B on vfio-pci),
//   busy-polling (spin_pause() after an empty poll, as a DPDK loop's rte_pause()), and with MSI-X interrupts
//   (wait_rx after an empty poll, as NAPI sleeps between interrupts).
//   TX on B, A dropping with XDP: pktgen (burst = batch, frames reused), `xdp-trafficgen udp`, the kernel's XDP
//   transmit path driven as xdp-trafficgen drives it (BPF_PROG_RUN live frames, batch = its batch_size; our own
//   2-instruction XDP_TX program, so every size and batch can be asked for), then bardrive's tx_burst of
//   frames built once (only the sequence number is written per send; spin_pause() when the full ring took
//   none). A path the driver lacks says SKIPPED.
// Receivers run on CPU 1 (B's interrupts too), senders on CPU 0 (pktgen's kpktgend_0, A's interrupts).
// Besides the rate, each row gives the CPU time per frame of the side being measured, because under TCG
// the sender often sets the rate: kernel receivers and bardrive with interrupts: CPU 1's time taken from
// an idle-priority soaker thread in a second pass (Soaker); bardrive busy-polling: the time of the polls
// that returned frames (empty polls left out); senders, which keep CPU 0 busy: its busy time (/proc/stat). "sent" is
// the sender's count (pktgen may round it up to its burst); every receiver checks pktgen's magic in each frame.
// Under `lab/lab run --count-instructions` each row also gives the guest instructions per frame of the measured
// vCPU (QEMU's insn_count plugin, bench/nic/insn_count.hpp): everything CPU 1 executed while a RX row ran
// (interrupts, softirq, system calls, the receiver; for busy polling without the empty polls, and with only
// those between the first and the last frame), everything CPU 0 executed while a TX row sent, less what the
// same path spent on a 64-frame row (its set-up: pktgen's configuration, a program run's preparation).

#include <linux/bpf.h>
#include <linux/if_link.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/nic/af_xdp_rx.hpp"
#include "bench/nic/insn_count.hpp"
#include "bench/nic/kernel_port.hpp"
#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/spin.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "nic/drivers.hpp"
#include "nic/igb/igb.hpp"
#include "nic/port.hpp"
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
constexpr int kS = 3, kB = 4;
constexpr std::uint32_t kSenderBurst = 32;  // pktgen's burst for every RX row
constexpr unsigned kSendCpu = 0, kRecvCpu = 1;
constexpr int kMaxBatch = 64;

struct Run {
    bool ran = false;
    std::uint64_t sent = 0, received = 0, valid = 0;
    double seconds = 0;
    double cpu = 0;  // seconds of CPU time of the measured side
    // guest instructions of the measured vCPU (--count-instructions), -1 when not counted; for busy polling
    // also without the empty polls (insns_frames) and with only those between the first and the last frame
    double insns = -1, insns_frames = -1, insns_between = -1;
    double bucket[2] = {-1, -1};  // the measured vCPU's buckets over the row (insn_add<0>, insn_add<1>)
    double counted_seconds = 0;   // RX: the wall time between the row's two marks
    double insns_filled = -1;     // bardrive poll: per frame, draining a ring filled first (every poll a full batch)
    std::uint64_t polls_with_frames = 0;
    std::uint64_t empty_polls = 0,
                  empty_outside = 0;  // busy polling: all, and before the first or after the last frame
    double insns_tx = -1;             // TX: per frame, by difference against a 64-frame row of the same path
    double insns_per_frame() const {
        if (insns_tx >= 0) return insns_tx;
        return ran && received && insns >= 0 ? insns / static_cast<double>(received) : -1;
    }
    double kpps() const { return ran && seconds > 0 ? static_cast<double>(received) / seconds / 1e3 : 0; }
    double ns_per_frame() const { return ran && received ? cpu * 1e9 / static_cast<double>(received) : 0; }
};

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The instruction counter (unavailable without --count-instructions: the columns then say "-").
bench::InsnCounter insn_counter;

// Instructions vCPU `cpu` executed between the marks `from` and `to`; -1 when either snapshot is missing.
double insns_between(std::uint64_t from, std::uint64_t to, unsigned cpu) {
    if (!insn_counter.available()) return -1;
    auto a = insn_counter.get(from), b = insn_counter.get(to);
    return a && b ? static_cast<double>(b->since(*a, cpu)) : -1;
}

// A TX path's instructions per frame on CPU 0: `send(n)` sends n frames through it and returns how many it sent;
// a row of kTxSmall frames, then one of `count`, and the difference, which leaves out what the path spends once
// per row (pktgen's configuration through /proc, loading an XDP program, waiting for the last descriptor).
// `settle()` runs between the two, uncounted. Returns the big row's result; -1 in insns when not counting.
constexpr std::uint64_t kTxSmall = 64;  // a multiple of every batch: pktgen sends whole bursts
template <class Send, class Settle>
std::uint64_t tx_counted(Send send, Settle settle, std::uint64_t count, Run& r) {
    double& insns = r.insns_tx;
    insns = -1;
    const std::uint64_t s0 = insn_counter.available() ? insn_counter.mark() : 0;
    const std::uint64_t small = insn_counter.available() ? send(kTxSmall) : 0;
    const std::uint64_t s1 = insn_counter.mark();
    if (insn_counter.available()) settle();
    const std::uint64_t m0 = insn_counter.mark();
    const std::uint64_t sent = send(count);
    const std::uint64_t m1 = insn_counter.mark();
    const double a = insns_between(s0, s1, kSendCpu), b = insns_between(m0, m1, kSendCpu);
    if (a >= 0 && b >= 0 && sent > small) insns = (b - a) / static_cast<double>(sent - small);
    if (auto x = insn_counter.get(m0), y = insn_counter.get(m1); x && y && sent)  // bucket 0: bardrive's sends alone
        if (std::uint64_t b0 = y->bucket_since(*x, 0, kSendCpu)) r.insns_frames = static_cast<double>(b0) / sent;
    return sent;
}

// Polls `value()` until it reaches `target` or stays still for `quiet`; returns when it last moved.
template <class F>
Clock::time_point wait_count(F value, std::uint64_t target, Clock::time_point since,
                             std::chrono::milliseconds quiet = std::chrono::milliseconds(2000)) {
    std::uint64_t seen = value();
    Clock::time_point moved = since;
    while (seen < target && Clock::now() - moved < quiet) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::uint64_t now = value();
        if (now != seen) moved = Clock::now();
        seen = now;
    }
    return moved;
}

// A child process (xdp-bench, xdp-trafficgen) pinned to one CPU, its output to `log` (or discarded).
pid_t spawn(const std::vector<std::string>& args, unsigned cpu, const std::string& log = "/dev/null") {
    pid_t pid = ::fork();
    if (pid == 0) {
        bench::pin_thread(cpu);
        std::FILE* out = std::fopen(log.c_str(), "w");
        if (out) {
            ::dup2(::fileno(out), 1);
            ::dup2(::fileno(out), 2);
        }
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

// `xdp-bench drop -p read-data` on `ifname` (CPU 0) in XDP mode `mode` ("native" or "skb", generic XDP),
// running once its program is attached and the link is back up (igb restarts the link when XDP is attached);
// 0 when it failed.
pid_t xdp_drop_in(const std::string& ifname, const std::string& mode) {
    pid_t pid = spawn({"xdp-bench", "drop", "-p", "read-data", "-m", mode, ifname}, kSendCpu);
    for (int i = 0; i < 300; ++i) {
        if (has_xdp(ifname)) {
            bench::wait_carrier(ifname);
            bench::pin_irqs(ifname, kRecvCpu);  // igb asked for its vectors anew
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            return pid;
        }
        if (::waitpid(pid, nullptr, WNOHANG) == pid) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    stop(pid);
    return 0;
}

// Native XDP where the driver has it, else generic XDP (igbvf has no native XDP); `mode` says which ran.
pid_t xdp_drop(const std::string& ifname, std::string* mode = nullptr) {
    for (const char* m : {"native", "skb"})
        if (pid_t pid = xdp_drop_in(ifname, m)) {
            if (mode) *mode = m;
            return pid;
        }
    return 0;
}

// A two-instruction XDP program: r0 = action; exit. Our own, so no BPF object file is needed.
UniqueFd load_xdp_program(std::uint32_t action, std::string& err) {
    bpf_insn prog[2]{};
    prog[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
    prog[0].dst_reg = BPF_REG_0;
    prog[0].imm = static_cast<std::int32_t>(action);
    prog[1].code = BPF_JMP | BPF_EXIT;
    static const char license[] = "GPL";
    bpf_attr attr{};
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.insns = reinterpret_cast<std::uint64_t>(prog);
    attr.insn_cnt = 2;
    attr.license = reinterpret_cast<std::uint64_t>(license);
    UniqueFd fd(static_cast<int>(::syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof attr)));
    if (!fd) err = std::string("BPF_PROG_LOAD: ") + std::strerror(errno);
    return fd;
}

// Attaches an XDP_PASS program to `ifindex` in native mode (igb's ndo_xdp_xmit only sends while a
// program is attached); detached when the returned link closes. Invalid fd and `err` on failure.
UniqueFd attach_xdp_pass(int ifindex, std::string& err) {
    UniqueFd prog = load_xdp_program(XDP_PASS, err);
    if (!prog) return prog;
    bpf_attr attr{};
    attr.link_create.prog_fd = static_cast<std::uint32_t>(prog.get());
    attr.link_create.target_ifindex = static_cast<std::uint32_t>(ifindex);
    attr.link_create.attach_type = BPF_XDP;
    attr.link_create.flags = XDP_FLAGS_DRV_MODE;
    UniqueFd link(static_cast<int>(::syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof attr)));
    if (!link) err = std::string("BPF_LINK_CREATE (native XDP_PASS): ") + std::strerror(errno);
    return link;
}

// The kernel's XDP transmit path as xdp-trafficgen drives it: BPF_PROG_RUN in live-frames mode runs an
// XDP program for `count` copies of one frame as if it had arrived on `ifindex`; the program returns
// XDP_TX, so the kernel sends each copy out of that interface through the driver's ndo_xdp_xmit,
// flushing every `batch` frames. Returns "" or what failed.
std::string xdp_live_tx(int ifindex, const std::uint8_t* frame, std::uint32_t len, std::uint32_t batch,
                        std::uint64_t count) {
    std::string err;
    UniqueFd fd = load_xdp_program(XDP_TX, err);
    if (!fd) return err;
    xdp_md ctx{};
    ctx.data_end = len;
    ctx.ingress_ifindex = static_cast<std::uint32_t>(ifindex);
    bpf_attr attr{};
    attr.test.prog_fd = static_cast<std::uint32_t>(fd.get());
    attr.test.data_in = reinterpret_cast<std::uint64_t>(frame);
    attr.test.data_size_in = len;
    attr.test.ctx_in = reinterpret_cast<std::uint64_t>(&ctx);
    attr.test.ctx_size_in = sizeof ctx;
    attr.test.repeat = static_cast<std::uint32_t>(count);
    attr.test.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
    attr.test.batch_size = batch;
    if (::syscall(__NR_bpf, BPF_PROG_TEST_RUN, &attr, sizeof attr) != 0)
        return std::string("BPF_PROG_TEST_RUN with live frames: ") + std::strerror(errno);
    return "";
}

// netperf's "looper" method for a receiver's CPU time: a SCHED_IDLE thread on the receiver's CPU counts
// loop iterations; whatever else runs there (softirq, the receiving thread, interrupts) takes its time, so
// the CPU time spent = wall time - iterations / the idle rate, measured just before and just after (their
// mean: under TCG the vCPU's speed drifts with the host's load). /proc/stat cannot
// tell: it samples ticks, and this kernel stops the tick while a CPU idles between interrupts (NO_HZ,
// no IRQ_TIME_ACCOUNTING), so work done in interrupt context goes mostly unseen.
class Soaker {
public:
    explicit Soaker(unsigned cpu) : thread_([this, cpu] { run(cpu); }) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        before_ = idle_rate();
    }
    ~Soaker() {
        stop_ = true;
        thread_.join();
    }
    std::pair<std::uint64_t, Clock::time_point> sample() const { return {count_.load(), Clock::now()}; }
    // CPU seconds taken from the soaker between two samples; measures the idle rate again (CPU 1 idle now)
    double taken(std::pair<std::uint64_t, Clock::time_point> a, std::pair<std::uint64_t, Clock::time_point> b) {
        double rate = (before_ + idle_rate()) / 2;
        double busy = secs(a.second, b.second) - static_cast<double>(b.first - a.first) / rate;
        return std::max(busy, 0.0);
    }

private:
    double idle_rate() const {
        auto [n0, t0] = sample();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        auto [n1, t1] = sample();
        return static_cast<double>(n1 - n0) / secs(t0, t1);
    }
    void run(unsigned cpu) {
        bench::pin_thread(cpu);
        sched_param p{};
        ::sched_setscheduler(0, SCHED_IDLE, &p);
        std::uint64_t n = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            for (int i = 0; i < 256; ++i) asm volatile("");
            count_.store(n += 256, std::memory_order_relaxed);
        }
    }
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> count_{0};
    double before_ = 1;
    std::thread thread_;  // last: starts once the counters exist
};

// pktgen on `a` sends about `count` frames of `len` bytes to `to` while `receive(target)` runs on
// `rx_cpu`; `target` becomes what A really sent once pktgen is done. With `soak`, CPU 1's time taken
// from a Soaker becomes the run's CPU time (unless `receive` measured its own).
template <class Receive>
Run rx_pass(const std::string& a, const nic::MacAddress& to, std::uint32_t len, std::uint64_t count, Receive& receive,
            unsigned rx_cpu, bool soak) {
    Run r;
    Clock::time_point last{};
    std::atomic<std::uint64_t> target{~std::uint64_t{0}};
    std::unique_ptr<Soaker> soaker = soak ? std::make_unique<Soaker>(kRecvCpu) : nullptr;
    std::thread rx([&] {
        bench::pin_thread(rx_cpu);
        last = receive(r, target);  // the time of the last arrival
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the receiver is ready
    std::uint64_t tx0 = bench::if_counter(a, "tx_packets");
    Clock::time_point t0 = Clock::now();
    auto s0 = soaker ? soaker->sample() : std::pair<std::uint64_t, Clock::time_point>{};
    const std::uint64_t m0 = insn_counter.mark();
    const Clock::time_point c0 = Clock::now();
    bench::Pktgen::send(a, to, len, kSenderBurst, count, count);
    // A counts a frame when its descriptor is done: wait for that count to settle
    wait_count([&] { return bench::if_counter(a, "tx_packets") - tx0; }, count, Clock::now(),
               std::chrono::milliseconds(200));
    r.sent = bench::if_counter(a, "tx_packets") - tx0;
    target = r.sent;
    rx.join();
    const std::uint64_t m1 = insn_counter.mark();
    r.counted_seconds = secs(c0, Clock::now());
    if (!soaker && insn_counter.available()) {  // the soaker's own loop would count too
        auto x = insn_counter.get(m0), y = insn_counter.get(m1);
        if (x && y) {
            r.insns = static_cast<double>(y->since(*x, kRecvCpu));
            for (unsigned b : {0u, 1u}) r.bucket[b] = static_cast<double>(y->bucket_since(*x, b, kRecvCpu));
        }
    }
    if (soaker && r.cpu == 0) r.cpu = soaker->taken(s0, soaker->sample());
    r.ran = true;
    r.seconds = last > t0 ? secs(t0, last) : 0;
    return r;
}

// One RX row: the rate and counts from a pass with CPU 1 otherwise idle, then (unless the receiver
// measures its own time) the CPU time per frame from a second pass with a Soaker on CPU 1, which keeps
// that vCPU busy and so changes the rate.
template <class Receive>
Run rx_with_pktgen(const std::string& a, const nic::MacAddress& to, std::uint32_t len, std::uint64_t count,
                   Receive receive, unsigned rx_cpu = kRecvCpu, bool measures_own_cpu = false) {
    Run r = rx_pass(a, to, len, count, receive, rx_cpu, false);
    if (!measures_own_cpu) {
        Run c = rx_pass(a, to, len, count, receive, rx_cpu, true);
        r.cpu = c.received ? c.cpu * static_cast<double>(r.received) / static_cast<double>(c.received) : 0;
    }
    return r;
}

struct Tables {
    Run xdp_drop[kS], afxdp[kS][kB], afxdp_zc[kS][kB], bard_rx[kS][kB], bard_rx_irq[kS][kB];
    Run pktgen_tx[kS][kB], trafficgen, xdp_tx[kS][kB], bard_tx[kS][kB];
    std::uint32_t trafficgen_len = 0;
    double idle_insns_per_s[2] = {-1, -1};  // what an idle vCPU executes a second (timer ticks, the idle loop)
    std::string zc_note, afxdp_note, xdp_note, trafficgen_note, xdp_tx_note;
    std::string xdp_mode = "native", afxdp_mode = "native";  // "skb": generic XDP, the driver has no native XDP
    std::string kernel_driver, bardrive_driver, irq_note;    // what ran the rows (the NIC's driver on each side)
};

void kernel_rx(Tables& t, KernelPort& a, KernelPort& b, std::uint64_t count) {
    // (a) XDP reading and dropping every frame; the drivers count the frames XDP took in rx_packets.
    // Reading that counter may cost register reads (igb_update_stats), so it is watched from CPU 0, every
    // 2 ms once pktgen is done, to keep CPU 1's time the receiver's.
    if (pid_t xb = xdp_drop(b.name, &t.xdp_mode); !xb) {
        t.xdp_note = "xdp-bench drop did not attach to " + b.name;
    } else {
        for (int s = 0; s < kS; ++s) {
            t.xdp_drop[s] = rx_with_pktgen(
                a.name, b.mac, kSizes[s], count,
                [&](Run& r, const std::atomic<std::uint64_t>& target) {
                    // runs before pktgen starts, once per pass
                    const std::uint64_t base = bench::if_counter(b.name, "rx_packets");
                    auto rx_count = [&] { return bench::if_counter(b.name, "rx_packets") - base; };
                    while (target.load() == ~std::uint64_t{0})
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    Clock::time_point last = wait_count(rx_count, target.load(), Clock::now());
                    r.received = rx_count();
                    r.valid = r.received;  // XDP counts; its program read each frame
                    return last;
                },
                kSendCpu);
        }
        stop(xb);
        bench::wait_carrier(b.name);
        bench::pin_irqs(b.name, kRecvCpu);
    }
    // (b) AF_XDP on queue 0 (B has one channel): zero-copy when offered, then copy mode (generic XDP where
    // the driver has no native XDP)
    for (bool zc : {true, false}) {
        using Mode = bench::AfXdpRx::Mode;
        std::string why, generic_why;
        auto sock = bench::AfXdpRx::open(b.name, 0, zc ? Mode::zero_copy : Mode::copy, why);
        if (!sock && !zc && (sock = bench::AfXdpRx::open(b.name, 0, Mode::generic_copy, generic_why)))
            t.afxdp_mode = "skb";
        if (!sock) {
            (zc ? t.zc_note : t.afxdp_note) = why + (generic_why.empty() ? "" : "; generic XDP: " + generic_why);
            continue;
        }
        bench::wait_carrier(b.name);
        bench::pin_irqs(b.name, kRecvCpu);  // igb asked for its vectors anew
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (int s = 0; s < kS; ++s)
            for (int k = 0; k < kB; ++k)
                (zc ? t.afxdp_zc : t.afxdp)[s][k] = rx_with_pktgen(
                    a.name, b.mac, kSizes[s], count, [&](Run& r, const std::atomic<std::uint64_t>& target) {
                        bench::RxCount c = sock->receive(target, kBatches[k]);
                        r.received = c.received;
                        r.valid = c.valid;
                        return Clock::time_point(std::chrono::nanoseconds(c.last_ns));
                    });
        sock.reset();
        bench::wait_carrier(b.name);
        bench::pin_irqs(b.name, kRecvCpu);
    }
}

// The kernel's TX paths on `a` (the measured NIC) towards `b` (dropping with XDP).
void kernel_tx(Tables& t, KernelPort& a, KernelPort& b, std::uint64_t count) {
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            Run& r = t.pktgen_tx[s][k];
            std::uint64_t base = 0, tx0 = 0;
            double cpu0 = 0, pps = 0;
            tx_counted(
                [&](std::uint64_t n) {
                    base = bench::if_counter(b.name, "rx_packets");
                    tx0 = bench::if_counter(a.name, "tx_packets");
                    cpu0 = bench::cpu_busy_seconds(kSendCpu);
                    pps = bench::Pktgen::send(a.name, b.mac, kSizes[s], kBatches[k], n, n);
                    return bench::if_counter(a.name, "tx_packets") - tx0;
                },
                [] {}, count, r);
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            wait_count([&] { return bench::if_counter(b.name, "rx_packets") - base; }, count, Clock::now());
            r.ran = pps > 0;
            r.sent = bench::if_counter(a.name, "tx_packets") - tx0;
            r.seconds = pps > 0 ? static_cast<double>(r.sent) / pps : 0;  // pktgen's own rate
            r.received = r.sent;
            r.valid = bench::if_counter(b.name, "rx_packets") - base;
        }
    // The XDP transmit path needs an XDP program on the sender (igb's and virtio_net's ndo_xdp_xmit refuse
    // without one; igbvf has none: the rows say SKIPPED with the error).
    std::string err;
    UniqueFd pass = attach_xdp_pass(a.ifindex, err);
    if (!pass) {
        t.trafficgen_note = t.xdp_tx_note = err;
        return;
    }
    bench::wait_carrier(a.name);
    bench::pin_irqs(a.name, kSendCpu);  // igb asked for its vectors anew
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    {  // xdp-trafficgen udp, as packaged
        const std::string log = "/tmp/nic-vs-xdp-trafficgen.log";
        std::uint64_t base = bench::if_counter(b.name, "rx_packets"), bytes0 = bench::if_counter(b.name, "rx_bytes"),
                      tx0 = bench::if_counter(a.name, "tx_packets");
        double cpu0 = bench::cpu_busy_seconds(kSendCpu);
        Clock::time_point t0 = Clock::now();
        pid_t tg =
            spawn({"xdp-trafficgen", "udp", "-m", b.mac.str(), "-n", std::to_string(count), a.name}, kSendCpu, log);
        int status = 0;
        ::waitpid(tg, &status, 0);
        Clock::time_point t1 = Clock::now();
        Run& r = t.trafficgen;
        r.sent = bench::if_counter(a.name, "tx_packets") - tx0;
        if (r.sent) {
            r.ran = true;
            r.received = r.sent;
            r.seconds = secs(t0, t1);  // includes loading its program: a lower bound on its rate
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            wait_count([&] { return bench::if_counter(b.name, "rx_packets") - base; }, r.sent, Clock::now());
            r.valid = bench::if_counter(b.name, "rx_packets") - base;
            if (r.valid)
                t.trafficgen_len =
                    static_cast<std::uint32_t>((bench::if_counter(b.name, "rx_bytes") - bytes0) / r.valid);
        } else {
            std::ifstream in(log);
            std::string line, last;
            while (std::getline(in, line))
                if (!line.empty() && line.find("libbpf: elf: skipping") == std::string::npos) last = line;
            t.trafficgen_note = "exit " + std::to_string(WEXITSTATUS(status)) + ": " + last;
        }
    }
    std::uint8_t frame[2048];
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            Run& r = t.xdp_tx[s][k];
            nic::write_test_frame(frame, kSizes[s], b.mac, a.mac, 0);
            std::uint64_t base = 0, tx0 = 0;
            double cpu0 = 0;
            Clock::time_point t0, t1;
            std::string err;
            tx_counted(
                [&](std::uint64_t n) {  // frames asked for: the path's work, whether or not a full ring drops them
                    if (!err.empty()) return n;
                    base = bench::if_counter(b.name, "rx_packets");
                    tx0 = bench::if_counter(a.name, "tx_packets");
                    cpu0 = bench::cpu_busy_seconds(kSendCpu);
                    t0 = Clock::now();
                    err = xdp_live_tx(a.ifindex, frame, kSizes[s], kBatches[k], n);
                    t1 = Clock::now();
                    return n;
                },
                [&] {  // igb counts the small row's frames as it reclaims them
                    wait_count([&] { return bench::if_counter(a.name, "tx_packets") - tx0; }, kTxSmall, Clock::now(),
                               std::chrono::milliseconds(200));
                },
                count, r);
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            if (!err.empty()) {
                t.xdp_tx_note = err;
                continue;
            }
            wait_count([&] { return bench::if_counter(a.name, "tx_packets") - tx0; }, count, Clock::now(),
                       std::chrono::milliseconds(200));
            wait_count([&] { return bench::if_counter(b.name, "rx_packets") - base; }, count, Clock::now());
            r.ran = true;
            r.sent = r.received =
                bench::if_counter(a.name, "tx_packets") - tx0;  // what igb sent (a full XDP ring drops)
            r.seconds = secs(t0, t1);
            r.valid = bench::if_counter(b.name, "rx_packets") - base;
        }
    pass.reset();
    bench::wait_carrier(a.name);
    bench::pin_irqs(a.name, kSendCpu);
}

// Frames the port has sent: the device's count (GPTC) where it keeps one, else the driver's (virtio-net has
// no counters; a frame counts once the device has used its descriptor).
std::uint64_t frames_sent(nic::Port& port) {
    return port.features() & nic::feature::DEVICE_COUNTERS ? port.device_stats().tx_packets : port.tx_stats(0).packets;
}

void bardrive_tx(Tables& t, nic::Port& a, dma::BufferPool& pool, const KernelPort& b, std::uint64_t count) {
    for (int s = 0; s < kS; ++s) {
        // frames built once per size in every buffer; a send writes only the sequence number
        std::vector<dma::BufferPool::Buffer> all;
        for (dma::BufferPool::Buffer buf; pool.alloc(buf);) all.push_back(buf);
        for (auto& buf : all)
            nic::write_test_frame(reinterpret_cast<std::uint8_t*>(buf.data), kSizes[s], b.mac, a.mac(), 0);
        for (auto& buf : all) pool.free(buf.index);
        for (int k = 0; k < kB; ++k) {
            Run& r = t.bard_tx[s][k];
            const std::uint32_t len = kSizes[s], batch = kBatches[k];
            a.tx_reclaim(0);
            const std::uint32_t idle_slots = a.tx_free_slots(0);  // every descriptor free: nothing in flight
            std::uint64_t base = 0, gptc0 = 0, sent = 0;
            double cpu0 = 0;
            Clock::time_point t0, t1;
            tx_counted(
                [&](std::uint64_t total) {
                    base = bench::if_counter(b.name, "rx_packets");
                    gptc0 = frames_sent(a);
                    cpu0 = bench::cpu_busy_seconds(kSendCpu);
                    t0 = Clock::now();
                    sent = 0;
                    while (sent < total) {
                        bench::insn_start();  // bucket 0: a send that took frames, 1: one the full ring refused
                        nic::Packet pkts[kMaxBatch];
                        std::uint32_t n = 0;
                        dma::BufferPool::Buffer buf;
                        while (n < batch && sent + n < total && pool.alloc(buf)) {
                            auto* d = reinterpret_cast<std::uint8_t*>(buf.data);
                            std::uint64_t seq = sent + n;
                            std::memcpy(d + nic::ETH_HEADER_LEN, &seq, sizeof seq);
                            pkts[n++] = nic::Packet{d, buf.iova, len, buf.index, &pool};
                        }
                        std::uint16_t took = a.tx_burst(0, std::span(pkts, n));
                        for (std::uint32_t i = took; i < n; ++i) nic::Port::release(pkts[i]);
                        sent += took;
                        if (took) {
                            bench::insn_add<0>();
                        } else {
                            spin_pause();  // under TCG this ends the vCPU's turn: the receiver gets to run
                            bench::insn_add<1>();
                        }
                    }
                    // done when the device has finished with every descriptor
                    bench::insn_start();
                    while (a.tx_free_slots(0) < idle_slots && Clock::now() - t0 < std::chrono::seconds(30))
                        a.tx_reclaim(0);
                    bench::insn_add<1>();
                    t1 = Clock::now();
                    a.tx_reclaim(0);
                    return sent;
                },
                [] {}, count, r);
            r.cpu = bench::cpu_busy_seconds(kSendCpu) - cpu0;
            r.ran = true;
            r.received = sent;  // taken by tx_burst, descriptors done
            r.sent = frames_sent(a) - gptc0;
            r.seconds = secs(t0, t1);
            wait_count([&] { return bench::if_counter(b.name, "rx_packets") - base; }, count, Clock::now());
            r.valid = bench::if_counter(b.name, "rx_packets") - base;
        }
    }
}

// bardrive's receive loop: rx_burst of up to `batch` on CPU 1 until `target` frames (or 2 s without a frame).
// Polling, its CPU time is that of the polls that found frames; with interrupts (b opened with them), an empty
// poll waits for the queue's MSI-X. It counts the empty polls, and those before the first frame and after the
// last; under --count-instructions each poll's instructions go to a bucket: 0 when it found frames (with their
// handling), 1 when it found none (with the wait for the interrupt).
Clock::time_point receive_loop(nic::Port& b, std::uint32_t batch, Run& run, const std::atomic<std::uint64_t>& target) {
    const bool irq = b.rx_fd(0) >= 0;
    std::uint64_t busy_ns = 0, empty = 0, empty_before = 0, empty_since = 0;
    nic::Packet got[kMaxBatch];
    Clock::time_point last = Clock::now();
    while (run.received < target.load()) {
        bench::insn_start();
        Clock::time_point p0 = Clock::now();
        std::uint16_t n = b.rx_burst(0, std::span(got, batch));
        if (n == 0) {
            ++empty;
            ++empty_since;
            if (p0 - last > std::chrono::seconds(2)) break;
            if (irq)
                b.wait_rx(0, 100);
            else
                spin_pause();
            bench::insn_add<1>();
            continue;
        }
        if (run.received == 0) empty_before = empty;
        empty_since = 0;
        ++run.polls_with_frames;
        for (std::uint16_t i = 0; i < n; ++i) {
            run.valid += bench::is_pktgen_frame(got[i].data, got[i].len);
            nic::Port::release(got[i]);
        }
        run.received += n;
        last = Clock::now();
        busy_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(last - p0).count());
        bench::insn_add<0>();
    }
    if (!irq) run.cpu = static_cast<double>(busy_ns) / 1e9;
    run.empty_polls = empty;
    run.empty_outside = empty_before + empty_since;
    return last;
}

// bardrive's receive alone at a full batch: pktgen puts kFill frames into B's ring while nothing polls it, then
// CPU 1 drains them, every poll taking `batch` frames; instructions per frame from bucket 0 (the polls), the
// fewest of kFillRounds rounds (a timer interrupt that lands in a poll counts there). -1 when not counting.
double filled_ring_insns(const KernelPort& a, nic::Port& b, std::uint32_t len, std::uint32_t batch) {
    // 3 x 64, a multiple of pktgen's burst, below every ring here (QEMU's virtio-net queues hold 256)
    constexpr std::uint64_t kFill = 192;
    constexpr int kFillRounds = 7;
    double best = -1;
    for (int round = 0; round < kFillRounds && insn_counter.available(); ++round) {
        const std::uint64_t tx0 = bench::if_counter(a.name, "tx_packets");
        bench::Pktgen::send(a.name, b.mac(), len, kSenderBurst, kFill, kFill);
        wait_count([&] { return bench::if_counter(a.name, "tx_packets") - tx0; }, kFill, Clock::now(),
                   std::chrono::milliseconds(200));
        const std::uint64_t sent = bench::if_counter(a.name, "tx_packets") - tx0;
        std::thread rx([&] {
            bench::pin_thread(kRecvCpu);
            Run r;
            const std::atomic<std::uint64_t> target{sent};
            const std::uint64_t m0 = insn_counter.mark();
            receive_loop(b, batch, r, target);
            const std::uint64_t m1 = insn_counter.mark();
            auto x = insn_counter.get(m0), y = insn_counter.get(m1);
            if (x && y && r.received == sent && sent && r.empty_polls == 0) {
                double per = static_cast<double>(y->bucket_since(*x, 0, kRecvCpu)) / static_cast<double>(sent);
                if (best < 0 || per < best) best = per;
            }
        });
        rx.join();
    }
    return best;
}

Run bardrive_rx_run(const KernelPort& a, nic::Port& b, std::uint32_t len, std::uint32_t batch, std::uint64_t count) {
    const bool irq = b.rx_fd(0) >= 0;
    auto receive = [&](Run& run, const std::atomic<std::uint64_t>& target) {
        return receive_loop(b, batch, run, target);
    };
    Run r = rx_with_pktgen(a.name, b.mac(), len, count, receive, kRecvCpu, !irq);
    if (r.bucket[0] >= 0) {  // without the empty polls, and with those between the first and the last frame
        r.insns_frames = r.bucket[0];
        const double between = static_cast<double>(r.empty_polls - r.empty_outside);
        r.insns_between =
            r.bucket[0] + (r.empty_polls ? r.bucket[1] * between / static_cast<double>(r.empty_polls) : 0);
    }
    if (!irq) r.insns_filled = filled_ring_insns(a, b, len, batch);
    return r;
}

// Polling, then with interrupts (a second port on the same device). igb's interrupts are moderated as the kernel's
// igb starts (kIrqIntervalUs: about 6000 interrupts a second, IGB_START_ITR), so frames that land together share
// one; the other drivers have no moderation to set (virtio-net suppresses interrupts with EVENT_IDX while the
// driver is behind, as the kernel's virtio_net does).
constexpr std::uint32_t kIrqIntervalUs = 160;

std::unique_ptr<nic::Port> open_rx_port(vfio::Device& dev, dma::IovaAllocator& iovas, dma::BufferPool& pool, bool irq) {
    if (irq && std::string_view(nic::driver_for(dev).name) == "igb") {
        nic::IgbOptions o;
        o.interrupts = true;
        o.interrupt_interval_us = kIrqIntervalUs;
        return std::make_unique<nic::Igb>(dev, iovas, pool, o);
    }
    nic::PortOptions o;
    o.interrupts = irq;
    return nic::open_port(dev, iovas, pool, o);
}

void bardrive_rx(Tables& t, const KernelPort& a, vfio::Device& dev, dma::IovaAllocator& iovas, dma::BufferPool& pool,
                 std::uint64_t count) {
    for (bool irq : {false, true}) {
        std::unique_ptr<nic::Port> b = open_rx_port(dev, iovas, pool, irq);
        // the vfio-pci handlers that turn B's MSI-X into eventfd wake-ups run on the receiver's CPU
        if (irq) bench::pin_device_irqs(dev.bdf().str(), kRecvCpu);
        for (int s = 0; s < kS; ++s)
            for (int k = 0; k < kB; ++k)
                (irq ? t.bard_rx_irq : t.bard_rx)[s][k] = bardrive_rx_run(a, *b, kSizes[s], kBatches[k], count);
    }
}

void use_vfio(const std::vector<pci::Bdf>& bdfs) {
    vfio::BindOptions bo;
    bo.force = true;
    vfio::bind(vfio::Sysfs(), bdfs, bo);
}

// Back to the kernel's driver, as the run found it (nic-lab.sh runs --vf next, on the same PF).
void back_to_kernel(const pci::Bdf& bdf) {
    vfio::unbind(vfio::Sysfs(), {bdf}, true, vfio::BindOptions{});
    for (int i = 0; i < 200 && bench::netdev_of(bdf).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}
std::string kpps(const Run& r) { return r.ran ? fmt("%.1f", r.kpps()) : "-"; }
// A CPU time of 0: the soaker's noise swallowed the cost (shown as ~0, left out of the ratios).
std::string ns(const Run& r) {
    if (!r.ran || !r.received) return "-";
    return r.cpu > 0 ? fmt("%.0f", r.ns_per_frame()) : "~0";
}
std::string counts(const Run& r) {
    if (!r.ran) return "-";
    return std::to_string(r.sent) + "/" + std::to_string(r.received) + "/" + std::to_string(r.valid);
}
std::string tx_counts(const Run& r) { return r.ran ? std::to_string(r.sent) + "/" + std::to_string(r.valid) : "-"; }
std::string ratio(double num, double den) { return num > 0 && den > 0 ? fmt("%.2fx", num / den) : "-"; }

// The best kernel figures of a row: the highest rate, the lowest CPU time per frame.
void best_of(std::initializer_list<const Run*> runs, double& rate, double& cost) {
    rate = 0;
    cost = 0;
    for (const Run* r : runs) {
        rate = std::max(rate, r->kpps());
        if (r->ran && r->received && r->cpu > 0 && (cost == 0 || r->ns_per_frame() < cost)) cost = r->ns_per_frame();
    }
}

void print(const Tables& t, std::uint64_t count) {
    std::printf("\n# NIC B: the kernel's %s against bardrive's %s\n", t.kernel_driver.c_str(),
                t.bardrive_driver.c_str());
    std::printf("\n## RX alone on NIC B (sender: pktgen on NIC A, burst %u, about %llu frames per row)\n\n",
                kSenderBurst, static_cast<unsigned long long>(count));
    if (!t.xdp_note.empty())
        std::printf("- XDP drop: SKIPPED (%s)\n", t.xdp_note.c_str());
    else
        std::printf("- XDP drop: %s XDP\n", t.xdp_mode == "skb" ? "generic (skb)" : "native");
    if (!t.afxdp_note.empty())
        std::printf("- AF_XDP copy mode: SKIPPED (%s)\n", t.afxdp_note.c_str());
    else
        std::printf("- AF_XDP copy mode: %s XDP\n", t.afxdp_mode == "skb" ? "generic (skb)" : "native");
    std::printf("- AF_XDP zero-copy: %s\n",
                t.zc_note.empty() ? ("offered by the kernel's " + t.kernel_driver + " (zc column)").c_str()
                                  : ("not offered (" + t.zc_note + ")").c_str());
    std::printf("- bardrive irq: %s\n\n", t.irq_note.c_str());
    std::printf(
        "| frame (wire) | batch | XDP drop kpps | AF_XDP copy kpps | AF_XDP zc kpps | bardrive poll kpps | bardrive "
        "irq "
        "kpps | rate vs best kernel: poll / irq | CPU ns/frame: XDP / AF_XDP / zc / poll / irq | CPU, best kernel / "
        "bardrive: poll / irq | sent/received/pktgen frames: XDP; AF_XDP; zc; poll; irq |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|\n");
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            double rate = 0, cost = 0;
            best_of({&t.xdp_drop[s], &t.afxdp[s][k], &t.afxdp_zc[s][k]}, rate, cost);
            const Run &p = t.bard_rx[s][k], &n = t.bard_rx_irq[s][k];
            std::printf(
                "| %u | %u | %s | %s | %s | %s | %s | %s / %s | %s / %s / %s / %s / %s | %s / %s | %s; %s; %s; %s; %s "
                "|\n",
                kSizes[s] + 4, kBatches[k], kpps(t.xdp_drop[s]).c_str(), kpps(t.afxdp[s][k]).c_str(),
                kpps(t.afxdp_zc[s][k]).c_str(), kpps(p).c_str(), kpps(n).c_str(), ratio(p.kpps(), rate).c_str(),
                ratio(n.kpps(), rate).c_str(), ns(t.xdp_drop[s]).c_str(), ns(t.afxdp[s][k]).c_str(),
                ns(t.afxdp_zc[s][k]).c_str(), ns(p).c_str(), ns(n).c_str(), ratio(cost, p.ns_per_frame()).c_str(),
                ratio(cost, n.ns_per_frame()).c_str(), counts(t.xdp_drop[s]).c_str(), counts(t.afxdp[s][k]).c_str(),
                counts(t.afxdp_zc[s][k]).c_str(), counts(p).c_str(), counts(n).c_str());
        }
    std::printf("\n## TX alone on NIC B (receiver: NIC A's driver dropping with XDP, %llu frames per row)\n\n",
                static_cast<unsigned long long>(count));
    if (t.trafficgen.ran)
        std::printf(
            "- xdp-trafficgen udp: %s kpps (%u-byte frames, %u on the wire; no size or batch knob; its time "
            "includes loading its program), CPU %s ns/frame, sent/B received %s\n",
            kpps(t.trafficgen).c_str(), t.trafficgen_len, t.trafficgen_len + 4, ns(t.trafficgen).c_str(),
            tx_counts(t.trafficgen).c_str());
    else
        std::printf("- xdp-trafficgen udp: SKIPPED (%s)\n", t.trafficgen_note.c_str());
    if (!t.xdp_tx_note.empty()) std::printf("- XDP live-frames TX: SKIPPED (%s)\n", t.xdp_tx_note.c_str());
    std::printf(
        "\n| frame (wire) | batch | pktgen kpps | XDP live-frames TX kpps | bardrive kpps | rate vs best kernel | CPU "
        "ns/frame: pktgen / XDP / bardrive | CPU, best kernel / bardrive | sent/B received: pktgen; XDP; bardrive |\n"
        "|---:|---:|---:|---:|---:|---:|---|---:|---|\n");
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            double rate = 0, cost = 0;
            best_of({&t.pktgen_tx[s][k], &t.xdp_tx[s][k]}, rate, cost);
            const Run& b = t.bard_tx[s][k];
            std::printf("| %u | %u | %s | %s | %s | %s | %s / %s / %s | %s | %s; %s; %s |\n", kSizes[s] + 4,
                        kBatches[k], kpps(t.pktgen_tx[s][k]).c_str(), kpps(t.xdp_tx[s][k]).c_str(), kpps(b).c_str(),
                        ratio(b.kpps(), rate).c_str(), ns(t.pktgen_tx[s][k]).c_str(), ns(t.xdp_tx[s][k]).c_str(),
                        ns(b).c_str(), ratio(cost, b.ns_per_frame()).c_str(), tx_counts(t.pktgen_tx[s][k]).c_str(),
                        tx_counts(t.xdp_tx[s][k]).c_str(), tx_counts(b).c_str());
        }
}

std::string insn(double v) { return v >= 0 ? fmt("%.1f", v) : "-"; }
std::string empties(const Run& p) {
    if (!p.ran || !p.received) return "-";
    const double per = p.empty_polls && p.bucket[1] >= 0 ? p.bucket[1] / static_cast<double>(p.empty_polls) : -1;
    return fmt("%.1f", static_cast<double>(p.empty_polls) / static_cast<double>(p.received)) + "; " +
           (per >= 0 ? fmt("%.1f", per) : "-");
}
double per_frame(const Run& r, double total) { return r.ran && r.received && total >= 0 ? total / r.received : -1; }

// The lowest instructions per frame among the kernel's paths of a row; -1 when none was counted.
double best_insns(std::initializer_list<const Run*> runs) {
    double best = -1;
    for (const Run* r : runs)
        if (double v = r->insns_per_frame(); v > 0 && (best < 0 || v < best)) best = v;
    return best;
}

// Guest instructions per frame (lab/lab run --count-instructions), and the bar of issue 22: at 64 B, batch 32,
// bardrive's receive at most 1/1.5 of the best kernel path's instructions per frame.
void print_insns(const Tables& t) {
    std::printf("\n## Guest instructions per frame (QEMU's insn_count plugin; RX: CPU 1, TX: CPU 0)\n\n");
    if (!insn_counter.available()) {
        std::printf("- not counted: run under lab/lab run --count-instructions\n");
        return;
    }
    std::printf("- an idle vCPU executes %s (CPU 0) and %s (CPU 1) instructions a second (timer, idle loop)\n",
                insn(t.idle_insns_per_s[0]).c_str(), insn(t.idle_insns_per_s[1]).c_str());
    std::printf(
        "- bardrive poll: the polls that found frames (with their handling) and the empty ones are counted apart "
        "(insn_add<0>/<1>); \"with the empty polls between frames\" adds those between the first and the last "
        "frame at their mean count\n");
    std::printf(
        "\n| frame (wire) | batch | XDP drop | AF_XDP copy | AF_XDP zc | bardrive poll, ring filled first | bardrive "
        "poll, frames only | frames per poll | bardrive poll, with the empty polls between frames | empty polls per "
        "frame; instructions per empty poll | bardrive irq | best kernel / bardrive: filled / frames only / with "
        "empty polls / irq | idle floor per frame: XDP / AF_XDP / irq |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|\n");
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            const Run &p = t.bard_rx[s][k], &n = t.bard_rx_irq[s][k];
            double best = best_insns({&t.xdp_drop[s], &t.afxdp[s][k], &t.afxdp_zc[s][k]});
            double frames = per_frame(p, p.insns_frames), between = per_frame(p, p.insns_between);
            auto floor = [&](const Run& r) {  // what CPU 1 would have executed idle over the row, per frame
                return insn(r.ran && r.received && t.idle_insns_per_s[kRecvCpu] >= 0
                                ? t.idle_insns_per_s[kRecvCpu] * r.counted_seconds / static_cast<double>(r.received)
                                : -1);
            };
            const double filled = p.insns_filled;
            std::printf(
                "| %u | %u | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s | %s / %s / %s |\n",
                kSizes[s] + 4, kBatches[k], insn(t.xdp_drop[s].insns_per_frame()).c_str(),
                insn(t.afxdp[s][k].insns_per_frame()).c_str(), insn(t.afxdp_zc[s][k].insns_per_frame()).c_str(),
                insn(filled).c_str(), insn(frames).c_str(),
                p.polls_with_frames ? fmt("%.1f", static_cast<double>(p.received) / p.polls_with_frames).c_str() : "-",
                insn(between).c_str(), empties(p).c_str(), insn(n.insns_per_frame()).c_str(),
                ratio(best, filled).c_str(), ratio(best, frames).c_str(), ratio(best, between).c_str(),
                ratio(best, n.insns_per_frame()).c_str(), floor(t.xdp_drop[s]).c_str(), floor(t.afxdp[s][k]).c_str(),
                floor(n).c_str());
        }
    std::printf(
        "\n| frame (wire) | batch | pktgen | XDP live-frames TX | bardrive | bardrive, sends that took frames only | "
        "best kernel / bardrive: all / sends only |\n"
        "|---:|---:|---:|---:|---:|---:|---|\n");
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k) {
            double best = best_insns({&t.pktgen_tx[s][k], &t.xdp_tx[s][k]});
            const Run& b = t.bard_tx[s][k];
            std::printf("| %u | %u | %s | %s | %s | %s | %s / %s |\n", kSizes[s] + 4, kBatches[k],
                        insn(t.pktgen_tx[s][k].insns_per_frame()).c_str(),
                        insn(t.xdp_tx[s][k].insns_per_frame()).c_str(), insn(b.insns_per_frame()).c_str(),
                        insn(b.insns_frames).c_str(), ratio(best, b.insns_per_frame()).c_str(),
                        ratio(best, b.insns_frames).c_str());
        }
    // the bar: 64 B on the wire is kSizes[0], batch 32 is kBatches[2]
    const Run &p = t.bard_rx[0][2], &n = t.bard_rx_irq[0][2];
    double best = best_insns({&t.xdp_drop[0], &t.afxdp[0][2], &t.afxdp_zc[0][2]});
    std::printf("\n- bar (64 B, batch 32: bardrive's receive <= best kernel / 1.5 = %s instructions per frame):",
                insn(best > 0 ? best / 1.5 : -1).c_str());
    for (auto [name, v] : {std::pair<const char*, double>{"poll, ring filled first", p.insns_filled},
                           {"poll, frames only", per_frame(p, p.insns_frames)},
                           {"poll with the empty polls between frames", per_frame(p, p.insns_between)},
                           {"irq", n.insns_per_frame()}})
        std::printf(" %s %s %s;", name, insn(v).c_str(),
                    best > 0 && v > 0 ? (v <= best / 1.5 ? "PASS" : "FAIL") : "not measured");
    std::printf("\n");
}

// --vf: NIC B's PF (on the kernel's igb) with two VFs, MACs set by the PF; VF 0 on vfio-pci for bardrive, VF 1 on
// the kernel's igbvf. The VFs go when it is destroyed.
class VfPair {
public:
    explicit VfPair(const pci::Bdf& pf) : pf_(pf.str()) {
        const std::string sys = "/sys/bus/pci/devices/" + pf_;
        const std::string pf_if = bench::netdev_of(pf);
        if (pf_if.empty())
            throw Error("create VFs", pf_, "no network interface", "leave NIC B's PF to the kernel's igb");
        std::ofstream("/proc/sys/net/ipv6/conf/" + pf_if + "/disable_ipv6") << "1";
        write(sys + "/sriov_numvfs", "0");
        if (!write(sys + "/sriov_numvfs", "2"))
            throw Error("create VFs", pf_, "writing 2 to sriov_numvfs failed", "the PF must be an 82576 on igb");
        created_ = true;
        // the MACs before a driver binds (a VF driver reads its MAC then); igbvf is loaded after VF 0 left it
        for (int vf : {0, 1}) {
            const std::string cmd = "ip link set dev " + pf_if + " up && ip link set dev " + pf_if + " vf " +
                                    std::to_string(vf) + " mac 02:00:00:00:0f:0" + std::to_string(vf);
            if (std::system(cmd.c_str()) != 0) throw Error("set a VF's MAC", pf_, cmd + " failed");
        }
        for (int vf : {0, 1})
            vf_[vf] = pci::Bdf::parse(
                std::filesystem::read_symlink(sys + "/virtfn" + std::to_string(vf)).filename().string());
        use_vfio({vf_[0]});
        if (!bench::load_module("igbvf")) throw Error("load igbvf", pf_, "modprobe igbvf failed");
        for (int i = 0; i < 200 && bench::netdev_of(vf_[1]).empty(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        bench::wait_carrier(pf_if);  // a VF resets only while the PF's link is up
    }
    ~VfPair() {
        if (created_) write("/sys/bus/pci/devices/" + pf_ + "/sriov_numvfs", "0");
    }
    pci::Bdf bardrive() const { return vf_[0]; }
    pci::Bdf kernel() const { return vf_[1]; }

private:
    static bool write(const std::string& path, const std::string& text) {
        std::ofstream f(path);
        f << text;
        return static_cast<bool>(f.flush());
    }
    std::string pf_;
    pci::Bdf vf_[2];
    bool created_ = false;
};

}  // namespace

int main(int argc, char** argv) try {
    const char* usage = "usage: nic-vs-xdp [--vf] [FRAMES]";
    bool vf = false;
    const char* frames = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--vf") == 0)
            vf = true;
        else if (!frames && argv[i][0] != '-')
            frames = argv[i];
        else {
            std::fprintf(stderr, "nic-vs-xdp: %s is not an argument here\n%s\n", argv[i], usage);
            return 2;
        }
    }
    char* end = nullptr;
    const std::uint64_t count = frames ? std::strtoull(frames, &end, 10) : 10000;
    if (frames && (*end || count == 0 || count > 1000000)) {
        std::fprintf(stderr, "nic-vs-xdp: FRAMES must be 1..1000000, not %s\n%s\n", frames, usage);
        return 2;
    }
    auto nics = bench::lab_nics();
    if (nics.size() < 2 || bench::netdev_of(nics[0]).empty() || bench::netdev_of(nics[1]).empty()) {
        std::fprintf(stderr,
                     "nic-vs-xdp: SKIPPED: needs two NICs on one wire, both on the kernel's driver: run it in the lab "
                     "(lab/lab run basic|virtio --bind 0000:03:00.0 -- build/bench/nic/nic-vs-xdp [--vf] [FRAMES])\n");
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
    if (insn_counter.available()) {  // the floor: what each vCPU executes a second with nothing to do
        const std::uint64_t m0 = insn_counter.mark();
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const std::uint64_t m1 = insn_counter.mark();
        for (unsigned c : {kSendCpu, kRecvCpu}) t.idle_insns_per_s[c] = insns_between(m0, m1, c);
    } else {
        std::fprintf(stderr, "nic-vs-xdp: no instruction counts (lab/lab run --count-instructions adds them)\n");
    }
    // A is the other end of the wire, always the kernel's; B is measured: the kernel's rows on B_kernel,
    // bardrive's on B_bardrive (the same NIC, or two VFs of it)
    const pci::Bdf A = nics[0];
    std::unique_ptr<VfPair> vfs = vf ? std::make_unique<VfPair>(nics[1]) : nullptr;
    const pci::Bdf B_kernel = vfs ? vfs->kernel() : nics[1], B_bardrive = vfs ? vfs->bardrive() : nics[1];
    {  // 1. the kernel on both NICs
        KernelPort a(A), b(B_kernel);
        std::error_code ec;  // the interface's driver: igb, igbvf, virtio_net
        t.kernel_driver =
            std::filesystem::read_symlink("/sys/class/net/" + b.name + "/device/driver", ec).filename().string();
        if (!bench::set_channels(b.name, 1))
            std::fprintf(stderr, "nic-vs-xdp: %s keeps its channels\n", b.name.c_str());
        bench::wait_carrier(b.name);
        bench::pin_irqs(a.name, kSendCpu);
        bench::pin_irqs(b.name, kRecvCpu);
        std::fprintf(stderr, "nic-vs-xdp: kernel RX on %s (%s)\n", b.name.c_str(), t.kernel_driver.c_str());
        kernel_rx(t, a, b, count);
        std::fprintf(stderr, "nic-vs-xdp: kernel TX on %s\n", b.name.c_str());
        pid_t drop = xdp_drop(a.name);
        bench::pin_irqs(b.name, kSendCpu);  // the sender's completions on the sender's CPU
        kernel_tx(t, b, a, count);
        stop(drop);
    }
    {  // 2. bardrive on B (vfio-pci), A still the kernel's: TX with A dropping with XDP, then RX from A's pktgen
        if (!vfs) use_vfio({B_bardrive});
        KernelPort a(A);
        vfio::Domain domain;
        auto dev = vfio::Device::open(domain, B_bardrive);
        dma::IovaAllocator iovas(domain);
        dma::BufferPool pool(domain, iovas, 2048, 4096);
        dma::BufferPool rx_pool(domain, iovas, 2048, 1024);
        t.bardrive_driver = nic::driver_for(dev).name;
        t.irq_note = t.bardrive_driver == "igb"
                         ? "EITR " + std::to_string(kIrqIntervalUs) + " us, as the kernel's igb starts"
                         : "no moderation (the driver has none to set)";
        {
            pid_t drop = xdp_drop(a.name);  // A's interrupts on CPU 1
            auto b = nic::open_port(dev, iovas, rx_pool);
            std::fprintf(stderr, "nic-vs-xdp: bardrive TX (%s)\n", b->driver());
            bardrive_tx(t, *b, pool, a, count);
            stop(drop);
        }
        bench::wait_carrier(a.name);
        bench::pin_irqs(a.name, kSendCpu);
        std::fprintf(stderr, "nic-vs-xdp: bardrive RX\n");
        bardrive_rx(t, a, dev, iovas, pool, count);
    }
    if (!vfs) back_to_kernel(B_bardrive);
    print(t, count);
    print_insns(t);
    bool ok = true;
    for (int s = 0; s < kS; ++s)
        for (int k = 0; k < kB; ++k)
            ok = ok && t.bard_rx[s][k].received == t.bard_rx[s][k].sent &&
                 t.bard_rx[s][k].valid == t.bard_rx[s][k].sent && t.bard_tx[s][k].sent == count;
    return ok ? 0 : 1;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "nic-vs-xdp: error: %s\n", e.what());
    return 2;
}
