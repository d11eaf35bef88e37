// Reads a topology exported with `lstopo --of xml` (hwloc 2.x XML) through hwloc itself.
#include <hwloc.h>

#include <cerrno>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <memory>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/log.hpp"
#include "pci/topology.hpp"
#include "pci/xml.hpp"

namespace bardrive::pci {

namespace {

struct HwlocTopology {
    hwloc_topology_t t = nullptr;
    ~HwlocTopology() {
        if (t) hwloc_topology_destroy(t);
    }
};

// NUMA node and CPUs of the nearest non-I/O ancestor (the package or node a host bridge hangs from).
void locality(hwloc_topology_t t, hwloc_obj_t obj, int& numa, std::string& cpus) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
    if (!anc) return;
    if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) numa = hwloc_bitmap_first(anc->nodeset);
    if (anc->cpuset && !hwloc_bitmap_iszero(anc->cpuset)) {
        char* s = nullptr;
        if (hwloc_bitmap_list_asprintf(&s, anc->cpuset) >= 0 && s) {
            cpus = s;
            std::free(s);
        }
    }
}

const char* osdev_prefix(hwloc_obj_osdev_type_t type) {
    switch (type) {
        case HWLOC_OBJ_OSDEV_BLOCK:
            return "block:";
        case HWLOC_OBJ_OSDEV_GPU:
            return "gpu:";
        case HWLOC_OBJ_OSDEV_NETWORK:
            return "net:";
        case HWLOC_OBJ_OSDEV_OPENFABRICS:
            return "rdma:";
        case HWLOC_OBJ_OSDEV_DMA:
            return "dma:";
        case HWLOC_OBJ_OSDEV_COPROC:
            return "coproc:";
    }
    return "os:";
}

}  // namespace

