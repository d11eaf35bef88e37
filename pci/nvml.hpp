// NVLinks of NVIDIA GPUs, read through NVML on the live machine. They travel like every other fact:
// LiveSource answers the pseudo file `nvlink_table_path` with a text table built from NVML, so a
// snapshot records it and read_topology() parses it wherever the snapshot is replayed.
// Table format (docs/topology.md, "Snapshot format"), one line each, '#' lines are comments:
//   GPU-BDF PEER-TYPE PEER-BDF|- LINKS   LINKS active NVLinks of the GPU end at that peer
//                                        (PEER-TYPE: gpu, nvswitch, cpu, unknown; '-': no address)
//   GPU-BDF none                         NVML answered for the GPU: no active NVLink
//   GPU-BDF unavailable: REASON          NVML could not tell this GPU's NVLinks
//   unavailable: REASON                  NVML could not be used at all
// Internal to pci/: not installed.
#pragma once

#include <string>

#include "topology.hpp"

namespace bardrive::pci {

inline constexpr const char* nvlink_table_path = "/nvml/nvlinks";

// Loads libnvidia-ml.so.1 at run time (never a build dependency) and writes the table above. Never
// throws: a missing library, a missing function or an NVML error becomes an "unavailable:" line.
std::string read_nvml_nvlink_table();

// Fills t.nvlinks and t.nvlink_source ("NVML") from a table; `where` names it in messages. Lines that
// do not parse become warnings; a GPU address that is not in the topology is skipped with a warning.
// An "unavailable" line becomes a note that NVLinks are unknown, and why.
void apply_nvlink_table(Topology& t, const std::string& table, const std::string& where);

}  // namespace bardrive::pci
