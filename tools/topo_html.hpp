// bardrive topo --html: one self-contained page (tools/topo_page.html, no network) that draws the topology
// and shows the P2P verdict of any two devices the user picks, from the `topo --json` document.
#pragma once

#include <string>

namespace bardrive::tools {

// The page with json_text (a bardrive-topo/1 document, docs/topology.md) embedded in it.
std::string topology_html(const std::string& json_text);

}  // namespace bardrive::tools
