// Reads an NCCL topology file (<system version="1">, as NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE
// reads) through libxml2. Each <cpu> is one host bridge on its NUMA node; <pci> elements are functions
// and their nesting is the tree; <gpu>, <nic><net> and <nvlink> children name and link them.
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iomanip>
#include <memory>
#include <set>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"
#include "pci/topology.hpp"
#include "pci/xml.hpp"

namespace bardrive::pci {

namespace {

// NCCL's target classes (src/graph/xml.h, topo.cc): an NVSwitch, an IBM POWER NPU (the CPU), a GPU.
constexpr std::uint32_t class_nvswitch = 0x068000;
constexpr std::uint32_t class_npu = 0x068001;

using xml::name_of;

bool is(const xmlNode* n, const char* name) {
    return n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

std::optional<std::string> attr(const xmlNode* n, const char* name) {
    xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
    if (!v) return std::nullopt;
    std::string s(reinterpret_cast<const char*>(v));
    xmlFree(v);
    return s;
}

// "0x10de" or "10de"; at most `max`.
std::optional<std::uint32_t> parse_hex(const std::string& s, std::uint32_t max) {
    std::size_t start = s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0 ? 2 : 0;
    if (start >= s.size() || s.size() - start > 8) return std::nullopt;
    for (std::size_t i = start; i < s.size(); ++i)
        if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    unsigned long v = std::strtoul(s.c_str() + start, nullptr, 16);
    if (v > max) return std::nullopt;
    return static_cast<std::uint32_t>(v);
}

// Decimal, or hex with 0x (NCCL reads these with strtol(..., 0)).
std::optional<int> parse_int(const std::string& s) {
    if (s.empty() || s.size() > 12) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 0);
    if (errno != 0 || *end != '\0' || v < 0 || v > 1'000'000) return std::nullopt;
    return static_cast<int>(v);
}

// NCCL's affinity is a Linux cpumask: 32-bit hex words, highest first ("000000ff,ffff0000,00ffffff").
// Returns the cpulist form of sysfs local_cpulist ("0-23,48-71"); empty when no bit is set.
std::optional<std::string> cpulist_from_mask(const std::string& mask) {
    std::vector<std::uint32_t> words;  // highest first
    std::size_t pos = 0;
    while (true) {
        auto comma = mask.find(',', pos);
        auto w = parse_hex(mask.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), 0xffffffffu);
        if (!w) return std::nullopt;
        words.push_back(*w);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (words.size() > 1024) return std::nullopt;
    std::string out;
    long run_start = -1;
    const long bits = static_cast<long>(words.size()) * 32;
    for (long cpu = 0; cpu <= bits; ++cpu) {
        bool set = cpu < bits && (words[words.size() - 1 - static_cast<std::size_t>(cpu / 32)] >> (cpu % 32)) & 1u;
        if (set && run_start < 0) run_start = cpu;
        if (!set && run_start >= 0) {
            if (!out.empty()) out += ',';
            out += std::to_string(run_start);
            if (cpu - 1 > run_start) out += "-" + std::to_string(cpu - 1);
            run_start = -1;
        }
    }
    return out;
}

class Reader {
public:
    explicit Reader(std::string name) : name_(std::move(name)) {}

    Topology read(const xmlNode* system) {
        t_.source = "NCCL XML " + name_;
        t_.groups_known = false;
        t_.bars_known = false;
        if (auto v = attr(system, "version"); !v || *v != "1")
            warn(system, "version " + (v ? "'" + log::bounded(*v) + "'" : std::string("missing")) +
                             ": this reader knows version 1 (NCCL refuses other versions); read anyway");
        std::size_t cpus = 0;
        for (const xmlNode* c = system->children; c; c = c->next) {
            if (is(c, "cpu"))
                read_cpu(c, cpus++);
            else
                unexpected(c, "<system>");
        }
        if (t_.devices.empty())
            t_.warnings.push_back(name_ + ": no <pci> elements below a <cpu>: no PCI functions in this file");
        t_.numa_nodes = static_cast<int>(numa_ids_.size());
        t_.warnings.push_back(
            "NCCL XML carries no config space, BARs, IOMMU groups or drivers: ACS, BARs and groups are unknown");
        assemble(t_, std::move(parents_));
        // A <cpu> is not a PCI function: nothing to look up in Linux's p2pdma allowlist but the CPU itself.
        for (auto& h : t_.host_bridges) h.device.reset();
        // NCCL keeps one <pci> per switch (its upstream port) and drops root and downstream ports (xml.cc
        // climbs sysfs two levels at a time): below the first level every bridge is a switch of its own.
        for (auto& d : t_.devices)
            if (d.role == Role::switch_downstream) d.role = Role::switch_upstream;
        finish_nvlinks();
        return std::move(t_);
    }

private:
    std::string where(const xmlNode* n) const {
        return log::concat(name_, " line ", xmlGetLineNo(n), ": <", name_of(n), ">");
    }
    void warn(const xmlNode* n, const std::string& text) { t_.warnings.push_back(where(n) + " " + text); }

