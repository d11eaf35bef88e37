// umem's NIC engine driven by GPU warps (tests/gpu/umem_nic_kernels.cu): the warps write descriptors,
// ring doorbells and poll completions themselves; software ports on a CPU thread play the NIC.
#include <catch2/catch_test_macros.hpp>

#include "umem_kernels.hpp"

using namespace bardrive::umem;
using namespace bardrive::umem::gputest;

TEST_CASE("warps drive the NIC engine: every page moved by queue descriptors, reads and write-backs exact") {
    std::string why = device_missing();
    if (!why.empty()) SKIP(why);
    for (std::uint32_t queues : {1u, 8u})
        for (std::uint64_t frames : {std::uint64_t{256}, std::uint64_t{32}}) {
            INFO(queues << " queues, " << frames << " frames for 256 pages");
            NicWarpResult r = run_nic_warps(256, frames, queues, 64, 100);
            CHECK(r.bad_reads == 0);
            CHECK(r.bad_words == 0);
            CHECK(r.fallbacks == 0);
            CHECK(r.broken == 0);
            CHECK(r.moves == r.stats[c_fills] + r.stats[c_writebacks]);
            CHECK(r.frames == r.moves);
            if (frames < 256) CHECK(r.stats[c_evictions] > 0);
        }
}
