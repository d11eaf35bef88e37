#include "bench/p2p/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.hpp"

namespace bardrive::bench {

const Point* PathResult::peak() const {
    const Point* best = nullptr;
    for (const auto& p : points)
        if (!best || p.gbps > best->gbps) best = &p;
    return best;
}

PathResult make_path(std::string method, std::string src, std::string dst, bool bidirectional) {
    PathResult p;
    p.id = method + ":" + src + (bidirectional ? "<->" : "->") + dst;
    p.method = std::move(method);
    p.src = std::move(src);
    p.dst = std::move(dst);
    p.bidirectional = bidirectional;
    return p;
}

bool Report::any_failed() const {
    return std::any_of(paths.begin(), paths.end(), [](const PathResult& p) { return !p.failure.empty(); });
}

std::string format_size(std::uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++u;
    }
    return log::concat(bytes, ' ', units[u]);
}

namespace {

std::string fixed(double v, int digits) {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(digits);
    os << v;
    return os.str();
}

// Rates below 1 GB/s (NICs, uncached reads) keep four decimals, so they do not read as 0.00.
std::string rate(double gbps) { return fixed(gbps, gbps < 1 ? 4 : 2); }

std::string ratio(double num, double den) { return den > 0 ? fixed(num / den, 3) : std::string("-"); }

std::string percent(double num, double den) { return den > 0 ? fixed(100.0 * num / den, 1) + "%" : std::string("-"); }

}  // namespace

void print_table(const Report& r, std::FILE* out) {
    for (const auto& p : r.paths) {
        if (!p.available()) {
            std::fprintf(out, "%-26s unavailable: %s\n", p.id.c_str(), p.reason.c_str());
            continue;
        }
        if (!p.failure.empty()) std::fprintf(out, "%-26s FAILED: %s\n", p.id.c_str(), p.failure.c_str());
        std::fprintf(out, "%-26s %s%s  reference: %s%s\n", p.id.c_str(), p.bidirectional ? "bidirectional, " : "",
                     p.topology.empty() ? "topology unknown" : p.topology.c_str(),
                     p.reference.empty() ? "none" : p.reference.c_str(),
                     p.link_gbps > 0 ? log::concat(", link ", fixed(p.link_gbps, 1), " GB/s").c_str() : "");
        if (!p.note.empty()) std::fprintf(out, "  note: %s\n", p.note.c_str());
        std::fprintf(out, "  %10s %10s %10s %8s %8s\n", "size", "GB/s", "ref GB/s", "ratio", "of link");
        for (const auto& pt : p.points)
            std::fprintf(out, "  %10s %10s %10s %8s %8s\n", format_size(pt.bytes).c_str(), rate(pt.gbps).c_str(),
                         pt.ref_gbps > 0 ? rate(pt.ref_gbps).c_str() : "-", ratio(pt.gbps, pt.ref_gbps).c_str(),
                         percent(pt.gbps, p.link_gbps).c_str());
        if (p.latency_us > 0)
            std::fprintf(out, "  latency of one %s transfer: %.2f us\n", format_size(p.latency_bytes).c_str(),
                         p.latency_us);
    }
}

