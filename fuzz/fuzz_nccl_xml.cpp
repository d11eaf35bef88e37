// libFuzzer target for `--nccl-xml FILE`: any text ends in a topology or a bardrive::Error (libxml2
// parses, the reader maps elements), NVLink indices stay inside the devices, and classes, NV<n> and
// verdicts compute.
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
        auto t = parse_nccl_xml(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
        for (const auto& l : t.nvlinks)
            if (l.gpu >= t.devices.size()) std::abort();
        const std::size_t n = std::min<std::size_t>(t.devices.size(), 16);
        for (std::size_t a = 0; a < n; ++a) {
            std::size_t steps = 0;
            for (auto p = t.devices[a].parent; p; p = t.devices[*p].parent)
                if (++steps > t.devices.size()) std::abort();
            if (t.devices[a].host_bridge >= t.host_bridges.size()) std::abort();
            for (std::size_t b = 0; b < n; ++b) judge_p2p(t, a, b);
        }
    } catch (const bardrive::Error&) {
    }
    return 0;
}
