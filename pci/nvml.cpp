#include "pci/nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/log.hpp"

namespace bardrive::pci {

namespace {

// The few NVML types and entry points used here, declared as NVIDIA's nvml.h (NVML API version 13,
// as in NVIDIA/go-nvml pkg/nvml/nvml.h) declares them, so that NVML is never a build dependency.
namespace nvml {
using Return = int;                           // nvmlReturn_t
constexpr Return success = 0;                 // NVML_SUCCESS
constexpr Return error_invalid_argument = 2;  // NVML_ERROR_INVALID_ARGUMENT: e.g. a link beyond the GPU's
constexpr Return error_not_supported = 3;     // NVML_ERROR_NOT_SUPPORTED: e.g. a GPU without NVLink
using Device = struct nvmlDevice_st*;         // nvmlDevice_t
constexpr unsigned max_links = 36;            // NVML_NVLINK_MAX_LINKS (older drivers: 6, 12, 18)
constexpr unsigned feature_enabled = 1;       // NVML_FEATURE_ENABLED of nvmlEnableState_t
// nvmlIntNvLinkDeviceType_t
constexpr int type_gpu = 0x00, type_ibmnpu = 0x01, type_switch = 0x02;

// nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2.
struct PciInfo {
    char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: "00000000:1A:00.0"
};

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using GetCountFn = Return (*)(unsigned*);
using GetHandleByIndexFn = Return (*)(unsigned, Device*);
using GetHandleByPciBusIdFn = Return (*)(const char*, Device*);
using GetPciInfoFn = Return (*)(Device, PciInfo*);
using GetNvLinkStateFn = Return (*)(Device, unsigned, unsigned*);
using GetNvLinkRemotePciInfoFn = Return (*)(Device, unsigned, PciInfo*);
using GetNvLinkRemoteDeviceTypeFn = Return (*)(Device, unsigned, int*);
}  // namespace nvml

struct NvmlApi {
    nvml::InitFn init = nullptr;
    nvml::ShutdownFn shutdown = nullptr;
    nvml::ErrorStringFn error_string = nullptr;
    nvml::GetCountFn count = nullptr;
    nvml::GetHandleByIndexFn handle_by_index = nullptr;
    nvml::GetHandleByPciBusIdFn handle_by_bus_id = nullptr;
    nvml::GetPciInfoFn pci_info = nullptr;
    nvml::GetNvLinkStateFn link_state = nullptr;
    nvml::GetNvLinkRemotePciInfoFn remote_pci = nullptr;
    nvml::GetNvLinkRemoteDeviceTypeFn remote_type = nullptr;  // absent before driver 450: then by address