Topology read_hwloc_xml(const std::string& file) {
    // hwloc's own XML parser, not its libxml2 backend: Debian's hwloc 2.9 dies (SIGSEGV) in the libxml2
    // backend on any internal DTD subset, even `<!DOCTYPE topology [ ]>`, and the file may be anyone's. Its own
    // parser reads the same files (the DGX-2 and Minsky fixtures) and refuses nothing valid; it was also the
    // faster of the two there. HWLOC_LIBXML, not HWLOC_LIBXML_IMPORT: it overrides the other two, so a user's
    // HWLOC_LIBXML=1 cannot bring the crash back. hwloc reads it once per process, at its first XML import.
    ::setenv("HWLOC_LIBXML", "0", 1);
    //
    // hwloc answers any file it cannot read with EINVAL ("Invalid argument"), so the file is read and parsed here
    // first (bounded, non-blocking; libxml2 with nothing loaded from outside) to name what is wrong, and an NCCL
    // file is pointed to --nccl-xml. hwloc then reads the same bytes.
    const std::string op = "read hwloc XML", fix = "give a file written by 'lstopo --of xml FILE'";
    const auto bytes = file::read_bytes(file, xml::max_file_bytes + 1);
    const std::string text(bytes.begin(), bytes.end());
    {
        const xml::Doc doc = xml::parse(text, file, op, fix);
        const std::string root = xml::name_of(xmlDocGetRootElement(doc.get()));
        if (root == "system")
            throw Error(op, file, "root element is <system>: an NCCL topology file", "read it with --nccl-xml");
        if (root != "topology")
            throw Error(op, file, "root element is <" + log::bounded(root) + ">, not hwloc's <topology>", fix);
    }
    HwlocTopology h;
    if (hwloc_topology_init(&h.t) < 0) throw Error::from_errno("initialise hwloc", file, errno);
    hwloc_topology_set_io_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_set_xmlbuffer(h.t, text.c_str(), static_cast<int>(text.size() + 1)) < 0 ||
        hwloc_topology_load(h.t) < 0)
        throw Error(op, file, "well-formed XML, but hwloc could not read a topology from it",
                    "HWLOC_XML_VERBOSE=1 says why; " + fix);

    Topology topo;
    topo.source = "hwloc XML " + file;
    topo.groups_known = false;
    topo.bars_known = false;
    topo.numa_nodes = hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_NUMANODE);
    if (hwloc_obj_t pkg = hwloc_get_obj_by_type(h.t, HWLOC_OBJ_PACKAGE, 0)) {
        if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUVendor")) topo.cpu_vendor = v;
        if (const char* f = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber")) topo.cpu_family = std::atoi(f);
    }

    std::map<hwloc_obj_t, std::size_t> host_index;
    std::vector<std::optional<Bdf>> parents;
    for (hwloc_obj_t o = hwloc_get_next_bridge(h.t, nullptr); o; o = hwloc_get_next_bridge(h.t, o)) {
        if (o->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST) continue;
        HostBridge hb;
        hb.domain = o->attr->bridge.downstream.pci.domain;
        hb.bus = o->attr->bridge.downstream.pci.secondary_bus;
        hb.name = log::concat("pci", std::hex, std::setfill('0'), std::setw(4), hb.domain, ':', std::setw(2),
                              static_cast<unsigned>(hb.bus));
        std::string cpus;
        locality(h.t, o, hb.numa_node, cpus);
        host_index[o] = topo.host_bridges.size();
        topo.host_bridges.push_back(std::move(hb));
    }

    // PCI functions: endpoints (PCIDev) and PCI-to-PCI bridges (Bridge with a PCI upstream side).
    auto add = [&](hwloc_obj_t o, const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pa, bool bridge) {
        Device d;
        d.bdf = Bdf{pa.domain, pa.bus, pa.dev, pa.func};
        d.vendor_id = pa.vendor_id;
        d.device_id = pa.device_id;
        d.subsystem_vendor_id = pa.subvendor_id;
        d.subsystem_id = pa.subdevice_id;
        d.class_code = static_cast<std::uint32_t>(pa.class_id) << 8;
        d.is_bridge = bridge;
        locality(h.t, o, d.numa_node, d.local_cpus);
        for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
            if (c->type == HWLOC_OBJ_OS_DEVICE && c->name)
                d.os_names.push_back(std::string(osdev_prefix(c->attr->osdev.type)) + c->name);
        std::optional<Bdf> parent;
        hwloc_obj_t p = o->parent;
        if (p && p->type == HWLOC_OBJ_BRIDGE && p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
            const auto& u = p->attr->bridge.upstream.pci;
            parent = Bdf{u.domain, u.bus, u.dev, u.func};
        } else if (p && host_index.count(p)) {
            d.host_bridge = host_index[p];
        } else {
            // No host bridge object above it (hwloc may omit it): one per root bus, by address.
            std::string name = log::concat("pci", std::hex, std::setfill('0'), std::setw(4), pa.domain, ':',
                                           std::setw(2), static_cast<unsigned>(pa.bus));
            std::optional<std::size_t> found;
            for (std::size_t k = 0; k < topo.host_bridges.size(); ++k)
                if (topo.host_bridges[k].name == name) found = k;
            if (!found) {
                found = topo.host_bridges.size();
                topo.host_bridges.push_back(HostBridge{name, pa.domain, pa.bus, d.numa_node, std::nullopt, {}});
            }
            d.host_bridge = *found;
        }
        topo.devices.push_back(std::move(d));
        parents.push_back(parent);
    };
    for (hwloc_obj_t o = hwloc_get_next_pcidev(h.t, nullptr); o; o = hwloc_get_next_pcidev(h.t, o))
        add(o, o->attr->pcidev, false);
    for (hwloc_obj_t o = hwloc_get_next_bridge(h.t, nullptr); o; o = hwloc_get_next_bridge(h.t, o))
        if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) add(o, o->attr->bridge.upstream.pci, true);
    if (topo.devices.empty())
        topo.warnings.push_back(file + ": no PCI devices (was it exported with I/O objects, 'lstopo --of xml'?)");
    topo.warnings.push_back(
        "hwloc XML carries no config space, BARs or IOMMU groups: link, ACS, BARs and groups are unknown");
    assemble(topo, std::move(parents));
    return topo;
}

}  // namespace bardrive::pci
