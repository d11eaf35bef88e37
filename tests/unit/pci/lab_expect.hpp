// What each lab preset's topology must look like (lab/lab presets describes the machines). Shared by
// the unit test over the committed snapshots (tests/unit/pci) and the live test in the guest (tests/lab).
#pragma once

#include <string>
#include <vector>

namespace bardrive::pci::lab_expect {

struct Pair {
    const char* a;
    const char* b;
    const char* cls;      // nvidia-smi topo -m class
    const char* verdict;  // judge_p2p(a -> b) with every NIC and window bound to vfio-pci
};

struct Preset {
    const char* name;
    std::size_t host_bridges;
    std::vector<const char*> matrix;  // default matrix devices (NICs and 64 MiB windows), in order
    std::vector<Pair> pairs;
};

inline const std::vector<Preset>& presets() {
    static const std::vector<Preset> p = {
        {"basic",
         1,
         {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"},
         {{"0000:01:00.0", "0000:02:00.0", "PHB", "platform-dependent"},
          {"0000:01:00.0", "0000:03:00.0", "PHB", "platform-dependent"},
          {"0000:02:00.0", "0000:03:00.0", "PHB", "platform-dependent"}}},
        {"switch",
         1,
         {"0000:03:00.0", "0000:04:00.0", "0000:05:00.0"},
         {{"0000:03:00.0", "0000:04:00.0", "PIX", "supported"},
          {"0000:05:00.0", "0000:04:00.0", "PHB", "platform-dependent"},
          {"0000:03:00.0", "0000:05:00.0", "PHB", "platform-dependent"}}},
        {"numa",
         4,
         {"0000:21:00.0", "0000:41:00.0", "0000:81:00.0", "0000:82:00.0"},
         {{"0000:21:00.0", "0000:41:00.0", "NODE", "platform-dependent"},
          {"0000:81:00.0", "0000:82:00.0", "PHB", "platform-dependent"},
          {"0000:21:00.0", "0000:81:00.0", "SYS", "platform-dependent"},
          {"0000:41:00.0", "0000:82:00.0", "SYS", "platform-dependent"}}},
        {"e1000e",
         1,
         {"0000:03:00.0", "0000:06:00.0", "0000:07:00.0"},
         {{"0000:06:00.0", "0000:07:00.0", "PIX", "supported"},
          {"0000:03:00.0", "0000:06:00.0", "PXB", "supported"},
          {"0000:03:00.0", "0000:07:00.0", "PXB", "supported"}}},
    };
    return p;
}

}  // namespace bardrive::pci::lab_expect
