// topo-bench: how long building a PCIe topology takes with bardrive against lspci -vvv and
// lstopo --of xml on the same input, each timed in the same run; ratios = tool time / bardrive time.
//   input 1: this machine's sysfs (bardrive topo as tree, --matrix, --json and without its name cache;
//            lspci -vvv, lstopo --of xml); then the CPU time of each bardrive topo form over lspci -vvv's,
//            against issue 15's target (at most 0.5)
//   input 2: the largest snapshot fixture; lspci reads the same config bytes as an 'lspci -xxxx' dump (-F)
//   input 3: the largest hwloc XML fixture (a DGX-2); lstopo reads the same file (--input)
// Each figure is the median of --reps runs after one warm-up. Prints a markdown table.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "pci/source.hpp"
#include "pci/topology.hpp"

using namespace bardrive;
using namespace bardrive::pci;

namespace {

using Clock = std::chrono::steady_clock;

// CPU time (user + system) of this process and its waited-for children, in ms: less sensitive than
// wall time to other work on a shared machine.
double cpu_ms() {
    double ms = 0;
    for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
        rusage u{};
        ::getrusage(who, &u);
        ms += (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    }
    return ms;
}

struct Measure {
    double ms = 0;   // median wall time of one run
    double cpu = 0;  // mean CPU time of one run
};

Measure measure(int reps, const std::function<void()>& f) {
    f();  // warm-up: page cache, pci.ids
    std::vector<double> t;
    double cpu0 = cpu_ms();
    for (int i = 0; i < reps; ++i) {
        auto a = Clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    }
    double cpu = (cpu_ms() - cpu0) / reps;
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], cpu};
}

// Runs argv with stdout and stderr to /dev/null, with `env` ("NAME=value") added to the environment;
// throws unless it exits 0.
void run_quiet(const std::vector<std::string>& argv, const char* env = nullptr) {
    pid_t pid = ::fork();
    if (pid < 0) throw Error::from_errno("fork", argv[0], errno);
    if (pid == 0) {
        if (env) ::putenv(const_cast<char*>(env));
        std::FILE* null = std::fopen("/dev/null", "w");
        if (null) {
            ::dup2(::fileno(null), 1);
            ::dup2(::fileno(null), 2);
        }
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error("run", argv[0], log::concat("exit status ", WEXITSTATUS(status)),
                    "is it installed? scripts/setup.sh installs pciutils and hwloc");
}

// The config bytes of a snapshot as an 'lspci -xxxx' dump, which 'lspci -F FILE' reads back.
std::size_t write_lspci_dump(const std::string& snapshot, const std::string& out) {
    auto data = read_snapshot(snapshot);
    std::ofstream f(out);
    std::size_t n = 0;
    const std::string prefix = "/sys/bus/pci/devices/";
    for (const auto& [path, bytes] : data.blobs) {
        if (!bytes || path.rfind(prefix, 0) != 0 || path.size() < 7 || path.compare(path.size() - 7, 7, "/config") != 0)
            continue;
        f << path.substr(prefix.size(), path.size() - prefix.size() - 7) << " dump\n";
        char buf[24];
        for (std::size_t i = 0; i < bytes->size(); ++i) {
            if (i % 16 == 0) {
                std::snprintf(buf, sizeof buf, "%03zx:", i);
                f << buf;
            }
            std::snprintf(buf, sizeof buf, " %02x", (*bytes)[i]);
            f << buf;
            if (i % 16 == 15 || i + 1 == bytes->size()) f << '\n';
        }
        f << '\n';
        ++n;
    }
    return n;
}

struct Row {
    std::string input, tool;
    Measure m, base;  // base: bardrive topo as a process, same input
};

}  // namespace

