#include "bench/p2p/engine.hpp"

#include <unistd.h>

#include <ctime>

#include "bench/p2p/annotate.hpp"
#include "bench/p2p/gpu.hpp"
#include "bench/p2p/host_memory.hpp"
#include "bench/p2p/progress.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "pci/source.hpp"
#include "pci/topology.hpp"

namespace bardrive::bench {
namespace {

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown host";
    return buf;
}

}  // namespace

Report run(const Options& opt) {
    Report r;
    r.date = utc_now();
    r.command = opt.command;
    r.repetitions = opt.sweep.repetitions;
    r.warmup = opt.sweep.warmup;
    Progress progress(opt.progress && Progress::on_terminal());

    HostNodes nodes;
    for (int n : nodes.nodes())
        r.endpoints.push_back({"host" + std::to_string(n), log::concat("pinned memory on NUMA node ", n), "", n});

    GpuList gpus = list_gpus();
    r.machine = host_name();
    for (const auto& g : gpus.devices) {
        r.endpoints.push_back({"gpu" + std::to_string(g.index), g.name + " at " + g.bdf, g.bdf, -1});
        r.machine += ", " + g.name;
    }
    if (!gpus.driver.empty()) r.machine += ", " + gpus.driver;

    if (gpus.devices.empty()) {
        for (const char* m : gpu_methods) {
            if (!opt.sweep.wants(m)) continue;
            bool peer = std::string(m) == "peer" || std::string(m) == "nopeer";
            PathResult p = make_path(m, peer ? "gpu0" : "host0", peer ? "gpu1" : "gpu0", false);
            p.reason = gpus.reason;
            r.paths.push_back(p);
        }
    } else {
        for (auto& p : run_gpu_paths(gpus, nodes, opt.sweep, progress)) r.paths.push_back(std::move(p));
    }

    if (opt.window)
        r.endpoints.push_back(
            {"bar", log::concat("BAR ", opt.window->bar, " of ", opt.window->bdf.str()), opt.window->bdf.str(), -1});
    for (auto& p : run_window_paths(opt.window, opt.sweep, progress, opt.window_max)) r.paths.push_back(std::move(p));

    if (opt.nics)
        r.endpoints.push_back({"nic",
                               log::concat("igb ", opt.nics->rx.str(), " receiving from igb ", opt.nics->tx.str()),
                               opt.nics->rx.str(), -1});
    for (auto& p : run_nic_paths(opt.nics, opt.window, opt.sweep, progress)) r.paths.push_back(std::move(p));
    progress.finish();

    // The map: classes and link rates from the live PCI topology. Without it the figures stand.
    try {
        pci::LiveSource sysfs;
        pci::Topology topo = pci::read_topology(sysfs);
        annotate(r, topo);
        for (auto& e : r.endpoints)
            if (auto b = pci::Bdf::try_parse(e.bdf))
                if (auto i = topo.find(*b)) e.numa_node = topo.devices[*i].numa_node;
    } catch (const Error& e) {
        log::warn("bardrive bench: paths are not annotated with their topology: ", e.what());
    }
    return r;
}

}  // namespace bardrive::bench
