#include "bench/p2p/report.hpp"

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

using namespace bardrive::bench;

namespace {

Report sample() {
    Report r;
    r.machine = "box \"1\"";
    r.date = "2026-11-22T01:00:00Z";
    r.command = "bardrive bench";
    r.repetitions = 5;
    r.endpoints.push_back({"host0", "pinned memory on NUMA node 0", "", 0});
    PathResult a = make_path("ce", "host0", "gpu0", false);
    a.topology = "NUMA local";
    a.reference = "cudaMemcpy H2D";
    a.link_gbps = 63.0;
    a.points = {{4096, 2.5, 2.0}, {1 << 20, 50.0, 51.0}};
    a.latency_us = 7.5;
    a.latency_bytes = 4;
    PathResult b = make_path("ce", "gpu0", "host0", false);
    b.points = {{4096, 3.0, 0}};
    b.failure = "3 of 512 words wrong";
    PathResult c = make_path("peer", "gpu0", "gpu1", true);
    c.reason = "one GPU";
    PathResult d = make_path("ce", "host1", "gpu0", false);
    d.reason = "one NUMA node";
    PathResult e = make_path("peer", "gpu0", "gpu1", false);
    e.topology = "PHB";
    e.note = "faster than its PCIe route";
    e.points = {{1 << 30, 396.0, 395.0}};
    r.paths = {a, b, c, d, e};
    return r;
}

std::string capture(void (*print)(const Report&, std::FILE*), const Report& r) {
    char* buf = nullptr;
    std::size_t len = 0;
    std::FILE* f = open_memstream(&buf, &len);
    print(r, f);
    std::fclose(f);
    std::string s(buf, len);
    std::free(buf);
    return s;
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("a path's id names method, ends and direction") {
    CHECK(make_path("ce", "host0", "gpu0", false).id == "ce:host0->gpu0");
    CHECK(make_path("ce", "host0", "gpu0", true).id == "ce:host0<->gpu0");
    CHECK(format_size(4096) == "4 KiB");
    CHECK(format_size(1ull << 30) == "1 GiB");
    CHECK(format_size(48) == "48 B");
    CHECK(format_size(3 * 1024 + 16) == "3088 B");
}

TEST_CASE("the peak is the fastest point; a failed path marks the report") {
    Report r = sample();
    REQUIRE(r.paths[0].peak() != nullptr);
    CHECK(r.paths[0].peak()->bytes == (1 << 20));
    CHECK(r.paths[2].peak() == nullptr);
    CHECK(r.any_failed());
    r.paths[1].failure.clear();
    CHECK_FALSE(r.any_failed());
}

TEST_CASE("the table shows ratios to the reference and the link, reasons and failures") {
    std::string t = capture(print_table, sample());
    CHECK(t.find("0.980") != std::string::npos);  // 50 / 51
    CHECK(t.find("1.250") != std::string::npos);  // 2.5 / 2.0
    CHECK(t.find("79.4%") != std::string::npos);  // 50 / 63
    CHECK(t.find("unavailable: one GPU") != std::string::npos);
    CHECK(t.find("FAILED: 3 of 512 words wrong") != std::string::npos);
    CHECK(t.find("7.50 us") != std::string::npos);
    CHECK(t.find("note: faster than its PCIe route") != std::string::npos);
}

TEST_CASE("the matrix has one block per method and direction kind; unavailable pairs say n/a") {
    std::string m = capture(print_matrix, sample());
    CHECK(count(m, "ce unidirectional") == 1);
    CHECK(count(m, "peer bidirectional") == 0);                    // nothing ran: only the table lists it
    CHECK(m.find("396.00 (x1.003) [PHB*]") != std::string::npos);  // the note is flagged
    CHECK(m.find("50.00 (x0.980) [NUMA local]") != std::string::npos);
    CHECK(m.find("n/a") != std::string::npos);
}

TEST_CASE("JSON escapes strings, keeps reasons and failures, and never writes NaN") {
    Report r = sample();
    r.paths[0].points[0].ref_gbps = 0.0 / 0.0;
    std::string j = to_json(r);
    CHECK(j.find("\"machine\": \"box \\\"1\\\"\"") != std::string::npos);
    CHECK(j.find("\"reason\": \"one GPU\"") != std::string::npos);
    CHECK(j.find("\"failure\": \"3 of 512 words wrong\"") != std::string::npos);
    CHECK(j.find("\"ref_gbps\": null") != std::string::npos);
    CHECK(j.find("\"note\": \"faster than its PCIe route\"") != std::string::npos);
    CHECK(j.find("nan") == std::string::npos);
    CHECK(count(j, "{") == count(j, "}"));
    CHECK(count(j, "[") == count(j, "]"));
}

// What a name may hold: JSON's special characters, control characters, UTF-8, and bytes that are not
// UTF-8 (a host name, a GPU name from the driver, a command line are all just bytes).
const std::string hostile =
    "q\"uote\" back\\slash tab\t nl\n cr\r ctl\x01\x1b\x1f\x7f caf\xc3\xa9 \xf0\x9f\x98\x80 <&>";
const std::string invalid =
    "bad\xff cut\xe2\x82"
    "A over\xc0\xaf end\xf0\x9f\x98";
const std::string invalid_replaced =  // U+FFFD per maximal ill-formed subsequence
    "bad\xef\xbf\xbd cut\xef\xbf\xbd"
    "A over\xef\xbf\xbd\xef\xbf\xbd end\xef\xbf\xbd";

TEST_CASE("JSON keeps hostile names intact, replaces bytes that are not UTF-8, and parses back") {
    Report r = sample();
    r.machine = hostile + invalid;
    r.command = "bardrive bench --only '" + hostile + "'";
    r.date = invalid;
    r.endpoints.push_back({hostile, invalid, "0000:01:00.0", -1});
    r.paths[0].reference = hostile;
    r.paths[1].failure = hostile;
    r.paths[2].reason = invalid;
    r.paths[4].note = hostile + invalid;
    r.paths[0].points[0].gbps = 1.0 / 0.0;
    const std::string text = to_json(r);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(text));  // strict: no raw control characters, valid UTF-8
    CHECK(j["machine"] == hostile + invalid_replaced);
    CHECK(j["command"] == "bardrive bench --only '" + hostile + "'");
    CHECK(j["date"] == invalid_replaced);
    CHECK(j["repetitions"] == 5);
    REQUIRE(j["endpoints"].size() == 2);
    CHECK(j["endpoints"][1]["name"] == hostile);
    CHECK(j["endpoints"][1]["description"] == invalid_replaced);
    CHECK(j["endpoints"][1]["numa_node"] == -1);
    const auto& p = j["paths"];
    REQUIRE(p.size() == 5);
    CHECK(p[0]["reference"] == hostile);
    CHECK(p[0]["points"][0]["gbps"].is_null());  // infinity is not JSON
    CHECK(p[0]["points"][0]["ref_gbps"] == 2.0);
    CHECK(p[0]["points"][1]["bytes"] == 1 << 20);
    CHECK(p[0]["latency_us"] == 7.5);
    CHECK(p[0]["latency_bytes"] == 4);
    CHECK(p[0]["link_gbps"] == 63.0);
    CHECK(p[1]["failure"] == hostile);
    CHECK(p[2]["available"] == false);
    CHECK(p[2]["reason"] == invalid_replaced);
    CHECK_FALSE(p[2].contains("points"));  // an unavailable path has its reason only
    CHECK(p[4]["note"] == hostile + invalid_replaced);
    CHECK(p[4]["id"] == "peer:gpu0->gpu1");
    CHECK(text.find('\x01') == std::string::npos);
    CHECK(text.find("\\u0001") != std::string::npos);
}

TEST_CASE("JSON: the keys of docs/bench.md's report, in order, and rates to four decimals") {
    Report r = sample();
    r.paths[4].points[0].gbps = 396.123456789;
    auto j = nlohmann::ordered_json::parse(to_json(r));
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items()) keys.push_back(k);
    CHECK(keys ==
          std::vector<std::string>{"machine", "date", "command", "repetitions", "warmup", "endpoints", "paths"});
    keys.clear();
    for (const auto& [k, v] : j["paths"][0].items()) keys.push_back(k);
    CHECK(keys == std::vector<std::string>{"id", "method", "src", "dst", "bidirectional", "available", "topology",
                                           "reference", "link_gbps", "latency_us", "latency_bytes", "points"});
    CHECK(j["paths"][4]["points"][0]["gbps"] == 396.1235);
    CHECK(j["endpoints"][0] ==
          nlohmann::ordered_json{
              {"name", "host0"}, {"description", "pinned memory on NUMA node 0"}, {"bdf", ""}, {"numa_node", 0}});
}

