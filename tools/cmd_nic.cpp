// bardrive nic stats: the statistics a running driver publishes (nic/stats_file.*); this file only
// reads options and prints.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "nic/stats_file.hpp"
#include "pci/bdf.hpp"
#include "tools/args.hpp"
#include "tools/commands.hpp"

namespace bardrive::tools {
namespace {

const char* usage =
    "usage: bardrive nic stats BDF [--json] [--watch] [--interval S] [--count N] [--stale] [--dir DIR]\n"
    "\n"
    "Shows the per-queue and device counters, and the link state, of a NIC that a bardrive program owns\n"
    "(VFIO lets only the owner touch the device, so the owner publishes them with nic::StatsPublisher in\n"
    "DIR/nic-BDF.stats; the numbers are as fresh as its last publish, shown as 'updated').\n"
    "  --json         one JSON object (with --watch: one per line)\n"
    "  --watch        print again every --interval seconds (default 1), with rates, until --count prints or ^C\n"
    "  --interval S   seconds between prints with --watch, 0.01 to 86400 (decimals allowed)\n"
    "  --count N      with --watch: stop after N prints (1 to 1000000000)\n"
    "  --stale        show the last numbers even when the owner is gone\n"
    "  --dir DIR      where owners publish (default $BARDRIVE_STATS_DIR, else /run/bardrive)\n"
    "Exit status: 0 shown, 1 nothing to show (nobody publishes the BDF, owner gone, malformed file, output\n"
    "not written), 2 bad usage.\n";

nlohmann::json queue_json(const nic::QueueStats& q, bool rx) {
    nlohmann::json j{
        {"packets", q.packets}, {"bytes", q.bytes}, {"doorbells", q.doorbells}, {"bad_length", q.bad_length}};
    if (rx) {
        j["chained"] = q.chained;
        j["frame_errors"] = q.frame_errors;
        j["no_buffers"] = q.no_buffers;
    } else {
        j["bad_head"] = q.bad_head;
    }
    return j;
}

nlohmann::json to_json(const nic::PublishedStats& p) {
    const nic::DeviceStats& d = p.stats.device;
    nlohmann::json j{
        {"bdf", p.bdf},
        {"driver", p.driver},
        {"owner_pid", p.owner_pid},
        {"owner_alive", p.owner_alive},
        {"updated_unix_ns", p.updated_unix_ns},
        {"publishes", p.publishes},
        {"link", {{"up", p.stats.link_up}, {"speed_mbps", p.stats.speed_mbps}, {"changes", p.stats.link_changes}}},
        {"device",
         {{"rx_packets", d.rx_packets},
          {"tx_packets", d.tx_packets},
          {"rx_bytes", d.rx_bytes},
          {"tx_bytes", d.tx_bytes},
          {"rx_total", d.rx_total},
          {"tx_total", d.tx_total},
          {"rx_broadcast", d.rx_broadcast},
          {"rx_multicast", d.rx_multicast},
          {"rx_missed", d.rx_missed},
          {"rx_no_buffers", d.rx_no_buffers},
          {"rx_undersize", d.rx_undersize},
          {"rx_oversize", d.rx_oversize},
          {"crc_errors", d.crc_errors}}}};
    j["rx"] = nlohmann::json::array();
    j["tx"] = nlohmann::json::array();
    for (unsigned q = 0; q < p.stats.rx_queues; ++q) j["rx"].push_back(queue_json(p.stats.rx[q], true));
    for (unsigned q = 0; q < p.stats.tx_queues; ++q) j["tx"].push_back(queue_json(p.stats.tx[q], false));
    return j;
}

double age_s(const nic::PublishedStats& p) {
    auto now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
    return (static_cast<double>(now.count()) - static_cast<double>(p.updated_unix_ns)) / 1e9;
}

// Human output; `prev` (with --watch) adds packet rates over `dt` seconds. The reader has refused names that
// are not printable ASCII, so they are safe for a terminal.
void print_table(const nic::PublishedStats& p, const nic::PublishedStats* prev, double dt) {
    const nic::StatsSnapshot& s = p.stats;
    const double age = age_s(p);
    const std::string updated = age >= -1 ? log::concat("updated ", std::fixed, std::setprecision(1), age, " s ago")
                                          : log::concat("updated ", std::fixed, std::setprecision(1), -age,
                                                        " s in the future (the owner's clock, or the file, is wrong)");
    std::printf("%s %s, owner pid %lld%s, %s (publish %llu)\n", p.bdf.c_str(), p.driver.c_str(),
                static_cast<long long>(p.owner_pid), p.owner_alive ? "" : " (GONE: stale numbers)", updated.c_str(),
                static_cast<unsigned long long>(p.publishes));
    if (s.link_up && s.speed_mbps == 0) {  // virtio-net reports no speed
        std::printf("link: up (speed not reported), %llu changes\n", static_cast<unsigned long long>(s.link_changes));
    } else if (s.link_up) {
        std::printf("link: up, %u Mb/s, %llu changes\n", s.speed_mbps, static_cast<unsigned long long>(s.link_changes));
    } else {
        std::printf("link: DOWN, %llu changes\n", static_cast<unsigned long long>(s.link_changes));
    }
    auto rate = [&](std::uint64_t now, std::uint64_t before) {
        return prev && dt > 0 && now >= before ? static_cast<double>(now - before) / dt : 0.0;
    };
    std::printf("%-6s %14s %16s %10s %12s %10s %10s%s\n", "queue", "packets", "bytes", "errors", "no_buffers",
                "refused", "doorbells", prev ? "   packets/s" : "");
    for (unsigned q = 0; q < s.rx_queues; ++q) {
        const auto& r = s.rx[q];
        std::printf("rx %-3u %14llu %16llu %10llu %12llu %10s %10llu", q, static_cast<unsigned long long>(r.packets),
                    static_cast<unsigned long long>(r.bytes),
                    static_cast<unsigned long long>(r.bad_length + r.chained + r.frame_errors),
                    static_cast<unsigned long long>(r.no_buffers), "-", static_cast<unsigned long long>(r.doorbells));
        if (prev) std::printf(" %12.0f", rate(r.packets, prev->stats.rx[q].packets));
        std::printf("\n");
    }
    for (unsigned q = 0; q < s.tx_queues; ++q) {
        const auto& t = s.tx[q];
        std::printf("tx %-3u %14llu %16llu %10llu %12s %10llu %10llu", q, static_cast<unsigned long long>(t.packets),
                    static_cast<unsigned long long>(t.bytes), static_cast<unsigned long long>(t.bad_head), "-",
                    static_cast<unsigned long long>(t.bad_length), static_cast<unsigned long long>(t.doorbells));
        if (prev) std::printf(" %12.0f", rate(t.packets, prev->stats.tx[q].packets));
        std::printf("\n");
    }
    const nic::DeviceStats& d = s.device;
    std::printf(
        "device: rx %llu packets %llu bytes (%llu broadcast, %llu multicast), tx %llu packets %llu bytes; missed "
        "%llu, no buffers %llu, undersize %llu, oversize %llu, CRC errors %llu\n",
        static_cast<unsigned long long>(d.rx_packets), static_cast<unsigned long long>(d.rx_bytes),
        static_cast<unsigned long long>(d.rx_broadcast), static_cast<unsigned long long>(d.rx_multicast),
        static_cast<unsigned long long>(d.tx_packets), static_cast<unsigned long long>(d.tx_bytes),
        static_cast<unsigned long long>(d.rx_missed), static_cast<unsigned long long>(d.rx_no_buffers),
        static_cast<unsigned long long>(d.rx_undersize), static_cast<unsigned long long>(d.rx_oversize),
        static_cast<unsigned long long>(d.crc_errors));
}

// A positive number of seconds up to a day (inf, nan and 1e300 would overflow the sleep to none at all).
double interval_seconds(const Args& args) {
    auto v = args.value("interval");
    if (!v) return 1.0;
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(d >= 0.01 && d <= 86400)) {
        throw UsageError("bardrive nic stats", "--interval", "'" + bounded(*v) + "' is not 0.01 to 86400 seconds",
                         "e.g. --interval 0.5");
    }
    return d;
}

// A whole number of prints from 1 to a billion (0: no limit when not given).
long print_count(const Args& args) {
    auto v = args.value("count");
    if (!v) return 0;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || errno == ERANGE || v->front() == '-' || n < 1 || n > 1000000000ull) {
        throw UsageError("bardrive nic stats", "--count",
                         "'" + bounded(*v) + "' is not a whole number from 1 to 1000000000", "e.g. --count 10");
    }
    return static_cast<long>(n);
}