void print_matrix(const Report& r, std::FILE* out) {
    // Group the paths by method and direction kind; each group becomes one src x dst matrix.
    std::map<std::string, std::vector<const PathResult*>> groups;
    std::vector<std::string> order;
    for (const auto& p : r.paths) {
        std::string key = p.method + (p.bidirectional ? " bidirectional" : " unidirectional");
        if (!groups.count(key)) order.push_back(key);
        groups[key].push_back(&p);
    }
    constexpr int width = 28;
    for (const auto& key : order) {
        const auto& g = groups[key];
        // A method nothing could run for has no matrix; the table lists its reasons.
        if (std::none_of(g.begin(), g.end(), [](const PathResult* p) { return p->available(); })) continue;
        std::vector<std::string> rows, cols;
        for (const auto* p : g) {
            if (std::find(rows.begin(), rows.end(), p->src) == rows.end()) rows.push_back(p->src);
            if (std::find(cols.begin(), cols.end(), p->dst) == cols.end()) cols.push_back(p->dst);
        }
        std::fprintf(out, "\n%s: peak GB/s (ratio to reference) [topology; * see the note below]\n%-8s", key.c_str(),
                     "src\\dst");
        for (const auto& c : cols) std::fprintf(out, " %*s", width, c.c_str());
        std::fprintf(out, "\n");
        for (const auto& row : rows) {
            std::fprintf(out, "%-8s", row.c_str());
            for (const auto& c : cols) {
                std::string cell = "-";
                for (const auto* p : g) {
                    if (p->src != row || p->dst != c) continue;
                    if (!p->available()) {
                        cell = "n/a";
                    } else if (const Point* pk = p->peak()) {
                        cell = rate(pk->gbps);
                        if (pk->ref_gbps > 0) cell += " (x" + ratio(pk->gbps, pk->ref_gbps) + ")";
                        if (!p->topology.empty()) cell += " [" + p->topology + (p->note.empty() ? "]" : "*]");
                    }
                }
                std::fprintf(out, " %*s", width, cell.c_str());
            }
            std::fprintf(out, "\n");
        }
    }
}

namespace {

// SVG text is XML 1.0, which admits neither bytes that are not UTF-8 nor control characters other
// than tab, newline and carriage return, not even as character references: both become U+FFFD.
// nlohmann's dump replaces the invalid bytes (as in the JSON); parsing its output gives them back.
std::string xml_escape(const std::string& s) {
    using nlohmann::json;
    const std::string utf8 =
        json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
    std::string o;
    for (char c : utf8) {
        switch (c) {
            case '<':
                o += "&lt;";
                break;
            case '>':
                o += "&gt;";
                break;
            case '&':
                o += "&amp;";
                break;
            case '"':
                o += "&quot;";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
                    o += "\xef\xbf\xbd";  // U+FFFD in UTF-8
                else
                    o += c;
        }
    }
    return o;
}

}  // namespace