TEST_CASE("the SVG keeps hostile names well-formed: no control characters, no bytes that are not UTF-8") {
    Report r = sample();
    r.machine = hostile + invalid;
    r.paths[0].id = hostile;
    std::string s = to_svg(r);
    for (unsigned char c : s) CHECK((c >= 0x20 || c == '\n' || c == '\t' || c == '\r'));
    CHECK_NOTHROW(nlohmann::json(s).dump());  // the strict dump throws on bytes that are not UTF-8
    CHECK(
        s.find("q&quot;uote&quot; back\\slash tab\t nl\n cr\r ctl\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\x7f caf\xc3\xa9 "
               "\xf0\x9f\x98\x80 &lt;&amp;&gt;" +
               invalid_replaced + ")</text>") != std::string::npos);
}

TEST_CASE("the SVG draws one line per measured path and escapes the names") {
    std::string s = to_svg(sample());
    CHECK(s.rfind("<svg", 0) == 0);
    CHECK(count(s, "<polyline") == 3);  // the unavailable paths draw nothing
    CHECK(s.find("ce:host0-&gt;gpu0") != std::string::npos);
    CHECK(s.find("->") == std::string::npos);
    CHECK(s.find("4 KiB") != std::string::npos);  // x-axis labels are sizes
    Report empty;
    CHECK(to_svg(empty).find("</svg>") != std::string::npos);
}

TEST_CASE("slow rates keep their digits") {
    Report r;
    PathResult n = make_path("nic", "nic", "host", false);
    n.points = {{64, 0.0123, 0}};
    r.paths = {n};
    CHECK(capture(print_table, r).find("0.0123") != std::string::npos);
    CHECK(capture(print_matrix, r).find("0.0123") != std::string::npos);
}
