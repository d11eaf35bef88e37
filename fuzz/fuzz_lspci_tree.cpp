// libFuzzer target for `--lspci-tv FILE`: any text ends in a topology or a bardrive::Error, and the
// classes between its functions can be computed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "pci/p2p.hpp"
#include "pci/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace bardrive::pci;
    try {
        auto t = read_lspci_tree(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
        const std::size_t n = std::min<std::size_t>(t.devices.size(), 16);
        for (std::size_t a = 0; a < n; ++a) {
            if (t.devices[a].host_bridge >= t.host_bridges.size()) std::abort();
            for (std::size_t b = 0; b < n; ++b) find_path(t, a, b);
        }
    } catch (const bardrive::Error&) {
    }
    return 0;
}
