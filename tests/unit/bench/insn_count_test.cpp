// bench/nic/insn_count.hpp: the lines lab/plugins/insn_count.c writes are read back exactly, anything else is
// refused; InsnCounter reads a log as the plugin appends it (here written by the test) and picks its own tags.
#include "bench/nic/insn_count.hpp"

#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using bardrive::bench::InsnCounter;
using bardrive::bench::parse_insn_snapshot;

TEST_CASE("insn_count: a plugin line parses", "[insn_count]") {
    auto s = parse_insn_snapshot("seq=7 vcpu=1 tag=18446744073709551615 counts=123456789012,42 b0=5,6 b1=0,9");
    REQUIRE(s);
    CHECK(s->seq == 7);
    CHECK(s->vcpu == 1);
    CHECK(s->tag == 18446744073709551615ull);
    CHECK(s->counts == std::vector<std::uint64_t>{123456789012ull, 42});
    CHECK(s->b0 == std::vector<std::uint64_t>{5, 6});
    CHECK(s->b1 == std::vector<std::uint64_t>{0, 9});
    auto one = parse_insn_snapshot("seq=1 vcpu=0 tag=0 counts=5 b0=0 b1=0");
    REQUIRE(one);
    CHECK(one->counts.size() == 1);
}

TEST_CASE("insn_count: since() is one vCPU's difference", "[insn_count]") {
    auto a = parse_insn_snapshot("seq=1 vcpu=0 tag=1 counts=100,1000 b0=1,2 b1=3,4");
    auto b = parse_insn_snapshot("seq=2 vcpu=0 tag=2 counts=150,4000 b0=1,12 b1=3,5");
    REQUIRE(a);
    REQUIRE(b);
    CHECK(b->since(*a, 0) == 50);
    CHECK(b->since(*a, 1) == 3000);
    CHECK(b->since(*a, 2) == 0);  // no such vCPU
    CHECK(a->since(*b, 0) == 0);  // backwards: never a huge unsigned number
    CHECK(b->bucket_since(*a, 0, 1) == 10);
    CHECK(b->bucket_since(*a, 1, 1) == 1);
    CHECK(b->bucket_since(*a, 1, 0) == 0);
    CHECK(a->bucket_since(*b, 0, 1) == 0);
}

TEST_CASE("insn_count: malformed lines are refused", "[insn_count]") {
    REQUIRE(parse_insn_snapshot("seq=1 vcpu=0 tag=0 counts=1 b0=0 b1=0"));  // the lines below break this one
    for (const char* bad :
         {"", "seq=1", "seq=1 vcpu=0 tag=0", "seq=1 vcpu=0 tag=0 counts=1", "seq=1 vcpu=0 tag=0 counts=1 b0=0",
          "seq=1 vcpu=0 tag=0 counts= b0=0 b1=0", "seq=1 vcpu=0 tag=0 counts=1, b0=0 b1=0",
          "seq=1 vcpu=0 tag=0 counts=,1 b0=0 b1=0", "seq=0 vcpu=0 tag=0 counts=1 b0=0 b1=0",
          "seq=1 vcpu=2 tag=0 counts=1,2 b0=0,0 b1=0,0", "seq=1 vcpu=0 tag=0 counts=1,2 b0=0 b1=0,0",
          "seq=1 vcpu=0 tag=0 counts=1 b0=0 b1=0 extra=2", "vcpu=0 seq=1 tag=0 counts=1 b0=0 b1=0",
          "seq=1 vcpu=0 tag=0 counts=1 b1=0 b0=0", "seq=1 vcpu=0 tag=-1 counts=1 b0=0 b1=0",
          "seq=1 vcpu=0 tag=0 counts=1x b0=0 b1=0", "seq=1  vcpu=0 tag=0 counts=1 b0=0 b1=0",
          "seq=99999999999999999999 vcpu=0 tag=0 counts=1 b0=0 b1=0", "seq=1 vcpu=0 tag=0 counts=1 b0=0 b1=0 "})
        CHECK_FALSE(parse_insn_snapshot(bad));
}

TEST_CASE("insn_count: InsnCounter reads the log as it grows and keeps its own tags", "[insn_count]") {
    char dir[] = "/tmp/insn-count-test-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string log = std::string(dir) + "/insn-counts";
    std::ofstream(log).close();
    const char* old = std::getenv("BARDRIVE_LAB_OUT");
    std::string saved = old ? old : "";
    ::setenv("BARDRIVE_LAB_OUT", dir, 1);
    {
        InsnCounter c;
        REQUIRE(c.available());
        const std::uint64_t mine = static_cast<std::uint64_t>(::getpid()) << 32;
        std::uint64_t t1 = c.mark();  // outside QEMU the marker is a NOP: the test plays the plugin
        std::uint64_t t2 = c.mark();
        CHECK(t1 >> 32 == mine >> 32);
        CHECK(t2 == t1 + 1);
        std::ofstream out(log, std::ios::app);
        out << "seq=1 vcpu=0 tag=" << t1 << " counts=10,20 b0=0,0 b1=0,0\n"
            << "seq=2 vcpu=1 tag=7 counts=11,25 b0=0,0 b1=0,0\n"  // another process's
            << "garbage\n"
            << "seq=3 vcpu=0 tag=" << t2 << " counts=40,20 b0=0,0 b1=0,";  // half a line: not yet
        out.flush();
        auto a = c.get(t1);
        REQUIRE(a);
        CHECK(a->counts[1] == 20);
        CHECK_FALSE(c.get(t2));
        CHECK_FALSE(c.get(7));  // not ours
        CHECK(c.malformed() == 1);
        out << "0\n";
        out.flush();
        auto b = c.get(t2);
        REQUIRE(b);
        CHECK(b->counts[1] == 20);
        CHECK(b->b1[1] == 0);
        CHECK(b->since(*a, 0) == 30);
    }
    if (old)
        ::setenv("BARDRIVE_LAB_OUT", saved.c_str(), 1);
    else
        ::unsetenv("BARDRIVE_LAB_OUT");
    std::filesystem::remove_all(dir);
}

TEST_CASE("insn_count: without the lab's log the counter is unavailable", "[insn_count]") {
    const char* old = std::getenv("BARDRIVE_LAB_OUT");
    std::string saved = old ? old : "";
    ::setenv("BARDRIVE_LAB_OUT", "/nonexistent-bardrive-dir", 1);
    InsnCounter c;
    CHECK_FALSE(c.available());
    CHECK_FALSE(c.now());
    if (old)
        ::setenv("BARDRIVE_LAB_OUT", saved.c_str(), 1);
    else
        ::unsetenv("BARDRIVE_LAB_OUT");
}