    void unexpected(const xmlNode* n, const char* inside) {
        if (n->type != XML_ELEMENT_NODE) return;  // text, comments
        warn(n, std::string("is not expected inside ") + inside + "; ignored");
    }

    void read_cpu(const xmlNode* cpu, std::size_t ordinal) {
        HostBridge hb;
        int numa = -1;
        if (auto v = attr(cpu, "numaid")) {
            if (auto n = parse_int(*v))
                numa = *n;
            else
                warn(cpu, "numaid '" + log::bounded(*v) + "' is not a NUMA node number (0 or more); NUMA node unknown");
        } else {
            warn(cpu, "has no numaid; NUMA node unknown");
        }
        hb.numa_node = numa;
        if (numa >= 0) numa_ids_.insert(numa);
        // One name per <cpu>: "cpu0" by NUMA node, with the element's place when that is not unique.
        hb.name = numa >= 0 ? log::concat("cpu", numa) : log::concat("cpu#", ordinal);
        for (const auto& h : t_.host_bridges)
            if (h.name == hb.name) hb.name = log::concat(hb.name, "#", ordinal);
        std::string cpus;
        if (auto v = attr(cpu, "affinity")) {
            if (auto l = cpulist_from_mask(*v))
                cpus = *l;
            else
                warn(cpu, "affinity '" + log::bounded(*v) +
                              "' is not a CPU mask (hex words separated by commas); CPUs unknown");
        }
        if (auto v = attr(cpu, "vendor")) {
            if (t_.cpu_vendor.empty())
                t_.cpu_vendor = *v;
            else if (t_.cpu_vendor != *v)
                warn(cpu, "vendor '" + log::bounded(*v) + "' differs from an earlier <cpu>'s '" + t_.cpu_vendor +
                              "'; kept the first");
        }
        if (auto v = attr(cpu, "familyid")) {
            auto f = parse_int(*v);
            if (!f)
                warn(cpu, "familyid '" + log::bounded(*v) + "' is not a number; CPU family unknown");
            else if (t_.cpu_family < 0)
                t_.cpu_family = *f;
            else if (t_.cpu_family != *f)
                warn(cpu, log::concat("familyid ", *f, " differs from an earlier <cpu>'s ", t_.cpu_family,
                                      "; kept the first"));
        }
        const std::size_t index = t_.host_bridges.size();
        const std::size_t first_device = t_.devices.size();
        t_.host_bridges.push_back(std::move(hb));
        for (const xmlNode* c = cpu->children; c; c = c->next) {
            if (is(c, "pci"))
                read_pci(c, std::nullopt, index, numa, cpus);
            else if (is(c, "nic"))
                for (const xmlNode* n = c->children; n; n = n->next)
                    if (is(n, "net"))
                        warn(n, "name '" + attr(n, "name").value_or("?") +
                                    "' hangs from the CPU, not a PCI function (a socket or virtual network); not "
                                    "in the model");
                    else
                        unexpected(n, "<nic>");
            else
                unexpected(c, "<cpu>");
        }
        // The host bridge's bus: the lowest address below it (the file gives a CPU no PCI address).
        std::optional<Bdf> lowest;
        for (std::size_t i = first_device; i < t_.devices.size(); ++i)
            if (!parents_[i] && (!lowest || t_.devices[i].bdf < *lowest)) lowest = t_.devices[i].bdf;
        if (lowest) {
            t_.host_bridges[index].domain = lowest->domain;
            t_.host_bridges[index].bus = lowest->bus;
        }
    }