    std::string error(nvml::Return rc) const {
        const char* s = error_string ? error_string(rc) : nullptr;
        return log::concat(s ? s : "NVML error", " (", rc, ")");
    }
};

// One line, so the table stays one record per line.
std::string one_line(std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    std::replace(s.begin(), s.end(), '\r', ' ');
    return s;
}

std::string bus_id(const nvml::PciInfo& p) { return one_line(std::string(p.busId, strnlen(p.busId, sizeof p.busId))); }

// No address for an all-zero one: 0000:00:00.0 is a host bridge, never an NVLink peer (a VM that
// hides the NVSwitches may report it so).
std::optional<Bdf> bdf_of(const nvml::PciInfo& p) {
    auto b = Bdf::try_parse(bus_id(p));
    if (b && *b == Bdf{}) return std::nullopt;
    return b;
}

// The table for every GPU NVML enumerates, with NVML initialised.
std::string table_of(const NvmlApi& api) {
    unsigned count = 0;
    if (auto rc = api.count(&count); rc != nvml::success)
        return "unavailable: nvmlDeviceGetCount_v2: " + api.error(rc) + "\n";
    std::ostringstream os;
    os << "# NVLinks from NVML: GPU PEER-TYPE PEER LINKS\n";
    for (unsigned i = 0; i < count; ++i) {
        nvml::Device dev = nullptr;
        nvml::PciInfo pci{};
        if (auto rc = api.handle_by_index(i, &dev); rc != nvml::success) {
            os << "unavailable: GPU " << i << " of " << count << ": " << api.error(rc) << '\n';
            continue;
        }
        if (auto rc = api.pci_info(dev, &pci); rc != nvml::success) {
            os << "unavailable: GPU " << i << " of " << count << ": nvmlDeviceGetPciInfo_v3: " << api.error(rc) << '\n';
            continue;
        }
        auto gpu = bdf_of(pci);
        if (!gpu) {
            os << "unavailable: GPU " << i << ": NVML gave the address '" << bus_id(pci) << "'\n";
            continue;
        }
        // Active links by peer: type name, peer address ("-" when NVML gives none).
        std::map<std::pair<std::string, std::string>, unsigned> peers;
        std::string failure;
        for (unsigned link = 0; link < nvml::max_links && failure.empty(); ++link) {
            unsigned state = 0;
            auto rc = api.link_state(dev, link, &state);
            if (rc == nvml::error_not_supported) break;        // no NVLink on this GPU
            if (rc == nvml::error_invalid_argument) continue;  // beyond this GPU's links
            if (rc != nvml::success) {
                failure = log::concat("nvmlDeviceGetNvLinkState link ", link, ": ", api.error(rc));
                break;
            }
            if (state != nvml::feature_enabled) continue;
            std::string peer = "-";
            nvml::PciInfo remote{};
            if (api.remote_pci(dev, link, &remote) == nvml::success)
                if (auto b = bdf_of(remote)) peer = b->str();
            std::string type = "unknown";
            int t = -1;
            if (api.remote_type && api.remote_type(dev, link, &t) == nvml::success) {
                type = t == nvml::type_gpu      ? "gpu"
                       : t == nvml::type_switch ? "nvswitch"
                       : t == nvml::type_ibmnpu ? "cpu"
                                                : "unknown";
            } else if (peer != "-") {
                // Older drivers: a peer NVML knows as a device is a GPU.
                nvml::Device other = nullptr;
                if (api.handle_by_bus_id(peer.c_str(), &other) == nvml::success) type = "gpu";
            }
            ++peers[{type, peer}];
        }
        if (!failure.empty()) {
            os << gpu->str() << " unavailable: " << one_line(failure) << '\n';
            continue;
        }
        if (peers.empty()) os << gpu->str() << " none\n";
        for (const auto& [key, n] : peers)
            os << gpu->str() << ' ' << key.first << ' ' << key.second << ' ' << n << '\n';
    }
    return os.str();
}

template <class Fn>
bool load_symbol(void* lib, const char* name, Fn& fn) {
    fn = reinterpret_cast<Fn>(::dlsym(lib, name));
    return fn != nullptr;
}

std::string nvml_table() {
    // Never closed: NVML may leave threads and handlers behind after nvmlShutdown.
    ::dlerror();
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* e = ::dlerror();
        return "unavailable: NVML not loaded: " + one_line(e ? e : "libnvidia-ml.so.1 not found") +
               " (it comes with the NVIDIA driver)\n";
    }
    NvmlApi api;
    const char* missing = nullptr;
    if (!load_symbol(lib, "nvmlInit_v2", api.init)) missing = "nvmlInit_v2";
    if (!load_symbol(lib, "nvmlShutdown", api.shutdown)) missing = "nvmlShutdown";
    if (!load_symbol(lib, "nvmlErrorString", api.error_string)) missing = "nvmlErrorString";
    if (!load_symbol(lib, "nvmlDeviceGetCount_v2", api.count)) missing = "nvmlDeviceGetCount_v2";
    if (!load_symbol(lib, "nvmlDeviceGetHandleByIndex_v2", api.handle_by_index))
        missing = "nvmlDeviceGetHandleByIndex_v2";
    if (!load_symbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", api.handle_by_bus_id))
        missing = "nvmlDeviceGetHandleByPciBusId_v2";
    if (!load_symbol(lib, "nvmlDeviceGetPciInfo_v3", api.pci_info)) missing = "nvmlDeviceGetPciInfo_v3";
    if (!load_symbol(lib, "nvmlDeviceGetNvLinkState", api.link_state)) missing = "nvmlDeviceGetNvLinkState";
    if (!load_symbol(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.remote_pci))
        missing = "nvmlDeviceGetNvLinkRemotePciInfo_v2";
    load_symbol(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", api.remote_type);
    if (missing) return log::concat("unavailable: libnvidia-ml.so.1 lacks ", missing, " (driver too old)\n");
    if (auto rc = api.init(); rc != nvml::success) return "unavailable: nvmlInit_v2: " + one_line(api.error(rc)) + "\n";
    std::string table = table_of(api);
    api.shutdown();
    return table;
}

}  // namespace

// Trailing white space removed, as Source::text() promises.
std::string read_nvml_nvlink_table() {
    std::string s = nvml_table();
    s.erase(s.find_last_not_of(" \t\r\n") + 1);
    return s;
}

void apply_nvlink_table(Topology& t, const std::string& table, const std::string& where) {
    std::istringstream is(table);
    std::set<std::size_t> answered;  // GPUs the table speaks of
    std::map<std::tuple<std::size_t, NvLink::Peer, std::optional<Bdf>>, unsigned> links;
    bool any = false;
    std::size_t lineno = 0;
    auto bad = [&](const std::string& line, const std::string& why) {
        t.warnings.push_back(log::concat(where, " line ", lineno, ": ", why, ": '", line, "'; ignored"));
    };
    for (std::string line; std::getline(is, line);) {
        ++lineno;
        auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        std::istringstream ls(line);
        std::string gpu_text, second;
        ls >> gpu_text;
        if (gpu_text == "unavailable:") {
            std::string why = line.substr(line.find("unavailable:") + 12);
            why.erase(0, why.find_first_not_of(" \t"));
            t.warnings.push_back("NVLinks unknown: " + why);
            continue;
        }
        auto gpu_bdf = Bdf::try_parse(gpu_text);
        if (!gpu_bdf) {
            bad(line, "not a GPU address");
            continue;
        }
        auto gpu = t.find(*gpu_bdf);
        if (!gpu) {
            bad(line, "GPU " + gpu_bdf->str() + " is not in the topology");
            continue;
        }
        ls >> second;
        if (second == "none") {
            answered.insert(*gpu);
            any = true;
            continue;
        }
        if (second == "unavailable:") {
            std::string why = line.substr(line.find("unavailable:") + 12);
            why.erase(0, why.find_first_not_of(" \t"));
            t.warnings.push_back("NVLinks of " + gpu_bdf->str() + " unknown: " + why);
            answered.insert(*gpu);
            continue;
        }
        std::string peer_text, count_text, extra;
        ls >> peer_text >> count_text >> extra;
        std::optional<NvLink::Peer> type;
        for (auto p : {NvLink::Peer::gpu, NvLink::Peer::nvswitch, NvLink::Peer::cpu, NvLink::Peer::unknown})
            if (second == nvlink_peer_name(p)) type = p;
        if (!type) {
            bad(line, "peer type '" + second + "' is none of gpu, nvswitch, cpu, unknown");
            continue;
        }
        std::optional<Bdf> peer;
        if (peer_text != "-") {
            peer = Bdf::try_parse(peer_text);
            if (!peer) {
                bad(line, "peer '" + peer_text + "' is not a PCI address or '-'");
                continue;
            }
        }
        // A GPU has at most NVML_NVLINK_MAX_LINKS links; a larger count is a damaged table.
        if (count_text.empty() || count_text.size() > 2 ||
            count_text.find_first_not_of("0123456789") != std::string::npos || std::stoul(count_text) == 0 ||
            std::stoul(count_text) > 64 || !extra.empty()) {
            bad(line, "expected GPU PEER-TYPE PEER LINKS with LINKS 1..64");
            continue;
        }
        if (*type == NvLink::Peer::gpu && peer && !t.find(*peer))
            t.warnings.push_back(log::concat("NVLink peer ", peer->str(), " of GPU ", gpu_bdf->str(),
                                             " is not in the topology (", where, ")"));
        links[{*gpu, *type, peer}] += static_cast<unsigned>(std::stoul(count_text));
        answered.insert(*gpu);
        any = true;
    }
    for (const auto& [key, n] : links) {
        const auto& [gpu, type, peer] = key;
        t.nvlinks.push_back(NvLink{gpu, type, peer, n});
    }
    if (!any) return;
    t.nvlink_source = "NVML";
    // NVML sees only GPUs its driver owns: one bound to vfio-pci has NVLinks nobody reported.
    std::string unseen;
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
        const auto& d = t.devices[i];
        if (d.is_nvidia_gpu() && !answered.count(i))
            unseen += log::concat(unseen.empty() ? "" : ", ", d.bdf.str(), " (driver ",
                                  d.driver.empty() ? "none" : d.driver, ")");
    }
    if (!unseen.empty()) t.warnings.push_back("NVLinks unknown for GPUs NVML does not report: " + unseen);
}

}  // namespace bardrive::pci
