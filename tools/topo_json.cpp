#include "tools/topo_json.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/log.hpp"
#include "pci/p2p.hpp"

namespace bardrive::tools {

using nlohmann::ordered_json;
using namespace bardrive::pci;

std::string hex4(unsigned v) {
    std::ostringstream os;
    os << std::hex << std::setfill('0') << std::setw(4) << v;
    return os.str();
}

std::string hex_class(std::uint32_t c) {
    std::ostringstream os;
    os << "0x" << std::hex << std::setfill('0') << std::setw(6) << c;
    return os.str();
}

std::string json_text(const ordered_json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

// Absent facts are null, as the schema says: a string that is empty, an index or node below 0.
ordered_json or_null(const std::string& s) { return s.empty() ? ordered_json() : ordered_json(s); }
ordered_json or_null(int v) { return v >= 0 ? ordered_json(v) : ordered_json(); }

// Link speeds are 2.5, 5, 8, 16, 32, 64 GT/s: whole ones are written as integers ("16", not "16.0").
ordered_json gts(double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return static_cast<std::int64_t>(v);
    return v;
}

ordered_json bar_json(const Bar& b) {
    ordered_json j;
    j["index"] = b.index;
    j["address"] = log::concat("0x", std::hex, b.address);
    j["size"] = b.size;
    j["type"] = b.io ? "io" : "mem";
    j["bits"] = b.io ? ordered_json() : ordered_json(b.is64 ? 64 : 32);
    j["prefetchable"] = b.prefetchable;
    j["resizable_sizes"] = b.resizable_sizes;
    return j;
}

ordered_json device_json(const Topology& t, const Device& d) {
    auto bdf_of = [&](const std::optional<std::size_t>& i) {
        return i ? ordered_json(t.devices[*i].bdf.str()) : ordered_json();
    };
    ordered_json j;
    j["bdf"] = d.bdf.str();
    j["parent"] = bdf_of(d.parent);
    j["host_bridge"] = t.host_bridges[d.host_bridge].name;
    j["role"] = role_name(d.role);
    j["role_inferred"] = d.is_bridge && !d.port_type;
    j["kind"] = device_kind(d);
    j["vendor_id"] = hex4(d.vendor_id);
    j["device_id"] = hex4(d.device_id);
    j["subsystem_vendor_id"] = hex4(d.subsystem_vendor_id);
    j["subsystem_id"] = hex4(d.subsystem_id);
    j["vendor"] = d.vendor_name;
    j["device"] = d.device_name;
    j["subsystem"] = or_null(d.subsystem_name);
    j["class"] = hex_class(d.class_code);
    j["class_name"] = d.class_name;
    j["driver"] = or_null(d.driver);
    j["iommu_group"] = or_null(d.iommu_group);
    j["numa_node"] = or_null(d.numa_node);
    j["local_cpus"] = or_null(d.local_cpus);
    j["bars"] = ordered_json::array();
    for (const auto& b : d.bars) j["bars"].push_back(bar_json(b));
    if (d.link)
        j["link"] = {{"speed_gts", gts(d.link->cur_gts)},
                     {"width", d.link->cur_width},
                     {"max_speed_gts", gts(d.link->max_gts)},
                     {"max_width", d.link->max_width},
                     {"downgraded", d.link->downgraded()}};
    else
        j["link"] = nullptr;
    j["config_bytes"] = d.config_bytes;
    j["extended_config"] = d.ext_config;
    if (d.acs)
        j["acs"] = {{"capability", acs::describe(d.acs->capability)}, {"control", acs::describe(d.acs->control)}};
    else
        j["acs"] = nullptr;
    // Without extended config space these capabilities could not be looked for: unknown, not absent.
    auto cap = [&](bool v) { return d.ext_config ? ordered_json(v) : ordered_json(); };
    j["ats"] = cap(d.ats);
    j["pri"] = cap(d.pri);
    j["pasid"] = cap(d.pasid);
    j["aer"] = cap(d.aer);
    if (d.sriov)
        j["sriov"] = {{"total_vfs", d.sriov->total_vfs}, {"num_vfs", d.sriov->num_vfs}};
    else
        j["sriov"] = nullptr;
    j["physfn"] = d.physfn ? ordered_json(d.physfn->str()) : ordered_json();
    j["os_names"] = d.os_names;
    j["nvlinks"] = ordered_json::array();
    const auto index = static_cast<std::size_t>(&d - t.devices.data());
    for (const auto& l : t.nvlinks)
        if (l.gpu == index)
            j["nvlinks"].push_back({{"peer_type", nvlink_peer_name(l.peer_type)},
                                    {"peer", l.peer ? ordered_json(l.peer->str()) : ordered_json()},
                                    {"links", l.links}});
    j["warnings"] = d.warnings;
    return j;
}

ordered_json pair_json(const Topology& t, const P2pReport& r) {
    ordered_json j;
    j["initiator"] = t.devices[r.initiator].bdf.str();
    j["target"] = t.devices[r.target].bdf.str();
    j["class"] = class_name(r.path.cls);
    j["bridges"] = ordered_json::array();
    for (auto x : r.path.bridges()) j["bridges"].push_back(t.devices[x].bdf.str());
    j["via_host_bridge"] = r.path.via_host_bridge;
    j["nvlinks"] = r.nvlinks;
    j["verdict"] = verdict_name(r.verdict);
    j["reasons"] = ordered_json::array();
    for (const auto& x : r.reasons) j["reasons"].push_back({{"effect", effect_name(x.effect)}, {"text", x.text}});
    return j;
}

}  // namespace

ordered_json topology_json(const Topology& t, const std::vector<std::size_t>& pair_devices,
                           std::size_t left_out_of_pairs) {
    ordered_json j;
    j["schema"] = "bardrive-topo/1";
    j["source"] = t.source;
    j["nvlink_source"] = t.nvlink_source.empty() ? ordered_json() : ordered_json(t.nvlink_source);
    j["numa_nodes"] = t.numa_nodes;
    j["iommu_groups_known"] = t.groups_known;
    j["bars_known"] = t.bars_known;
    j["warnings"] = t.warnings;
    j["host_bridges"] = ordered_json::array();
    for (const auto& h : t.host_bridges)
        j["host_bridges"].push_back(
            {{"name", h.name},
             {"domain", h.domain},
             {"bus", h.bus},
             {"numa_node", or_null(h.numa_node)},
             {"function0", h.device ? ordered_json(t.devices[*h.device].bdf.str()) : ordered_json()}});
    j["devices"] = ordered_json::array();
    for (const auto& d : t.devices) j["devices"].push_back(device_json(t, d));
    j["pairs"] = ordered_json::array();
    for (auto a : pair_devices)
        for (auto b : pair_devices)
            if (a != b) j["pairs"].push_back(pair_json(t, judge_p2p(t, a, b)));
    j["devices_left_out_of_pairs"] = left_out_of_pairs;
    return j;
}

}  // namespace bardrive::tools
