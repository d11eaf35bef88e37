// Peer-to-peer between two functions: the PCIe path, its class with nvidia-smi topo -m's meanings,
// NVLinks between GPUs, and a verdict on P2P DMA through VFIO with the reasons behind it. Pure logic
// over a Topology.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topology.hpp"

namespace bardrive::pci {

// X: same device. PIX: at most one PCIe bridge (one switch, or one root port's bus). PXB: several
// bridges without crossing a host bridge. PHB: through a host bridge. NODE: between host bridges of
// one NUMA node. SYS: across the SMP interconnect between NUMA nodes.
enum class PathClass { X, PIX, PXB, PHB, NODE, SYS };
const char* class_name(PathClass c);

struct Path {
    PathClass cls = PathClass::X;
    std::vector<std::size_t> up;               // bridges from a (exclusive) up to the common bridge, inclusive
    std::vector<std::size_t> down;             // bridges from below the common bridge down to b (exclusive)
    bool via_host_bridge = false;              // no common bridge: the path goes through the root complex
    std::size_t host_a = 0, host_b = 0;        // host bridge indices of a and b
    std::vector<std::size_t> bridges() const;  // up then down
};

Path find_path(const Topology& t, std::size_t a, std::size_t b);

enum class Verdict { supported, platform_dependent, unsupported };
const char* verdict_name(Verdict v);  // "supported", "platform-dependent", "unsupported"

struct Reason {
    enum class Effect { ok, note, action, platform, block };
    Effect effect;
    std::string text;
};
const char* effect_name(Reason::Effect e);  // "ok", "note", "action", "platform", "block"

// NVLinks between two GPUs as `nvidia-smi topo -m` counts its NV<n>: the links that join them
// directly, or, for two GPUs that both reach NVSwitches, the links each has to the switches (the fewer
// of the two). 0 when none are known (Topology::nvlinks empty for this input) or there are none.
unsigned nvlinks_between(const Topology& t, std::size_t a, std::size_t b);

struct P2pReport {
    std::size_t initiator = 0, target = 0;  // the initiator DMAs into the target's BAR
    Path path;
    unsigned nvlinks = 0;  // nvlinks_between(initiator, target)
    Verdict verdict = Verdict::supported;
    std::vector<Reason> reasons;
};

// Judges P2P DMA from `initiator` into `target`'s largest memory BAR when both are owned through
// VFIO. Reasons cover the route (switch vs root complex, Linux p2pdma's host bridge allowlist), ACS
// redirect and egress control on the path, IOMMU groups (members and their drivers) and the BAR window.
// NVLinks between two GPUs add a note; they do not change the PCIe verdict.
P2pReport judge_p2p(const Topology& t, std::size_t initiator, std::size_t target);

// Whether Linux's p2pdma (drivers/pci/p2pdma.c) allows traffic through this host bridge, and whether
// only within the same host bridge. Empty reason when not on the list.
struct HostBridgeAllowance {
    bool allowed = false;
    bool same_host_bridge_only = false;
    std::string why;
};
HostBridgeAllowance host_bridge_allowance(const Topology& t, std::size_t host_bridge);

// Endpoints worth a matrix by default: GPUs, NICs, NVMe, accelerators and devices with a memory BAR
// of at least 64 MiB. `all` takes every endpoint.
std::vector<std::size_t> p2p_candidates(const Topology& t, bool all);

// Every initiator/target pair judged, best first: supported before platform-dependent before
// unsupported, then the shorter path class (PIX before PXB ... SYS), then the order given. Answers
// "which NIC should DMA into this GPU's BAR". Pairs of a device with itself are left out.
std::vector<P2pReport> rank_p2p_pairs(const Topology& t, const std::vector<std::size_t>& initiators,
                                      const std::vector<std::size_t>& targets);

}  // namespace bardrive::pci
