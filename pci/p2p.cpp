#include "pci/p2p.hpp"

#include <algorithm>
#include <iomanip>
#include <set>

#include "core/log.hpp"

namespace bardrive::pci {

namespace {

constexpr std::uint16_t vendor_intel = 0x8086;
constexpr std::uint16_t vendor_amd = 0x1022;

std::vector<std::size_t> ancestors(const Topology& t, std::size_t i) {
    std::vector<std::size_t> out;
    for (auto p = t.devices[i].parent; p; p = t.devices[*p].parent) out.push_back(*p);
    return out;
}

// A switch is one bridge in nvidia-smi's sense: its downstream ports count as their upstream port.
std::size_t switch_of(const Topology& t, std::size_t bridge) {
    const auto& d = t.devices[bridge];
    if (d.role == Role::switch_downstream && d.parent && t.devices[*d.parent].role == Role::switch_upstream)
        return *d.parent;
    return bridge;
}

std::string size_text(std::uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;
    while (u + 1 < std::size(units) && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++u;
    }
    return log::concat(bytes, " ", units[u]);
}

std::string hb_label(const Topology& t, std::size_t hb) {
    const auto& h = t.host_bridges[hb];
    if (!h.device) return h.name;
    const auto& d = t.devices[*h.device];
    return log::concat(h.name, " (", std::hex, std::setfill('0'), std::setw(4), d.vendor_id, ':', std::setw(4),
                       d.device_id, ")");
}

// Drivers that leave a group viable for VFIO: vfio-pci itself, pci-stub, and the PCIe port driver
// (both declare driver_managed_dma); a function with no driver is fine too.
bool vfio_compatible_driver(const std::string& drv) {
    return drv.empty() || drv == "vfio-pci" || drv == "pci-stub" || drv == "pcieport";
}

// NVLinks of GPU a: those ending at GPU b (when b is given), or those ending at any NVSwitch.
unsigned links_of(const Topology& t, std::size_t a, std::optional<std::size_t> b) {
    unsigned n = 0;
    for (const auto& l : t.nvlinks) {
        if (l.gpu != a) continue;
        if (b ? (l.peer_type == NvLink::Peer::gpu && l.peer == t.devices[*b].bdf)
              : l.peer_type == NvLink::Peer::nvswitch)
            n += l.links;
    }
    return n;
}

}  // namespace

unsigned nvlinks_between(const Topology& t, std::size_t a, std::size_t b) {
    if (a == b || t.nvlinks.empty()) return 0;
    // Both ends report a direct link; one end missing from a hand-written file must not hide it.
    if (unsigned direct = std::max(links_of(t, a, b), links_of(t, b, a))) return direct;
    return std::min(links_of(t, a, std::nullopt), links_of(t, b, std::nullopt));
}

const char* class_name(PathClass c) {
    switch (c) {
        case PathClass::X:
            return "X";
        case PathClass::PIX:
            return "PIX";
        case PathClass::PXB:
            return "PXB";
        case PathClass::PHB:
            return "PHB";
        case PathClass::NODE:
            return "NODE";
        case PathClass::SYS:
            return "SYS";
    }
    return "?";
}

const char* verdict_name(Verdict v) {
    switch (v) {
        case Verdict::supported:
            return "supported";
        case Verdict::platform_dependent:
            return "platform-dependent";
        case Verdict::unsupported:
            return "unsupported";
    }
    return "?";
}

const char* effect_name(Reason::Effect e) {
    switch (e) {
        case Reason::Effect::ok:
            return "ok";
        case Reason::Effect::note:
            return "note";
        case Reason::Effect::action:
            return "action";
        case Reason::Effect::platform:
            return "platform";
        case Reason::Effect::block:
            return "block";
    }
    return "?";
}

std::vector<std::size_t> Path::bridges() const {
    std::vector<std::size_t> out = up;
    out.insert(out.end(), down.begin(), down.end());
    return out;
}

Path find_path(const Topology& t, std::size_t a, std::size_t b) {
    Path p;
    p.host_a = t.devices[a].host_bridge;
    p.host_b = t.devices[b].host_bridge;
    if (a == b) return p;
    auto ua = ancestors(t, a), ub = ancestors(t, b);
    // a may itself be b's bridge (or the other way round): then the path ends there.
    auto in = [](const std::vector<std::size_t>& v, std::size_t x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    std::optional<std::size_t> common;
    if (in(ub, a))
        common = a;
    else if (in(ua, b))
        common = b;
    else
        for (auto x : ua)
            if (in(ub, x)) {
                common = x;
                break;
            }
    if (common) {
        for (auto x : ua) {
            if (x == *common) break;
            p.up.push_back(x);
        }
        if (*common != a && *common != b) p.up.push_back(*common);
        for (auto x : ub) {
            if (x == *common) break;
            p.down.insert(p.down.begin(), x);
        }
        std::set<std::size_t> switches;
        for (auto x : p.bridges()) switches.insert(switch_of(t, x));
        p.cls = switches.size() <= 1 ? PathClass::PIX : PathClass::PXB;
        return p;
    }
    p.up = ua;
    p.down.assign(ub.rbegin(), ub.rend());
    p.via_host_bridge = true;
    if (p.host_a == p.host_b) {
        p.cls = PathClass::PHB;
        return p;
    }
    int na = t.host_bridges[p.host_a].numa_node, nb = t.host_bridges[p.host_b].numa_node;
    if (na >= 0 && nb >= 0)
        p.cls = na == nb ? PathClass::NODE : PathClass::SYS;
    else
        p.cls = t.numa_nodes == 1 ? PathClass::NODE : PathClass::SYS;  // unknown node: assume the worse
    return p;
}

HostBridgeAllowance host_bridge_allowance(const Topology& t, std::size_t hb) {
    HostBridgeAllowance a;
    // drivers/pci/p2pdma.c: any AMD CPU of family 0x17 (Zen) or newer.
    if (t.cpu_vendor == "AuthenticAMD" && t.cpu_family >= 0x17) {
        a.allowed = true;
        a.why = log::concat("AMD Zen CPU (family 0x", std::hex, t.cpu_family, ")");
        return a;
    }
    const auto& h = t.host_bridges[hb];
    if (!h.device) return a;
    const auto& d = t.devices[*h.device];
    struct Entry {
        std::uint16_t vendor, device;
        bool same_host_bridge;
        const char* what;
    };
    static const Entry list[] = {
        {vendor_intel, 0x3c00, true, "Intel Xeon E5/Core i7"},
        {vendor_intel, 0x3c01, true, "Intel Xeon E5/Core i7"},
        {vendor_intel, 0x2f00, true, "Intel Xeon E5 v3/E7 v3"},
        {vendor_intel, 0x2f01, true, "Intel Xeon E5 v3/E7 v3"},
        {vendor_intel, 0x2030, false, "Intel Skylake-E"},
        {vendor_intel, 0x2031, false, "Intel Skylake-E"},
        {vendor_intel, 0x2032, false, "Intel Skylake-E"},
        {vendor_intel, 0x2033, false, "Intel Skylake-E"},
        {vendor_intel, 0x2020, false, "Intel Skylake-E"},
        {vendor_intel, 0x09a2, false, "Intel Ice Lake-SP"},
        // Older kernels listed AMD Zen host bridges by ID; the CPU check above replaced them.
        {vendor_amd, 0x1450, false, "AMD Zen"},
        {vendor_amd, 0x15d0, false, "AMD Zen (Raven)"},
        {vendor_amd, 0x1630, false, "AMD Zen (Renoir)"},
        {vendor_amd, 0x1480, false, "AMD Zen 2"},
    };
    for (const auto& e : list)
        if (e.vendor == d.vendor_id && e.device == d.device_id) {
            a.allowed = true;
            a.same_host_bridge_only = e.same_host_bridge;
            a.why = log::concat(e.what, " host bridge ", std::hex, std::setfill('0'), std::setw(4), e.vendor, ':',
                                std::setw(4), e.device);
            return a;
        }
    return a;
}

P2pReport judge_p2p(const Topology& t, std::size_t initiator, std::size_t target) {
    P2pReport r;
    r.initiator = initiator;
    r.target = target;
    r.path = find_path(t, initiator, target);
    using E = Reason::Effect;
    auto add = [&](E e, std::string text) { r.reasons.push_back({e, std::move(text)}); };
    const Device& ini = t.devices[initiator];
    const Device& tgt = t.devices[target];
    if (initiator == target) {
        add(E::note, "same function");
        r.verdict = Verdict::supported;
        return r;
    }
    r.nvlinks = nvlinks_between(t, initiator, target);
    if (r.nvlinks) {
        bool direct = links_of(t, initiator, target) || links_of(t, target, initiator);
        add(E::note, log::concat("NV", r.nvlinks, ": the GPUs share ", r.nvlinks, " NVLinks",
                                 direct ? "" : " through NVSwitches", " (", t.nvlink_source,
                                 "): CUDA peer copies and NCCL go over NVLink; this verdict concerns DMA into the "
                                 "BAR over PCIe"));
    }

    // 1. The window the initiator writes into.
    if (const Bar* bar = tgt.largest_memory_bar()) {
        add(E::note, log::concat("target window: ", tgt.bdf.str(), " BAR", bar->index, " ", size_text(bar->size),
                                 bar->is64 ? ", 64-bit" : ", 32-bit",
                                 bar->prefetchable ? ", prefetchable" : ", non-prefetchable"));
        if (!bar->resizable_sizes.empty() && bar->resizable_sizes.back() > bar->size)
            add(E::action, log::concat("BAR", bar->index, " is ", size_text(bar->size),
                                       " but the device supports up to ", size_text(bar->resizable_sizes.back()),
                                       " (Resizable BAR): enable Above 4G Decoding and Resizable BAR in the firmware, "
                                       "or resize it through sysfs resource",
                                       bar->index, "_resize"));
        if (tgt.is_nvidia_gpu() && bar->size <= (std::uint64_t{256} << 20))
            add(E::note, log::concat("a ", size_text(bar->size), " BAR", bar->index,
                                     " is a window onto part of the GPU's memory: peers reach only what the GPU "
                                     "driver maps into it"));
    } else if (!t.bars_known) {
        add(E::note, "BARs unknown for this input: the target window cannot be judged");
    } else {
        add(E::block, log::concat(tgt.bdf.str(), " has no memory BAR: nothing for a peer to write into"));
    }

    // 2. The route: ACS on the bridges, then who forwards the TLPs.
    // Like Linux's p2pdma, the two functions themselves count too: a multi-function device's ACS
    // can redirect traffic between its functions.
    std::vector<std::string> redirecting, unknown_acs;
    std::vector<std::size_t> on_path = r.path.bridges();
    on_path.push_back(initiator);
    on_path.push_back(target);
    for (auto x : on_path) {
        const auto& d = t.devices[x];
        constexpr std::uint16_t redirect_bits =
            acs::p2p_request_redirect | acs::p2p_completion_redirect | acs::p2p_egress_control;
        if (d.acs) {
            if (d.acs->control & redirect_bits)
                redirecting.push_back(
                    log::concat(d.bdf.str(), " (", acs::describe(d.acs->control & redirect_bits), ")"));
        } else if (!d.ext_config && (d.role == Role::root_port || d.role == Role::switch_downstream)) {
            unknown_acs.push_back(d.bdf.str());
        }
    }
    bool through_root = r.path.via_host_bridge;
    if (!redirecting.empty()) {
        std::string list;
        for (const auto& s : redirecting) list += (list.empty() ? "" : ", ") + s;
        // Redirected traffic is judged below by the root complex that receives it.
        add(E::note, "ACS redirect/egress control enabled on " + list +
                         ": peer requests go up to the root complex and through the IOMMU instead of across the switch "
                         "(Linux's pci=disable_acs_redir= lifts it, at the cost of isolation)");
        through_root = true;
    }
    if (!unknown_acs.empty() && !r.path.via_host_bridge) {
        std::string list;
        for (const auto& s : unknown_acs) list += (list.empty() ? "" : ", ") + s;
        add(E::platform, "ACS control of " + list + " unknown (extended config space not readable" +
                             (t.groups_known ? std::string("; run as root") : std::string(" from this input")) +
                             "): if it redirects, traffic goes through the root complex");
    }
    if (!through_root) {
        std::size_t common = r.path.up.empty() ? (ini.parent ? *ini.parent : initiator) : r.path.up.back();
        add(E::ok,
            log::concat("common upstream bridge ", t.devices[common].bdf.str(), " (", role_name(t.devices[common].role),
                        ") routes peer TLPs directly, below the root complex"));
    } else if (r.path.host_a == r.path.host_b) {
        auto al = host_bridge_allowance(t, r.path.host_a);
        if (al.allowed)
            add(E::ok, "through root complex " + hb_label(t, r.path.host_a) + ": on Linux's p2pdma allowlist (" +
                           al.why + ")");
        else
            add(E::platform, "through root complex " + hb_label(t, r.path.host_a) +
                                 ", which is not on Linux's p2pdma allowlist: whether it forwards peer TLPs depends on "
                                 "the platform (VFIO maps the peer BAR regardless); measure it");
    } else {
        auto aa = host_bridge_allowance(t, r.path.host_a), ab = host_bridge_allowance(t, r.path.host_b);
        std::string between =
            "between host bridges " + hb_label(t, r.path.host_a) + " and " + hb_label(t, r.path.host_b);
        if (r.path.cls == PathClass::SYS) {
            add(E::platform, between +
                                 " across the inter-socket interconnect (SYS): most platforms forward peer "
                                 "traffic there slowly or not at all, and NVIDIA's driver refuses GPU P2P over it");
        } else if (aa.allowed && ab.allowed && !aa.same_host_bridge_only && !ab.same_host_bridge_only) {
            add(E::ok, between + " within one NUMA node: Linux's p2pdma allows it (" + aa.why + ")");
        } else {
            add(E::platform, between +
                                 ": not on Linux's p2pdma allowlist for traffic between host bridges; "
                                 "platform dependent, measure it");
        }
        if (t.host_bridges[r.path.host_a].numa_node < 0 || t.host_bridges[r.path.host_b].numa_node < 0)
            add(E::note,
                "NUMA node of a host bridge unknown (numa_node -1): classed as " + std::string(class_name(r.path.cls)));
    }

    // 3. IOMMU groups: what VFIO needs before it hands out either device.
    if (!t.groups_known) {
        add(E::note, "IOMMU groups unknown for this input");
    } else if (ini.iommu_group < 0 || tgt.iommu_group < 0) {
        add(E::block, log::concat(ini.iommu_group < 0 ? ini.bdf.str() : tgt.bdf.str(),
                                  " has no IOMMU group: the kernel runs without an IOMMU; VFIO needs one "
                                  "(boot with intel_iommu=on or amd_iommu=on)"));
    } else {
        if (ini.iommu_group == tgt.iommu_group)
            add(E::note, log::concat("both are in IOMMU group ", ini.iommu_group,
                                     ": VFIO hands them out together, to one container, and the IOMMU does not "
                                     "isolate them from each other"));
        std::set<int> groups{ini.iommu_group, tgt.iommu_group};
        for (int g : groups) {
            auto members = t.group_members(g);
            std::vector<std::string> blockers;
            for (auto m : members) {
                const auto& d = t.devices[m];
                if (!vfio_compatible_driver(d.driver)) blockers.push_back(d.bdf.str() + " (" + d.driver + ")");
            }
            if (!blockers.empty()) {
                std::string list;
                for (const auto& s : blockers) list += (list.empty() ? "" : ", ") + s;
                add(E::action, log::concat("IOMMU group ", g, " (", members.size(),
                                           " functions) is not viable for VFIO "
                                           "until ",
                                           list, " is bound to vfio-pci or unbound"));
            } else if (members.size() > 1) {
                add(E::note,
                    log::concat("IOMMU group ", g, " has ", members.size(), " functions; VFIO takes them together"));
            }
        }
    }

    r.verdict = Verdict::supported;
    for (const auto& x : r.reasons) {
        if (x.effect == E::block)
            r.verdict = Verdict::unsupported;
        else if (x.effect == E::platform && r.verdict == Verdict::supported)
            r.verdict = Verdict::platform_dependent;
    }
    return r;
}

std::vector<std::size_t> p2p_candidates(const Topology& t, bool all) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        const auto& d = t.devices[i];
        if (d.is_bridge || d.role != Role::endpoint) continue;
        std::string kind = device_kind(d);
        if (kind == "host-bridge" || kind == "bridge") {
            if (all) out.push_back(i);
            continue;
        }
        const Bar* bar = d.largest_memory_bar();
        bool big = bar && bar->size >= (std::uint64_t{64} << 20);
        if (all || kind == "gpu" || kind == "nic" || kind == "nvme" || kind == "accel" || big) out.push_back(i);
    }
    return out;
}

std::vector<P2pReport> rank_p2p_pairs(const Topology& t, const std::vector<std::size_t>& initiators,
                                      const std::vector<std::size_t>& targets) {
    std::vector<P2pReport> out;
    for (std::size_t a : initiators)
        for (std::size_t b : targets)
            if (a != b) out.push_back(judge_p2p(t, a, b));
    std::stable_sort(out.begin(), out.end(), [](const P2pReport& x, const P2pReport& y) {
        if (x.verdict != y.verdict) return x.verdict < y.verdict;  // declared best first
        return x.path.cls < y.path.cls;
    });
    return out;
}

}  // namespace bardrive::pci