int run_stats(const CommandArgs& argv) {
    Args args("nic stats", argv, {"json", "watch", "stale", "help"}, {"interval", "count", "dir"});
    if (args.has("help")) {
        std::fputs(usage, stdout);
        return 0;
    }
    if (args.positional().size() != 1) {
        std::fputs(usage, stderr);
        return 2;
    }
    auto parsed = pci::Bdf::try_parse(args.positional()[0]);
    if (!parsed) {
        throw UsageError("bardrive nic stats", "'" + bounded(args.positional()[0]) + "'", "is not a PCI address",
                         "give it as DOMAIN:BUS:DEVICE.FUNCTION, e.g. 0000:01:00.0");
    }
    const pci::Bdf bdf = *parsed;
    std::string path = nic::stats_file_path(bdf, args.value("dir").value_or(""));
    bool json = args.has("json"), watch = args.has("watch"), stale = args.has("stale");
    const double interval = interval_seconds(args);
    const long count = print_count(args);  // 0: no limit
    nic::PublishedStats prev;
    bool have_prev = false;
    for (long n = 1;; ++n) {
        nic::PublishedStats p = nic::read_published_stats(path, stale);
        if (json) {
            std::printf("%s\n", to_json(p).dump(watch ? -1 : 2).c_str());
        } else {
            if (n > 1) std::printf("\n");
            double dt = have_prev ? static_cast<double>(p.updated_unix_ns - prev.updated_unix_ns) / 1e9 : 0;
            print_table(p, have_prev && p.updated_unix_ns > prev.updated_unix_ns ? &prev : nullptr, dt);
        }
        if (std::fflush(stdout) != 0 || std::ferror(stdout))
            throw Error::from_errno("write", "standard output", errno ? errno : EIO, "is the disk full?");
        if (!watch || (count > 0 && n >= count)) return 0;
        prev = p;
        have_prev = true;
        std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
}

}  // namespace

int run_nic(const CommandArgs& argv) {
    if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
        std::fputs(usage, argv.empty() ? stderr : stdout);
        return argv.empty() ? 2 : 0;
    }
    if (argv[0] == "stats") return run_stats(CommandArgs(argv.begin() + 1, argv.end()));
    std::fprintf(stderr, "bardrive nic: unknown subcommand '%s'\n%s", argv[0].c_str(), usage);
    return 2;
}

}  // namespace bardrive::tools
