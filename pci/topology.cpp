#include "pci/topology.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "pci/nvml.hpp"

namespace bardrive::pci {

namespace {

constexpr const char* devices_dir = "/sys/bus/pci/devices";

// Linux include/linux/ioport.h resource flags, as printed in sysfs "resource".
constexpr std::uint64_t ioresource_io = 0x100;
constexpr std::uint64_t ioresource_mem = 0x200;
constexpr std::uint64_t ioresource_prefetch = 0x2000;
constexpr std::uint64_t ioresource_mem_64 = 0x100000;

std::optional<std::uint64_t> parse_u64(const std::string& s, int base) {
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, base);
    if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
    return v;
}

std::optional<int> parse_int(const std::string& s) {
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 10);
    if (errno != 0 || end == s.c_str() || *end != '\0' || v < -1 || v > 1'000'000) return std::nullopt;
    return static_cast<int>(v);
}

std::string basename_of(const std::string& p) {
    auto s = p.find_last_of('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

// "pci0000:00" -> (domain, bus)
std::optional<std::pair<std::uint32_t, std::uint8_t>> parse_host_bridge_name(const std::string& c) {
    if (c.rfind("pci", 0) != 0) return std::nullopt;
    auto colon = c.find(':', 3);
    if (colon == std::string::npos) return std::nullopt;
    auto dom = parse_u64(c.substr(3, colon - 3), 16);
    auto bus = parse_u64(c.substr(colon + 1), 16);
    if (!dom || !bus || *dom > 0xffffffffu || *bus > 0xff || colon - 3 < 4 || c.size() - colon - 1 != 2)
        return std::nullopt;
    return std::make_pair(static_cast<std::uint32_t>(*dom), static_cast<std::uint8_t>(*bus));
}

std::string host_bridge_name(std::uint32_t domain, std::uint8_t bus) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "pci%04x:%02x", domain, bus);
    return buf;
}

// sysfs "8.0 GT/s PCIe" -> 8.0; "Unknown" -> 0
double parse_speed(const std::string& s) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    return end == s.c_str() ? 0.0 : v;
}

std::vector<Bar> parse_resource(const std::string& text, std::vector<std::string>& warnings, const std::string& path) {
    std::vector<Bar> bars;
    std::istringstream is(text);
    std::string line;
    for (unsigned idx = 0; std::getline(is, line) && idx < 6; ++idx) {
        std::istringstream ls(line);
        std::string a, b, f;
        ls >> a >> b >> f;
        auto start = parse_u64(a, 16), end = parse_u64(b, 16), flags = parse_u64(f, 16);
        if (!start || !end || !flags) {
            warnings.push_back(log::concat(path, " line ", idx + 1, ": cannot parse '", log::bounded(line), "'"));
            continue;
        }
        if (*start == 0 && *end == 0) continue;
        if (*end < *start) {
            warnings.push_back(log::concat(path, " line ", idx + 1, ": end before start"));
            continue;
        }
        Bar bar;
        bar.index = idx;
        bar.address = *start;
        bar.size = *end - *start + 1;
        bar.io = (*flags & ioresource_io) != 0;
        bar.is64 = (*flags & ioresource_mem_64) != 0;
        bar.prefetchable = (*flags & ioresource_prefetch) != 0;
        if (!bar.io && !(*flags & ioresource_mem)) continue;  // unassigned
        bars.push_back(bar);
    }
    return bars;
}

