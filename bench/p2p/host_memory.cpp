#include "bench/p2p/host_memory.hpp"

#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::bench {

HostNodes::HostNodes() {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) throw Error::from_errno("hwloc_topology_init", "host topology", errno);
    topo_.reset(t, hwloc_topology_destroy);
    if (hwloc_topology_load(t) != 0) throw Error::from_errno("hwloc_topology_load", "host topology", errno);
    int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        if (o->attr && o->attr->numanode.local_memory == 0) continue;  // CPU-less/memory-less nodes hold nothing
        nodes_.push_back(static_cast<int>(o->os_index));
    }
    if (nodes_.empty()) nodes_.push_back(0);
}

HostBuffer::HostBuffer(const HostNodes& nodes, int node, std::size_t bytes)
    : topo_(nodes.topology()), size_(bytes), node_(node) {
    hwloc_topology_t t = topo_.get();
    hwloc_obj_t obj = nullptr;
    for (obj = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); obj;
         obj = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, obj))
        if (static_cast<int>(obj->os_index) == node) break;
    if (!obj) throw Error("allocate host memory", log::concat("NUMA node ", node), "no such node");
    data_ = hwloc_alloc_membind(t, bytes, obj->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (!data_ && nodes.nodes().size() == 1) {
        // One node (or a kernel without NUMA support): binding has nothing to choose, so plain
        // page-aligned memory is already on that node.
        log::debug("hwloc could not bind ", bytes, " bytes to node ", node, " (", std::strerror(errno),
                   "); one node, so allocating unbound");
        data_ = hwloc_alloc(t, bytes);
    }
    if (!data_)
        throw Error::from_errno("allocate host memory", log::concat(bytes, " bytes on NUMA node ", node), errno,
                                "free memory on that node or pick smaller --sizes");
    std::memset(data_, 0, bytes);  // first touch: the pages become resident on the bound node now
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : topo_(std::move(o.topo_)), data_(std::exchange(o.data_, nullptr)), size_(o.size_), node_(o.node_) {}

HostBuffer::~HostBuffer() {
    if (data_) hwloc_free(topo_.get(), data_, size_);
}

}  // namespace bardrive::bench
