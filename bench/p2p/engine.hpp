// `bardrive bench`'s engine: finds what the machine has (GPUs, NUMA nodes, a BAR window), runs
// every path it can, lists the others with the reason, and returns one Report.
#pragma once

#include <optional>
#include <string>

#include "bench/p2p/nic.hpp"
#include "bench/p2p/report.hpp"
#include "bench/p2p/sweep.hpp"
#include "bench/p2p/window.hpp"

namespace bardrive::bench {

struct Options {
    SweepConfig sweep;
    std::optional<WindowSpec> window;
    std::uint64_t window_max = 16ull << 20;  // largest size swept over a BAR window
    std::optional<NicPair> nics;             // igb NICs for the NIC paths
    bool progress = true;                    // a progress bar, when stdout is a terminal
    std::string command;                     // recorded in the report
};

// Throws bardrive::Error when set-up fails for a reason the user must fix (memory for the sweep,
// a window that cannot be mapped); paths the machine cannot do are rows with a reason instead.
Report run(const Options& opt);

}  // namespace bardrive::bench
