#include "bench/p2p/report.hpp"

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
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
