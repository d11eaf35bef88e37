// bardrive bench: bandwidth and latency of every path bardrive can drive (host, GPUs, BAR
// windows, NICs), each figure beside a reference measured in the same run. Engine: bench/p2p/.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

#include "bench/p2p/engine.hpp"
#include "core/error.hpp"
#include "tools/args.hpp"
#include "tools/commands.hpp"

namespace bardrive::tools {
namespace {

const char* usage =
    "usage: bardrive bench [--sizes 4K..1G] [--reps N] [--warmup N] [--only METHODS] [--window BDF/BAR]\n"
    "                      [--window-max SIZE] [--nics TX,RX] [--no-latency] [--json FILE|-] [--svg FILE]\n"
    "                      [--quiet]\n"
    "\n"
    "Measures each path the machine can do and lists the others with the reason:\n"
    "  ce        host <-> GPU by copy engine (cudaMemcpyAsync); reference: cudaMemcpy, same run\n"
    "  sm        host <-> GPU by an SM copy kernel over pinned, mapped host memory\n"
    "  zc-read   GPU threads reading pinned host memory in place (zero-copy)\n"
    "  zc-write  GPU threads writing pinned host memory in place\n"
    "  peer      GPU -> GPU, peer access on (cudaMemcpyPeerAsync)\n"
    "  nopeer    GPU -> GPU, peer access off (the driver stages through host memory)\n"
    "  mmio-wc   host <-> BAR window by CPU through sysfs resourceN_wc (write-combining)\n"
    "  mmio-uc   host <-> BAR window by CPU through sysfs resourceN (uncached)\n"
    "  nic       NIC RX DMA into host memory, then into the BAR window (frames of 64, 512, 1514 B)\n"
    "Host memory is pinned on each NUMA node (host0, host1, ...). Sizes double from MIN to MAX\n"
    "('4K..1G:4' steps by 4, or list them: '4K,1M,64M'); each figure is the median of --reps timed\n"
    "runs (default 5) after --warmup runs (default 1), timed with CUDA events where a GPU is involved.\n"
    "Every path checks the bytes that landed; a path whose bytes are wrong is FAILED and the exit\n"
    "status is 1.\n"
    "\n"
    "  --only METHODS    comma-separated methods from the list above (default: all)\n"
    "  --window BDF/BAR  a memory BAR the CPU paths may overwrite, e.g. 0000:00:05.0/2 (an ivshmem BAR)\n"
    "  --window-max SIZE largest size swept over the window (default 16M; uncached reads are slow)\n"
    "  --nics TX,RX      two NICs bardrive drives (igb, e1000e), bound to vfio-pci on one link, for the nic paths\n"
    "                    (the window must then be bound to vfio-pci too)\n"
    "  --no-latency      skip the small-transfer latencies\n"
    "  --json FILE       also write the report as JSON ('-': JSON alone on stdout)\n"
    "  --svg FILE        also write a plot of bandwidth against size\n"
    "  --quiet           no progress bar (it is drawn only when stdout is a terminal anyway)\n";

// Opened before the run, so a path that cannot be written fails in a second, not after the sweep.
std::ofstream open_output(const std::string& path) {
    errno = 0;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f)  // open(2)'s errno says which: no such folder, a directory, no permission
        throw Error::from_errno("create", path, errno ? errno : EIO,
                                "give a file in a folder that exists and is writable");
    return f;
}

void write_file(std::ofstream& f, const std::string& path, const std::string& text) {
    errno = 0;
    f << text;
    f.flush();
    if (!f) throw Error::from_errno("write", path, errno ? errno : EIO, "check the disk is not full");
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= s.size()) {
        std::size_t c = s.find(',', start);
        if (c == std::string::npos) c = s.size();
        if (c > start) out.push_back(s.substr(start, c - start));
        start = c + 1;
    }
    return out;
}

int to_count(const std::string& flag, const std::string& v, int least) {
    try {
        std::size_t used = 0;
        int n = std::stoi(v, &used);
        if (used == v.size() && n >= least && n <= 1000) return n;
    } catch (const std::exception&) {
    }
    throw UsageError("bardrive bench", "--" + flag + " " + bounded(v), "not a count",
                     "give a whole number from " + std::to_string(least) + " to 1000");
}

}  // namespace

