// libFuzzer target for everything behind `--sysfs FILE`: the snapshot parser, the topology reader
// over whatever the snapshot claims, and the path classes and verdicts between its functions. Any
// input must end in a topology or a bardrive::Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "pci/p2p.hpp"
#include "pci/source.hpp"
#include "pci/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace bardrive::pci;
    try {
        SnapshotSource src(parse_snapshot(std::string(reinterpret_cast<const char*>(data), size), "fuzz"), "fuzz");
        auto t = read_topology(src);
        const std::size_t n = std::min<std::size_t>(t.devices.size(), 16);
        for (std::size_t a = 0; a < n; ++a) {
            std::size_t steps = 0;
            for (auto p = t.devices[a].parent; p; p = t.devices[*p].parent)
                if (++steps > t.devices.size()) std::abort();  // a parent loop survived
            if (t.devices[a].host_bridge >= t.host_bridges.size()) std::abort();
            for (std::size_t b = 0; b < n; ++b) judge_p2p(t, a, b);
        }
    } catch (const bardrive::Error&) {
    }
    return 0;
}
