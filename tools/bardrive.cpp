// bardrive: the command-line front of the library. `bardrive help` lists the subcommands.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "tools/args.hpp"
#include "tools/commands.hpp"

namespace bardrive::tools {

int run_bench(const CommandArgs&);   // cmd_bench.cpp
int run_topo(const CommandArgs&);    // cmd_topo.cpp
int run_bind(const CommandArgs&);    // cmd_bind.cpp
int run_unbind(const CommandArgs&);  // cmd_bind.cpp
int run_nic(const CommandArgs&);     // cmd_nic.cpp

namespace {

int run_version(const CommandArgs& args) {
    if (!args.empty())
        throw UsageError("bardrive version", bounded(args.front()), "unexpected argument",
                         "run 'bardrive version' alone");
    std::printf("bardrive %s\n", BARDRIVE_VERSION);
    return 0;
}

int run_help(const CommandArgs&);

// The one list of subcommands.
const Command commands[] = {
    {"help", "list the subcommands", run_help},
    {"version", "print the version", run_version},
    {"topo", "PCIe topology: tree, matrix, P2P verdicts, snapshots", run_topo},
    {"bind", "hand PCI devices to vfio-pci (--list: drivers and IOMMU groups)", run_bind},
    {"unbind", "give devices back from vfio-pci (--restore: to their previous driver)", run_unbind},
    {"nic", "NIC statistics and link state a running bardrive driver publishes (nic stats BDF)", run_nic},
    {"bench", "bandwidth and latency across host, GPUs, BAR windows and NICs", run_bench},
};

int run_help(const CommandArgs& args) {
    if (!args.empty()) {  // help COMMAND: that command's own help
        if (args.size() == 1)
            for (const auto& c : commands)
                if (args[0] == c.name && c.run != run_help) return c.run({"--help"});
        throw UsageError("bardrive help", bounded(args.front()),
                         args.size() == 1 ? "no such command" : "one command at most", "'bardrive help' lists them");
    }
    std::printf("usage: bardrive COMMAND [ARGS...]   ('bardrive COMMAND --help' for one command)\n\ncommands:\n");
    for (const auto& c : commands) std::printf("  %-10s %s\n", c.name, c.summary);
    return 0;
}

}  // namespace
}  // namespace bardrive::tools

// An error's text without a leading "bardrive NAME" (its operation), which main's own prefix already says.
static const char* without_prefix(const char* what, const char* name) {
    const std::string prefix = std::string("bardrive ") + name + " ";
    return std::strncmp(what, prefix.c_str(), prefix.size()) == 0 ? what + prefix.size() : what;
}

int main(int argc, char** argv) {
    using namespace bardrive::tools;
    const char* name = argc > 1 ? argv[1] : "help";
    if (std::strcmp(name, "--help") == 0 || std::strcmp(name, "-h") == 0) name = "help";
    for (const auto& c : commands) {
        if (std::strcmp(c.name, name) != 0) continue;
        CommandArgs args(argv + (argc > 1 ? 2 : 1), argv + argc);
        try {
            const int rc = c.run(args);
            // What was written to standard output must have arrived (a full disk, a closed pipe): never
            // exit 0 having written nothing.
            if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
                std::fprintf(stderr, "bardrive %s: error: writing standard output failed: %s\n", name,
                             std::strerror(errno ? errno : EIO));
                return rc != 0 ? rc : 1;
            }
            return rc;
        } catch (const UsageError& e) {
            std::fprintf(stderr, "bardrive %s: error: %s\n", name, without_prefix(e.what(), name));
            return 2;
        } catch (const bardrive::Error& e) {
            std::fprintf(stderr, "bardrive %s: error: %s\n", name, without_prefix(e.what(), name));
            return 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bardrive %s: internal error: %s\n", name, e.what());
            return 1;  // 2 is bad usage; this is a bug to report
        }
    }
    std::fprintf(stderr, "bardrive: unknown command '%s'; 'bardrive help' lists them\n", bounded(name).c_str());
    return 2;
}
