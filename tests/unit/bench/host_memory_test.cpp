#include "bench/p2p/host_memory.hpp"

#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"

using namespace bardrive::bench;

TEST_CASE("host memory is page-aligned, zeroed and bound to the node asked for") {
    HostNodes nodes;
    REQUIRE_FALSE(nodes.nodes().empty());
    const int node = nodes.nodes().front();
    HostBuffer b(nodes, node, 1 << 20);
    CHECK(b.size() == (1u << 20));
    CHECK(b.node() == node);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 4096 == 0);
    auto* p = static_cast<unsigned char*>(b.data());
    CHECK(p[0] == 0);
    CHECK(p[(1 << 20) - 1] == 0);
    std::memset(p, 0xab, 1 << 20);  // writable end to end
    HostBuffer moved(std::move(b));
    CHECK(moved.data() == p);
    CHECK(b.data() == nullptr);
}

TEST_CASE("a NUMA node that does not exist is refused") {
    HostNodes nodes;
    CHECK_THROWS_AS(HostBuffer(nodes, 4095, 4096), bardrive::Error);
}