// Sorts devices by address and turns each parent address (parents[i] belongs to devices[i]) into an
// index. A parent that is missing, or a chain that loops (a lying snapshot), leaves the device on its
// root bus with a warning, so every walk up the tree terminates. Children follow their root's host bridge.
void link_tree(Topology& t, std::vector<std::optional<Bdf>> parents) {
    std::vector<std::pair<Device, std::optional<Bdf>>> both;
    for (std::size_t i = 0; i < t.devices.size(); ++i) both.emplace_back(std::move(t.devices[i]), parents[i]);
    std::stable_sort(both.begin(), both.end(), [](const auto& a, const auto& b) { return a.first.bdf < b.first.bdf; });
    // An address listed twice (a damaged snapshot, two lspci -tv outputs pasted together) is one function: the
    // first description is kept, so no device is paired with itself.
    std::string twice;
    std::size_t repeats = 0;
    for (std::size_t i = 1; i < both.size(); ++i)
        if (both[i].first.bdf == both[i - 1].first.bdf && ++repeats <= 3 &&
            (i < 2 || both[i - 2].first.bdf != both[i].first.bdf))
            twice += (twice.empty() ? "" : ", ") + both[i].first.bdf.str();
    if (repeats > 0) {
        both.erase(std::unique(both.begin(), both.end(),
                               [](const auto& a, const auto& b) { return a.first.bdf == b.first.bdf; }),
                   both.end());
        t.warnings.push_back(log::concat(t.source, " lists ", twice, repeats > 3 ? " and more" : "",
                                         " more than once (", repeats,
                                         " repeated entries ignored; the first of each is kept)"));
    }
    t.devices.clear();
    for (auto& [d, p] : both) t.devices.push_back(std::move(d));
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        auto& d = t.devices[i];
        d.parent.reset();
        const auto& p = both[i].second;
        if (!p) continue;
        auto idx = t.find(*p);
        if (!idx || *idx == i || !t.devices[*idx].is_bridge) {
            d.warnings.push_back("parent " + p->str() + " is not a bridge in the topology; placed on the root bus");
            continue;
        }
        d.parent = idx;
    }
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        std::size_t steps = 0;
        for (auto p = t.devices[i].parent; p; p = t.devices[*p].parent)
            if (++steps > t.devices.size()) {
                t.devices[i].warnings.push_back("parent chain loops; placed on the root bus");
                t.devices[i].parent.reset();
                break;
            }
    }
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        std::size_t root = i;
        while (t.devices[root].parent) root = *t.devices[root].parent;
        t.devices[i].host_bridge = t.devices[root].host_bridge;
    }
}

// Assigns parents, children, host bridges and roles once devices are known.
void finish(Topology& t) {
    std::vector<std::size_t> order_hb(t.host_bridges.size()), new_index(t.host_bridges.size());
    for (std::size_t i = 0; i < order_hb.size(); ++i) order_hb[i] = i;
    std::sort(order_hb.begin(), order_hb.end(), [&](std::size_t a, std::size_t b) {
        const auto &x = t.host_bridges[a], &y = t.host_bridges[b];
        return std::tie(x.domain, x.bus, x.name) < std::tie(y.domain, y.bus, y.name);
    });
    std::vector<HostBridge> sorted_hb;
    for (std::size_t k = 0; k < order_hb.size(); ++k) {
        new_index[order_hb[k]] = k;
        sorted_hb.push_back(std::move(t.host_bridges[order_hb[k]]));
    }
    t.host_bridges = std::move(sorted_hb);
    for (auto& d : t.devices) d.host_bridge = new_index[d.host_bridge];
    for (auto& d : t.devices) d.children.clear();
    for (auto& h : t.host_bridges) h.children.clear();
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        auto& d = t.devices[i];
        if (d.parent) {
            t.devices[*d.parent].children.push_back(i);
        } else {
            auto& hb = t.host_bridges[d.host_bridge];
            hb.children.push_back(i);
            if (d.bdf.device == 0 && d.bdf.function == 0 && d.bdf.bus == hb.bus) hb.device = i;
        }
    }
    for (auto& h : t.host_bridges) {
        if (h.numa_node >= 0) continue;
        for (const auto& d : t.devices)
            if (t.host_bridges[d.host_bridge].name == h.name && d.numa_node >= 0) {
                h.numa_node = d.numa_node;
                break;
            }
    }
    // Roles: top-down so that inference can look at the parent's role.
    std::size_t inferred = 0;
    std::vector<std::size_t> order;
    for (const auto& h : t.host_bridges) order.insert(order.end(), h.children.begin(), h.children.end());
    for (std::size_t k = 0; k < order.size(); ++k) {
        auto& d = t.devices[order[k]];
        order.insert(order.end(), d.children.begin(), d.children.end());
        if (!d.is_bridge) {
            d.role = Role::endpoint;
            continue;
        }
        if (d.port_type) {
            switch (*d.port_type) {
                case PortType::root_port:
                    d.role = Role::root_port;
                    continue;
                case PortType::switch_upstream:
                    d.role = Role::switch_upstream;
                    continue;
                case PortType::switch_downstream:
                    d.role = Role::switch_downstream;
                    continue;
                default:
                    d.role = Role::bridge;
                    continue;
            }
        }
        ++inferred;
        if (!d.parent)
            d.role = Role::root_port;
        else if (auto pr = t.devices[*d.parent].role; pr == Role::root_port || pr == Role::switch_downstream)
            d.role = Role::switch_upstream;
        else if (pr == Role::switch_upstream)
            d.role = Role::switch_downstream;
        else
            d.role = Role::bridge;
    }
    if (inferred)
        t.warnings.push_back(log::concat("port types of ", inferred,
                                         " bridges inferred from the tree (PCI Express capability not readable)"));
}

}  // namespace

