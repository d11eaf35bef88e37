// The results of one `bardrive bench` run and the ways to show them: a table per path, an
// nvbandwidth-style matrix, JSON and an SVG plot of bandwidth against transfer size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace bardrive::bench {

// One transfer size of a sweep: the path's rate and its reference's rate, both from the same run.
struct Point {
    std::uint64_t bytes = 0;  // one transfer's size (per direction for bidirectional paths)
    double gbps = 0;          // median over the repetitions, 1 GB/s = 1e9 bytes/s
    double ref_gbps = 0;      // the reference measured beside it; 0 = none
};

// One path: where the bytes go, by what means, and either its sweep or why it could not run.
struct PathResult {
    std::string id;      // "ce:host0->gpu0": method, then endpoints
    std::string method;  // ce, sm, zc-read, zc-write, peer, nopeer, mmio-wc, mmio-uc, nic
    std::string src;     // endpoint names: host0 (pinned memory on NUMA node 0), gpu0, bar, nic
    std::string dst;
    std::string src_bdf;  // PCI address of a device endpoint; empty for host memory
    std::string dst_bdf;
    int host_node = -1;  // NUMA node of the host-memory end; -1 = no such end, or not placed
    bool bidirectional = false;
    std::string topology;   // the pair's class (PIX/PXB/PHB/NODE/SYS, or NUMA local/remote)
    std::string note;       // what the figures mean beyond the class ("faster than its PCIe route")
    std::string reference;  // what ref_gbps is ("cudaMemcpy H2D", "ivshmem BAR uncached")
    double link_gbps = 0;   // the PCIe link's theoretical rate for the path; 0 = not a PCIe path/unknown
    std::string reason;     // non-empty: the path is unavailable, and this says why
    std::string failure;    // non-empty: the path ran but failed (wrong bytes landed, a call failed)
    std::vector<Point> points;
    double latency_us = 0;  // median time of one small transfer; 0 = not measured
    std::uint64_t latency_bytes = 0;

    bool available() const { return reason.empty(); }
    const Point* peak() const;  // the point with the highest rate; nullptr when there are none
};

// A path with its id ("ce:host0->gpu0", "ce:host0<->gpu0") built from its parts.
PathResult make_path(std::string method, std::string src, std::string dst, bool bidirectional);

// A device or memory the paths run between, for the report's legend.
struct Endpoint {
    std::string name;         // host0, gpu0, bar, nic0
    std::string description;  // "NVIDIA H100 80GB HBM3 at 0000:06:00.0", "pinned memory on NUMA node 0"
    std::string bdf;          // PCI address when it is a device; empty for host memory
    int numa_node = -1;       // -1 = unknown
};

struct Report {
    std::string machine;  // host name, CPU/GPU names, driver
    std::string date;     // UTC, ISO 8601
    std::string command;  // the command line that produced it
    int repetitions = 0;
    int warmup = 0;
    std::vector<Endpoint> endpoints;
    std::vector<PathResult> paths;
    bool any_failed() const;
};

// "4 KiB", "1 GiB": sizes as people read them.
std::string format_size(std::uint64_t bytes);

// Per path: availability, topology, then one row per size with the ratio to each reference.
void print_table(const Report& r, std::FILE* out);

// nvbandwidth-style: one matrix per method and direction kind, rows = source, columns =
// destination, cell = peak GB/s with ratio and topology class; unavailable pairs show "n/a".
void print_matrix(const Report& r, std::FILE* out);

std::string to_json(const Report& r);

// Bandwidth (GB/s, linear) against transfer size (log2), one line per available path.
std::string to_svg(const Report& r);

}  // namespace bardrive::bench
