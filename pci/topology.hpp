// pci::Topology: what is on the bus. Host bridges, the bridges and ports below them, endpoints and
// SR-IOV VFs, each with IDs and names, BARs, link, capabilities, driver, IOMMU group, NUMA node and
// OS names. Built from a Source (live sysfs, a copied tree or a snapshot), an hwloc XML or an NCCL XML file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bdf.hpp"
#include "config.hpp"
#include "source.hpp"

namespace bardrive::pci {

// Where a function sits in the tree. From the PCI Express capability when it was readable,
// otherwise inferred from the tree (a bridge under a host bridge is a root port, and so on).
enum class Role { root_port, switch_upstream, switch_downstream, bridge, endpoint };
const char* role_name(Role r);

struct Bar {
    unsigned index = 0;  // 0..5; 6 is the expansion ROM
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    bool io = false;
    bool is64 = false;
    bool prefetchable = false;
    std::vector<std::uint64_t> resizable_sizes;  // from the Resizable BAR capability, when present
};

struct Device {
    Bdf bdf;
    std::uint16_t vendor_id = 0xffff, device_id = 0xffff;
    std::uint16_t subsystem_vendor_id = 0, subsystem_id = 0;
    std::uint32_t class_code = 0;  // base << 16 | sub << 8 | prog-if
    std::string vendor_name, device_name, class_name;
    std::string subsystem_name;  // empty when pci.ids does not know the subsystem
    Role role = Role::endpoint;
    bool is_bridge = false;
    std::optional<PortType> port_type;
    std::string driver;      // empty when none is bound
    int iommu_group = -1;    // -1: none (no IOMMU) or unknown
    int numa_node = -1;      // -1: unknown
    std::string local_cpus;  // cpulist form, "0-15"
    std::vector<Bar> bars;
    std::optional<LinkInfo> link;
    std::optional<AcsInfo> acs;
    std::optional<SriovInfo> sriov;
    std::optional<Bdf> physfn;  // set for SR-IOV virtual functions
    bool ats = false, pri = false, pasid = false, aer = false;
    std::size_t config_bytes = 0;       // how much config space could be read
    bool ext_config = false;            // extended config space (capabilities beyond 0xff) was readable
    bool caps_unread = false;           // it has a capability list that could not be read (not root)
    std::vector<std::string> os_names;  // "net:eth0", "nvme:nvme0", "block:nvme0n1", "drm:card0", "nvidia:0", "cuda:0"
    std::vector<std::string> warnings;

    std::optional<std::size_t> parent;  // index of the upstream bridge; none when on a root bus
    std::size_t host_bridge = 0;        // index into Topology::host_bridges
    std::vector<std::size_t> children;

    bool is_vf() const { return physfn.has_value(); }
    bool is_nvidia_gpu() const { return vendor_id == 0x10de && base_class() == 0x03; }
    std::uint8_t base_class() const { return static_cast<std::uint8_t>(class_code >> 16); }
    std::uint16_t class_sub() const { return static_cast<std::uint16_t>(class_code >> 8); }
    // Largest memory BAR (a peer's DMA window); nullptr when the device has none.
    const Bar* largest_memory_bar() const;
};

struct HostBridge {
    std::string name;  // "pci0000:00", the sysfs name
    std::uint32_t domain = 0;
    std::uint8_t bus = 0;
    int numa_node = -1;
    std::optional<std::size_t> device;  // function 00.0 on its root bus: what Linux's p2pdma allowlist checks
    std::vector<std::size_t> children;  // devices on the root bus
};

// NVLink ports of one GPU that end at the same peer, as NVML or an NCCL topology file reports them.
struct NvLink {
    enum class Peer { gpu, nvswitch, cpu, unknown };  // cpu: an IBM POWER NPU
    std::size_t gpu = 0;                              // index into Topology::devices
    Peer peer_type = Peer::unknown;
    std::optional<Bdf> peer;  // the peer's PCI address where reported (an NVSwitch's may not be in devices)
    unsigned links = 0;       // how many of the GPU's links end there
};
const char* nvlink_peer_name(NvLink::Peer p);  // "gpu", "nvswitch", "cpu", "unknown"

struct Topology {
    std::string source;  // "/sys", "snapshot FILE", "hwloc XML FILE", "NCCL XML FILE"
    std::vector<HostBridge> host_bridges;
    std::vector<Device> devices;  // sorted by BDF
    int numa_nodes = 0;           // 0 when unknown
    bool groups_known = true;     // false for inputs without IOMMU group information (hwloc XML)
    bool bars_known = true;       // false for inputs without BARs (hwloc XML)
    std::string cpu_vendor;       // "GenuineIntel", "AuthenticAMD"; empty when unknown
    int cpu_family = -1;
    std::vector<std::string> warnings;  // what could not be read, and where
    std::vector<NvLink> nvlinks;        // by GPU; empty when none are known
    std::string nvlink_source;          // "NVML", "NCCL XML FILE"; empty: NVLinks unknown for this input

    std::optional<std::size_t> find(const Bdf& bdf) const;
    std::vector<std::size_t> group_members(int group) const;
};

// Reads the topology from sysfs-shaped input. Missing or unreadable files become warnings that name
// the file; only a source without /sys/bus/pci/devices is an error.
Topology read_topology(Source& src);

// Reads `lstopo --of xml` output through hwloc. Throws bardrive::Error naming the file when hwloc
// cannot load it.
Topology read_hwloc_xml(const std::string& file);

// Reads an NCCL topology file (NCCL_TOPO_DUMP_FILE output or an NCCL_TOPO_FILE, `<system version="1">`)
// through libxml2: each <cpu> becomes a host bridge on its NUMA node, nested <pci> elements the tree,
// <gpu>/<net> children OS names ("cuda:N", "rdma:NAME"), <nvlink> children Topology::nvlinks. Throws
// bardrive::Error naming the file (and line) when it is not well-formed XML or its root is not <system>;
// odd elements and attributes become warnings.
Topology read_nccl_xml(const std::string& file);
// The same over text in memory; `name` is used in messages.
Topology parse_nccl_xml(const std::string& text, const std::string& name);

// Reads `lspci -tv` output (a tree from a bug report): shape and name text only; `name` is used in
// messages. Throws bardrive::Error when the text holds no PCI function.
Topology read_lspci_tree(const std::string& text, const std::string& name);

// Finishes a topology a reader assembled: sorts devices, resolves parents[i] (the upstream bridge of
// devices[i], by address) into indices, fills children, host bridge NUMA nodes and roles. Devices on a
// root bus name their host bridge by index. Readers and hand-built test topologies both use it.
void assemble(Topology& t, std::vector<std::optional<Bdf>> parents);

// Fills vendor/device/class names from the pci.ids database through libpci; ids it lacks stay numeric.
// Cached per machine (names.hpp: where, how it is invalidated, BARDRIVE_NO_NAME_CACHE).
void attach_names(Topology& topo);

// Classifies a device for filters and the default matrix: one of device_kinds.
std::string device_kind(const Device& d);
inline constexpr const char* device_kinds[] = {"gpu",   "nic",    "nvme",        "storage",
                                               "accel", "bridge", "host-bridge", "other"};

}  // namespace bardrive::pci
