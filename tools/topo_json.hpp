// `bardrive topo --json`: the topology model and its pairs' verdicts as JSON (schema bardrive-topo/1,
// docs/topology.md), built with nlohmann-json so that any string from the inputs stays valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pci/topology.hpp"

namespace bardrive::tools {

// The document of docs/topology.md, keys in the schema's order. `pairs` holds every ordered pair of
// distinct pair_devices (indices into t.devices), in their order, each with its class and verdict.
nlohmann::ordered_json topology_json(const pci::Topology& t, const std::vector<std::size_t>& pair_devices,
                                     std::size_t left_out_of_pairs = 0);

// The text of a JSON document as bardrive writes it: two-space indent, UTF-8 left as it is, each byte
// that is not valid UTF-8 replaced by U+FFFD (names come from pci.ids, sysfs, hwloc XML and pasted
// text, none of which promises UTF-8), so that writing never throws. Ends with a newline.
std::string json_text(const nlohmann::ordered_json& j);

// IDs as the tree, `show` and JSON spell them: "10de", and classes as "0x030200".
std::string hex4(unsigned v);
std::string hex_class(std::uint32_t c);

}  // namespace bardrive::tools