void assemble(Topology& t, std::vector<std::optional<Bdf>> parents) {
    if (parents.size() != t.devices.size())
        throw Error("assemble topology", t.source, "one parent per device expected");
    for (const auto& d : t.devices)
        if (d.host_bridge >= t.host_bridges.size())
            throw Error("assemble topology", d.bdf.str(), "host bridge index out of range");
    link_tree(t, std::move(parents));
    finish(t);
}

const char* nvlink_peer_name(NvLink::Peer p) {
    switch (p) {
        case NvLink::Peer::gpu:
            return "gpu";
        case NvLink::Peer::nvswitch:
            return "nvswitch";
        case NvLink::Peer::cpu:
            return "cpu";
        case NvLink::Peer::unknown:
            return "unknown";
    }
    return "?";
}

const char* role_name(Role r) {
    switch (r) {
        case Role::root_port:
            return "root port";
        case Role::switch_upstream:
            return "switch upstream port";
        case Role::switch_downstream:
            return "switch downstream port";
        case Role::bridge:
            return "bridge";
        case Role::endpoint:
            return "endpoint";
    }
    return "?";
}

const Bar* Device::largest_memory_bar() const {
    const Bar* best = nullptr;
    for (const auto& b : bars)
        if (!b.io && (!best || b.size > best->size)) best = &b;
    return best;
}

std::optional<std::size_t> Topology::find(const Bdf& bdf) const {
    auto it =
        std::lower_bound(devices.begin(), devices.end(), bdf, [](const Device& d, const Bdf& b) { return d.bdf < b; });
    if (it == devices.end() || it->bdf != bdf) return std::nullopt;
    return static_cast<std::size_t>(it - devices.begin());
}

std::vector<std::size_t> Topology::group_members(int group) const {
    std::vector<std::size_t> out;
    if (group < 0) return out;
    for (std::size_t i = 0; i < devices.size(); ++i)
        if (devices[i].iommu_group == group) out.push_back(i);
    return out;
}

