// capture: receives on one port (any NIC bardrive drives) and writes every frame to a pcap file through
// libpcap, as tcpdump -w would; `tcpdump -r FILE` or wireshark read it. Stops after --count frames,
// after --seconds, or when no frame came for --idle seconds; prints what it wrote.
//   capture [--port BDF] [--out capture.pcap] [--count 0 (no limit)] [--seconds 10] [--idle 0 (off)] [--promiscuous]
#include <pcap/pcap.h>
#include <sys/time.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "dma/buffer_pool.hpp"
#include "dma/iova_allocator.hpp"
#include "examples/common.hpp"
#include "nic/port.hpp"
#include "vfio/device.hpp"
#include "vfio/domain.hpp"

using namespace bardrive;

static const char* kUsage =
    "capture [--port BDF] [--out capture.pcap] [--count 0] [--seconds 10] [--idle 0] [--promiscuous]\n"
    "        (in the lab --port defaults to the second of BARDRIVE_LAB_NICS)";

namespace {
// Frames a port may hand out: up to the jumbo frames some drivers take; the file says so in its header.
constexpr int kSnapLen = 9728;

struct PcapClose {
    void operator()(pcap_t* p) const noexcept { pcap_close(p); }
};
struct DumperClose {
    void operator()(pcap_dumper_t* d) const noexcept { pcap_dump_close(d); }
};
}  // namespace

int main(int argc, char** argv) try {
    examples::Options opt(argc, argv, kUsage);
    const pci::Bdf bdf = opt.bdf("port", "BARDRIVE_LAB_NICS", 1);
    const std::string out = opt.str("out", "capture.pcap");
    const auto count = opt.num("count", 0), seconds = opt.num("seconds", 10), idle_s = opt.num("idle", 0);

    std::unique_ptr<pcap_t, PcapClose> pcap(pcap_open_dead(DLT_EN10MB, kSnapLen));
    if (!pcap) throw Error("open pcap", out, "libpcap could not make an Ethernet capture handle");
    std::unique_ptr<pcap_dumper_t, DumperClose> dump(pcap_dump_open(pcap.get(), out.c_str()));
    if (!dump) throw Error("create pcap file", out, pcap_geterr(pcap.get()), "check the path and its permissions");

    vfio::Domain domain;
    auto dev = vfio::Device::open(domain, bdf);
    dma::IovaAllocator iovas(domain);
    dma::BufferPool pool(domain, iovas, 2048, 2048);
    nic::PortOptions o;
    o.promiscuous = opt.has("promiscuous");
    auto port = nic::open_port(dev, iovas, pool, o);
    std::printf("capture: %s %s (%s) -> %s\n", port->driver(), bdf.str().c_str(), port->mac().str().c_str(),
                out.c_str());
    std::fflush(stdout);  // a script waiting for this line knows the port is up

    std::uint64_t frames = 0, bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    for (;;) {
        nic::Packet got[32];
        const std::uint16_t n = port->rx_burst(0, got);
        const auto now = std::chrono::steady_clock::now();
        timeval tv{};
        gettimeofday(&tv, nullptr);
        for (std::uint16_t i = 0; i < n; ++i) {
            pcap_pkthdr h{};
            h.ts = tv;
            h.caplen = h.len = got[i].len;
            pcap_dump(reinterpret_cast<u_char*>(dump.get()), &h, got[i].data);
            bytes += got[i].len;
            nic::Port::release(got[i]);
        }
        frames += n;
        if (n)
            last = now;
        else
            spin_pause();
        if (count && frames >= count) break;
        if (now - start >= std::chrono::seconds(seconds)) break;
        if (idle_s && now - last >= std::chrono::seconds(idle_s)) break;
    }
    if (pcap_dump_flush(dump.get()) != 0) throw Error("write pcap file", out, "the write failed (disk full?)");
    std::printf("capture: wrote %llu frames, %llu bytes to %s\n", static_cast<unsigned long long>(frames),
                static_cast<unsigned long long>(bytes), out.c_str());
    return 0;
} catch (const bardrive::Error& e) {
    std::fprintf(stderr, "capture: error: %s\n", e.what());
    return 2;
}