int main(int argc, char** argv) {
    std::string cli, fixture, xml;
    int reps = 11;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (k == "--cli")
            cli = argv[i + 1];
        else if (k == "--snapshot")
            fixture = argv[i + 1];
        else if (k == "--hwloc-xml")
            xml = argv[i + 1];
        else if (k == "--reps")
            reps = std::max(1, std::atoi(argv[i + 1]));
    }
    if (cli.empty() || fixture.empty()) {
        std::fprintf(stderr,
                     "usage: topo-bench --cli build/tools/bardrive --snapshot FILE [--hwloc-xml FILE] [--reps N]\n");
        return 2;
    }
    try {
        std::vector<Row> rows;
        auto add = [&](const std::string& input, const std::string& tool, Measure m, Measure base) {
            rows.push_back({input, tool, m, base});
        };

        // 1. This machine.
        std::size_t live_n = 0;
        Measure lib = measure(reps, [&] {
            LiveSource src;
            auto t = read_topology(src);
            attach_names(t);
            live_n = t.devices.size();
        });
        Measure proc = measure(reps, [&] { run_quiet({cli, "topo"}); });
        std::string live = log::concat("this machine (", live_n, " functions)");
        Measure matrix = measure(reps, [&] { run_quiet({cli, "topo", "--matrix"}); });
        Measure json = measure(reps, [&] { run_quiet({cli, "topo", "--json"}); });
        Measure uncached = measure(reps, [&] { run_quiet({cli, "topo"}, "BARDRIVE_NO_NAME_CACHE=1"); });
        Measure lspci = measure(reps, [&] { run_quiet({"lspci", "-vvv"}); });
        add(live, "bardrive library: read + names", lib, proc);
        add(live, "bardrive topo (process)", proc, proc);
        add(live, "bardrive topo --matrix (process)", matrix, proc);
        add(live, "bardrive topo --json (process)", json, proc);
        add(live, "bardrive topo, BARDRIVE_NO_NAME_CACHE=1 (process)", uncached, proc);
        add(live, "lspci -vvv", lspci, proc);
        add(live, "lstopo --of xml", measure(reps, [&] { run_quiet({"lstopo", "--of", "xml", "-"}); }), proc);
        struct Target {
            const char* form;
            Measure m;
        };
        const std::vector<Target> targets = {
            {"bardrive topo", proc}, {"bardrive topo --matrix", matrix}, {"bardrive topo --json", json}};

        // 2. The largest snapshot fixture; lspci gets the same config bytes.
        std::string dump = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/topo-bench-" +
                           std::to_string(::getpid()) + ".lspci";
        std::size_t dumped = write_lspci_dump(fixture, dump);
        std::size_t snap_n = 0;
        lib = measure(reps, [&] {
            auto src = open_source(fixture);
            auto t = read_topology(*src);
            attach_names(t);
            snap_n = t.devices.size();
        });
        proc = measure(reps, [&] { run_quiet({cli, "topo", "--sysfs", fixture}); });
        std::string snap = log::concat("snapshot ", fixture.substr(fixture.find_last_of('/') + 1), " (", snap_n,
                                       " functions, ", dumped, " config dumps)");
        add(snap, "bardrive library: read + names", lib, proc);
        add(snap, "bardrive topo --sysfs (process)", proc, proc);
        add(snap, "lspci -vvv -F (same config bytes)",
            measure(reps,
                    [&] {
                        run_quiet({"lspci", "-vvv", "-F", dump});
                    }),
            proc);
        std::remove(dump.c_str());

        // 3. The largest hwloc XML; lstopo reads the same file.
        if (!xml.empty()) {
            std::size_t xml_n = 0;
            lib = measure(reps, [&] {
                auto t = read_hwloc_xml(xml);
                attach_names(t);
                xml_n = t.devices.size();
            });
            proc = measure(reps, [&] { run_quiet({cli, "topo", "--hwloc-xml", xml}); });
            std::string in =
                log::concat("hwloc XML ", xml.substr(xml.find_last_of('/') + 1), " (", xml_n, " functions)");
            add(in, "bardrive library: read + names", lib, proc);
            add(in, "bardrive topo --hwloc-xml (process)", proc, proc);
            add(in, "lstopo --input FILE --of xml",
                measure(reps,
                        [&] {
                            run_quiet({"lstopo", "--input", xml, "--of", "xml", "-"});
                        }),
                proc);
        }

        std::printf(
            "| input | tool | wall ms (median) | CPU ms (mean) | wall vs bardrive topo | CPU vs bardrive topo |\n"
            "|---|---|---:|---:|---:|---:|\n");
        for (const auto& r : rows)
            std::printf("| %s | %s | %.2f | %.2f | %.2fx | %.2fx |\n", r.input.c_str(), r.tool.c_str(), r.m.ms, r.m.cpu,
                        r.m.ms / r.base.ms, r.m.cpu / r.base.cpu);
        std::printf(
            "\n%d runs after one warm-up; ratio > 1: the tool takes longer than bardrive topo (as a process).\n", reps);
        std::printf(
            "\nThis machine, CPU time over lspci -vvv's (issue 15's target: at most 0.50):\n\n"
            "| bardrive | CPU ms | lspci -vvv CPU ms | ratio | target |\n|---|---:|---:|---:|---|\n");
        for (const auto& t : targets)
            std::printf("| %s | %.2f | %.2f | %.2f | %s |\n", t.form, t.m.cpu, lspci.cpu, t.m.cpu / lspci.cpu,
                        t.m.cpu <= 0.5 * lspci.cpu ? "met" : "missed");
        std::printf(
            "\nWithout the name cache (as the first run after pci.ids changes, less writing the cache): "
            "%.2f ms, %.2f of lspci -vvv's.\n",
            uncached.cpu, uncached.cpu / lspci.cpu);
    } catch (const Error& e) {
        std::fprintf(stderr, "topo-bench: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