std::string to_json(const Report& r) {
    using nlohmann::ordered_json;
    // JSON has no NaN or infinity: a rate that is not finite is null. Four decimals, as the table's slow rates.
    auto number = [](double v) { return std::isfinite(v) ? ordered_json(std::round(v * 1e4) / 1e4) : ordered_json(); };
    ordered_json j;
    j["machine"] = r.machine;
    j["date"] = r.date;
    j["command"] = r.command;
    j["repetitions"] = r.repetitions;
    j["warmup"] = r.warmup;
    j["endpoints"] = ordered_json::array();
    for (const auto& e : r.endpoints)
        j["endpoints"].push_back(
            {{"name", e.name}, {"description", e.description}, {"bdf", e.bdf}, {"numa_node", e.numa_node}});
    j["paths"] = ordered_json::array();
    for (const auto& p : r.paths) {
        ordered_json o;
        o["id"] = p.id;
        o["method"] = p.method;
        o["src"] = p.src;
        o["dst"] = p.dst;
        o["bidirectional"] = p.bidirectional;
        o["available"] = p.available();
        if (!p.available()) {
            o["reason"] = p.reason;
            j["paths"].push_back(std::move(o));
            continue;
        }
        o["topology"] = p.topology;
        o["reference"] = p.reference;
        o["link_gbps"] = number(p.link_gbps);
        if (!p.failure.empty()) o["failure"] = p.failure;
        if (!p.note.empty()) o["note"] = p.note;
        if (p.latency_us > 0) {
            o["latency_us"] = number(p.latency_us);
            o["latency_bytes"] = p.latency_bytes;
        }
        o["points"] = ordered_json::array();
        for (const auto& pt : p.points)
            o["points"].push_back({{"bytes", pt.bytes}, {"gbps", number(pt.gbps)}, {"ref_gbps", number(pt.ref_gbps)}});
        j["paths"].push_back(std::move(o));
    }
    // Names come from the driver, the host and the command line: bytes that are not UTF-8 become
    // U+FFFD rather than an exception (the rule of `topo --json`, docs/topology.md).
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string to_svg(const Report& r) {
    constexpr double W = 960, H = 540, left = 70, right = 300, top = 40, bottom = 60;
    const double pw = W - left - right, ph = H - top - bottom;
    double xmin = 1e300, xmax = -1e300, ymax = 0;
    for (const auto& p : r.paths)
        for (const auto& pt : p.points) {
            double x = std::log2(static_cast<double>(std::max<std::uint64_t>(pt.bytes, 1)));
            xmin = std::min(xmin, x);
            xmax = std::max(xmax, x);
            if (std::isfinite(pt.gbps)) ymax = std::max(ymax, pt.gbps);
        }
    if (xmin > xmax) xmin = 12, xmax = 30;  // nothing measured: an empty 4 KiB..1 GiB frame
    if (xmax - xmin < 1) xmax = xmin + 1;
    // A round y-axis top: 1, 2 or 5 times a power of ten, at or above the highest rate.
    double ystep = 1;
    if (ymax > 0) {
        double mag = std::pow(10.0, std::floor(std::log10(ymax / 5)));
        for (double m : {1.0, 2.0, 5.0, 10.0})
            if (m * mag * 5 >= ymax) {
                ystep = m * mag;
                break;
            }
    }
    const double ytop = ystep * 5;
    auto X = [&](double lg) { return left + (lg - xmin) / (xmax - xmin) * pw; };
    auto Y = [&](double g) { return top + ph - g / ytop * ph; };

    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(1);
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
      << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">bardrive bench: bandwidth against transfer size"
      << (r.machine.empty() ? "" : " (" + xml_escape(r.machine) + ")") << "</text>\n";
    // Grid and axes.
    for (int i = 0; i <= 5; ++i) {
        double g = ystep * i;
        o << "<line x1=\"" << left << "\" y1=\"" << Y(g) << "\" x2=\"" << left + pw << "\" y2=\"" << Y(g)
          << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 6 << "\" y=\"" << Y(g) + 4 << "\" text-anchor=\"end\">" << g
          << "</text>\n";
    }
    for (int lg = static_cast<int>(std::ceil(xmin)); lg <= static_cast<int>(std::floor(xmax)); lg += 2) {
        o << "<line x1=\"" << X(lg) << "\" y1=\"" << top << "\" x2=\"" << X(lg) << "\" y2=\"" << top + ph
          << "\" stroke=\"#eee\"/>\n<text x=\"" << X(lg) << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">"
          << format_size(std::uint64_t{1} << lg) << "</text>\n";
    }
    o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"black\"/>\n"
      << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 20 << "\" text-anchor=\"middle\">transfer size</text>\n"
      << "<text transform=\"translate(18," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">GB/s</text>\n";
    static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    int n = 0;
    for (const auto& p : r.paths) {
        if (!p.available() || p.points.empty()) continue;
        const char* color = colors[n % 10];
        // After the first ten paths the colours repeat, dashed.
        const char* dash = n >= 10 ? " stroke-dasharray=\"6 3\"" : "";
        o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << " points=\"";
        for (const auto& pt : p.points)
            o << X(std::log2(static_cast<double>(std::max<std::uint64_t>(pt.bytes, 1)))) << ','
              << Y(std::isfinite(pt.gbps) ? pt.gbps : 0) << ' ';
        o << "\"><title>" << xml_escape(p.id) << "</title></polyline>\n";
        double ly = top + 8 + 16 * n;
        o << "<line x1=\"" << left + pw + 12 << "\" y1=\"" << ly << "\" x2=\"" << left + pw + 36 << "\" y2=\"" << ly
          << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << "/>\n<text x=\"" << left + pw + 42
          << "\" y=\"" << ly + 4 << "\">" << xml_escape(p.id) << (p.bidirectional ? " (both ways)" : "") << "</text>\n";
        ++n;
    }
    o << "</svg>\n";
    return o.str();
}

}  // namespace bardrive::bench