    void read_pci(const xmlNode* n, std::optional<Bdf> parent, std::size_t host_bridge, int numa,
                  const std::string& cpus) {
        auto busid = attr(n, "busid");
        std::optional<Bdf> bdf = busid ? Bdf::try_parse(*busid) : std::nullopt;
        if (!bdf || seen_.count(*bdf)) {
            std::size_t below = 0;
            count_pci(n, below);
            std::string why = !busid ? "has no busid"
                              : !bdf ? "busid '" + log::bounded(*busid) + "' is not a PCI address (DDDD:BB:DD.F)"
                                     : "busid " + bdf->str() + " appears twice";
            warn(n, why + log::concat("; ignored with the ", below, " <pci> elements below it"));
            return;
        }
        seen_.insert(*bdf);
        Device d;
        d.bdf = *bdf;
        d.host_bridge = host_bridge;
        d.numa_node = numa;
        d.local_cpus = cpus;
        auto dev_warn = [&](const std::string& text) { d.warnings.push_back(where(n) + " " + text); };
        if (auto v = attr(n, "class")) {
            if (auto c = parse_hex(*v, 0xffffff))
                d.class_code = *c;
            else
                dev_warn("class '" + log::bounded(*v) + "' is not a hex class code; class unknown");
        } else {
            dev_warn("has no class; class unknown");
        }
        // Static files use 0xffff or 0x0000 for IDs they do not know (a hidden switch): unknown, not a vendor.
        auto id = [&](const char* key, std::uint16_t& field, std::uint16_t unknown) {
            auto v = attr(n, key);
            if (!v) return;
            auto x = parse_hex(*v, 0xffff);
            if (!x)
                dev_warn(std::string(key) + " '" + log::bounded(*v) + "' is not a 16-bit hex ID; unknown");
            else if (*x != 0xffff && *x != 0)
                field = static_cast<std::uint16_t>(*x);
            else
                field = unknown;
        };
        id("vendor", d.vendor_id, 0xffff);
        id("device", d.device_id, 0xffff);
        id("subsystem_vendor", d.subsystem_vendor_id, 0);
        id("subsystem_device", d.subsystem_id, 0);
        // One speed and width: NCCL writes the lower of the device's and its port's maximum.
        auto speed = attr(n, "link_speed"), width = attr(n, "link_width");
        if (speed && width && !speed->empty() && !width->empty()) {
            char* end = nullptr;
            double gts = std::strtod(speed->c_str(), &end);
            auto w = parse_int(*width);
            if (end == speed->c_str() || gts <= 0 || gts > 1000 || !w)
                dev_warn("link_speed '" + log::bounded(*speed) + "' / link_width '" + log::bounded(*width) +
                         "' do not parse; link unknown");
            else if (*w > 0)
                d.link = LinkInfo{gts, static_cast<unsigned>(*w), gts, static_cast<unsigned>(*w)};
        }

        bool has_children = false;
        for (const xmlNode* c = n->children; c; c = c->next) has_children |= is(c, "pci");
        d.is_bridge = has_children || (d.class_code >> 8) == 0x0604 || (d.class_code >> 8) == 0x0609;
        if (has_children && (d.class_code >> 8) != 0x0604 && (d.class_code >> 8) != 0x0609)
            dev_warn("holds <pci> elements but its class is not a PCI bridge; taken as a bridge");

        for (const xmlNode* c = n->children; c; c = c->next) {
            if (is(c, "gpu"))
                read_gpu(c, d);
            else if (is(c, "nic"))
                for (const xmlNode* x = c->children; x; x = x->next) {
                    if (!is(x, "net")) {
                        unexpected(x, "<nic>");
                        continue;
                    }
                    auto name = attr(x, "name");
                    if (name && !name->empty())
                        d.os_names.push_back("rdma:" + *name);
                    else
                        dev_warn("<net> at line " + std::to_string(xmlGetLineNo(x)) + " has no name");
                }
            else if (!is(c, "pci") && !is(c, "pcilink"))  // pcilink: Broadcom switch links, not modelled
                unexpected(c, "<pci>");
        }
        t_.devices.push_back(std::move(d));
        parents_.push_back(parent);
        for (const xmlNode* c = n->children; c; c = c->next)
            if (is(c, "pci")) read_pci(c, *bdf, host_bridge, numa, cpus);
    }

    void count_pci(const xmlNode* n, std::size_t& count) {
        for (const xmlNode* c = n->children; c; c = c->next)
            if (is(c, "pci")) {
                ++count;
                count_pci(c, count);
            }
    }

    void read_gpu(const xmlNode* g, Device& d) {
        if (auto v = attr(g, "dev")) {
            if (auto n = parse_int(*v))
                d.os_names.push_back(log::concat("cuda:", *n));
            else
                warn(g, "dev '" + log::bounded(*v) + "' is not a CUDA device index; ignored");
        }
        for (const xmlNode* c = g->children; c; c = c->next) {
            if (is(c, "nvlink"))
                read_nvlink(c, d.bdf);
            else if (!is(c, "c2c"))  // c2c: the Grace CPU link, not modelled
                unexpected(c, "<gpu>");
        }
    }

