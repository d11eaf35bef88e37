// bardrive bench's GPU paths on a real GPU: every path must move the right bytes at every size
// (each path checks what landed after its sweep), peer rows run or say why, and a sweep that
// does not fit in GPU memory is refused with the reason. SKIPs where there is no GPU.
#include <catch2/catch_test_macros.hpp>

#include "bench/p2p/gpu.hpp"
#include "core/error.hpp"

using namespace bardrive::bench;

namespace {

GpuList gpus_or_skip() {
    GpuList g = list_gpus();
    if (g.devices.empty()) SKIP(g.reason);
    return g;
}

}  // namespace

TEST_CASE("every GPU path moves the right bytes at every size", "[gpu][bench]") {
    GpuList gpus = gpus_or_skip();
    HostNodes nodes;
    SweepConfig cfg;
    cfg.sizes = parse_sizes("4K..16M:4");
    cfg.repetitions = 2;
    Progress quiet(false);
    auto rows = run_gpu_paths(gpus, nodes, cfg, quiet);
    int measured = 0;
    for (const auto& r : rows) {
        INFO(r.id << " reason: " << r.reason << " failure: " << r.failure);
        if (!r.available()) continue;
        ++measured;
        CHECK(r.failure.empty());
        REQUIRE(r.points.size() == cfg.sizes.size());
        for (const auto& p : r.points) CHECK(p.gbps > 0);
        if (r.method == "ce" || r.method == "sm") CHECK(r.points.back().ref_gbps > 0);
        if (r.method == "ce" && !r.bidirectional) CHECK(r.latency_us > 0);
    }
    // ce, sm: 3 each; zc-read, zc-write: 1 each, per GPU and NUMA node.
    CHECK(measured >= 8 * static_cast<int>(gpus.devices.size() * nodes.nodes().size()));
    quiet.finish();
    CHECK(quiet.done() == measured * static_cast<int>(cfg.sizes.size()));
}

TEST_CASE("GPU-to-GPU rows run on two GPUs and say why on one", "[gpu][bench]") {
    GpuList gpus = gpus_or_skip();
    HostNodes nodes;
    SweepConfig cfg;
    cfg.sizes = {1 << 20};
    cfg.repetitions = 1;
    cfg.methods = {"peer", "nopeer"};
    Progress quiet(false);
    auto rows = run_gpu_paths(gpus, nodes, cfg, quiet);
    REQUIRE_FALSE(rows.empty());
    for (const auto& r : rows) {
        INFO(r.id << " reason: " << r.reason << " failure: " << r.failure);
        CHECK((r.method == "peer" || r.method == "nopeer"));
        if (gpus.devices.size() == 1) CHECK(r.reason.find("one GPU") != std::string::npos);
        if (r.available()) CHECK(r.failure.empty());
    }
}

TEST_CASE("a sweep larger than GPU memory is refused with the reason", "[gpu][bench]") {
    GpuList gpus = gpus_or_skip();
    HostNodes nodes;
    SweepConfig cfg;
    cfg.sizes = {1ull << 40};
    Progress quiet(false);
    try {
        run_gpu_paths(gpus, nodes, cfg, quiet);
        FAIL("a 1 TiB sweep was accepted");
    } catch (const bardrive::Error& e) {
        CHECK(std::string(e.what()).find("--sizes") != std::string::npos);
    }
}
