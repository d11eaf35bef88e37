// NIC DMA into a BAR window against NIC DMA into host memory: igb NIC A sends test frames to NIC
// B, whose receive buffers sit first in host memory, then in the window (dma::PeerWindow: another
// device's BAR mapped into the same IOMMU domain). In the lab: the ivshmem BAR, QEMU's igb.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "bench/p2p/progress.hpp"
#include "bench/p2p/report.hpp"
#include "bench/p2p/sweep.hpp"
#include "bench/p2p/window.hpp"
#include "pci/bdf.hpp"

namespace bardrive::bench {

struct NicPair {
    pci::Bdf tx;  // sends
    pci::Bdf rx;  // receives into host memory or the window: the DMA being measured
};

// "TX,RX", two BDFs; throws bardrive::Error explaining the form.
NicPair parse_nics(std::string_view text);

// Frame sizes (bytes on the wire without CRC) the NIC paths measure, in place of the size sweep.
inline constexpr std::uint32_t nic_frame_sizes[] = {64, 512, 1514};

// Rows nic:nic->host and nic:nic->bar (reference: the host row at the same frame size). Each
// received frame's bytes and order are checked; lost or wrong frames fail the path. Both NICs
// (and the window) must be bound to vfio-pci; what cannot be opened makes the rows unavailable
// with the reason, and the rest of the bench still runs.
std::vector<PathResult> run_nic_paths(const std::optional<NicPair>& nics, const std::optional<WindowSpec>& window,
                                      const SweepConfig& cfg, Progress& progress);

}  // namespace bardrive::bench
