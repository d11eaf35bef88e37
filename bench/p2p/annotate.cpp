#include "bench/p2p/annotate.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include "core/log.hpp"
#include "pci/p2p.hpp"

namespace bardrive::bench {

double link_gbps(const pci::LinkInfo& l) {
    if (l.cur_gts <= 0 || l.cur_width == 0) return 0;
    double efficiency = l.cur_gts <= 5.0 ? 8.0 / 10 : l.cur_gts <= 32.0 ? 128.0 / 130 : 236.0 / 256;
    return l.cur_gts * l.cur_width * efficiency / 8;
}

namespace {

// The slowest known link among the given devices; 0 when none is known.
double slowest(const pci::Topology& t, const std::vector<std::size_t>& devices) {
    double best = 0;
    for (auto i : devices) {
        const auto& link = t.devices[i].link;
        if (!link) continue;
        double g = link_gbps(*link);
        if (g > 0 && (best == 0 || g < best)) best = g;
    }
    return best;
}

// A device and the bridges above it up to its root port: the links between it and the CPU.
std::vector<std::size_t> to_root(const pci::Topology& t, std::size_t i) {
    std::vector<std::size_t> out{i};
    for (auto p = t.devices[i].parent; p; p = t.devices[*p].parent) out.push_back(*p);
    return out;
}

std::optional<std::size_t> find(const pci::Topology& t, const std::string& bdf) {
    if (bdf.empty()) return std::nullopt;
    auto b = pci::Bdf::try_parse(bdf);
    return b ? t.find(*b) : std::nullopt;
}

}  // namespace

void annotate(Report& r, const pci::Topology& t) {
    for (auto& p : r.paths) {
        auto a = find(t, p.src_bdf), b = find(t, p.dst_bdf);
        double link = 0;
        if (a && b) {
            pci::Path route = pci::find_path(t, *a, *b);
            p.topology = pci::class_name(route.cls);
            std::vector<std::size_t> on_way = route.bridges();
            on_way.push_back(*a);
            on_way.push_back(*b);
            link = slowest(t, on_way);
        } else if (a || b) {
            const pci::Device& d = t.devices[a ? *a : *b];
            link = slowest(t, to_root(t, a ? *a : *b));
            if (p.host_node >= 0) {
                if (d.numa_node >= 0)
                    p.topology = d.numa_node == p.host_node ? "NUMA local" : "NUMA remote";
                else
                    p.topology = t.numa_nodes <= 1 ? "NUMA local (one node)" : "NUMA node of device unknown";
            } else if (d.numa_node >= 0) {
                p.topology = log::concat("CPU to device on NUMA node ", d.numa_node);
            }
        }
        if (link <= 0) continue;
        if (p.bidirectional) link *= 2;
        // PCI sees only PCIe. A pair that beats its PCIe link moved the bytes over another fabric
        // (NVLink between GPUs): say so rather than print a share of the wrong link.
        const Point* peak = p.peak();
        if (peak && peak->gbps > link * 1.02) {
            std::ostringstream os;
            os.precision(3);
            os << "faster than its PCIe route (" << link
               << " GB/s): another link carried it (NVLink between GPUs) or the link is emulated";
            p.note = os.str();
            continue;
        }
        p.link_gbps = link;
    }
}

}  // namespace bardrive::bench