Topology read_topology(Source& src) {
    Topology t;
    t.source = src.describe();
    auto names = src.list(devices_dir);
    if (!names) {
        const std::string where = src.describe();
        if (where == "/sys")
            throw Error("read PCI topology", devices_dir, "missing",
                        "is sysfs mounted? To read another machine, give --sysfs with a snapshot from "
                        "'bardrive topo snapshot FILE' or a copied /sys folder");
        // Another machine's copy: name the path looked for in it; "is sysfs mounted?" is no fix for a folder.
        const bool snapshot = where.rfind("snapshot ", 0) == 0;
        throw Error("read PCI topology", where,
                    snapshot ? "it records no /sys/bus/pci/devices" : "no " + where + "/bus/pci/devices in it",
                    snapshot ? "capture it again with 'bardrive topo snapshot FILE' and read that with --sysfs"
                             : "--sysfs takes a copy of a whole /sys folder (DIR/bus/pci/devices/...) or a "
                               "snapshot from 'bardrive topo snapshot FILE'");
    }

    std::map<std::string, std::size_t> hb_index;
    auto host_bridge = [&](std::uint32_t dom, std::uint8_t bus) {
        auto name = host_bridge_name(dom, bus);
        auto [it, added] = hb_index.emplace(name, t.host_bridges.size());
        if (added) t.host_bridges.push_back(HostBridge{name, dom, bus, -1, std::nullopt, {}});
        return it->second;
    };
    struct Pending {
        std::optional<Bdf> parent;
    };
    std::vector<Pending> pending;
    std::size_t short_config = 0;

    for (const auto& name : *names) {
        auto bdf = Bdf::try_parse(name);
        if (!bdf) {
            t.warnings.push_back(log::concat(devices_dir, "/", name, ": not a PCI address; ignored"));
            continue;
        }
        const std::string dir = std::string(devices_dir) + "/" + name + "/";
        const std::string shown = src.where(dir);  // in warnings: the folder actually read
        Device d;
        d.bdf = *bdf;
        Pending p;
        // The link's target is the device's place in the tree: .../pciDDDD:BB/<bridge BDFs>/<this BDF>.
        if (auto target = src.link(std::string(devices_dir) + "/" + name)) {
            std::vector<std::string> comps;
            std::stringstream ss(*target);
            for (std::string c; std::getline(ss, c, '/');) comps.push_back(c);
            std::optional<std::size_t> hb_pos;
            for (std::size_t k = 0; k < comps.size(); ++k)
                if (parse_host_bridge_name(comps[k])) hb_pos = k;
            if (!hb_pos || comps.empty() || comps.back() != name) {
                d.warnings.push_back("sysfs link '" + log::bounded(*target) + "' does not end in pciDDDD:BB/.../" +
                                     name + "; placed on its own root bus");
                d.host_bridge = host_bridge(bdf->domain, bdf->bus);
            } else {
                auto [dom, bus] = *parse_host_bridge_name(comps[*hb_pos]);
                d.host_bridge = host_bridge(dom, bus);
                if (comps.size() - *hb_pos >= 3) {
                    p.parent = Bdf::try_parse(comps[comps.size() - 2]);
                    if (!p.parent)
                        d.warnings.push_back("sysfs link '" + log::bounded(*target) + "': parent '" +
                                             comps[comps.size() - 2] +
                                             "' is not a PCI address; placed on the root bus");
                }
            }
        } else {
            d.warnings.push_back(
                log::concat(devices_dir, "/", name, " is not a readable link; placed on its own root bus"));
            d.host_bridge = host_bridge(bdf->domain, bdf->bus);
        }

        // Config space first: sysfs attributes below override what they also say. Only the registers
        // decoded are read: every dword may trap to a hypervisor or walk ECAM (a VM's host bridge took
        // 10 ms for 4 KiB), and a full dump of a PCI Express function is 1024 of them.
        bool config_readable = false;
        ConfigInfo cfg = parse_config([&](std::size_t off, std::span<std::uint8_t> out) -> std::size_t {
            auto got = src.bytes(dir + "config", off, out.size());
            if (!got) return 0;
            config_readable = true;
            std::copy(got->begin(), got->end(), out.begin());
            return got->size();
        });
        if (config_readable) {
            d.config_bytes = cfg.size;
            for (const auto& w : cfg.warnings) d.warnings.push_back(shown + "config: " + w);
            d.caps_unread = cfg.size < 256 && cfg.has_cap_list;
            short_config += d.caps_unread;
        } else {
            cfg = ConfigInfo{};
            d.warnings.push_back(shown + "config: not readable; IDs and class from sysfs attributes only");
        }
        d.vendor_id = cfg.vendor_id;
        d.device_id = cfg.device_id;
        d.class_code = cfg.class_code;
        d.is_bridge = cfg.is_bridge();
        d.subsystem_vendor_id = cfg.subsystem_vendor_id.value_or(0);
        d.subsystem_id = cfg.subsystem_id.value_or(0);
        d.port_type = cfg.port_type;
        d.link = cfg.link;
        d.acs = cfg.acs;
        d.sriov = cfg.sriov;
        d.ats = cfg.ats;
        d.pri = cfg.pri;
        d.pasid = cfg.pasid;
        d.aer = cfg.aer;
        d.ext_config = cfg.ext_caps_readable;

        auto hex_attr = [&](const char* attr, auto& field, std::uint64_t max) {
            auto v = src.text(dir + attr);
            if (!v) return;
            auto n = parse_u64(*v, 16);
            if (!n || *n > max) {
                d.warnings.push_back(shown + attr + ": cannot parse '" + log::bounded(*v) + "'");
                return;
            }
            field = static_cast<std::remove_reference_t<decltype(field)>>(*n);
        };
        hex_attr("vendor", d.vendor_id, 0xffff);
        hex_attr("device", d.device_id, 0xffff);
        hex_attr("subsystem_vendor", d.subsystem_vendor_id, 0xffff);
        hex_attr("subsystem_device", d.subsystem_id, 0xffff);
        hex_attr("class", d.class_code, 0xffffff);
        if (d.vendor_id == 0xffff)
            d.warnings.push_back(shown + ": vendor ID unknown (neither config nor vendor readable)");
        // A bridge is class 06 04 / 06 09 even when the header type could not be read.
        if ((d.class_code >> 8) == 0x0604 || (d.class_code >> 8) == 0x0609) d.is_bridge = true;
        std::uint8_t base = d.base_class();
        if (base > 0x13 && base != 0x40 && base != 0xff)
            d.warnings.push_back(log::concat("unknown class code 0x", std::hex, d.class_code));

        if (auto v = src.text(dir + "resource")) {
            d.bars = parse_resource(*v, d.warnings, dir + "resource");
            for (auto& b : d.bars)
                for (const auto& rb : cfg.rebar)
                    if (rb.bar == b.index) b.resizable_sizes = rb.supported_sizes;
        } else {
            d.warnings.push_back(shown + "resource: not readable; BARs unknown");
        }
        if (auto v = src.link(dir + "driver")) d.driver = basename_of(*v);
        if (auto v = src.link(dir + "iommu_group")) {
            const std::string name = basename_of(*v);
            if (auto g = parse_int(name); g && *g >= 0)
                d.iommu_group = *g;
            else
                d.warnings.push_back(shown + "iommu_group: '" + log::bounded(name) +
                                     "' is not a group number; group unknown");
        }
        if (auto v = src.text(dir + "numa_node")) {
            if (auto n = parse_int(*v))
                d.numa_node = *n;
            else
                d.warnings.push_back(shown + "numa_node: cannot parse '" + log::bounded(*v) + "'");
        }
        if (auto v = src.text(dir + "local_cpulist")) d.local_cpus = *v;

        // Link: sysfs attributes are readable without root; config space only when captured.
        auto ms = src.text(dir + "max_link_speed"), mw = src.text(dir + "max_link_width");
        auto cs = src.text(dir + "current_link_speed"), cw = src.text(dir + "current_link_width");
        if (ms && mw && cs && cw) {
            LinkInfo l;
            l.max_gts = parse_speed(*ms);
            l.cur_gts = parse_speed(*cs);
            l.max_width = static_cast<unsigned>(parse_u64(*mw, 10).value_or(0));
            l.cur_width = static_cast<unsigned>(parse_u64(*cw, 10).value_or(0));
            if (l.max_gts > 0 && l.max_width > 0) d.link = l;
        }
        if (auto v = src.text(dir + "sriov_totalvfs")) {
            SriovInfo s = d.sriov.value_or(SriovInfo{});
            s.total_vfs = static_cast<std::uint16_t>(parse_u64(*v, 10).value_or(0));
            if (auto n = src.text(dir + "sriov_numvfs"))
                s.num_vfs = static_cast<std::uint16_t>(parse_u64(*n, 10).value_or(0));
            d.sriov = s;
        }
        if (auto v = src.link(dir + "physfn")) d.physfn = Bdf::try_parse(basename_of(*v));

        // OS names: network interfaces, NVMe controllers and their namespaces, DRM cards, RDMA devices.
        if (auto v = src.list(dir + "net"))
            for (const auto& n : *v) d.os_names.push_back("net:" + n);
        if (auto v = src.list(dir + "nvme"))
            for (const auto& n : *v) {
                d.os_names.push_back("nvme:" + n);
                if (auto ns = src.list(dir + "nvme/" + n))
                    for (const auto& b : *ns)
                        if (b.rfind(n + "n", 0) == 0) d.os_names.push_back("block:" + b);
            }
        if (auto v = src.list(dir + "drm"))
            for (const auto& n : *v)
                if (n.rfind("card", 0) == 0 || n.rfind("renderD", 0) == 0) d.os_names.push_back("drm:" + n);
        // NVIDIA's driver numbers its GPUs (/dev/nvidiaN, nvidia-smi's order) in /proc.
        if (d.is_nvidia_gpu())
            if (auto v = src.text("/proc/driver/nvidia/gpus/" + name + "/information")) {
                std::istringstream is(*v);
                for (std::string line; std::getline(is, line);)
                    if (line.rfind("Device Minor:", 0) == 0) {
                        auto n = line.find_first_not_of(" \t", 13);
                        if (n != std::string::npos) d.os_names.push_back("nvidia:" + line.substr(n));
                    }
            }
        if (auto v = src.list(dir + "infiniband"))
            for (const auto& n : *v) d.os_names.push_back("rdma:" + n);

        t.devices.push_back(std::move(d));
        pending.push_back(p);
    }

    std::vector<std::optional<Bdf>> parents;
    for (const auto& p : pending) parents.push_back(p.parent);

    if (short_config)
        t.warnings.push_back(
            log::concat(short_config,
                        " devices: only the first 64 bytes of config space were readable, so capabilities (link, "
                        "ACS, ATS, SR-IOV, resizable BAR) beyond them are unknown; run as root to read them"));

    if (auto nodes = src.list("/sys/devices/system/node")) {
        for (const auto& n : *nodes)
            if (n.size() > 4 && n.rfind("node", 0) == 0 && parse_int(n.substr(4))) ++t.numa_nodes;
    }
    // Linux's p2pdma allows any AMD Zen (family >= 0x17) root complex: the CPU tells which it is.
    if (auto info = src.bytes("/proc/cpuinfo", 0, 8192)) {
        std::istringstream is(std::string(info->begin(), info->end()));
        for (std::string line; std::getline(is, line);) {
            auto colon = line.find(':');
            if (colon == std::string::npos) continue;
            std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
            std::string val = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
            if (key == "vendor_id" && t.cpu_vendor.empty()) t.cpu_vendor = val;
            if (key == "cpu family" && t.cpu_family < 0) t.cpu_family = parse_int(val).value_or(-1);
        }
    }
    t.groups_known = true;
    assemble(t, std::move(parents));
    // NVLinks: asked only where there is an NVIDIA GPU, so that other machines never load NVML.
    if (std::any_of(t.devices.begin(), t.devices.end(), [](const Device& d) { return d.is_nvidia_gpu(); })) {
        if (auto table = src.text(nvlink_table_path))
            apply_nvlink_table(t, *table, src.describe() + " " + nvlink_table_path);
        else
            t.warnings.push_back(log::concat("NVLinks unknown: ", src.describe(), " has no ", nvlink_table_path,
                                             " (NVML answers it on the live machine; 'bardrive topo snapshot' "
                                             "records it)"));
    }
    return t;
}

std::string device_kind(const Device& d) {
    std::uint8_t base = d.base_class();
    std::uint16_t sub = d.class_sub();
    if (base == 0x03) return "gpu";
    if (base == 0x02) return "nic";
    if (sub == 0x0108) return "nvme";
    if (base == 0x01) return "storage";
    if (base == 0x12 || sub == 0x0b40) return "accel";
    if (sub == 0x0600) return "host-bridge";
    if (d.is_bridge || base == 0x06) return "bridge";
    return "other";
}

}  // namespace bardrive::pci
