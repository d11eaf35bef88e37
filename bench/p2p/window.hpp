// Host <-> BAR window by CPU: memcpy through the kernel's sysfs mappings of a device BAR,
// write-combining (resourceN_wc) against uncached (resourceN). In the lab the window is QEMU's
// ivshmem BAR2, the stand-in for a GPU's BAR1. The bench overwrites the window's contents.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/p2p/progress.hpp"
#include "bench/p2p/report.hpp"
#include "bench/p2p/sweep.hpp"
#include "pci/bdf.hpp"

namespace bardrive::bench {

struct WindowSpec {
    pci::Bdf bdf;
    int bar = 0;  // 0..5
};

// A shared mapping of a BAR through its sysfs resource file: `resourceN` (uncached) or `resourceN_wc`
// (write-combining, offered for prefetchable BARs). Throws bardrive::Error when it cannot be mapped.
class BarMapping {
public:
    BarMapping(const std::string& path, std::size_t bytes);
    BarMapping(const BarMapping&) = delete;
    BarMapping& operator=(const BarMapping&) = delete;
    ~BarMapping();
    unsigned char* data() const { return data_; }

private:
    unsigned char* data_ = nullptr;
    std::size_t size_;
};

// "0000:00:05.0/2" or "00:05.0/bar2"; throws bardrive::Error explaining the form.
WindowSpec parse_window(std::string_view text);

inline constexpr const char* window_methods[] = {"mmio-wc", "mmio-uc"};

// The four CPU paths (write and read, WC and UC) over the window, sizes capped at the BAR's size
// and at `max_bytes` (uncached reads crawl on real hardware). No window: the rows say so. A BAR
// that cannot be mapped throws bardrive::Error; a WC mapping the kernel does not offer (the BAR is
// not prefetchable) leaves the mmio-wc rows unavailable with that reason. `sysfs_devices` is
// /sys/bus/pci/devices except in tests.
std::vector<PathResult> run_window_paths(const std::optional<WindowSpec>& window, const SweepConfig& cfg,
                                         Progress& progress, std::uint64_t max_bytes = 16ull << 20,
                                         const std::string& sysfs_devices = "/sys/bus/pci/devices");

}  // namespace bardrive::bench
