// Reads `lspci -tv` output: the tree shape (domains, root buses, bridges and their secondary buses,
// functions) and each line's name text. Classes, IDs, BARs, links, groups and NUMA nodes are not in it.
#include <cctype>
#include <iomanip>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "pci/topology.hpp"

namespace bardrive::pci {

namespace {

bool hex_at(const std::string& s, std::size_t i, std::size_t n) {
    if (i + n > s.size()) return false;
    for (std::size_t k = 0; k < n; ++k)
        if (!std::isxdigit(static_cast<unsigned char>(s[i + k]))) return false;
    return true;
}

unsigned hex(const std::string& s, std::size_t i, std::size_t n) {
    return static_cast<unsigned>(std::stoul(s.substr(i, n), nullptr, 16));
}

// Where the functions printed at one column live: their bus and their upstream bridge.
struct Context {
    std::uint32_t domain = 0;
    std::uint8_t bus = 0;
    std::optional<Bdf> parent;
    std::size_t host_bridge = 0;
};

}  // namespace

Topology read_lspci_tree(const std::string& text, const std::string& name) {
    Topology t;
    t.source = "lspci -tv " + name;
    t.groups_known = false;
    t.bars_known = false;
    std::vector<std::optional<Bdf>> parents;
    std::map<std::size_t, Context> at;  // column of a function token -> its context
    std::istringstream is(text);
    std::size_t lineno = 0;
    for (std::string line; std::getline(is, line);) {
        ++lineno;
        std::optional<Context> next;  // context for the next token on this line
        std::size_t i = 0;
        while (i < line.size()) {
            char c = line[i];
            if (c == ' ' || c == '|' || c == '+' || c == '\\' || c == '-') {
                // Two spaces after a function token start its name; elsewhere they are margin.
                ++i;
                continue;
            }
            if (c == '[') {  // a root bus: [DDDD:BB]
                auto close = line.find(']', i);
                auto colon = line.find(':', i);
                if (close == std::string::npos || colon == std::string::npos || colon > close || colon - i - 1 < 4 ||
                    colon - i - 1 > 8 || !hex_at(line, i + 1, colon - i - 1) || !hex_at(line, colon + 1, 2)) {
                    t.warnings.push_back(
                        log::concat(name, " line ", lineno, ": cannot read root bus at column ", i + 1));
                    break;
                }
                Context ctx;
                ctx.domain = hex(line, i + 1, colon - i - 1);
                ctx.bus = static_cast<std::uint8_t>(hex(line, colon + 1, 2));
                std::string hb = log::concat("pci", std::hex, std::setfill('0'), std::setw(4), ctx.domain, ':',
                                             std::setw(2), static_cast<unsigned>(ctx.bus));
                ctx.host_bridge = t.host_bridges.size();
                t.host_bridges.push_back(HostBridge{hb, ctx.domain, ctx.bus, -1, std::nullopt, {}});
                next = ctx;
                i = close + 1;
                continue;
            }
            if (hex_at(line, i, 2) && i + 4 <= line.size() && line[i + 2] == '.' && line[i + 3] >= '0' &&
                line[i + 3] <= '7') {
                Context ctx;
                if (next)
                    ctx = *next;
                else if (auto it = at.find(i); it != at.end())
                    ctx = it->second;
                else {
                    t.warnings.push_back(log::concat(name, " line ", lineno, ": function at column ", i + 1,
                                                     " has no bus above it; ignored"));
                    break;
                }
                at[i] = ctx;
                next.reset();
                Device d;
                d.bdf = Bdf{ctx.domain, ctx.bus, static_cast<std::uint8_t>(hex(line, i, 2)),
                            static_cast<std::uint8_t>(line[i + 3] - '0')};
                d.host_bridge = ctx.host_bridge;
                d.vendor_id = d.device_id = 0xffff;
                if (d.bdf.device > 31) {
                    t.warnings.push_back(log::concat(name, " line ", lineno, ": device number above 31; ignored"));
                    break;
                }
                i += 4;
                // A bridge: -[SS] or -[SS-UU], its children follow on this line.
                if (line.compare(i, 2, "-[") == 0 && hex_at(line, i + 2, 2)) {
                    d.is_bridge = true;
                    d.class_code = 0x060400;
                    Context child{ctx.domain, static_cast<std::uint8_t>(hex(line, i + 2, 2)), d.bdf, ctx.host_bridge};
                    next = child;
                    auto close = line.find(']', i);
                    i = close == std::string::npos ? line.size() : close + 1;
                }
                if (line.compare(i, 2, "  ") == 0) {
                    auto start = line.find_first_not_of(' ', i);
                    if (start != std::string::npos) d.vendor_name = line.substr(start);
                    i = line.size();
                }
                t.devices.push_back(std::move(d));
                parents.push_back(ctx.parent);
                continue;
            }
            t.warnings.push_back(log::concat(name, " line ", lineno, ": unexpected '", c, "' at column ", i + 1));
            break;
        }
    }
    if (t.devices.empty())
        throw Error("read lspci -tv output", name, "no PCI functions found", "give the output of 'lspci -tv'");
    t.warnings.push_back(
        "lspci -tv carries names only: classes, IDs, BARs, links, IOMMU groups and NUMA nodes are unknown");
    assemble(t, std::move(parents));
    return t;
}

}  // namespace bardrive::pci
