// bardrive topo: the PCIe topology (tree, matrix, one device, JSON, DOT), peer-to-peer verdicts,
// and snapshots of exactly what was read. Logic lives in pci/; this file only reads options and prints.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"
#include "pci/p2p.hpp"
#include "pci/topology.hpp"
#include "tools/args.hpp"
#include "tools/commands.hpp"
#include "tools/topo_html.hpp"
#include "tools/topo_json.hpp"

namespace bardrive::tools {
namespace {

using namespace bardrive::pci;

const char* usage =
    "usage: bardrive topo [SOURCE] [FILTERS] [--matrix | --json | --dot | --html FILE]\n"
    "       bardrive topo show BDF [SOURCE]\n"
    "       bardrive topo p2p [BDF BDF] [SOURCE] [FILTERS]\n"
    "       bardrive topo snapshot FILE [--sysfs DIR]\n"
    "\n"
    "Without a mode: the PCIe tree (like 'lspci -tv') with link, NUMA node, IOMMU group, driver and BARs.\n"
    "  --matrix          path classes between devices (like 'nvidia-smi topo -m', NV<n> for NVLinks), with a legend\n"
    "  --json            the whole model and every pair's class and verdict (schema: docs/topology.md)\n"
    "  --dot             the tree as a Graphviz graph ('| dot -Tsvg > topo.svg')\n"
    "  --html FILE       a self-contained page (no network) that draws the tree by NUMA node and gives the\n"
    "                    'p2p' verdict of any two endpoints picked in it (filters pick which; at most 64)\n"
    "  show BDF          one device in full: IDs, BARs, link, capabilities, group, path to the root\n"
    "  p2p [A B]         P2P DMA verdicts with reasons: for A -> B, or for every pair of the matrix\n"
    "  snapshot FILE     write exactly what was read (sysfs files, config bytes, NVML's NVLinks) to FILE,\n"
    "                    to attach to a bug report; read it back anywhere with --sysfs FILE\n"
    "SOURCE (default: this machine):\n"
    "  --sysfs DIR|FILE  a copied /sys folder, or a snapshot file\n"
    "  --hwloc-xml FILE  a topology exported with 'lstopo --of xml FILE' (no config space, no groups)\n"
    "  --nccl-xml FILE   an NCCL topology file (NCCL_TOPO_DUMP_FILE, NCCL_TOPO_FILE): tree, GPUs, NICs, NVLinks\n"
    "  --lspci-tv FILE   'lspci -tv' output: tree and names only (filter by --vendor NAME or use --all)\n"
    "FILTERS (matrix, p2p, tree; repeatable):\n"
    "  --class KIND      gpu, nic, nvme, storage, accel, bridge, host-bridge, other, or a hex class prefix (0302)\n"
    "  --vendor ID       hex vendor ID (10de) or part of the vendor name (nvidia)\n"
    "  --all             every endpoint (default: GPUs, NICs, NVMe, accelerators, devices with a BAR >= 64 MiB)\n"
    "  --device BDF      exactly these functions, in this order (repeatable; matrix, p2p, JSON pairs)\n"
    "Without root only 64 bytes of config space are readable: the tool says what it could not read.\n"
    "Names come from pci.ids through libpci, cached until pci.ids changes in $XDG_CACHE_HOME/bardrive (else\n"
    "/var/cache/bardrive for root, ~/.cache/bardrive for others); BARDRIVE_NO_NAME_CACHE=1 turns the cache off.\n";

std::string size_short(std::uint64_t b) {
    const char* units[] = {"", "K", "M", "G", "T"};
    unsigned u = 0;
    while (u + 1 < std::size(units) && b >= 1024 && b % 1024 == 0) {
        b /= 1024;
        ++u;
    }
    return log::concat(b, units[u]);
}

std::string speed(double gts) {
    std::ostringstream os;
    os << gts;
    return os.str();
}

std::string link_text(const LinkInfo& l) {
    std::string s = log::concat(speed(l.cur_gts), "GT/s x", l.cur_width);
    if (l.cur_width == 0) s = "link down";
    if (l.downgraded()) s += log::concat(" DOWNGRADED (capable ", speed(l.max_gts), "GT/s x", l.max_width, ")");
    return s;
}

std::string bar_summary(const Device& d) {
    std::string s;
    for (const auto& b : d.bars) {
        if (!s.empty()) s += ' ';
        s += log::concat("BAR", b.index, "=", size_short(b.size));
        if (b.io)
            s += "(io)";
        else if (b.prefetchable)
            s += "(pf)";
    }
    return s;
}

std::string short_name(const Device& d) { return d.vendor_name + " " + d.device_name; }

// ---- source and filters ----

struct Loaded {
    Topology topo;
};

Topology load(const Args& args) {
    auto sysfs = args.value("sysfs");
    auto xml = args.value("hwloc-xml");
    auto nccl = args.value("nccl-xml");
    auto tree = args.value("lspci-tv");
    if (!!sysfs + !!xml + !!nccl + !!tree > 1)
        throw UsageError("bardrive topo", "--sysfs, --hwloc-xml, --nccl-xml, --lspci-tv",
                         "give one source, not several");
    Topology t;
    if (tree) {  // names are in the text already
        // Read whole: the tail of a large machine's tree must not be dropped. lspci -tv of a large server is a
        // few hundred KB; past 16 MiB it is not lspci -tv output.
        constexpr std::size_t limit = std::size_t{16} << 20;
        auto bytes = file::read_bytes(*tree, limit + 1);
        if (bytes.size() > limit)
            throw Error("read lspci -tv", *tree, "the file holds more than 16 MiB",
                        "give the output of 'lspci -tv' (a few KB to a few hundred KB)");
        return read_lspci_tree(std::string(bytes.begin(), bytes.end()), *tree);
    }
    if (xml) {
        t = read_hwloc_xml(*xml);
    } else if (nccl) {
        t = read_nccl_xml(*nccl);
    } else if (sysfs) {
        auto src = open_source(*sysfs);
        t = read_topology(*src);
    } else {
        LiveSource src;
        t = read_topology(src);
    }
    attach_names(t);
    return t;
}

bool matches(const Device& d, const Args& args) {
    auto classes = args.values("class");
    if (!classes.empty()) {
        bool ok = false;
        for (const auto& c : classes) {
            if (c == device_kind(d)) ok = true;
            std::string hex = hex_class(d.class_code).substr(2);
            if (!c.empty() && c.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos &&
                hex.rfind(c, 0) == 0)
                ok = true;
        }
        if (!ok) return false;
    }
    auto vendors = args.values("vendor");
    if (!vendors.empty()) {
        bool ok = false;
        std::string name = d.vendor_name;
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        for (auto v : vendors) {
            std::transform(v.begin(), v.end(), v.begin(), ::tolower);
            if (v == hex4(d.vendor_id) || v == "0x" + hex4(d.vendor_id) ||
                (!v.empty() && name.find(v) != std::string::npos))
                ok = true;
        }
        if (!ok) return false;
    }
    return true;
}

bool filtered(const Args& args) { return args.has("class") || args.has("vendor"); }

// A filter that could match nothing is a mistake to name, not an empty answer.
void check_filters(const Args& args) {
    for (const auto& c : args.values("class")) {
        const bool kind = std::find_if(std::begin(device_kinds), std::end(device_kinds),
                                       [&](const char* k) { return c == k; }) != std::end(device_kinds);
        const bool hex =
            !c.empty() && c.size() <= 6 && c.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
        if (!kind && !hex) {
            std::string kinds;
            for (const char* k : device_kinds) kinds += std::string(kinds.empty() ? "" : ", ") + k;
            throw UsageError("bardrive topo", "--class " + bounded(c), "not a kind of device or a hex class prefix",
                             "give one of " + kinds + ", or a class prefix such as 0302");
        }
    }
    for (const auto& v : args.values("vendor"))
        if (v.empty())
            throw UsageError("bardrive topo", "--vendor ''", "empty", "give a hex vendor ID (10de) or part of a name");
}

// Said on stderr when the filters leave nothing of a tree that has devices.
void note_nothing_matched(const Topology& t, const Args& args) {
    std::string f;
    for (const auto& c : args.values("class")) f += " --class " + c;
    for (const auto& v : args.values("vendor")) f += " --vendor " + bounded(v);
    std::fprintf(stderr, "bardrive topo: note: no device of the %zu matches%s ('bardrive topo' lists them all)\n",
                 t.devices.size(), f.c_str());
}

std::vector<std::size_t> chosen(const Topology& t, const Args& args) {
    std::vector<std::size_t> out;
    if (args.has("device")) {  // exactly these, in the order given
        for (const auto& s : args.values("device")) {
            auto bdf = usage_value([&] { return Bdf::parse(s); });
            auto i = t.find(bdf);
            if (!i)
                throw Error("bardrive topo", bdf.str(), "no such device in " + t.source, "'bardrive topo' lists them");
            out.push_back(*i);
        }
        return out;
    }
    bool all = args.has("all") || filtered(args);
    for (auto i : p2p_candidates(t, all))
        if (matches(t.devices[i], args)) out.push_back(i);
    return out;
}

// Matrix labels like nvidia-smi's: GPU0, NIC0, NVME0, ... in address order.
std::vector<std::string> labels(const Topology& t, const std::vector<std::size_t>& devs) {
    std::map<std::string, int> next;
    std::vector<std::string> out;
    for (auto i : devs) {
        std::string k = device_kind(t.devices[i]);
        std::string p = k == "gpu" ? "GPU" : k == "nic" ? "NIC" : k == "nvme" ? "NVME" : k == "accel" ? "ACC" : "DEV";
        out.push_back(p + std::to_string(next[p]++));
    }
    return out;
}

void print_warnings(const Topology& t) {
    std::fflush(stdout);  // keep notes after the output they explain
    for (const auto& w : t.warnings) std::fprintf(stderr, "bardrive topo: note: %s\n", w.c_str());
    for (const auto& d : t.devices)
        for (const auto& w : d.warnings)
            std::fprintf(stderr, "bardrive topo: warning: %s: %s\n", d.bdf.str().c_str(), w.c_str());
}

// ---- tree ----

void print_tree(const Topology& t, const Args& args) {
    std::vector<bool> keep(t.devices.size(), !filtered(args));
    if (filtered(args))
        for (std::size_t i = 0; i < t.devices.size(); ++i)
            if (matches(t.devices[i], args))
                for (std::optional<std::size_t> p = i; p; p = t.devices[*p].parent) keep[*p] = true;
    if (filtered(args) && std::find(keep.begin(), keep.end(), true) == keep.end()) note_nothing_matched(t, args);
    std::printf("PCIe topology from %s: %zu functions, %zu host bridges, %d NUMA nodes\n", t.source.c_str(),
                t.devices.size(), t.host_bridges.size(), t.numa_nodes);
    auto line = [&](std::size_t i, const std::string& prefix, bool last, auto&& self) -> void {
        const auto& d = t.devices[i];
        std::string s = prefix + (last ? "\\-" : "+-") + d.bdf.str() + " [" + hex4(d.vendor_id) + ":" +
                        hex4(d.device_id) + "] " + short_name(d);
        if (d.role != Role::endpoint)
            s += std::string(" <") + role_name(d.role) + ">";
        else
            s += " (" + d.class_name + ")";
        std::vector<std::string> facts;
        if (d.link) facts.push_back(link_text(*d.link));
        if (d.numa_node >= 0) facts.push_back("numa " + std::to_string(d.numa_node));
        if (d.iommu_group >= 0) facts.push_back("group " + std::to_string(d.iommu_group));
        if (!d.driver.empty()) facts.push_back(d.driver);
        if (!d.bars.empty()) facts.push_back(bar_summary(d));
        for (const auto& n : d.os_names) facts.push_back(n);
        if (d.is_vf()) facts.push_back("VF of " + d.physfn->str());
        std::string f;
        for (const auto& x : facts) f += (f.empty() ? "" : " | ") + x;
        std::printf("%s%s%s\n", s.c_str(), f.empty() ? "" : "  ", f.c_str());
        std::vector<std::size_t> kids;
        for (auto c : d.children)
            if (keep[c]) kids.push_back(c);
        for (std::size_t k = 0; k < kids.size(); ++k)
            self(kids[k], prefix + (last ? "  " : "| "), k + 1 == kids.size(), self);
    };
    for (const auto& h : t.host_bridges) {
        std::vector<std::size_t> kids;
        for (auto c : h.children)
            if (keep[c]) kids.push_back(c);
        if (kids.empty()) continue;
        std::printf("[%s] domain %04x bus %02x%s\n", h.name.c_str(), h.domain, h.bus,
                    h.numa_node >= 0 ? (" numa " + std::to_string(h.numa_node)).c_str() : " numa ?");
        for (std::size_t k = 0; k < kids.size(); ++k) line(kids[k], " ", k + 1 == kids.size(), line);
    }
}

// ---- matrix ----

const char* legend =
    "Legend:\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

std::vector<std::size_t> capped_pairs(const Topology& t, const Args& args, std::vector<std::size_t> devs,
                                      const char* what);

void print_matrix(const Topology& t, const Args& args) {
    auto devs = capped_pairs(t, args, chosen(t, args), "the matrix");
    if (devs.empty()) {
        std::printf("no devices to compare (try --all, or fewer filters)\n");
        return;
    }
    auto lab = labels(t, devs);
    std::printf("%-8s", "");
    for (const auto& l : lab) std::printf("%-7s", l.c_str());
    int cpu_w = 14;  // "CPU Affinity  ", wider for long cpulists
    for (auto i : devs) cpu_w = std::max(cpu_w, static_cast<int>(t.devices[i].local_cpus.size()) + 2);
    std::printf("%-*s%s\n", cpu_w, "CPU Affinity", "NUMA Affinity");
    for (std::size_t r = 0; r < devs.size(); ++r) {
        std::printf("%-8s", lab[r].c_str());
        for (std::size_t c = 0; c < devs.size(); ++c) {
            auto cls = find_path(t, devs[r], devs[c]).cls;
            if (unsigned nv = nvlinks_between(t, devs[r], devs[c]))
                std::printf("%-7s", log::concat("NV", nv).c_str());
            else
                std::printf("%-7s", cls == PathClass::X ? " X" : class_name(cls));
        }
        const auto& d = t.devices[devs[r]];
        std::printf("%-*s%s\n", cpu_w, d.local_cpus.empty() ? "N/A" : d.local_cpus.c_str(),
                    d.numa_node >= 0 ? std::to_string(d.numa_node).c_str() : "N/A");
    }
    std::printf("\n%s", legend);
    bool nvidia = std::any_of(t.devices.begin(), t.devices.end(), [](const Device& d) { return d.is_nvidia_gpu(); });
    std::string nvlinks = !t.nvlink_source.empty() ? "from " + t.nvlink_source
                          : nvidia                 ? std::string("unknown for this input")
                                                   : std::string("none (no NVIDIA GPU)");
    std::printf("  NVLinks: %s\n\nDevices:\n", nvlinks.c_str());
    for (std::size_t r = 0; r < devs.size(); ++r) {
        const auto& d = t.devices[devs[r]];
        std::string os;
        for (const auto& n : d.os_names) os += " " + n;
        std::printf("  %-6s %s %s%s\n", lab[r].c_str(), d.bdf.str().c_str(), short_name(d).c_str(), os.c_str());
    }
}

// ---- p2p ----

void print_report(const Topology& t, const P2pReport& r) {
    const auto& a = t.devices[r.initiator];
    const auto& b = t.devices[r.target];
    std::string path = a.bdf.str();
    for (auto x : r.path.up) path += " -> " + t.devices[x].bdf.str();
    if (r.path.via_host_bridge) {
        path += " -> " + t.host_bridges[r.path.host_a].name;
        if (r.path.host_a != r.path.host_b) path += " -> " + t.host_bridges[r.path.host_b].name;
    }
    for (auto x : r.path.down) path += " -> " + t.devices[x].bdf.str();
    path += " -> " + b.bdf.str();
    std::printf("%s -> %s: %s, %s\n  path: %s\n", a.bdf.str().c_str(), b.bdf.str().c_str(), class_name(r.path.cls),
                verdict_name(r.verdict), path.c_str());
    for (const auto& x : r.reasons) std::printf("  %-8s %s\n", effect_name(x.effect), x.text.c_str());
}

// ---- show ----

void print_show(const Topology& t, std::size_t i) {
    const auto& d = t.devices[i];
    std::printf("%s  %s\n", d.bdf.str().c_str(), short_name(d).c_str());
    std::printf("  ids:        vendor %s device %s subsystem %s:%s class %s (%s, kind %s)\n", hex4(d.vendor_id).c_str(),
                hex4(d.device_id).c_str(), hex4(d.subsystem_vendor_id).c_str(), hex4(d.subsystem_id).c_str(),
                hex_class(d.class_code).c_str(), d.class_name.c_str(), device_kind(d).c_str());
    if (!d.subsystem_name.empty()) std::printf("  subsystem:  %s\n", d.subsystem_name.c_str());
    std::printf("  role:       %s%s\n", role_name(d.role),
                d.port_type   ? (std::string(" (PCIe capability: ") + port_type_name(*d.port_type) + ")").c_str()
                : d.is_bridge ? " (inferred from the tree: PCI Express capability not read)"
                              : "");
    std::printf("  driver:     %s\n", d.driver.empty() ? "(none)" : d.driver.c_str());
    if (d.iommu_group >= 0) {
        std::string m;
        for (auto x : t.group_members(d.iommu_group))
            m += " " + t.devices[x].bdf.str() + "(" + (t.devices[x].driver.empty() ? "-" : t.devices[x].driver) + ")";
        std::printf("  iommu:      group %d, members:%s\n", d.iommu_group, m.c_str());
    } else {
        std::printf("  iommu:      %s\n", t.groups_known ? "no group (no IOMMU)" : "unknown for this input");
    }
    std::printf("  numa:       %s  cpus: %s\n", d.numa_node >= 0 ? std::to_string(d.numa_node).c_str() : "unknown",
                d.local_cpus.empty() ? "unknown" : d.local_cpus.c_str());
    for (const auto& b : d.bars) {
        std::string rs;
        for (auto s : b.resizable_sizes) rs += (rs.empty() ? "" : ",") + size_short(s);
        std::printf("  BAR%u:       0x%llx size %s %s%s%s%s\n", b.index, static_cast<unsigned long long>(b.address),
                    size_short(b.size).c_str(), b.io ? "I/O" : "memory", b.io ? "" : (b.is64 ? " 64-bit" : " 32-bit"),
                    b.prefetchable ? " prefetchable" : "", rs.empty() ? "" : (" resizable: " + rs).c_str());
    }
    if (d.link)
        std::printf("  link:       %s (capable %sGT/s x%u)\n", link_text(*d.link).c_str(),
                    speed(d.link->max_gts).c_str(), d.link->max_width);
    std::printf("  config:     %zu bytes read%s\n", d.config_bytes,
                d.caps_unread   ? " (capabilities not readable: run as root)"
                : !d.ext_config ? " (no extended config space)"
                                : "");
    if (d.acs)
        std::printf("  ACS:        capability %s; enabled %s\n", acs::describe(d.acs->capability).c_str(),
                    acs::describe(d.acs->control).c_str());
    else
        std::printf("  ACS:        %s\n", d.ext_config ? "not present" : "unknown");
    if (d.ext_config)
        std::printf("  ATS %s, PRI %s, PASID %s, AER %s\n", d.ats ? "yes" : "no", d.pri ? "yes" : "no",
                    d.pasid ? "yes" : "no", d.aer ? "yes" : "no");
    if (d.sriov) std::printf("  SR-IOV:     %u of %u VFs enabled\n", d.sriov->num_vfs, d.sriov->total_vfs);
    if (d.is_vf()) std::printf("  VF of:      %s\n", d.physfn->str().c_str());
    for (const auto& n : d.os_names) std::printf("  os name:    %s\n", n.c_str());
    for (const auto& l : t.nvlinks)
        if (l.gpu == i)
            std::printf("  nvlink:     %u link%s to %s %s\n", l.links, l.links == 1 ? "" : "s",
                        nvlink_peer_name(l.peer_type), l.peer ? l.peer->str().c_str() : "(address not reported)");
    std::string up;
    for (auto p = d.parent; p; p = t.devices[*p].parent)
        up += " -> " + t.devices[*p].bdf.str() + " (" + role_name(t.devices[*p].role) + ")";
    std::printf("  upstream:  %s -> %s\n", up.c_str(), t.host_bridges[d.host_bridge].name.c_str());
    for (const auto& w : d.warnings) std::printf("  warning:    %s\n", w.c_str());
}

// ---- json ----

// Every pair of n devices with its reasons is quadratic (a rack's NCCL file with 3000 GPUs: 9 million pairs,
// gigabytes): pairs are judged among at most this many devices, the matrix's default ones (GPUs, NICs, NVMe,
// ...) first, with a note saying how many were left out. `topo p2p A B` judges any one pair.
constexpr std::size_t pair_limit = 64;  // devices: 4032 pairs, about 1 KB each in JSON

// The devices whose pairs `what` (page, JSON, p2p list) judges: `devs` as chosen, capped at pair_limit.
std::vector<std::size_t> capped_pairs(const Topology& t, const Args& args, std::vector<std::size_t> devs,
                                      const char* what) {
    if (devs.size() <= pair_limit) return devs;
    auto first = p2p_candidates(t, false);
    std::stable_partition(devs.begin(), devs.end(),
                          [&](std::size_t i) { return std::find(first.begin(), first.end(), i) != first.end(); });
    std::fprintf(stderr,
                 "bardrive topo: note: %s pairs %zu of %zu devices (%zu left out); choose with --class, --vendor or "
                 "--device, or ask for one pair with 'topo p2p A B'\n",
                 what, pair_limit, devs.size(), devs.size() - pair_limit);
    devs.resize(pair_limit);
    if (!args.has("device")) std::sort(devs.begin(), devs.end());
    return devs;
}

// How many of `devs` capped_pairs() leaves out.
std::size_t left_out(const std::vector<std::size_t>& devs) { return devs.size() - std::min(devs.size(), pair_limit); }

void print_json(const Topology& t, const Args& args) {
    const auto devs = chosen(t, args);
    std::fputs(json_text(topology_json(t, capped_pairs(t, args, devs, "the JSON"), left_out(devs))).c_str(), stdout);
}

// ---- html ----

// The page lets the user pick any two endpoints, so its pairs cover all of them (or those the filters
// pick).
std::vector<std::size_t> html_candidates(const Topology& t, const Args& args) {
    return args.has("device") || filtered(args) ? chosen(t, args) : p2p_candidates(t, true);
}

void write_html(const Topology& t, const Args& args, const std::string& file) {
    const auto all = html_candidates(t, args);
    const auto devs = capped_pairs(t, args, all, "the page");
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw Error::from_errno("create page", file, errno, "check that the folder exists and is writable");
    out << topology_html(json_text(topology_json(t, devs, left_out(all))));
    out.close();
    if (!out) throw Error::from_errno("write page", file, errno);
    std::printf("wrote %s: %zu functions, %zu devices to pair (open it in a browser)\n", file.c_str(), t.devices.size(),
                devs.size());
}

// ---- dot ----

void print_dot(const Topology& t) {
    auto q = [](const std::string& s) {
        std::string o;
        for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
        return "\"" + o + "\"";
    };
    std::printf("digraph pcie {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (const auto& h : t.host_bridges)
        std::printf("  %s [label=%s, shape=ellipse];\n", q(h.name).c_str(),
                    q(h.name + (h.numa_node >= 0 ? "\\nnuma " + std::to_string(h.numa_node) : std::string())).c_str());
    for (const auto& d : t.devices) {
        std::string label = d.bdf.str() + "\\n" + d.device_name;
        if (d.link) label += "\\n" + link_text(*d.link);
        if (d.iommu_group >= 0) label += "\\ngroup " + std::to_string(d.iommu_group);
        std::printf("  %s [label=%s%s];\n", q(d.bdf.str()).c_str(), q(label).c_str(),
                    d.role == Role::endpoint ? "" : ", style=filled, fillcolor=lightgrey");
        std::string from = d.parent ? t.devices[*d.parent].bdf.str() : t.host_bridges[d.host_bridge].name;
        std::printf("  %s -> %s;\n", q(from).c_str(), q(d.bdf.str()).c_str());
    }
    std::printf("}\n");
}

int run_snapshot(const Args& args) {
    if (args.positional().size() != 2)
        throw UsageError("bardrive topo snapshot", "arguments", "expected one FILE",
                         "usage: bardrive topo snapshot FILE [--sysfs DIR]");
    // A snapshot records sysfs (this machine's or --sysfs DIR's), nothing else: an option it would ignore is
    // a mistake (--hwloc-xml X once snapshotted the live machine without a word).
    for (const char* o :
         {"hwloc-xml", "nccl-xml", "lspci-tv", "matrix", "json", "dot", "html", "class", "vendor", "device", "all"})
        if (args.has(o))
            throw UsageError("bardrive topo snapshot", std::string("--") + o, "a snapshot records sysfs only",
                             "snapshot this machine, or a copied /sys with --sysfs DIR; read other inputs with "
                             "'bardrive topo --" +
                                 std::string(o) + " ...' directly");
    const std::string file = args.positional()[1];
    std::unique_ptr<Source> inner;
    if (auto dir = args.value("sysfs"))
        inner = open_source(*dir);
    else
        inner = std::make_unique<LiveSource>();
    RecordingSource rec(*inner);
    auto t = read_topology(rec);
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    std::time_t now = std::time(nullptr);
    char when[64];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    auto& data = rec.recorded();
    data.comments.push_back(log::concat("captured by bardrive ", BARDRIVE_VERSION, " on ", host, " at ", when,
                                        " as uid ", ::getuid(), " from ", inner->describe()));
    write_snapshot(data, file);
    std::size_t n = data.texts.size() + data.blobs.size() + data.links.size() + data.lists.size();
    std::printf("wrote %s: %zu functions, %zu records (sysfs files, links, folders, config space)\n", file.c_str(),
                t.devices.size(), n);
    if (::getuid() != 0)
        std::printf(
            "note: not root, so config space beyond 64 bytes is not in the snapshot (ACS, link "
            "capabilities); run as root for a complete one\n");
    return 0;
}

}  // namespace

int run_topo(const CommandArgs& argv) {
    Args args("topo", argv, {"matrix", "json", "dot", "all", "help"},
              {"sysfs", "hwloc-xml", "nccl-xml", "lspci-tv", "class", "vendor", "device", "html"});
    if (args.has("help")) {
        std::fputs(usage, stdout);
        return 0;
    }
    const auto& pos = args.positional();
    std::string mode = pos.empty() ? "" : pos[0];
    if (mode == "snapshot") return run_snapshot(args);
    if (!mode.empty() && mode != "show" && mode != "p2p")
        throw UsageError("bardrive topo", "'" + bounded(mode) + "'", "unknown mode",
                         "expected show, p2p or snapshot; see 'bardrive topo --help'");
    int outputs = args.has("matrix") + args.has("json") + args.has("dot") + args.has("html");
    if (outputs > 1) throw UsageError("bardrive topo", "--matrix/--json/--dot/--html", "give at most one of them");
    check_filters(args);

    Topology t = load(args);
    auto find = [&](const std::string& s) {
        auto bdf = usage_value([&] { return Bdf::parse(s); });
        auto i = t.find(bdf);
        if (!i) throw Error("bardrive topo", bdf.str(), "no such device in " + t.source, "'bardrive topo' lists them");
        return *i;
    };
    if (mode == "show") {
        if (pos.size() != 2)
            throw UsageError("bardrive topo show", "arguments", "expected one BDF",
                             "e.g. 'bardrive topo show 0000:01:00.0'");
        print_show(t, find(pos[1]));
        return 0;
    }
    if (mode == "p2p") {
        if (pos.size() == 3) {
            const auto a = find(pos[1]), b = find(pos[2]);
            if (a == b)
                throw UsageError("bardrive topo p2p", t.devices[a].bdf.str(),
                                 "initiator and target are the same function", "give two different devices");
            print_report(t, judge_p2p(t, a, b));
            return 0;
        }
        if (pos.size() != 1)
            throw UsageError("bardrive topo p2p", "arguments", "expected none or two BDFs (initiator target)");
        auto devs = capped_pairs(t, args, chosen(t, args), "p2p");
        for (auto a : devs)
            for (auto b : devs)
                if (a != b) print_report(t, judge_p2p(t, a, b));
        if (devs.size() < 2)
            std::printf("fewer than two devices to pair%s\n", args.has("all") || args.has("device") || filtered(args)
                                                                  ? " (fewer filters, or other devices, may give more)"
                                                                  : " (try --all)");
        print_warnings(t);
        return 0;
    }
    if (args.has("json")) {
        print_json(t, args);
        return 0;
    }
    if (auto file = args.value("html")) {
        write_html(t, args, *file);
        print_warnings(t);
        return 0;
    }
    if (args.has("dot"))
        print_dot(t);
    else if (args.has("matrix"))
        print_matrix(t, args);
    else
        print_tree(t, args);
    print_warnings(t);
    return 0;
}

}  // namespace bardrive::tools