    void read_nvlink(const xmlNode* n, const Bdf& gpu) {
        ++nvlink_elements_;
        auto count = attr(n, "count");
        auto links = count ? parse_int(*count) : std::nullopt;
        if (!links || *links == 0) {
            warn(n, "count '" + log::bounded(count.value_or("")) + "' is not a positive number of links; ignored");
            return;
        }
        PendingLink p{gpu, {}, {}, n};
        p.link.links = static_cast<unsigned>(*links);
        auto target = attr(n, "target");
        if (target) p.link.peer = Bdf::try_parse(*target);
        if (p.link.peer == gpu) {  // said, not dropped silently: nvlinks_between() never pairs a GPU with itself
            warn(n, "targets its own GPU " + gpu.str() + "; ignored");
            return;
        }
        if (auto tc = attr(n, "tclass")) {
            auto c = parse_hex(*tc, 0xffffff);
            if (!c)
                warn(n, "tclass '" + log::bounded(*tc) + "' is not a hex class code; peer type unknown");
            else
                p.tclass = *c;
        }
        pending_.push_back(std::move(p));
    }

    // Peer types once every function is known: NCCL's tclass, else the class of the target in this file.
    void finish_nvlinks() {
        for (auto& p : pending_) {
            auto gpu = t_.find(p.gpu);
            if (!gpu) continue;  // its <pci> was ignored
            std::optional<std::uint32_t> cls = p.tclass;
            if (!cls && p.link.peer)
                if (auto i = t_.find(*p.link.peer)) cls = t_.devices[*i].class_code;
            if (!cls && !p.link.peer) cls = class_nvswitch;  // NCCL's "fffffff:ffff:ff": a switch the VM hides
            if (cls == class_nvswitch)
                p.link.peer_type = NvLink::Peer::nvswitch;
            else if (cls == class_npu)
                p.link.peer_type = NvLink::Peer::cpu;
            else if (cls && (*cls >> 16) == 0x03)
                p.link.peer_type = NvLink::Peer::gpu;
            else
                warn(p.node, cls ? log::concat("target class 0x", std::hex, std::setfill('0'), std::setw(6), *cls,
                                               " is neither a GPU, an NVSwitch nor a CPU; peer type unknown")
                                 : std::string("has no tclass and its target is not in this file; peer type unknown"));
            if (p.link.peer_type == NvLink::Peer::gpu && !p.link.peer)
                warn(p.node, "target GPU has no PCI address; its links cannot be paired");
            p.link.gpu = *gpu;
            t_.nvlinks.push_back(p.link);
        }
        std::stable_sort(t_.nvlinks.begin(), t_.nvlinks.end(),
                         [](const NvLink& a, const NvLink& b) { return a.gpu < b.gpu; });
        if (nvlink_elements_)
            t_.nvlink_source = "NCCL XML " + name_;
        else
            t_.warnings.push_back(name_ +
                                  ": no <nvlink> elements: NVLinks unknown (a file for NCCL_TOPO_FILE may leave them "
                                  "out, and NCCL then asks NVML)");
    }

    struct PendingLink {
        Bdf gpu;
        NvLink link;
        std::optional<std::uint32_t> tclass;
        const xmlNode* node = nullptr;
    };

    std::string name_;
    Topology t_;
    std::vector<std::optional<Bdf>> parents_;
    std::set<Bdf> seen_;
    std::set<int> numa_ids_;
    std::vector<PendingLink> pending_;
    std::size_t nvlink_elements_ = 0;
};

}  // namespace

Topology parse_nccl_xml(const std::string& text, const std::string& name) {
    const std::string op = "read NCCL topology XML";
    const std::string hint =
        "give a file NCCL wrote with NCCL_TOPO_DUMP_FILE, or one written for NCCL_TOPO_FILE (<system version=\"1\">)";
    const xml::Doc doc = xml::parse(text, name, op, hint);
    const xmlNode* root = xmlDocGetRootElement(doc.get());
    if (!is(root, "system"))
        throw Error(op, name,
                    log::concat("line ", xmlGetLineNo(root), ": root element is <", log::bounded(name_of(root)),
                                ">, not <system>"),
                    is(root, "topology") ? hint + "; 'lstopo --of xml' output is read with --hwloc-xml" : hint);
    return Reader(name).read(root);
}

Topology read_nccl_xml(const std::string& file) {
    auto bytes = file::read_bytes(file, xml::max_file_bytes + 1);
    return parse_nccl_xml(std::string(bytes.begin(), bytes.end()), file);
}

}  // namespace bardrive::pci
