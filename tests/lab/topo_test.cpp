// bardrive topo against the live guest of every lab preset: the tree read from the guest's sysfs
// (real kernel, QEMU's root ports, switches and pxb-pcie host bridges) and the matrix the CLI prints
// must match what the preset builds (tests/unit/pci/lab_expect.hpp). Elsewhere it SKIPs.
#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/pci/lab_expect.hpp"
#include "pci/p2p.hpp"
#include "pci/topology.hpp"

using namespace bardrive::pci;

namespace {
const lab_expect::Preset* current_preset() {
    const char* name = std::getenv("BARDRIVE_LAB_PRESET");
    if (!name) return nullptr;
    for (const auto& p : lab_expect::presets())
        if (p.name == std::string(name)) return &p;
    return nullptr;
}

std::string run(const std::string& cmd) {
    std::string out;
    FILE* f = ::popen(cmd.c_str(), "r");
    REQUIRE(f);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    CHECK(::pclose(f) == 0);
    return out;
}
}  // namespace

TEST_CASE("live tree and matrix in the lab guest match the preset", "[lab][pci]") {
    if (!std::getenv("BARDRIVE_LAB"))
        SKIP("not in a lab guest: run through 'meson test --suite lab' (lab/lab run PRESET)");
    const auto* p = current_preset();
    if (!p) SKIP("no expectations for preset " << std::getenv("BARDRIVE_LAB_PRESET"));
    INFO("preset " << p->name);

    LiveSource src;
    auto t = read_topology(src);
    CHECK(t.host_bridges.size() == p->host_bridges);
    for (const auto& pair : p->pairs) {
        INFO(pair.a << " -> " << pair.b);
        auto a = t.find(Bdf::parse(pair.a)), b = t.find(Bdf::parse(pair.b));
        REQUIRE(a);
        REQUIRE(b);
        CHECK(class_name(find_path(t, *a, *b).cls) == std::string(pair.cls));
        CHECK(verdict_name(judge_p2p(t, *a, *b).verdict) == std::string(pair.verdict));
        CHECK(t.devices[*a].driver == "vfio-pci");
        CHECK_FALSE(t.devices[*a].caps_unread);  // root in the guest: capabilities readable
    }

    // The CLI's matrix: map labels to addresses from its "Devices:" list, then read the cells.
    auto out = run(BARDRIVE_CLI " topo --matrix");
    INFO(out);
    std::istringstream is(out);
    std::vector<std::vector<std::string>> rows;
    std::map<std::string, std::string> label_of;
    std::vector<std::string> header;
    bool devices = false;
    for (std::string line; std::getline(is, line);) {
        std::istringstream ls(line);
        std::vector<std::string> tok;
        for (std::string w; ls >> w;) tok.push_back(w);
        if (tok.empty()) continue;
        if (tok[0] == "Devices:")
            devices = true;
        else if (devices && tok.size() >= 2)
            label_of[tok[1]] = tok[0];
        else if (header.empty())
            header = tok;
        else if (tok[0].size() > 2 && (tok[0].rfind("NIC", 0) == 0 || tok[0].rfind("DEV", 0) == 0))
            rows.push_back(tok);
    }
    REQUIRE(label_of.size() == p->matrix.size());
    for (const auto& pair : p->pairs) {
        std::string la = label_of[pair.a], lb = label_of[pair.b];
        INFO(pair.a << " (" << la << ") -> " << pair.b << " (" << lb << ")");
        std::size_t col = 0;
        for (std::size_t i = 0; i < header.size(); ++i)
            if (header[i] == lb) col = i + 1;  // rows start with their own label
        REQUIRE(col > 0);
        bool found = false;
        for (const auto& r : rows)
            if (r[0] == la && col < r.size()) {
                CHECK(r[col] == pair.cls);
                found = true;
            }
        CHECK(found);
    }
    // The tree names the preset's devices with their driver.
    auto tree = run(BARDRIVE_CLI " topo");
    for (const auto& bdf : p->matrix) CHECK(tree.find(std::string(bdf) + " [") != std::string::npos);
    CHECK(tree.find("vfio-pci") != std::string::npos);
}
