// Host memory placed on a chosen NUMA node (through hwloc), for the "local" and "remote" host
// endpoints of the GPU paths.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

struct hwloc_topology;

namespace bardrive::bench {

class HostNodes {
public:
    HostNodes();  // loads the machine's topology; throws bardrive::Error when hwloc cannot
    // The OS indexes of the NUMA nodes that have memory, ascending (one entry on a single-node machine).
    const std::vector<int>& nodes() const { return nodes_; }
    std::shared_ptr<hwloc_topology> topology() const { return topo_; }

private:
    std::shared_ptr<hwloc_topology> topo_;
    std::vector<int> nodes_;
};

// Page-aligned memory bound to one NUMA node and touched, so every page is resident there.
// Move-only; freed on destruction.
class HostBuffer {
public:
    HostBuffer(const HostNodes& nodes, int node, std::size_t bytes);  // throws bardrive::Error
    HostBuffer(HostBuffer&& o) noexcept;
    HostBuffer& operator=(HostBuffer&&) = delete;
    HostBuffer(const HostBuffer&) = delete;
    ~HostBuffer();

    void* data() const { return data_; }
    std::size_t size() const { return size_; }
    int node() const { return node_; }

private:
    std::shared_ptr<hwloc_topology> topo_;
    void* data_ = nullptr;
    std::size_t size_ = 0;
    int node_ = -1;
};

}  // namespace bardrive::bench