int run_bench(const CommandArgs& argv) {
    Args args("bench", argv, {"help", "no-latency", "quiet"},
              {"sizes", "reps", "warmup", "only", "window", "window-max", "nics", "json", "svg"});
    if (args.has("help")) {
        std::fputs(usage, stdout);
        return 0;
    }
    if (!args.positional().empty())
        throw UsageError("bardrive bench", bounded(args.positional().front()), "unexpected argument",
                         "see 'bardrive bench --help'");

    bench::Options opt;
    opt.sweep.sizes = usage_value([&] { return bench::parse_sizes(args.value("sizes").value_or("4K..1G")); });
    opt.sweep.repetitions = to_count("reps", args.value("reps").value_or("5"), 1);
    opt.sweep.warmup = to_count("warmup", args.value("warmup").value_or("1"), 0);
    opt.sweep.latency = !args.has("no-latency");
    if (auto only = args.value("only")) {
        static const std::string known[] = {"ce",     "sm",      "zc-read", "zc-write", "peer",
                                            "nopeer", "mmio-wc", "mmio-uc", "nic"};
        for (const auto& m : split(*only)) {
            if (std::find(std::begin(known), std::end(known), m) == std::end(known))
                throw UsageError("bardrive bench", "--only " + bounded(m), "unknown method",
                                 "see 'bardrive bench --help'");
            opt.sweep.methods.push_back(m);
        }
        if (opt.sweep.methods.empty())  // an empty list once meant every method
            throw UsageError("bardrive bench", "--only '" + bounded(*only) + "'", "names no method",
                             "give methods from 'bardrive bench --help', e.g. --only ce,sm; leave --only out for all");
    }
    if (auto w = args.value("window")) opt.window = usage_value([&] { return bench::parse_window(*w); });
    if (auto m = args.value("window-max")) opt.window_max = usage_value([&] { return bench::parse_size(*m); });
    if (auto n = args.value("nics")) {
        opt.nics = usage_value([&] { return bench::parse_nics(*n); });
        for (const auto& b : {opt.nics->tx, opt.nics->rx})
            if (::access(("/sys/bus/pci/devices/" + b.str()).c_str(), F_OK) != 0)
                throw Error("bardrive bench --nics", b.str(), "no such PCI device",
                            "'bardrive bind --list' lists the devices present");
    }
    const auto json = args.value("json");
    const bool json_only = json && *json == "-";
    opt.progress = !args.has("quiet") && !json_only;
    opt.command = "bardrive bench";
    for (const auto& a : argv) opt.command += " " + a;

    std::ofstream json_file, svg_file;
    if (json && !json_only) json_file = open_output(*json);
    if (auto svg = args.value("svg")) svg_file = open_output(*svg);

    bench::Report report = bench::run(opt);

    if (json_only) {
        std::fputs(bench::to_json(report).c_str(), stdout);
    } else {
        std::printf("bardrive bench: %s, %s\n", report.machine.c_str(), report.date.c_str());
        std::printf("median of %d runs after %d warm-up; 1 GB/s = 1e9 bytes/s\n\nendpoints:\n", report.repetitions,
                    report.warmup);
        for (const auto& e : report.endpoints) std::printf("  %-6s %s\n", e.name.c_str(), e.description.c_str());
        bench::print_matrix(report, stdout);
        std::printf("\n");
        bench::print_table(report, stdout);
        if (json) write_file(json_file, *json, bench::to_json(report));
    }
    if (auto svg = args.value("svg")) write_file(svg_file, *svg, bench::to_svg(report));
    if (report.any_failed()) {
        std::fprintf(stderr, "bardrive bench: some paths FAILED their data check (see above)\n");
        return 1;
    }
    // What was asked for by name (--only, --nics) and ran nowhere is a failure, not a quiet exit 0.
    std::vector<std::string> asked = opt.sweep.methods;
    if (opt.nics && asked.empty()) asked.push_back("nic");
    std::string none_ran;
    for (const auto& m : asked)
        if (std::none_of(report.paths.begin(), report.paths.end(),
                         [&](const bench::PathResult& p) { return p.method == m && p.available(); }))
            none_ran += " " + m;
    if (!none_ran.empty()) {
        std::fprintf(stderr, "bardrive bench: asked for but could not run here:%s (the report says why)\n",
                     none_ran.c_str());
        return 1;
    }
    return 0;
}

}  // namespace bardrive::tools
