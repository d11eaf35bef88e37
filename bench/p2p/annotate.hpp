// Puts each path on the map: its topology class from pci/ (PIX/PXB/PHB/NODE/SYS between devices,
// NUMA local/remote between host memory and a device) and the PCIe link's theoretical rate, the
// reference every PCIe path is shown against.
#pragma once

#include "bench/p2p/report.hpp"
#include "pci/topology.hpp"

namespace bardrive::bench {

// One direction's data rate of a link at its current speed and width, in GB/s, after the line
// encoding (PCIe Base Spec 6.0, 4.2: 8b/10b to 5 GT/s, 128b/130b at 8-32 GT/s; at 64 GT/s Flit
// mode carries 236 payload bytes in 256, 4.2.3.1) and before packet (TLP/DLLP) overhead. 0 when
// the link is down or unknown.
double link_gbps(const pci::LinkInfo& link);

// Fills topology and link_gbps of every path whose endpoints name PCI devices found in `t`
// (bidirectional paths get twice the one-way rate: PCIe is full duplex). The slowest link on the
// way bounds the path. A path measured faster than its PCIe route keeps no link rate and says
// so in its note (NVLink, which PCI cannot see, or an emulated link). Paths with endpoints not in `t` keep what they
// had.
void annotate(Report& r, const pci::Topology& t);

}  // namespace bardrive::bench
