// The paging protocol on CPU threads standing in for GPU warps (same code as the kernels run).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "umem/host_pager.hpp"

using namespace bardrive::umem;

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kWords = kPage / 8;

// Backing store whose word w of page p holds p * kWords + w, so every read can be checked.
std::vector<std::uint64_t> numbered(std::uint64_t pages) {
    std::vector<std::uint64_t> d(pages * kWords);
    for (std::uint64_t i = 0; i < d.size(); ++i) d[i] = i;
    return d;
}

std::byte* bytes(std::vector<std::uint64_t>& d) { return reinterpret_cast<std::byte*>(d.data()); }

Config config(std::uint64_t pages, std::uint64_t frames, Admission a = Admission::migrate) {
    Config c;
    c.page_size = kPage;
    c.bytes = pages * kPage;
    c.frames = frames;
    c.admission = a;
    return c;
}

// Word w of the page at p (a frame, host memory).
std::uint64_t word(const std::byte* p, std::uint64_t w) {
    std::uint64_t x;
    std::memcpy(&x, p + w * 8, 8);
    return x;
}
std::uint64_t word(const HostPager::Access& a, std::uint64_t w) { return word(a.data(), w); }

// body(t) for t in [0, n) on n threads that start together (a barrier, so that races are likely), joined before it
// returns.
template <class F>
void on_threads(unsigned n, F&& body) {
    std::barrier start(static_cast<std::ptrdiff_t>(n));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < n; ++t)
        ts.emplace_back([&, t] {
            start.arrive_and_wait();
            body(t);
        });
    for (auto& t : ts) t.join();
}

}  // namespace

TEST_CASE("PTE transitions keep every field in its bits") {
    Pte e{0};
    CHECK(e.state() == PageState::host);
    e.word += Pte::pin_one * 3;
    e.word |= static_cast<std::uint64_t>(PageState::migrating);
    e.word += 1 + (std::uint64_t{0xbcdef12} << Pte::frame_shift) + Pte::dirty + 2 * Pte::writer_one;
    CHECK(e.state() == PageState::resident);
    CHECK(e.frame() == 0xbcdef12u);
    CHECK(e.writers() == 2);
    CHECK(e.pins() == 3);
    CHECK(e.is(Pte::dirty));
    CHECK_FALSE(e.is(Pte::referenced));
}

TEST_CASE("an array size near 2^64 is refused, never a page count wrapped to 0") {
    Config c = config(4, 2);
    for (std::uint64_t bytes : {~std::uint64_t{0}, ~std::uint64_t{0} - 100, std::uint64_t{1} << 63}) {
        INFO(bytes);
        c.bytes = bytes;
        CHECK(page_count(c) >= bytes / c.page_size);  // rounded up, not wrapped
        CHECK_THROWS_WITH(check(c), Catch::Matchers::ContainsSubstring("more pages than a 32-bit page index holds"));
    }
    c.bytes = (std::uint64_t{1} << 32) * c.page_size - 1;  // the last size that still fits
    CHECK(page_count(c) == (std::uint64_t{1} << 32));
}

TEST_CASE("a frame pool larger than the machine is refused naming frames and page size, not std::bad_alloc") {
    Config c = config(4, (std::uint64_t{1} << 28) - 2);  // fits the PTE's frame field
    c.page_size = 2u << 20;                              // 512 TiB of frames
    c.bytes = 4 * c.page_size;
    std::vector<std::byte> data(4);
    CHECK_THROWS_WITH(HostPager(c, data.data()),
                      Catch::Matchers::ContainsSubstring("268435454 frames of 2097152 B") &&
                          Catch::Matchers::ContainsSubstring("more than this machine's memory") &&
                          Catch::Matchers::ContainsSubstring("give fewer frames"));
}

TEST_CASE("bad configurations are refused with a hint") {
    std::vector<std::uint64_t> d = numbered(4);
    Config c = config(4, 2);
    c.page_size = 3000;
    CHECK_THROWS_AS(HostPager(c, bytes(d)), bardrive::Error);
    c.page_size = 64;
    CHECK_THROWS_AS(HostPager(c, bytes(d)), bardrive::Error);
    c.page_size = 4u << 20;
    CHECK_THROWS_AS(HostPager(c, bytes(d)), bardrive::Error);
    c = config(4, 0);
    try {
        HostPager p(c, bytes(d));
        FAIL("an empty frame pool was accepted");
    } catch (const bardrive::Error& e) {
        CHECK(e.hint().find("at least one frame") != std::string::npos);
    }
}

TEST_CASE("a fault fills a frame, the next access hits it") {
    std::vector<std::uint64_t> d = numbered(8);
    HostPager p(config(8, 8), bytes(d));
    {
        auto a = p.access(5, false);
        CHECK(a.data() != bytes(d) + 5 * kPage);  // served from a frame, not host memory
        CHECK(word(a, 7) == 5 * kWords + 7);
    }
    CHECK(p.state(5) == PageState::resident);
    {
        auto a = p.access(5, false);
        CHECK(word(a, 0) == 5 * kWords);
    }
    Stats s = p.stats();
    CHECK(s[c_faults] == 1);
    CHECK(s[c_fills] == 1);
    CHECK(s[c_hits] == 1);
    CHECK(s[c_bytes_in] == kPage);
    CHECK(s.bytes_used == kPage);
}

TEST_CASE("2 MiB pages: faults, eviction and write-back move whole large pages") {
    constexpr std::uint64_t big = 2u << 20;
    std::vector<std::uint64_t> d(4 * big / 8);
    for (std::uint64_t i = 0; i < d.size(); ++i) d[i] = i;
    Config c;
    c.bytes = 4 * big;
    c.page_size = big;
    c.frames = 2;
    HostPager p(c, bytes(d));
    for (std::uint64_t pg = 0; pg < 4; ++pg) {
        auto a = p.access(pg, true);
        REQUIRE(a.bytes() == big);
        CHECK(word(a, big / 8 - 1) == (pg + 1) * big / 8 - 1);
        std::uint64_t v = 42 + pg;
        std::memcpy(a.data(), &v, 8);
    }
    p.flush();
    for (std::uint64_t pg = 0; pg < 4; ++pg) CHECK(d[pg * big / 8] == 42 + pg);
    Stats s = p.stats();
    CHECK(s[c_evictions] == 2);
    CHECK(s[c_bytes_in] == 4 * big);
    CHECK(s[c_bytes_out] == 4 * big);
    CHECK(s.bytes_used == 2 * big);
}

TEST_CASE("256-byte pages: small pages move whole, exact through eviction") {
    std::vector<std::uint64_t> d = numbered(2);  // 8 KiB: 32 pages of 256 B
    Config c;
    c.bytes = 2 * kPage;
    c.page_size = 256;
    c.frames = 4;
    HostPager p(c, bytes(d));
    for (std::uint64_t pg = 0; pg < 32; ++pg) {
        auto a = p.access(pg, pg % 2 == 0);
        REQUIRE(a.bytes() == 256);
        CHECK(word(a, 1) == pg * 32 + 1);
        if (pg % 2 == 0) {
            std::uint64_t v = 9000 + pg;
            std::memcpy(a.data() + 8, &v, 8);
        }
    }
    p.flush();
    for (std::uint64_t pg = 0; pg < 32; ++pg) {
        CHECK(d[pg * 32 + 1] == (pg % 2 == 0 ? 9000 + pg : pg * 32 + 1));
        CHECK(d[pg * 32 + 2] == pg * 32 + 2);
    }
    Stats s = p.stats();
    CHECK(s[c_bytes_in] == 32 * 256);
    CHECK(s[c_evictions] == 28);
}

TEST_CASE("the last partial page moves only its bytes") {
    std::vector<std::uint64_t> d = numbered(3);
    Config c = config(3, 3);
    c.bytes = 2 * kPage + 1808;
    HostPager p(c, bytes(d));
    auto a = p.access(2, false);
    CHECK(a.bytes() == 1808);
    CHECK(word(a, 225) == 2 * kWords + 225);
    CHECK(p.stats()[c_bytes_in] == 1808);
}

TEST_CASE("oversubscribed: dirty frames are written back on eviction and on flush") {
    const std::uint64_t pages = 64;
    std::vector<std::uint64_t> d = numbered(pages);
    HostPager p(config(pages, 4), bytes(d));
    for (std::uint64_t pg = 0; pg < pages; ++pg) {
        auto a = p.access(pg, true);
        std::uint64_t v = 1000000 + pg;
        std::memcpy(a.data() + 8, &v, 8);
    }
    Stats s = p.stats();
    CHECK(s[c_evictions] == pages - 4);
    CHECK(s[c_writebacks] == pages - 4);
    CHECK(s.frames_used == 4);
    p.flush();
    for (std::uint64_t pg = 0; pg < pages; ++pg) {
        CHECK(d[pg * kWords + 1] == 1000000 + pg);
        CHECK(d[pg * kWords + 2] == pg * kWords + 2);  // untouched words survive the round trip
    }
    CHECK(p.stats()[c_writebacks] == pages);
}

TEST_CASE("no pin on a hit when every page has a frame of its own, a pin when not") {
    std::vector<std::uint64_t> d = numbered(4);
    {
        HostPager p(config(4, 4), bytes(d));
        auto a = p.access(2, false);
        CHECK(Pte{p.view().pte[2]}.pins() == 0);
        auto b = p.access(2, false);
        CHECK(Pte{p.view().pte[2]}.pins() == 0);
    }
    {
        HostPager p(config(4, 2), bytes(d));
        auto a = p.access(2, false);
        auto b = p.access(2, false);
        CHECK(Pte{p.view().pte[2]}.pins() == 2);
    }
    {
        HostPager p(config(4, 4, Admission::read_through), bytes(d));
        auto a = p.access(2, false);
        CHECK(Pte{p.view().pte[2]}.pins() == 1);  // a reader in host memory: pinned, not a writer
        CHECK(Pte{p.view().pte[2]}.writers() == 0);
        auto w = p.access(2, true);
        CHECK(Pte{p.view().pte[2]}.pins() == 1);
        CHECK(Pte{p.view().pte[2]}.writers() == 1);  // a writer in place: the page must not migrate under it
    }
    HostPager p(config(4, 4, Admission::read_through), bytes(d));
    {
        auto a = p.access(2, true);
        auto b = p.access(2, false);
    }
    CHECK(Pte{p.view().pte[2]}.pins() == 0);
    CHECK(Pte{p.view().pte[2]}.writers() == 0);
}

TEST_CASE("a page read in place by others still migrates; one written in place does not") {
    // Second touch: the first access reads through, the second migrates. Readers in host memory
    // hold no pin, so a hot page that is always being read in place is not kept out of the pool.
    std::vector<std::uint64_t> d = numbered(4);
    HostPager p(config(4, 4, Admission::second_touch), bytes(d));
    auto reader = p.access(1, false);
    REQUIRE(reader.data() == bytes(d) + kPage);
    {
        auto b = p.access(1, false);
        CHECK(b.data() != bytes(d) + kPage);
        CHECK(word(b, 4) == kWords + 4);
    }
    CHECK(p.state(1) == PageState::resident);
    CHECK(Pte{p.view().pte[1]}.pins() == 1);  // the reader's pin moved with the page: no eviction under it
    CHECK(word(reader, 4) == kWords + 4);     // host memory still holds the page for its reader
    auto writer = p.access(2, true);
    REQUIRE(writer.data() == bytes(d) + 2 * kPage);
    {
        auto b = p.access(2, false);
        CHECK(b.data() == bytes(d) + 2 * kPage);  // pinned by the writer: read in place too
    }
    CHECK(p.state(2) == PageState::host);
}

TEST_CASE("threads reading single elements (GPU get()'s path) see every value, pool ample or small") {
    // What Array::get does on a GPU thread: an unpinned look-up first when nothing is ever evicted,
    // else the protocol: a fill or a hit, a read and a release.
    const std::uint64_t pages = 64;
    for (std::uint64_t frames : {pages, pages / 4, std::uint64_t{2}}) {
        std::vector<std::uint64_t> d = numbered(pages);
        HostPager p(config(pages, frames), bytes(d));
        const PagerView& v = p.view();
        std::vector<std::uint64_t> bad(8, 0);
        on_threads(8, [&](unsigned t) {
            std::mt19937_64 rng(t + 17 * frames);
            ThreadGroup g = ThreadGroup::current();
            CpuMover m;
            for (int i = 0; i < 20000; ++i) {
                std::uint64_t page = rng() % 8 == 0 ? rng() % pages : rng() % 4, w = rng() % kWords;
                std::uint64_t x;
                if (const std::byte* f = find_resident(v, page)) {
                    std::memcpy(&x, f + w * 8, 8);
                } else {
                    const std::byte* q = acquire(v, page, false, g, m);
                    std::memcpy(&x, q + w * 8, 8);
                    release(v, page, g, q, false);
                }
                bad[t] += x != page * kWords + w;
            }
        });
        INFO("frames " << frames);
        for (unsigned t = 0; t < 8; ++t) CHECK(bad[t] == 0);
        for (std::uint64_t pg = 0; pg < pages; ++pg) CHECK(Pte{v.pte[pg]}.pins() == 0);
        if (frames == pages) CHECK(p.stats()[c_fills] <= pages);  // no page filled twice
    }
}

TEST_CASE("concurrent faults on one page are coalesced into one fill") {
    const int threads = 8;
    for (int round = 0; round < 20; ++round) {
        std::vector<std::uint64_t> d = numbered(4);
        HostPager p(config(4, 4), bytes(d));
        std::vector<int> ok(threads, 0);
        on_threads(threads, [&](int t) {
            auto a = p.access(3, false);
            ok[t] = word(a, 9) == 3 * kWords + 9;
        });
        for (int t = 0; t < threads; ++t) CHECK(ok[t]);
        Stats s = p.stats();
        CHECK(s[c_fills] <= 1);  // a page is never filled twice (late comers wait or read through)
        CHECK(s[c_hits] + s[c_fills] + s[c_read_through] == threads);
    }
}

TEST_CASE("threads as warps: random reads and writes through a small pool stay exact") {
    const std::uint64_t pages = 256;
    const int threads = 6;
    const int ops = 4000;
    for (Eviction ev : {Eviction::clock, Eviction::fifo, Eviction::random}) {
        std::vector<std::uint64_t> d = numbered(pages);
        Config c = config(pages, 16);
        c.eviction = ev;
        c.prefetch_depth = 2;
        HostPager p(c, bytes(d));
        std::vector<std::vector<std::uint64_t>> expect(threads, std::vector<std::uint64_t>(pages, 0));
        std::vector<int> bad(threads, 0);
        on_threads(threads, [&](int t) {
            std::mt19937_64 rng(t * 7919 + 1);
            for (int i = 0; i < ops; ++i) {
                std::uint64_t pg = rng() % pages;
                if (i % 3 == 0) pg = (pg & ~std::uint64_t{7}) + (i / 3) % 8;  // short sequential runs
                bool write = rng() % 2;
                auto a = p.access(pg, write);
                if (word(a, 100) != pg * kWords + 100) ++bad[t];
                if (write) {
                    // word 200 + t belongs to thread t on every page: a private counter.
                    std::uint64_t v = word(a, 200 + t) + 1;
                    std::memcpy(a.data() + (200 + t) * 8, &v, 8);
                    ++expect[t][pg];
                }
            }
        });
        p.flush();
        for (int t = 0; t < threads; ++t) {
            CHECK(bad[t] == 0);
            for (std::uint64_t pg = 0; pg < pages; ++pg)
                REQUIRE(d[pg * kWords + 200 + t] == pg * kWords + 200 + t + expect[t][pg]);
        }
        Stats s = p.stats();
        CHECK(s[c_evictions] > 0);
        CHECK(s[c_hits] + s[c_faults] >= std::uint64_t{threads} * ops);
    }
}

TEST_CASE("frame exhaustion never deadlocks: accesses read through while all frames are pinned") {
    const std::uint64_t pages = 16;
    std::vector<std::uint64_t> d = numbered(pages);
    HostPager p(config(pages, 2), bytes(d));
    auto held0 = p.access(0, false);
    auto held1 = p.access(1, true);  // both frames pinned now
    auto other = std::async(std::launch::async, [&] {
        int good = 0;
        for (std::uint64_t pg = 2; pg < pages; ++pg) {
            auto a = p.access(pg, true);
            good += word(a, 3) == pg * kWords + 3;
            std::uint64_t v = 77;
            std::memcpy(a.data() + 16, &v, 8);  // lands in host memory directly
        }
        return good;
    });
    REQUIRE(other.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    CHECK(other.get() == static_cast<int>(pages - 2));
    for (std::uint64_t pg = 2; pg < pages; ++pg) CHECK(d[pg * kWords + 2] == 77);
    Stats s = p.stats();
    CHECK(s[c_exhausted] == pages - 2);
    CHECK(s[c_read_through] == pages - 2);
    CHECK(p.state(0) == PageState::resident);
    CHECK(p.state(1) == PageState::resident);
}

TEST_CASE("admission: second touch migrates, read-through never does") {
    std::vector<std::uint64_t> d = numbered(4);
    HostPager two(config(4, 4, Admission::second_touch), bytes(d));
    {
        auto a = two.access(1, false);
        CHECK(a.data() == bytes(d) + kPage);
    }
    CHECK(two.state(1) == PageState::host);
    {
        auto a = two.access(1, false);
        CHECK(a.data() != bytes(d) + kPage);
        CHECK(word(a, 1) == kWords + 1);
    }
    CHECK(two.state(1) == PageState::resident);

    HostPager never(config(4, 4, Admission::read_through), bytes(d));
    for (int i = 0; i < 3; ++i) {
        auto a = never.access(2, true);
        CHECK(a.data() == bytes(d) + 2 * kPage);
    }
    CHECK(never.state(2) == PageState::host);
    CHECK(never.stats()[c_fills] == 0);
    CHECK(never.stats()[c_read_through] == 3);
}

TEST_CASE("adaptive admission: migrates what fits, reads through when the pool thrashes") {
    const std::uint64_t pages = 1024;
    std::vector<std::uint64_t> d = numbered(pages);
    HostPager fits(config(pages, 64, Admission::adaptive), bytes(d));
    for (int pass = 0; pass < 4; ++pass)
        for (std::uint64_t pg = 0; pg < 64; ++pg) {
            auto a = fits.access(pg * 7, false);
            CHECK(word(a, 5) == pg * 7 * kWords + 5);
        }
    CHECK(fits.stats()[c_fills] == 64);
    CHECK(fits.stats()[c_hits] == 3 * 64);

    HostPager scan(config(pages, 64, Admission::adaptive), bytes(d));
    HostPager naive(config(pages, 64, Admission::migrate), bytes(d));
    for (int pass = 0; pass < 4; ++pass)
        for (std::uint64_t pg = 0; pg < pages; ++pg) {
            auto a = scan.access(pg, false);
            auto b = naive.access(pg, false);
            CHECK(word(a, 9) == pg * kWords + 9);
        }
    Stats s = scan.stats(), n = naive.stats();
    CHECK(n[c_hits] == 0);  // a cyclic scan larger than the pool defeats CLOCK
    CHECK(n[c_fills] == 4 * pages);
    CHECK(s[c_read_through] > pages);  // thrash detected: most misses read in place
    CHECK(s[c_fills] < pages);         // only a sample is admitted...
    CHECK(s[c_hits] > 0);              // ...and what stays resident is hit on the next pass
}

TEST_CASE(
    "adaptive admission: pages hit too few times to pay for a 4 KiB fill read through; small pages keep migrating") {
    // Each page is hit twice after its fill and then evicted by the cycle: two hits pay for a page of
    // 256 B (paid_hits 2), not for one of 4 KiB (paid_hits 5).
    const std::uint64_t pages = 1024;
    std::vector<std::uint64_t> d = numbered(pages);
    for (std::uint64_t page_size : {std::uint64_t{4096}, std::uint64_t{256}}) {
        Config c;
        c.bytes = pages * kPage;
        c.page_size = page_size;
        c.frames = 64;
        c.admission = Admission::adaptive;
        HostPager p(c, bytes(d));
        CHECK(p.view().paid_hits() == (page_size == 4096 ? 5u : 2u));
        const std::uint64_t n = c.bytes / page_size;
        for (int pass = 0; pass < 3; ++pass)
            for (std::uint64_t pg = 0; pg < n; ++pg)
                for (int k = 0; k < 3; ++k) {
                    auto a = p.access(pg, false);
                    REQUIRE(word(a, 1) == pg * (page_size / 8) + 1);
                }
        Stats s = p.stats();
        INFO("page size " << page_size);
        if (page_size == 4096) {
            CHECK(s[c_read_through] > s[c_fills]);  // judged thrashing: mostly read in place
        } else {
            CHECK(s[c_read_through] < n);  // paid: keeps migrating
            CHECK(s[c_hits] >= 2 * (s[c_fills] - 64));
        }
    }
}

TEST_CASE("adaptive admission: a thrashing pool admits fills for about 1/64 of the bytes read in place") {
    // A cycle over 1024 pages through 64 frames, each page read once a pass: the pool thrashes once its first 64
    // evictions did not pay (a page in a frame is read once a pass, fewer times than pays for its fill). Then a miss is
    // admitted with probability 1/64 divided by what its fill moves against what it reads: 4 KiB fills for 64-byte
    // reads, 1/2048; for whole pages, and 128 B pages read 8 bytes at a time (a read of host memory counts as 128 bytes
    // at least), 1/64.
    const std::uint64_t pages = 1024, frames = 64, passes = 16, misses = pages * passes;
    const std::uint64_t before = 2 * frames;  // the never-used frames, then the window's first 64 evictions
    struct Case {
        std::uint64_t page_size, offset, bytes;
        bool small;  // the fill moves many times what the access reads
    };
    for (Case k : {Case{4096, 1000, 64, true}, Case{4096, 0, 4096, false}, Case{128, 40, 8, false}}) {
        INFO("page " << k.page_size << ", " << k.bytes << " bytes read");
        std::vector<std::uint64_t> d = numbered(pages * k.page_size / kPage);
        Config c;
        c.bytes = pages * k.page_size;
        c.page_size = k.page_size;
        c.frames = frames;
        c.admission = Admission::adaptive;
        HostPager p(c, bytes(d));
        const PagerView& v = p.view();
        ThreadGroup g{0};
        CpuMover m;
        std::uint64_t wrong = 0;
        for (std::uint64_t pass = 0; pass < passes; ++pass)
            for (std::uint64_t pg = 0; pg < pages; ++pg) {
                const std::byte* a = acquire(v, pg, false, g, m, k.bytes, k.offset);
                const std::uint64_t w = (pg * k.page_size + k.offset) / 8;
                wrong += word(a, k.offset / 8) != w;
                release(v, pg, g, a, false);
            }
        CHECK(wrong == 0);
        Stats s = p.stats();
        CHECK(s[c_fills] >= before);
        const std::uint64_t sampled = s[c_fills] - before;  // about (misses - before) / 64, or / 2048
        if (k.small)
            CHECK(sampled * 256 < misses);
        else
            CHECK(sampled * 128 > misses);
    }
}

TEST_CASE("adaptive admission: a small page hit once after its fill, by the filler's own next read, did not pay") {
    // BFS's row offsets: an access reads row[v], then row[v + 1] from the same 128 B page, and the
    // page is not read again before the cycle evicts it. One hit is not reuse: the pool is judged
    // thrashing and misses read in place, where every page was filled when one hit paid.
    const std::uint64_t pages = 1024;
    std::vector<std::uint64_t> d = numbered(pages);
    Config c;
    c.bytes = pages * kPage;
    c.page_size = 128;
    c.frames = 256;
    c.admission = Admission::adaptive;
    HostPager p(c, bytes(d));
    REQUIRE(p.view().paid_hits() == 2);
    const std::uint64_t n = c.bytes / c.page_size;
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint64_t pg = 0; pg < n; ++pg)
            for (std::uint64_t w : {std::uint64_t{3}, std::uint64_t{4}}) {  // row[v], row[v + 1]
                auto a = p.access(pg, false);
                REQUIRE(word(a, w) == pg * 16 + w);
            }
    Stats s = p.stats();
    CHECK(s[c_read_through] > s[c_fills]);  // judged thrashing: mostly read in place
    CHECK(s[c_fills] < n);
}

TEST_CASE("a hit counter per residency: counts until the hits pay, starts again at the next fill") {
    std::vector<std::uint64_t> d = numbered(4);
    HostPager p(config(4, 1), bytes(d));
    for (int i = 0; i < 10; ++i) p.access(0, false);
    CHECK(Pte{p.view().pte[0]}.hits() == 5);  // counted until it pays (4 KiB: 5 hits)
    CHECK(Pte{p.view().pte[0]}.pins() == 0);
    p.access(1, false);  // evicts page 0
    CHECK(Pte{p.view().pte[0]}.hits() == 0);
    CHECK(p.state(0) == PageState::host);
}

TEST_CASE("a sequential stream prefetches the next pages") {
    std::vector<std::uint64_t> d = numbered(16);
    Config c = config(16, 16);
    c.prefetch_depth = 4;
    HostPager p(c, bytes(d));
    { auto a = p.access(0, false); }  // nothing before page 0: no stream yet
    CHECK(p.state(1) == PageState::host);
    { auto a = p.access(1, false); }  // page 0 resident: a stream, fetch 2..5
    for (std::uint64_t pg = 2; pg <= 5; ++pg) CHECK(p.state(pg) == PageState::resident);
    CHECK(p.state(6) == PageState::host);
    {
        auto a = p.access(4, false);
        CHECK(word(a, 11) == 4 * kWords + 11);
    }
    Stats s = p.stats();
    CHECK(s[c_prefetches] == 4);
    CHECK(s[c_fills] == 2);
    CHECK(s[c_hits] == 1);
}

TEST_CASE("CLOCK keeps a hot page that FIFO evicts") {
    auto hot_hits = [](Eviction ev) {
        std::vector<std::uint64_t> d = numbered(64);
        Config c = config(64, 4);
        c.eviction = ev;
        HostPager p(c, bytes(d));
        std::uint64_t hits_before = 0, hot = 0;
        for (std::uint64_t pg = 1; pg < 64; ++pg) {
            hits_before = p.stats()[c_hits];
            { auto a = p.access(0, false); }
            hot += p.stats()[c_hits] - hits_before;
            { auto a = p.access(pg, false); }
        }
        return hot;
    };
    std::uint64_t clock = hot_hits(Eviction::clock), fifo = hot_hits(Eviction::fifo);
    CHECK(clock == 62);  // every access to the hot page after the first hits
    CHECK(fifo < clock);
}

TEST_CASE("threads taking the last never-used frames at once get each once, and none past the pool") {
    // Each round four threads race for the pool's one frame: a taker that saw it left can lose it to another between
    // its look and its fetch_add, and must then come back with none, not with a frame past the pool.
    constexpr unsigned threads = 4, rounds = 50000;
    std::vector<std::uint64_t> ctl(ctl_words, 0);
    PagerView v{};
    v.ctl = ctl.data();
    v.frames_n = 1;
    std::vector<std::uint32_t> got(threads);
    unsigned wrong = 0;
    auto between = [&]() noexcept {  // on one thread, all others waiting
        std::uint32_t seen = 0;
        for (std::uint32_t f : got)
            if (f != Pte::max_frames) {
                if (f >= v.frames_n || ((seen >> f) & 1u) != 0) ++wrong;
                seen |= f < 32 ? 1u << f : 0u;
            }
        if (seen != 1u) ++wrong;
        ctl[ctl_fresh] = 0;
    };
    std::barrier round(threads, between);
    on_threads(threads, [&](unsigned t) {
        for (unsigned r = 0; r < rounds; ++r) {
            got[t] = take_fresh(v);
            round.arrive_and_wait();
        }
    });
    CHECK(wrong == 0);
}

TEST_CASE("a claim looks at most sweep_steps frames; the bits it cleared stay cleared for the next claim") {
    // A pool of 1024 frames whose every page was hit since the hand passed: the first miss's claim clears
    // sweep_steps reference bits, finds no frame and reads in place; each next claim goes on where it stopped,
    // and once the hand is round the frame it cleared first is evicted (CLOCK order).
    constexpr std::uint64_t frames = 1024, claims = frames / sweep_steps;
    static_assert(claims >= 2 && frames % sweep_steps == 0 && 2 * frames + 1 > sweep_steps);
    std::vector<std::uint64_t> d = numbered(2 * frames);
    HostPager p(config(2 * frames, frames), bytes(d));
    for (std::uint64_t pg = 0; pg < frames; ++pg) p.access(pg, false);  // fills frames 0..1023 in order
    for (std::uint64_t pg = 0; pg < frames; ++pg) p.access(pg, false);  // hits: every page referenced
    REQUIRE(p.stats()[c_hits] == frames);
    for (std::uint64_t k = 0; k < claims; ++k) {
        INFO("claim " << k);
        auto a = p.access(frames + k, false);
        CHECK(word(a, 7) == (frames + k) * kWords + 7);  // read in place, right
        CHECK(p.state(frames + k) == PageState::host);
        CHECK(p.stats()[c_exhausted] == k + 1);
        CHECK(p.stats()[c_hand_steps] == (k + 1) * sweep_steps);
        CHECK(p.stats()[c_evictions] == 0);
    }
    {
        auto a = p.access(frames + claims, false);  // the hand is round: frame 0's bit was cleared first
        CHECK(word(a, 7) == (frames + claims) * kWords + 7);
    }
    CHECK(p.state(frames + claims) == PageState::resident);
    CHECK(p.state(0) == PageState::host);
    CHECK(p.stats()[c_evictions] == 1);
    CHECK(p.stats()[c_exhausted] == claims);
    CHECK(p.stats()[c_hand_steps] == claims * sweep_steps + 1);
}

TEST_CASE("an access beyond the array is caught in debug builds") {
#ifdef NDEBUG
    SKIP("release build (NDEBUG): the bounds check is compiled out");
#else
    std::vector<std::uint64_t> d = numbered(4);
    HostPager p(config(4, 2), bytes(d));
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The assertion message is expected: keep the log clean, and die by the signal itself
        // rather than through Catch2's handler (which would report a failure from the child).
        std::signal(SIGABRT, SIG_DFL);
        std::freopen("/dev/null", "w", stderr);
        auto a = p.access(4, false);
        _exit(a.data() != nullptr ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
#endif
}

// ---- automatic page size: the access profile and the choice ------------------------------------

namespace {

// A view with only what profile_note uses: the profile, sampling as for an array of `bytes`.
struct ProfiledView {
    std::vector<std::uint64_t> slots = std::vector<std::uint64_t>(profile_words);
    std::uint32_t choice = 0;
    PagerView v{};
    explicit ProfiledView(std::uint64_t bytes) {
        v.profile = slots.data();
        v.profile_bits = profile_bits_for(bytes);
        v.profile_choice = &choice;
        v.page_shift = auto_start_shift;
    }
};

// The tally recounted from the slots (what the accesses' running tally must equal).
void recount(const std::vector<std::uint64_t>& slots, std::uint64_t (&t)[2]) {
    t[0] = t[1] = 0;
    for (unsigned i = 0; i < profile_slots; ++i) {
        std::uint64_t r[2];
        region_tally(static_cast<std::uint32_t>(slots[i]), r);
        t[0] += r[0];
        t[1] += r[1];
    }
}

std::uint32_t choose_from_slots(const std::vector<std::uint64_t>& slots, std::uint32_t current) {
    std::uint64_t t[2];
    recount(slots, t);
    return choose_page_shift(t, current);
}

bool region_sampled(const PagerView& v, std::uint64_t region) {
    return ((region * 0x9e3779b97f4a7c15ull) >> (64 - v.profile_bits)) == 0;
}

// The sampled regions of an array of `regions` 4 KiB regions.
std::vector<std::uint64_t> sampled_regions(const PagerView& v, std::uint64_t regions) {
    std::vector<std::uint64_t> out;
    for (std::uint64_t r = 0; r < regions; ++r)
        if (region_sampled(v, r)) out.push_back(r);
    return out;
}

std::uint64_t slot_of(const ProfiledView& p, std::uint64_t region) {
    return p.slots[((region * 0x9e3779b97f4a7c15ull) >> 24) & (profile_slots - 1)];
}

}  // namespace

TEST_CASE("the access profile marks the 128-byte blocks an access reads, in sampled regions only") {
    const std::uint64_t regions = 1 << 16;  // 256 MiB
    ProfiledView p(regions * 4096);
    CHECK(p.v.profile_bits == 6);  // 64K regions: 1 in 64 sampled, about 1024 of 4096 slots
    std::vector<std::uint64_t> s = sampled_regions(p.v, regions);
    REQUIRE(s.size() > 500);
    REQUIRE(s.size() < 1600);
    const std::uint64_t r = s[3];
    profile_note(p.v, r * 4096 + 200, 300);  // bytes 200..499: blocks 1, 2, 3
    CHECK(slot_of(p, r) == (((r + 1) << 32) | 0xe));
    profile_note(p.v, r * 4096 + 4000, 500);  // to the region's end: block 31 only
    CHECK(slot_of(p, r) == (((r + 1) << 32) | 0xe | (1ull << 31)));
    profile_note(p.v, r * 4096, 4096);  // the whole region
    CHECK(slot_of(p, r) == (((r + 1) << 32) | 0xffffffffull));
    std::uint64_t unsampled = 0;
    while (region_sampled(p.v, unsampled)) ++unsampled;
    const std::vector<std::uint64_t> before = p.slots;
    profile_note(p.v, unsampled * 4096 + 64, 8);
    CHECK(p.slots == before);
    PagerView fixed{};  // no profile (a fixed page size): nothing noted, nothing read
    profile_note(fixed, 0, 8);
}

TEST_CASE("the automatic page size: the largest page under twice the 128-byte footprint") {
    std::vector<std::uint64_t> slots(profile_words);
    auto fill = [&](std::uint32_t regions, auto mask_of) {
        std::fill(slots.begin(), slots.end(), 0);
        for (std::uint32_t i = 0; i < regions; ++i)
            slots[i * 7 % profile_slots] = (std::uint64_t{i} + 1) << 32 | mask_of(i);
        return choose_from_slots(slots, auto_start_shift);
    };
    CHECK(fill(100, [](std::uint32_t i) { return 1u << (i % 32); }) == 7);                // 8-byte elements: 128 B
    CHECK(fill(100, [](std::uint32_t i) { return 3u << (2 * (i % 16)); }) == 8);          // 256-byte rows: 256 B
    CHECK(fill(100, [](std::uint32_t i) { return 0xffu << (8 * (i % 4)); }) == 10);       // 1 KiB rows: 1 KiB
    CHECK(fill(100, [](std::uint32_t) { return 0xffffffffu; }) == 12);                    // gathers, scans: 4 KiB
    CHECK(fill(100, [](std::uint32_t) { return 1u | 1u << 16; }) == 7);                   // two blocks far apart: small
    CHECK(fill(15, [](std::uint32_t i) { return 1u << (i % 32); }) == auto_start_shift);  // too little seen: kept
    // Two rows of 256 B in every 1 KiB: a 512 B page holds both (footprint equal), 1 KiB twice the bytes.
    CHECK(fill(100, [](std::uint32_t i) { return 0xfu << (8 * (i % 4)); }) == 9);
    // A page in use that is within the bound is kept unless the choice is more than twice as large.
    std::fill(slots.begin(), slots.end(), 0);
    for (std::uint32_t i = 0; i < 100; ++i) slots[i] = (std::uint64_t{i} + 1) << 32 | 0xfu << (8 * (i % 4));
    CHECK(choose_from_slots(slots, 8) == 8);   // 256 B: within, choice 512 B: kept
    CHECK(choose_from_slots(slots, 12) == 9);  // 4 KiB: 8x the bytes: changed
    for (std::uint32_t i = 0; i < 100; ++i) slots[i] = (std::uint64_t{i} + 1) << 32 | 0xffffffffu;
    CHECK(choose_from_slots(slots, 7) == 12);   // 128 B, choice 4 KiB: changed
    CHECK(choose_from_slots(slots, 11) == 11);  // 2 KiB, choice 4 KiB: kept
}

TEST_CASE("the automatic page size from access streams: rows, elements, runs, gathers") {
    const std::uint64_t bytes = 1ull << 30;  // 1 GiB: 256K regions
    std::mt19937_64 rng(5);
    auto choose = [&](auto stream, std::uint64_t n) {
        ProfiledView p(bytes);
        for (std::uint64_t k = 0; k < n; ++k) {
            auto [off, len] = stream();
            profile_note(p.v, off, len);
        }
        // The accesses' running tally is the recount, and what they proposed is its choice.
        std::uint64_t t[2];
        recount(p.slots, t);
        CHECK(p.slots[profile_tally] == t[0]);
        CHECK(p.slots[profile_tally + 1] == t[1]);
        CHECK(p.choice == choose_page_shift(t, auto_start_shift));
        return choose_page_shift(t, auto_start_shift);
    };
    // 1M lookups of random 256-byte rows (about 4 a region): 256 B pages.
    CHECK(choose(
              [&] {
                  return std::pair<std::uint64_t, std::uint64_t>{(rng() % (bytes / 256)) * 256, 256};
              },
              1 << 20) == 8);
    // 1M random 8-byte elements: 128 B.
    CHECK(choose([&] { return std::pair<std::uint64_t, std::uint64_t>{(rng() % (bytes / 8)) * 8, 8}; }, 1 << 20) == 7);
    // Runs of 4 adjacent 16-byte elements (64 B) at random 16-byte positions: 128 B.
    CHECK(choose(
              [&] {
                  return std::pair<std::uint64_t, std::uint64_t>{(rng() % (bytes / 16 - 4)) * 16, 64};
              },
              1 << 20) == 7);
    // 64K gathers of 4 KiB blocks: 4 KiB.
    CHECK(choose(
              [&] {
                  return std::pair<std::uint64_t, std::uint64_t>{(rng() % (bytes / 4096)) * 4096, 4096};
              },
              1 << 16) == 12);
    // 1 KiB rows: 1 KiB.
    CHECK(choose(
              [&] {
                  return std::pair<std::uint64_t, std::uint64_t>{(rng() % (bytes / 1024)) * 1024, 1024};
              },
              1 << 18) == 10);
}

TEST_CASE("the access profile under concurrent accesses: every block any thread read is marked, one region a slot") {
    const std::uint64_t regions = 1 << 14;  // 64 MiB: 1 in 64 sampled
    ProfiledView p(regions * 4096);
    const std::vector<std::uint64_t> s = sampled_regions(p.v, regions);
    constexpr unsigned threads = 8;
    constexpr std::uint64_t per_thread = 20000;
    // Each thread notes random 8..256-byte reads over the sampled regions (and unsampled ones, ignored);
    // the union of what they read is computed here.
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> reads(threads);
    for (unsigned t = 0; t < threads; ++t) {
        std::mt19937_64 rng(t + 1);
        for (std::uint64_t k = 0; k < per_thread; ++k) {
            std::uint64_t region = k % 3 == 0 ? rng() % regions : s[rng() % s.size()];
            std::uint64_t len = 8u << (rng() % 6), off = region * 4096 + (rng() % (4096 / len)) * len;
            reads[t].push_back({off, len});
        }
    }
    on_threads(threads, [&](unsigned t) {
        for (auto [off, len] : reads[t]) profile_note(p.v, off, len);
    });
    std::map<std::uint64_t, std::uint32_t> want;  // region -> blocks read
    for (auto& rs : reads)
        for (auto [off, len] : rs) {
            const std::uint64_t region = off / 4096;
            if (!region_sampled(p.v, region)) continue;
            for (std::uint64_t b = (off % 4096) / 128; b <= (off % 4096 + len - 1) / 128; ++b) want[region] |= 1u << b;
        }
    std::uint64_t owned = 0;
    for (auto [region, mask] : want) {
        const std::uint64_t e = slot_of(p, region);
        if ((e >> 32) != region + 1) continue;  // the slot went to another region that hashes there
        ++owned;
        CHECK(static_cast<std::uint32_t>(e) == mask);
    }
    CHECK(owned * 10 >= want.size() * 9);  // collisions are rare at this fill
    for (unsigned i = 0; i < profile_slots; ++i)
        if (p.slots[i] != 0) CHECK(want.count((p.slots[i] >> 32) - 1) == 1);  // no slot holds a region nobody read
    std::uint64_t t[2];  // the running tally lost and doubled nothing
    recount(p.slots, t);
    CHECK(p.slots[profile_tally] == t[0]);
    CHECK(p.slots[profile_tally + 1] == t[1]);
}

TEST_CASE("the access profile under contention: threads marking other blocks of the same regions lose none") {
    const std::uint64_t regions = 1 << 14;
    constexpr unsigned threads = 8;
    std::uint64_t lost = 0;
    for (int round = 0; round < 300 && lost == 0; ++round) {
        ProfiledView p(regions * 4096);
        const std::vector<std::uint64_t> s = sampled_regions(p.v, regions);
        on_threads(threads, [&](unsigned t) {
            for (unsigned b = t; b < 32; b += threads)
                for (std::uint64_t r : s) profile_note(p.v, r * 4096 + b * 128, 8);
        });
        for (std::uint64_t r : s) {
            const std::uint64_t e = slot_of(p, r);
            if ((e >> 32) == r + 1) lost += static_cast<std::uint32_t>(e) != 0xffffffffu;
        }
        std::uint64_t t[2];
        recount(p.slots, t);
        lost += p.slots[profile_tally] != t[0] || p.slots[profile_tally + 1] != t[1];
    }
    CHECK(lost == 0);
}

// The tables of a change to pages of 1 << to_shift bytes over `from`'s pool, as GpuPager::layout makes them
// (marks and partial pages only at the 4 KiB start: none).
struct Relaid {
    std::vector<std::uint64_t> pte, ctl, whole;
    std::vector<std::uint32_t> owner;
    PagerView view;
    Relaid(const PagerView& from, std::uint32_t to_shift) {
        const std::uint64_t sub = 1ull << (from.page_shift - to_shift);
        pte.assign(from.pages * sub, 0);
        ctl.assign(ctl_words, 0);
        owner.assign(from.frames_n * sub, no_page);
        view = from;
        view.page_shift = to_shift;
        view.pages = from.pages * sub;
        view.frames_n = static_cast<std::uint32_t>(from.frames_n * sub);
        view.pte = pte.data();
        view.frame_owner = owner.data();
        view.ctl = ctl.data();
        view.dirty_blocks = nullptr;
        view.sectors = nullptr;
        view.whole = nullptr;
        view.shared_slots = nullptr;  // as GpuPager's views after the change
        view.displaced_blocks = nullptr;
        if (view.never_evicts()) {
            whole.assign(whole_words(view.pages), 0);
            view.whole = whole.data();
        }
    }
    Relaid(const Relaid&) = delete;  // the view points into it
};

// relay_page over every sub-page as the relay kernel calls it: only those of pages with work (relay_has_work), in
// `backwards` order or not. Checks first that relaying the others writes nothing.
void relay_as_the_kernel(const PagerView& from, Relaid& r, bool backwards = false) {
    const std::uint32_t d = from.page_shift - r.view.page_shift;
    const auto cleared_pte = r.pte;
    const auto cleared_owner = r.owner;
    for (std::uint64_t q = 0; q < r.view.pages; ++q)
        if (!relay_has_work(from, q >> d)) relay_page(from, r.view, q);
    CHECK(r.pte == cleared_pte);
    CHECK(r.owner == cleared_owner);
    for (std::uint64_t i = 0; i < r.view.pages; ++i) {
        const std::uint64_t q = backwards ? r.view.pages - 1 - i : i;
        if (relay_has_work(from, q >> d)) relay_page(from, r.view, q);
    }
}

// A host pager over `pages` numbered pages whose tables are seen as an automatic GPU pager's at its 4 KiB start,
// before the first choice (the profile, partial pages' blocks and dirty marks laid on its view).
struct AutomaticStart {
    std::vector<std::uint64_t> data, slots, sectors;
    std::vector<std::uint32_t> marks;
    HostPager pager;
    PagerView view;
    AutomaticStart(std::uint64_t pages, std::uint64_t frames, Admission a)
        : data(numbered(pages)), pager(config(pages, frames, a), bytes(data)), view(pager.view()) {
        slots.assign(profile_words, 0);
        sectors.assign(view.pages, 0);
        marks.assign(view.pages, 0);
        view.profile = slots.data();
        view.profile_bits = profile_bits_for(view.bytes);
        view.sectors = sectors.data();
        view.dirty_blocks = marks.data();
    }
    AutomaticStart(const AutomaticStart&) = delete;  // the view points into it
};

TEST_CASE(
    "before the first choice of page size, a small access fills only its own blocks, the rest as they are needed") {
    const std::uint64_t pages = 8;
    for (std::uint64_t frames : {pages, std::uint64_t{4}}) {
        INFO("frames " << frames);
        AutomaticStart start(pages, frames, Admission::adaptive);
        HostPager& p = start.pager;
        PagerView& v = start.view;
        std::vector<std::uint64_t>& sectors = start.sectors;
        ThreadGroup g{0};
        CpuMover m;
        auto frame_word = [&](std::uint64_t page, std::uint64_t w) {
            return word(v.frame_data(Pte{v.pte[page]}.frame()), w);
        };
        // A warp's 256-byte row at 512: blocks 4 and 5 come in, the page is partial.
        std::byte* a = acquire(v, 3, false, g, m, 256, 512);
        CHECK(a == v.frame_data(Pte{v.pte[3]}.frame()));
        release(v, 3, g, a, false);
        CHECK(Pte{v.pte[3]}.is(Pte::partial));
        CHECK(find_resident(v, 3) == nullptr);  // a read hit must not take a partial page's frame
        // ... unless what it reads is there, where the frame is the page's own (a pool that holds the array)
        CHECK(find_resident(v, 3, 512, 256) == (frames == pages ? v.frame_data(3) : nullptr));
        CHECK(find_resident(v, 3, 600, 8) == (frames == pages ? v.frame_data(3) : nullptr));
        CHECK(find_resident(v, 3, 0, 8) == nullptr);      // block 0 is not
        CHECK(find_resident(v, 3, 512, 512) == nullptr);  // blocks 4-7: 6 and 7 are not
        if (v.whole != nullptr) CHECK_FALSE(whole_bit(v, 3));
        CHECK(sectors[3] == (0x30ull | 0x30ull << 32));
        CHECK(frame_word(3, 64) == 3 * kWords + 64);
        CHECK(frame_word(3, 95) == 3 * kWords + 95);
        CHECK(frame_word(3, 0) != 3 * kWords + 0);  // block 0 not copied
        CHECK(p.stats()[c_bytes_in] == 256);
        // Another row of it: its blocks come in, the page stays where it is.
        a = acquire(v, 3, false, g, m, 256, 0);
        release(v, 3, g, a, false);
        CHECK(static_cast<std::uint32_t>(sectors[3]) == 0x33u);
        CHECK(frame_word(3, 0) == 3 * kWords);
        CHECK(p.stats()[c_fills] == 2);
        CHECK(p.stats()[c_bytes_in] == 512);
        // A row it has: a hit, nothing copied.
        a = acquire(v, 3, false, g, m, 128, 640);
        release(v, 3, g, a, false);
        CHECK(p.stats()[c_bytes_in] == 512);
        // Over a quarter of the page, or a fixed page size: the whole page.
        a = acquire(v, 4, false, g, m, 1025, 0);
        release(v, 4, g, a, false);
        CHECK_FALSE(Pte{v.pte[4]}.is(Pte::partial));
        // A lone thread's element: a chunk of its page while the pool holds the array (half the page where
        // lone_fill_shift is 0), its block when not.
        CHECK(need_blocks(v, 5, 16, 8) == (frames == pages ? 0xffffu : 1u));
        CHECK(need_blocks(v, 5, 4095, 1) == (frames == pages ? 0xffff0000u : 0x80000000u));
        if (frames == pages) {                                    // then each other chunk, once it reads there
            CHECK(missing_blocks(v, 5, 16, 8, 0xffffu, 0) == 0);  // its half is in: a hit
            CHECK(missing_blocks(v, 5, 4095, 1, 0xffffu, 0) == 0xffff0000u);  // the other half
            CHECK(missing_blocks(v, 5, 16, 8, 0xff00u, 0) == 0x00ffu);        // its block missing: what its half lacks
            CHECK(missing_blocks(v, 5, 16, 8, 0xff01u, 0) == 0);              // its block in: nothing, whatever else
            CHECK(missing_blocks(v, 5, 0, 256, 0xffff0000u, 0) == 0x3u);      // a warp's row: its own blocks
            v.lone_fill_shift = 10;                                           // chunks of 1 KiB: 8 blocks, aligned
            CHECK(need_blocks(v, 5, 16, 8) == 0xffu);
            CHECK(need_blocks(v, 5, 1500, 8) == 0xff00u);
            CHECK(need_blocks(v, 5, 4095, 1) == 0xff000000u);
            CHECK(missing_blocks(v, 5, 2048, 16, 0xffu, 0) == 0xff0000u);
            CHECK(missing_blocks(v, 5, 2048, 16, 0xff0000u, 0) == 0);
            CHECK(need_blocks(v, 5, 16, 32) == 0x1u);  // 32 bytes: not a lone element, its own block
            v.lone_fill_shift = 5;                     // below a block: a block
            CHECK(need_blocks(v, 5, 300, 8) == 0x4u);
            v.lone_fill_shift = 12;  // a whole page or more: half the page
            CHECK(need_blocks(v, 5, 300, 8) == 0xffffu);
            CHECK(lone_fill_shift_for(1ull << 30) == 9);  // 512 B chunks up to 1 GiB, 1 KiB to 4, half pages above
            CHECK(lone_fill_shift_for((1ull << 30) + 16) == 10);
            CHECK(lone_fill_shift_for(4ull << 30) == 10);
            CHECK(lone_fill_shift_for((4ull << 30) + 16) == 11);
            CHECK(lone_rest_blocks_for(2ull << 30) == 16);  // the rest once half is in up to 2 GiB, a quarter above
            CHECK(lone_rest_blocks_for((2ull << 30) + 16) == 8);
            v.lone_fill_shift = 9;  // 512 B chunks, the rest of the page once 16 blocks are in or claimed
            v.lone_rest_blocks = 16;
            CHECK(missing_blocks(v, 5, 16, 8, 0xfu, 0) == 0);                    // its block in
            CHECK(missing_blocks(v, 5, 600, 8, 0xfu, 0) == 0xf0u);               // its chunk
            CHECK(missing_blocks(v, 5, 3000, 8, 0xfffu, 0) == 0x00f00000u);      // 12 in: still its chunk
            CHECK(missing_blocks(v, 5, 3000, 8, 0xffffu, 0) == 0xffff0000u);     // 16 in: the rest
            CHECK(missing_blocks(v, 5, 600, 8, 0xfu, 0xfff00u) == 0xfffffff0u);  // 4 in, 12 claimed: the rest
            CHECK(missing_blocks(v, 5, 0, 256, 0xffffu, 0) == 0);                // a warp's row in: a hit
            CHECK(missing_blocks(v, 5, 2048, 256, 0xffffu, 0) == 0x30000u);      // a warp's row: its own blocks
            // An element that straddles two chunks (16 bytes at 504: two u64 words around the first chunk's end):
            // both chunks, and with the first in, the second.
            CHECK(need_blocks(v, 5, 504, 16) == 0xffu);
            CHECK(missing_blocks(v, 5, 504, 16, 0xfu, 0) == 0xf0u);
            CHECK(need_blocks(v, 5, 4088, 8) == 0xf0000000u);  // the page's last word: its last chunk
            v.lone_rest_blocks = 0;
            {  // through the protocol: both words from the frame, page 2 partial with both chunks in
                a = acquire(v, 2, false, g, m, 16, 504);
                CHECK(a == v.frame_data(Pte{v.pte[2]}.frame()));
                CHECK(word(a, 63) == 2 * kWords + 63);
                CHECK(word(a, 64) == 2 * kWords + 64);
                release(v, 2, g, a, false);
                CHECK(static_cast<std::uint32_t>(sectors[2]) == 0xffu);
            }
            v.lone_fill_shift = 10;  // through the protocol: page 6 comes in 1 KiB at a time, each chunk once
            const std::uint64_t in = p.stats()[c_bytes_in];
            a = acquire(v, 6, false, g, m, 8, 1500);
            release(v, 6, g, a, false);
            CHECK(static_cast<std::uint32_t>(sectors[6]) == 0xff00u);
            CHECK(frame_word(6, 1024 / 8) == 6 * kWords + 1024 / 8);
            CHECK(frame_word(6, 2047 / 8) == 6 * kWords + 2047 / 8);
            a = acquire(v, 6, false, g, m, 8, 1024);  // the same chunk: nothing copied
            release(v, 6, g, a, false);
            a = acquire(v, 6, false, g, m, 8, 3100);
            release(v, 6, g, a, false);
            CHECK(static_cast<std::uint32_t>(sectors[6]) == 0xff00ff00u);
            CHECK(frame_word(6, 3072 / 8) == 6 * kWords + 3072 / 8);
            CHECK(p.stats()[c_bytes_in] - in == 2048);
            CHECK(Pte{v.pte[6]}.is(Pte::partial));
            a = acquire(v, 6, false, g, m, 8, 0);
            release(v, 6, g, a, false);
            a = acquire(v, 6, false, g, m, 8, 2048);
            release(v, 6, g, a, false);
            CHECK_FALSE(Pte{v.pte[6]}.is(Pte::partial));  // every chunk in: whole
            CHECK(whole_bit(v, 6));
            CHECK(p.stats()[c_bytes_in] - in == 4096);
            for (std::uint64_t w = 0; w < kWords; ++w) CHECK(frame_word(6, w) == 6 * kWords + w);
            // Through the protocol: page 7 in 512 B chunks until half of it is in, then the rest in one copy that
            // leaves the blocks in the frame as they are (a word written there stays).
            v.lone_fill_shift = 9;
            v.lone_rest_blocks = 16;
            const std::uint64_t in7 = p.stats()[c_bytes_in], fills7 = p.stats()[c_fills];
            for (std::uint64_t off : {0, 512, 2560, 3584}) {
                a = acquire(v, 7, false, g, m, 8, off + 8);
                release(v, 7, g, a, false);
            }
            CHECK(static_cast<std::uint32_t>(sectors[7]) == 0xf0f000ffu);
            CHECK(p.stats()[c_bytes_in] - in7 == 2048);
            CHECK(Pte{v.pte[7]}.is(Pte::partial));
            std::memcpy(v.frame_data(Pte{v.pte[7]}.frame()) + 600, "written!", 8);
            a = acquire(v, 7, false, g, m, 8, 1100);
            release(v, 7, g, a, false);
            CHECK(p.stats()[c_bytes_in] - in7 == 4096);
            CHECK(p.stats()[c_fills] - fills7 == 5);
            CHECK_FALSE(Pte{v.pte[7]}.is(Pte::partial));
            CHECK(whole_bit(v, 7));
            CHECK(std::memcmp(v.frame_data(Pte{v.pte[7]}.frame()) + 600, "written!", 8) == 0);
            for (std::uint64_t w = 0; w < kWords; ++w)
                if (w != 600 / 8) CHECK(frame_word(7, w) == 7 * kWords + w);
            v.lone_rest_blocks = 0;
            v.lone_fill_shift = 0;
            a = acquire(v, 5, false, g, m, 8, 2048 + 16);
            release(v, 5, g, a, false);
            CHECK(static_cast<std::uint32_t>(sectors[5]) == 0xffff0000u);
            CHECK(frame_word(5, 256 + 2) == 5 * kWords + 256 + 2);
            a = acquire(v, 5, false, g, m, 8, 2048 + 8 * 100);  // the same half: a hit, nothing copied
            release(v, 5, g, a, false);
            CHECK(static_cast<std::uint32_t>(sectors[5]) == 0xffff0000u);
            a = acquire(v, 5, false, g, m, 8, 16);  // the other half: the page whole
            release(v, 5, g, a, false);
            CHECK_FALSE(Pte{v.pte[5]}.is(Pte::partial));
            CHECK(whole_bit(v, 5));
            for (std::uint64_t w = 0; w < kWords; ++w) CHECK(frame_word(5, w) == 5 * kWords + w);
        }
        // Two accesses that need the same blocks: the first claims them, the second waits for its copy.
        const Step s1 = begin_access(v, 3, false, 0, 256, 1024);
        CHECK(s1.kind == Step::sector);
        CHECK(s1.blocks == 0x300u);
        CHECK(begin_access(v, 3, false, 0, 256, 1024).kind == Step::wait);
        const Step s3 = begin_access(v, 3, false, 0, 384, 1024);  // one more block: that one is its own
        CHECK(s3.kind == Step::sector);
        CHECK(s3.blocks == 0x400u);
        fill_frame(v, 3, s1, false, true, true, g, m);
        fill_frame(v, 3, s3, false, true, true, g, m);
        CHECK(static_cast<std::uint32_t>(sectors[3]) == 0x733u);
        CHECK(frame_word(3, 128) == 3 * kWords + 128);
        // After the first choice an access needs the whole page: a partial one gets the rest.
        v.profile_decided = 1;
        a = acquire(v, 3, false, g, m, 8, 16);
        release(v, 3, g, a, false);
        CHECK_FALSE(Pte{v.pte[3]}.is(Pte::partial));
        if (v.whole != nullptr) CHECK(whole_bit(v, 3));  // whole now: its blocks' copies made it so
        CHECK(static_cast<std::uint32_t>(sectors[3]) == 0xffffffffu);
        for (std::uint64_t w = 0; w < kWords; ++w) CHECK(frame_word(3, w) == 3 * kWords + w);
        v.profile_decided = 0;
        v.sectors = nullptr;  // a fixed page size: as before
        CHECK(need_blocks(v, 6, 0, 256) == 0xffffffffu);
        for (std::uint64_t pg = 0; pg < pages; ++pg) CHECK(Pte{v.pte[pg]}.pins() == 0);
    }
}

TEST_CASE("lone elements at a full pool: threads filling chunks and the rest of pages at once stay exact") {
    // Given: the automatic start with a pool that holds the array, 512 B chunks, the rest once 16 blocks are in or
    // claimed (lone_fill_shift_for, lone_rest_blocks_for).
    const std::uint64_t pages = 32;
    AutomaticStart start(pages, pages, Admission::adaptive);
    HostPager& p = start.pager;
    PagerView& v = start.view;
    v.lone_fill_shift = 9;
    v.lone_rest_blocks = 16;
    constexpr unsigned threads = 8;
    std::vector<std::uint64_t> bad(threads, 0);
    std::vector<std::vector<std::uint32_t>> writes(threads, std::vector<std::uint32_t>(pages));
    auto written = [](std::uint64_t w) { return w % 64 == 3; };  // thread w / 64 adds to word w
    // When: threads read random words of random pages as lone 8-byte elements, and add 1 to a word of their own, so
    // that chunks and rests are claimed while others write into blocks already in.
    on_threads(threads, [&](unsigned t) {
        std::mt19937_64 rng(t + 7);
        ThreadGroup g = ThreadGroup::current();
        CpuMover m;
        for (int i = 0; i < 20000; ++i) {
            const std::uint64_t page = rng() % pages;
            const bool write = i % 4 == 0;
            std::uint64_t w = write ? 64 * t + 3 : rng() % kWords;
            if (!write && written(w)) ++w;
            std::byte* q = acquire(v, page, write, g, m, 8, w * 8);
            std::uint64_t x;
            std::memcpy(&x, q + w * 8, 8);
            if (write) {
                ++x;
                std::memcpy(q + w * 8, &x, 8);
                if (q != v.host_page(page)) note_write(v, page, w * 8, 8);
                ++writes[t][page];
            } else {
                bad[t] += x != page * kWords + w;
            }
            release(v, page, g, q, write);
        }
    });
    // Then: every read saw its word, every page came in whole, each byte once, and the writes reach host memory.
    for (unsigned t = 0; t < threads; ++t) CHECK(bad[t] == 0);
    for (std::uint64_t pg = 0; pg < pages; ++pg) {
        CHECK_FALSE(Pte{v.pte[pg]}.is(Pte::partial));
        CHECK(Pte{v.pte[pg]}.pins() == 0);
    }
    CHECK(p.stats()[c_bytes_in] == pages * kPage);
    ThreadGroup g{0};
    CpuMover m;
    flush_all(v, g, m);
    std::uint64_t wrong = 0;
    for (std::uint64_t pg = 0; pg < pages; ++pg)
        for (std::uint64_t w = 0; w < kWords; ++w)
            wrong += start.data[pg * kWords + w] != pg * kWords + w + (written(w) ? writes[w / 64][pg] : 0);
    CHECK(wrong == 0);
}

TEST_CASE("partial pages: threads reading and writing rows through a small pool stay exact, written back by block") {
    const std::uint64_t pages = 32;
    for (std::uint64_t frames : {pages, std::uint64_t{4}}) {
        AutomaticStart start(pages, frames, Admission::adaptive);
        HostPager& p = start.pager;
        PagerView& v = start.view;
        std::vector<std::uint64_t>& d = start.data;
        constexpr unsigned threads = 8;
        std::vector<std::uint64_t> bad(threads, 0);
        // Thread t reads 64-byte rows of random pages (checking one word of each, never a written one) and
        // adds 1 to word 256 + 16 t of them (a 32-byte row in block 16 + t, which readers' rows need too: two
        // copies of one block, unclaimed, could put a write's block back as it was).
        std::vector<std::vector<std::uint32_t>> writes(threads, std::vector<std::uint32_t>(pages));
        on_threads(threads, [&](unsigned t) {
            std::mt19937_64 rng(t + 99 * frames);
            ThreadGroup g = ThreadGroup::current();
            CpuMover m;
            for (int i = 0; i < 5000; ++i) {
                const std::uint64_t page = rng() % pages;
                const bool write = i % 3 == 0;
                std::uint64_t w = rng() % kWords;
                if (w >= 256 && w < 256 + 16 * threads && (w - 256) % 16 == 0) ++w;  // not the written word
                const std::uint64_t at = write ? (256 + 16 * t) * 8 : w * 8 & ~63ull, n = write ? 32 : 64;
                profile_note(v, page * kPage + at, n);
                std::byte* q = acquire(v, page, write, g, m, n, at);
                std::uint64_t x;
                if (write) {
                    std::memcpy(&x, q + at, 8);
                    ++x;
                    std::memcpy(q + at, &x, 8);
                    if (q != v.host_page(page)) note_write(v, page, at, 8);
                    ++writes[t][page];
                } else {
                    std::memcpy(&x, q + w * 8, 8);
                    bad[t] += x != page * kWords + w;
                }
                release(v, page, g, q, write);
            }
        });
        ThreadGroup g{0};
        CpuMover m;
        flush_all(v, g, m);
        INFO("frames " << frames);
        for (unsigned t = 0; t < threads; ++t) CHECK(bad[t] == 0);
        std::uint64_t wrong = 0;
        for (std::uint64_t pg = 0; pg < pages; ++pg)
            for (std::uint64_t w = 0; w < kWords; ++w) {
                std::uint64_t want = pg * kWords + w;
                if (w >= 256 && w < 256 + 16 * threads && (w - 256) % 16 == 0) want += writes[(w - 256) / 16][pg];
                wrong += d[pg * kWords + w] != want;
            }
        CHECK(wrong == 0);  // a write-back of a partial page's whole frame would have put its unread blocks back
        for (std::uint64_t pg = 0; pg < pages; ++pg) CHECK(Pte{v.pte[pg]}.pins() == 0);
        CHECK(p.stats()[c_fills] > 0);
        CHECK(p.stats()[c_bytes_in] < p.stats()[c_fills] * kPage);  // blocks came in, not whole pages
        if (frames < pages) CHECK(p.stats()[c_writebacks] > 0);
    }
}

TEST_CASE("a change to smaller pages keeps a partial page's blocks, completes its sub-pages, frees the rest") {
    const std::uint64_t pages = 4, frames = 2;
    constexpr std::uint32_t to_shift = 8, d = 12 - to_shift, sub = 1u << d;
    AutomaticStart start(pages, frames, Admission::adaptive);
    PagerView& from = start.view;
    std::vector<std::uint64_t>& data = start.data;
    ThreadGroup g{0};
    CpuMover m;
    // Page 1: 128 bytes at 512 read (block 4: half of 256-byte sub-page 2), 32 bytes at 1024 written.
    std::byte* a = acquire(from, 1, false, g, m, 128, 512);
    release(from, 1, g, a, false);
    a = acquire(from, 1, true, g, m, 32, 1024);
    std::uint64_t x;
    std::memcpy(&x, a + 1024, 8);
    x += 1000;
    std::memcpy(a + 1024, &x, 8);
    note_write(from, 1, 1024, 8);
    release(from, 1, g, a, true);
    REQUIRE(Pte{from.pte[1]}.is(Pte::partial));
    Relaid r(from, to_shift);
    PagerView& to = r.view;
    auto &pte = r.pte, &ctl = r.ctl;
    auto& owner = r.owner;
    relay_as_the_kernel(from, r);
    const std::uint32_t f = Pte{from.pte[1]}.frame();
    for (std::uint32_t j = 0; j < sub; ++j) {
        INFO("sub-page " << j);
        const Pte n{pte[1 * sub + j]};
        const bool kept = j == 2 || j == 4;
        CHECK((n.state() == PageState::resident) == kept);
        CHECK(owner[f * sub + j] == (kept ? 1 * sub + j : free_frame));
        CHECK(n.is(Pte::dirty) == (j == 4));
        CHECK_FALSE(n.is(Pte::partial));
        if (kept) CHECK(n.hits() == Pte::max_hits);  // of a page's own frame: paid, no fill at this size (relaid_hits)
    }
    // Sub-pages 2 and 4 completed from host memory: their second blocks were never read at 4 KiB.
    auto sub_word = [&](std::uint32_t j, std::uint64_t w) {
        return word(to.frame_data(Pte{pte[1 * sub + j]}.frame()), w);
    };
    CHECK(sub_word(2, 0) == 1 * kWords + 64);
    CHECK(sub_word(2, 16) == 1 * kWords + 80);
    CHECK(sub_word(4, 0) == 1 * kWords + 128 + 1000);
    CHECK(sub_word(4, 16) == 1 * kWords + 144);
    // The hand hands the free frames out before it evicts anything; the pool is full otherwise (every frame was
    // taken at 4 KiB). The kept sub-pages are not referenced (relay_page): the hand passes them while free frames
    // remain, and evicts once a claim finds none.
    relay_ctl(from, to);
    CHECK(ctl[ctl_free_first] == 1);
    ctl[ctl_fresh] = to.frames_n;
    std::uint32_t handed = 0;
    for (std::uint32_t k = 0; k < sub - 2; ++k) {
        const Claim c = claim_frame(to, 0, 0);
        REQUIRE(c.frame != Pte::max_frames);
        CHECK(c.victim == no_page);
        CHECK(c.frame / sub == f);
        owner[c.frame] = 0;  // as finish_fill would: taken
        ++handed;
    }
    CHECK(handed == sub - 2);
    CHECK(ctl[ctl_free_first] == 1);
    const Claim evicting = claim_frame(to, 0, 0);
    CHECK(ctl[ctl_free_first] == 0);
    REQUIRE((evicting.victim == 1 * sub + 2 || evicting.victim == 1 * sub + 4));
    CHECK(evicting.frame == f * sub + (evicting.victim - 1 * sub));
    CHECK(Pte{pte[evicting.victim]}.state() == PageState::evicting);
    pte[evicting.victim] -= 1;  // evicting -> resident: left for the flush below
    ThreadGroup g2{0};
    flush_all(to, g2, m);
    CHECK(data[1 * kWords + 128] == 1 * kWords + 128 + 1000);
    CHECK(data[1 * kWords + 129] == 1 * kWords + 129);
}

// An automatic pager's 4 KiB start over a pool smaller than the array, with frames that pages share and a tally
// that proposes 128-byte pages (16 sampled regions, one block read in each); with `seconds`, pages' second frames
// (GpuPager's start has them).
struct SharingStart : AutomaticStart {
    std::vector<std::uint32_t> shared, displaced;
    std::vector<std::uint64_t> second;
    SharingStart(std::uint64_t pages, std::uint64_t frames, bool seconds = false)
        : AutomaticStart(pages, frames, Admission::adaptive) {
        shared.assign(view.frames_n, 0);
        displaced.assign(view.pages, 0);
        second.assign(view.pages, 0);
        view.shared_slots = shared.data();
        view.displaced_blocks = displaced.data();
        if (seconds) view.second_frames = second.data();
        std::uint64_t t[2];
        region_tally(1u, t);
        slots[profile_tally] = 16 * t[0];
        slots[profile_tally + 1] = 16 * t[1];
    }
};

// Reads word w of `page` as a lone thread's 8-byte element: where it was read from, and the word.
std::pair<const std::byte*, std::uint64_t> read_lone(const PagerView& v, std::uint64_t page, std::uint64_t w) {
    ThreadGroup g{0};
    CpuMover m;
    std::byte* a = acquire(v, page, false, g, m, 8, w * 8);
    const std::uint64_t x = word(a, w);
    release(v, page, g, a, false);
    return {a, x};
}

TEST_CASE("before the first choice, lone reads in a pool smaller than the array share frames, a block a slot") {
    SharingStart s(64, 4);
    PagerView& v = s.view;
    HostPager& p = s.pager;
    auto frame_of = [&](std::uint64_t page) { return Pte{v.pte[page]}.frame(); };
    // When: a lone read (under 32 bytes), before the first choice, while the tally proposes 128 B.
    CHECK(shares(v, 8, false));
    CHECK_FALSE(shares(v, 8, true));
    CHECK_FALSE(shares(v, 32, false));
    v.profile_decided = 1;
    CHECK_FALSE(shares(v, 8, false));
    v.profile_decided = 0;
    const std::uint64_t t0 = s.slots[profile_tally], t1 = s.slots[profile_tally + 1];
    std::uint64_t dense[2];
    region_tally(0xffffffffu, dense);  // 16 regions read whole: the tally proposes 4 KiB
    s.slots[profile_tally] = 16 * dense[0];
    s.slots[profile_tally + 1] = 16 * dense[1];
    CHECK_FALSE(shares(v, 8, false));
    s.slots[profile_tally] = t0;
    s.slots[profile_tally + 1] = t1;
    CHECK_FALSE(any_shared(v));  // no frame opened for sharing yet: settling would read no page
    // Pages 0, 1 and 2 read in blocks 0, 1 and 2: each opens a never-used frame, its block in the slot of its number.
    for (std::uint64_t k = 0; k < 3; ++k) {
        INFO("page " << k);
        const auto [at, x] = read_lone(v, k, 16 * k);
        CHECK(x == k * kWords + 16 * k);
        CHECK(at == v.frame_data(static_cast<std::uint32_t>(k)));
        CHECK(frame_of(k) == k);
        CHECK(Pte{v.pte[k]}.is(Pte::partial));
        CHECK(static_cast<std::uint32_t>(s.sectors[k]) == 1u << k);
        CHECK(s.shared[k] == 1u << k);
        CHECK(v.frame_owner[k] == shared_frame);
        CHECK(any_shared(v));
    }
    CHECK(word(v.frame_data(1), 16 * 1) == 1 * kWords + 16);
    CHECK(word(v.frame_data(2), 16 * 2) == 2 * kWords + 32);
    CHECK(p.stats()[c_bytes_in] == 3 * 128);
    // A hit, and a later block of page 0: into its frame beside the first.
    const std::uint64_t hits = p.stats()[c_hits];
    CHECK(read_lone(v, 1, 17).second == 1 * kWords + 17);
    CHECK(p.stats()[c_hits] == hits + 1);
    CHECK(read_lone(v, 0, 5 * 16 + 3).second == 5 * 16 + 3);
    CHECK(frame_of(0) == 0);
    CHECK(static_cast<std::uint32_t>(s.sectors[0]) == 0x21u);
    CHECK(s.shared[0] == 0x21u);
    // Page 20, read whole, takes the last never-used frame as its own.
    {
        ThreadGroup g{0};
        CpuMover m;
        std::byte* a = acquire(v, 20, false, g, m);
        release(v, 20, g, a, false);
    }
    CHECK(frame_of(20) == 3);
    CHECK(v.frame_owner[3] == 20);
    CHECK(s.shared[3] == 0);
    // Page 3's block 1, no never-used frame left: into a frame taken so far whose slot 1 is free (0 or 2).
    CHECK(read_lone(v, 3, 16).second == 3 * kWords + 16);
    const std::uint32_t f3 = frame_of(3);
    REQUIRE((f3 == 0 || f3 == 2));
    CHECK(s.shared[f3] == ((f3 == 0 ? 0x21u : 0x4u) | 0x2u));
    CHECK(word(v.frame_data(f3), 16) == 3 * kWords + 16);
    // The page whose frame that is wants its block 1: the slot is page 3's. The read is served from host memory, the
    // page stays as it was.
    const std::uint64_t q = f3;  // page 0 lives in frame 0, page 2 in frame 2
    const std::uint32_t had = static_cast<std::uint32_t>(s.sectors[q]);
    const std::uint64_t through = p.stats()[c_read_through];
    const auto [atq, xq] = read_lone(v, q, 17);
    CHECK(atq == v.host_page(q));
    CHECK(xq == q * kWords + 17);
    CHECK(p.stats()[c_read_through] == through + 1);
    CHECK(s.sectors[q] == (std::uint64_t{had} | std::uint64_t{had} << 32));  // its claim of block 1 given back
    CHECK(Pte{v.pte[q]}.pins() == 0);
    // A write takes the page out of the shared frame: back to host memory, where it writes in place, counted as a
    // writer while it lasts (a write to a page in a shared frame: its own case below).
    {
        ThreadGroup g{0};
        CpuMover m;
        std::byte* a = acquire(v, q, true, g, m, 8, 128);
        CHECK(a == v.host_page(q));
        CHECK(Pte{v.pte[q]}.writers() == 1);
        CHECK(Pte{v.pte[q]}.pins() == 0);
        release(v, q, g, a, true);
        CHECK(Pte{v.pte[q]}.writers() == 0);
        CHECK(Pte{v.pte[q]}.state() == PageState::host);
    }
    // Page 10's block 1 takes the other frame with slot 1 free; then none is left: page 11's block 1 is read in place,
    // a fill given up.
    CHECK(read_lone(v, 10, 16).second == 10 * kWords + 16);
    CHECK(frame_of(10) == 2 - f3);
    const std::uint64_t exhausted = p.stats()[c_exhausted];
    const auto [at11, x11] = read_lone(v, 11, 16);
    CHECK(at11 == v.host_page(11));
    CHECK(x11 == 11 * kWords + 16);
    CHECK(p.stats()[c_exhausted] == exhausted + 1);
    CHECK(Pte{v.pte[11]}.state() == PageState::host);
    // The eviction hand passes shared frames: page 21, read whole, takes page 20's.
    {
        ThreadGroup g{0};
        CpuMover m;
        std::byte* a = acquire(v, 21, false, g, m);
        CHECK(word(a, 7) == 21 * kWords + 7);
        release(v, 21, g, a, false);
    }
    CHECK(frame_of(21) == 3);
    CHECK(Pte{v.pte[20]}.state() == PageState::host);
    for (std::uint64_t r : {std::uint64_t{1}, 2 - q, std::uint64_t{3}, std::uint64_t{10}})
        CHECK(Pte{v.pte[r]}.state() == PageState::resident);
}

TEST_CASE("before the tally has seen enough to propose, lone reads share frames until half the pool is taken") {
    SharingStart s(64, 8);
    PagerView& v = s.view;
    s.slots[profile_tally] = 0;  // nothing seen: the first wave of a kernel's misses, before any proposal
    s.slots[profile_tally + 1] = 0;
    CHECK(shares(v, 8, false));
    CHECK_FALSE(shares(v, 8, true));
    CHECK_FALSE(shares(v, 32, false));
    // Pages 0..5 read in block k: the first four open never-used frames for sharing (half of 8), the rest take
    // frames of their own.
    for (std::uint64_t k = 0; k < 6; ++k) {
        INFO("page " << k);
        const auto [at, x] = read_lone(v, k, 16 * k);
        CHECK(x == k * kWords + 16 * k);
        const std::uint32_t f = Pte{v.pte[k]}.frame();
        CHECK(f == k);
        CHECK(at == v.frame_data(f));
        CHECK(s.shared[f] == (k < 4 ? 1u << k : 0u));
    }
    CHECK(v.ctl[ctl_fresh] == 6);
    CHECK_FALSE(shares(v, 8, false));
    // Past half the pool a lone read takes a frame of its own, as it did before sharing.
    const auto [at, x] = read_lone(v, 8, 16 * 5);
    CHECK(x == 8 * kWords + 16 * 5);
    CHECK(Pte{v.pte[8]}.frame() == 6);  // not shared any more: a frame of its own
    CHECK(at == v.frame_data(6));
}

// Four shared frames, every one taken: page 0's blocks 0 and 1 in frame 0, page 1's block 1 in frame 1, page 2's
// blocks 1 and 2 in frame 2, page 3's block 3 and then page 10's block 1 (the only slot 1 free) in frame 3.
void share_some(SharingStart& s) {
    read_lone(s.view, 0, 0);
    read_lone(s.view, 0, 16);
    read_lone(s.view, 1, 16);
    read_lone(s.view, 2, 32);
    read_lone(s.view, 2, 16);
    read_lone(s.view, 3, 48);
    read_lone(s.view, 10, 16);
    REQUIRE(s.shared == std::vector<std::uint32_t>{0x3u, 0x2u, 0x6u, 0xau});
    REQUIRE(Pte{s.view.pte[10]}.frame() == 3);
}

TEST_CASE("the change to 128-byte pages makes each slot of a shared frame a frame of its own, the empty ones free") {
    SharingStart s(64, 4);
    const PagerView& from = s.view;
    share_some(s);
    for (bool backwards : {false, true}) {  // every sub-frame's owner is written once: the order does not matter
        INFO((backwards ? "pages last to first" : "pages first to last"));
        Relaid r(from, 7);
        const PagerView& to = r.view;
        relay_as_the_kernel(from, r, backwards);
        // Sub-frame 32 f + k: the block in slot k of frame f (sub-page 32 p + k of page p).
        const std::map<std::uint32_t, std::uint64_t> kept = {{0, 0},       {1, 1},       {33, 32 + 1}, {65, 64 + 1},
                                                             {66, 64 + 2}, {99, 96 + 3}, {97, 320 + 1}};
        for (std::uint32_t f = 0; f < 128; ++f) {
            INFO("frame " << f);
            const auto k = kept.find(f);
            CHECK(r.owner[f] == (k != kept.end() ? k->second : free_frame));
        }
        for (const auto& [f, q] : kept) {
            INFO("sub-page " << q);
            const Pte n{r.pte[q]};
            CHECK(n.state() == PageState::resident);
            CHECK(n.frame() == f);
            CHECK_FALSE(n.is(Pte::dirty));
            CHECK(n.hits() == 1);  // filled alone, its own hits never counted: the read that filled it (relaid_hits)
            CHECK(word(to.frame_data(f), 0) == q * 16);
        }
        std::uint64_t resident = 0;
        for (std::uint64_t q = 0; q < to.pages; ++q) resident += Pte{r.pte[q]}.state() == PageState::resident;
        CHECK(resident == kept.size());
    }
}

// fill_displaced over every page, a block copied word by word.
std::uint64_t fill_all_displaced(const PagerView& from, const PagerView& to) {
    std::uint64_t n = 0;
    for (std::uint64_t q = 0; q < from.pages; ++q)
        n += fill_displaced(from, to, q, 0, [](std::byte* dst, const std::byte* src, std::uint32_t bytes) {
            copy_words(dst, src, bytes);
        });
    return n;
}

TEST_CASE("blocks read in place for want of a slot are filled into their frame's free slots at the change to 128 B") {
    SharingStart s(64, 4);
    const PagerView& from = s.view;
    share_some(s);  // frame 3: page 10's block 1 in slot 1, page 3's block 3 in slot 3
    CHECK(std::all_of(s.displaced.begin(), s.displaced.end(), [](std::uint32_t m) { return m == 0; }));
    CHECK_FALSE(any_displaced(from));  // the change would launch no kernel to fill them
    // Page 10's block 3 and page 3's block 1: each slot is the other page's, so both are read in place, and marked.
    auto read_at = [](const PagerView& v, std::uint64_t page, std::uint64_t w, const std::byte* at) {
        const auto [a, x] = read_lone(v, page, w);
        CHECK(a == at);
        return x;
    };
    CHECK(read_at(from, 10, 3 * 16 + 5, from.host_page(10)) == 10 * kWords + 53);
    CHECK(read_at(from, 3, 16 + 2, from.host_page(3)) == 3 * kWords + 18);
    CHECK(read_lone(from, 3, 16 + 9).first == from.host_page(3));  // again: the mark stays as it was
    CHECK(s.displaced[10] == 1u << 3);
    CHECK(s.displaced[3] == 1u << 1);
    CHECK(any_displaced(from));
    // A block known displaced is read in place without a claim: while another access holds a claim on it (as one did
    // before it found the slot taken), a read neither waits for that claim nor claims.
    s.sectors[10] |= std::uint64_t{1u << 3} << 32;
    const Step known = begin_access(from, 10, false, 0, 8, 3 * 128 + 8);
    CHECK(known.kind == Step::host);
    CHECK(s.sectors[10] >> 32 == ((1u << 1) | (1u << 3)));  // only the claim set above besides its own block's
    CHECK(Pte{from.pte[10]}.pins() == 1);                   // the read's pin, held as held() says
    ThreadGroup g{0};
    release(from, 10, g, from.host_page(10), false);
    s.sectors[10] &= ~(std::uint64_t{1u << 3} << 32);
    // A read of that block and one not yet displaced (16 bytes across blocks 3 and 4) claims both; slot 3 is page 3's,
    // so it reads in place, and both are marked.
    CHECK(begin_access(from, 10, false, 0, 16, 4 * 128 - 8).kind == Step::host);
    CHECK(s.displaced[10] == ((1u << 3) | (1u << 4)));
    CHECK(s.sectors[10] >> 32 == 1u << 1);  // its claims given back
    release(from, 10, g, from.host_page(10), false);
    s.displaced[10] = 1u << 3;  // block 4 unmarked again, for the fill below
    // Page 11 found no frame at all (place_shared): nothing to fill it near, so no mark.
    CHECK(read_lone(from, 11, 16).first == from.host_page(11));
    CHECK(s.displaced[11] == 0);
    Relaid r(from, 7);
    const PagerView& to = r.view;
    relay_as_the_kernel(from, r);
    const std::uint64_t before = s.pager.stats()[c_bytes_in];
    CHECK(fill_all_displaced(from, to) == 2);
    // Sub-page 32 * 3 + 1 into frame 3's first free slot (sub-frame 96), 32 * 10 + 3 into the next (98); the
    // sub-pages relaid there stay.
    const std::map<std::uint32_t, std::uint64_t> in3 = {{96, 97}, {97, 321}, {98, 323}, {99, 99}};
    for (const auto& [f, q] : in3) {
        INFO("sub-frame " << f);
        CHECK(r.owner[f] == q);
        const Pte e{r.pte[q]};
        CHECK(e.state() == PageState::resident);
        CHECK(e.frame() == f);
        CHECK(e.pins() == 0);
        CHECK(e.hits() == 1);
        CHECK(word(to.frame_data(f), 0) == q * 16);
        CHECK(word(to.frame_data(f), 15) == q * 16 + 15);
    }
    CHECK_FALSE(Pte{r.pte[97]}.is(Pte::dirty));
    CHECK(s.pager.stats()[c_prefetches] == 2);
    CHECK(s.pager.stats()[c_bytes_in] == before + 256);
    CHECK(Pte{r.pte[11 * 32 + 1]}.state() == PageState::host);
    // Reads at 128 B find them.
    CHECK(read_at(to, 97, 2, to.frame_data(96)) == 3 * kWords + 18);
    CHECK(read_at(to, 323, 5, to.frame_data(98)) == 10 * kWords + 53);
    // A sub-frame that another page's block took after this page found it free (warps of pages that share a frame race
    // for its free slots): the claim fails and leaves the sub-frame and the page as they were.
    CHECK_FALSE(claim_displaced(to, 96, 32 * 10 + 4));
    CHECK(r.owner[96] == 97);
    CHECK(Pte{r.pte[32 * 10 + 4]}.state() == PageState::host);
    CHECK(word(to.frame_data(96), 0) == 97 * 16);
    // More displaced blocks than free slots: the frame fills up, no slot taken twice, the rest left to the next kernel.
    SharingStart s2(64, 4);
    share_some(s2);
    s2.displaced[10] = ~0u;  // all but block 1, in slot 1, want a slot: 31, where 30 are free
    Relaid r2(s2.view, 7);
    relay_as_the_kernel(s2.view, r2);
    CHECK(fill_all_displaced(s2.view, r2.view) == 30);
    std::set<std::uint64_t> owners;
    for (std::uint32_t f = 96; f < 128; ++f) {
        INFO("sub-frame " << f);
        const std::uint64_t q = r2.owner[f];
        CHECK(owners.insert(q).second);
        REQUIRE(q < r2.view.pages);
        CHECK(Pte{r2.pte[q]}.frame() == f);
        CHECK(word(r2.view.frame_data(f), 7) == q * 16 + 7);
    }
    CHECK(owners.contains(99));   // page 3's block, relaid
    CHECK(owners.contains(321));  // page 10's own
}

TEST_CASE("another first choice gives each shared frame to the page of its lowest slot, the others to host memory") {
    SharingStart s(64, 4);
    PagerView& v = s.view;
    share_some(s);
    // Page 1, alone in frame 1, reads every block: it comes to have every slot, and is whole.
    for (std::uint64_t k = 0; k < 32; ++k) CHECK(read_lone(v, 1, 16 * k + 1).second == 1 * kWords + 16 * k + 1);
    REQUIRE(Pte{v.pte[1]}.frame() == 1);
    CHECK_FALSE(Pte{v.pte[1]}.is(Pte::partial));
    CHECK(s.shared[1] == 0xffffffffu);
    for (std::uint64_t q = 0; q < v.pages; ++q) settle_shared(v, q);
    CHECK(v.frame_owner[0] == 0);   // the only page there
    CHECK(v.frame_owner[1] == 1);   // the only page there, whole
    CHECK(v.frame_owner[2] == 2);   // the only page there
    CHECK(v.frame_owner[3] == 10);  // page 10 has slot 1, page 3 slot 3
    CHECK(Pte{v.pte[3]}.state() == PageState::host);
    CHECK(s.sectors[3] == 0);
    for (std::uint64_t q : {0, 1, 2, 10}) CHECK(Pte{v.pte[q]}.state() == PageState::resident);
    // After the choice the frames are their pages' own: page 10 grows in place. The slots are read no more, not
    // cleared: the view that warp_acquire's misses read (PagerView::shared) keeps them.
    v.profile_decided = 1;
    ThreadGroup g{0};
    CpuMover m;
    std::byte* a = acquire(v, 10, false, g, m, 8, 128 + 8);  // block 1: in
    CHECK(a == v.frame_data(3));
    release(v, 10, g, a, false);
    a = acquire(v, 10, false, g, m, 8, 3 * 128 + 8);  // block 3, page 3's slot before: the whole page now
    CHECK(a == v.frame_data(3));
    CHECK(word(a, 49) == 10 * kWords + 49);
    release(v, 10, g, a, false);
}

TEST_CASE("a write to a page in a shared frame takes the page out of it: no block stays there older than the write") {
    SharingStart s(64, 4);
    PagerView& v = s.view;
    share_some(s);  // frame 3: page 10's block 1 in slot 1, page 3's block 3 in slot 3
    ThreadGroup g{0};
    CpuMover m;
    auto write_words = [&](std::uint64_t page, std::uint64_t first, std::uint64_t n, std::uint64_t plus) {
        std::byte* a = acquire(v, page, true, g, m, n * 8, first * 8);
        for (std::uint64_t w = first; w < first + n; ++w) {
            const std::uint64_t x = page * kWords + w + plus;
            std::memcpy(a + w * 8, &x, 8);
        }
        return a;
    };
    // 384 bytes of page 3 from block 1: its block 3 is in frame 3, the slot of its block 1 is page 10's. The write goes
    // to host memory, the page with it (a writer in place while it lasts), and the frame keeps nothing of it.
    std::byte* a = write_words(3, 16, 48, 7000);
    CHECK(a == v.host_page(3));
    CHECK(Pte{v.pte[3]}.state() == PageState::host);
    CHECK(Pte{v.pte[3]}.writers() == 1);
    CHECK(Pte{v.pte[3]}.pins() == 0);
    release(v, 3, g, a, true);
    CHECK(Pte{v.pte[3]}.writers() == 0);
    CHECK(s.sectors[3] == 0);
    CHECK(read_lone(v, 3, 48).second == 3 * kWords + 48 + 7000);  // the new word, wherever it is read from now
    CHECK(read_lone(v, 3, 63).second == 3 * kWords + 63 + 7000);
    // A write that the frame could have served (page 0's block 0, in frame 0) leaves it too.
    a = write_words(0, 2, 1, 9000);
    CHECK(a == v.host_page(0));
    release(v, 0, g, a, true);
    CHECK(read_lone(v, 0, 2).second == 2 + 9000);
    CHECK(read_lone(v, 0, 16).second == 16);  // block 1, which was in frame 0 too: read from host memory now
    // Not while another access holds the page: that one may be reading the frame.
    std::byte* held = acquire(v, 10, false, g, m, 8, 128);
    CHECK(held == v.frame_data(3));
    const Step busy = begin_access(v, 10, true, 0, 8, 128 + 8);
    CHECK(busy.kind == Step::wait);
    CHECK(Pte{v.pte[10]}.state() == PageState::resident);
    CHECK(Pte{v.pte[10]}.pins() == 1);
    release(v, 10, g, held, false);
    flush_all(v, g, m);
    for (std::uint64_t w = 16; w < 64; ++w) CHECK(s.data[3 * kWords + w] == 3 * kWords + w + 7000);
    CHECK(s.data[2] == 2 + 9000);
    // At the change to 128 B the slot page 3 left in frame 3 is a free frame, as are all of frame 0 but the blocks
    // read back into it.
    Relaid r(v, 7);
    relay_as_the_kernel(v, r);
    CHECK(r.owner[96 + 3] == free_frame);
    CHECK(r.owner[96 + 1] == 10 * 32 + 1);
    for (std::uint32_t f = 0; f < r.view.frames_n; ++f) {
        INFO("sub-frame " << f);
        const std::uint32_t o = r.owner[f];
        CHECK((o == free_frame || (o < r.view.pages && Pte{r.pte[o]}.frame() == f)));
    }
}

TEST_CASE("another first choice frees a shared frame whose lowest slot a write took out") {
    SharingStart s(64, 4);
    PagerView& v = s.view;
    share_some(s);  // frame 1: page 1's block 1 alone
    ThreadGroup g{0};
    CpuMover m;
    std::byte* a = acquire(v, 1, true, g, m, 8, 16 * 8);
    CHECK(a == v.host_page(1));
    release(v, 1, g, a, true);
    for (std::uint64_t q = 0; q < v.pages; ++q) settle_shared(v, q);
    CHECK(v.frame_owner[1] == free_frame);  // nobody's: the hand hands it out
    CHECK(v.frame_owner[0] == 0);
    CHECK(v.frame_owner[3] == 10);
    const Claim c = claim_frame(v, 40, 0);
    CHECK(c.frame == 1);
    CHECK(c.victim == no_page);
}

TEST_CASE("a sector fill that brings all a read needs serves it, pinned; one that brings part of it looks again") {
    SharingStart s(64, 4, true);
    PagerView& v = s.view;
    HostPager& p = s.pager;
    share_some(s);  // frame 3: page 10's block 1 in slot 1, page 3's block 3 in slot 3
    ThreadGroup g{0};
    CpuMover m;
    // Page 10's block 2, its slot in frame 3 free: copied there, and the read served from there with its pin held
    // until release(), the page marked as a hit would mark it, counted a fill, not a hit.
    v.pte[10] &= ~Pte::referenced;
    const std::uint64_t hits = p.stats()[c_hits], fills = p.stats()[c_fills];
    std::byte* a = acquire(v, 10, false, g, m, 8, (2 * 16 + 3) * 8);
    CHECK(a == v.frame_data(3));
    CHECK(word(a, 2 * 16 + 3) == 10 * kWords + 2 * 16 + 3);
    CHECK(Pte{v.pte[10]}.pins() == 1);
    CHECK(Pte{v.pte[10]}.is(Pte::referenced));
    CHECK(p.stats()[c_fills] == fills + 1);
    CHECK(p.stats()[c_hits] == hits);
    release(v, 10, g, a, false);
    CHECK(Pte{v.pte[10]}.pins() == 0);
    CHECK((s.sectors[10] & 0xffffffffu) == 0x6u);
    // Block 4 the same way; then a 16-byte read of blocks 4 and 5 whose slot 5 in frame 3 is taken: block 5 goes into a
    // second frame, which does not hold block 4, so the read looks again instead of reading there.
    CHECK(read_lone(v, 10, 4 * 16).first == v.frame_data(3));
    s.shared[3] |= 1u << 5;
    a = acquire(v, 10, false, g, m, 16, (5 * 16 - 1) * 8);
    const std::uint32_t f2 = static_cast<std::uint32_t>(s.second[10] >> 32) - 1;
    REQUIRE(f2 < 3);
    CHECK(static_cast<std::uint32_t>(s.second[10]) == 1u << 5);
    CHECK(a != v.frame_data(f2));
    CHECK(word(a, 5 * 16 - 1) == 10 * kWords + 5 * 16 - 1);
    CHECK(word(a, 5 * 16) == 10 * kWords + 5 * 16);
    release(v, 10, g, a, false);
    CHECK(Pte{v.pte[10]}.pins() == 0);
}

TEST_CASE("a lone read whose slot is another page's takes a second frame for its page; the change to 128 B keeps it") {
    SharingStart s(64, 4, true);
    PagerView& v = s.view;
    HostPager& p = s.pager;
    share_some(s);  // frame 3: page 10's block 1 in slot 1, page 3's block 3 in slot 3; frames 0-2 have slot 3 free
    // Page 10's block 3: its slot in frame 3 is page 3's. The page gets a second frame where slot 3 is free, and the
    // block goes there, in slot 3.
    const auto [at, x] = read_lone(v, 10, 3 * 16 + 5);
    CHECK(x == 10 * kWords + 3 * 16 + 5);
    const std::uint32_t f2 = static_cast<std::uint32_t>(s.second[10] >> 32) - 1;
    REQUIRE(f2 < 3);
    CHECK(at == v.frame_data(f2));
    CHECK(static_cast<std::uint32_t>(s.second[10]) == 1u << 3);
    CHECK((s.shared[f2] & (1u << 3)) != 0);
    CHECK(word(v.frame_data(f2), 3 * 16 + 9) == 10 * kWords + 3 * 16 + 9);
    CHECK(s.sectors[10] == (std::uint64_t{1u << 1} | std::uint64_t{1u << 1} << 32));  // its claim of block 3 given back
    CHECK(s.displaced[10] == 0);
    CHECK(Pte{v.pte[10]}.frame() == 3);
    CHECK(Pte{v.pte[10]}.pins() == 0);
    // Read again: a hit there.
    const std::uint64_t hits = p.stats()[c_hits];
    CHECK(read_lone(v, 10, 3 * 16 + 6) ==
          std::pair<const std::byte*, std::uint64_t>{v.frame_data(f2), 10 * kWords + 54});
    CHECK(p.stats()[c_hits] == hits + 1);
    // Page 3's block 5 goes into frame 3 (slot 5 free); then page 10's block 5 finds that slot taken and goes into its
    // second frame.
    CHECK(read_lone(v, 3, 5 * 16).first == v.frame_data(3));
    CHECK(read_lone(v, 10, 5 * 16 + 1).first == v.frame_data(f2));
    CHECK(static_cast<std::uint32_t>(s.second[10]) == ((1u << 3) | (1u << 5)));
    // While another access gets page 3 its second frame, a read that needs one waits: no mark, no claim, no pin kept.
    const std::uint64_t had3 = s.sectors[3];
    s.second[3] = placing_second;
    CHECK(begin_access(v, 3, false, 0, 8, 128 + 16).kind == Step::wait);
    CHECK(s.displaced[3] == 0);
    CHECK(s.sectors[3] == had3);
    CHECK(Pte{v.pte[3]}.pins() == 0);
    s.second[3] = 0;
    // Page 3's block 1: its slot in frame 3 is page 10's, and no frame has slot 1 free: read in place, marked.
    CHECK(read_lone(v, 3, 16 + 2).first == v.host_page(3));
    CHECK(s.second[3] == no_second);
    CHECK(s.displaced[3] == 1u << 1);
    // Page 10's block 3 read in place before it came into the second frame (a read of it and of a block not displaced
    // claims both): still marked, but in a slot of its own, so the change must not fill it again.
    s.displaced[10] |= 1u << 3;
    // The change to 128 B: page 10's blocks 3 and 5 stay where they are, in its second frame's slots.
    Relaid r(v, 7);
    relay_as_the_kernel(v, r);
    for (std::uint32_t k : {3u, 5u}) {
        INFO("block " << k);
        const std::uint64_t q = 10 * 32 + k;
        const Pte e{r.pte[q]};
        CHECK(e.state() == PageState::resident);
        CHECK(e.frame() == f2 * 32 + k);
        CHECK(r.owner[f2 * 32 + k] == q);
        CHECK(word(r.view.frame_data(e.frame()), 7) == q * 16 + 7);
    }
    CHECK(fill_all_displaced(v, r.view) == 1);  // page 3's block 1, into a free slot of frame 3
    for (std::uint32_t f = 0; f < r.view.frames_n; ++f) {
        INFO("sub-frame " << f);
        const std::uint32_t o = r.owner[f];
        CHECK((o == free_frame || (o < r.view.pages && Pte{r.pte[o]}.frame() == f)));
    }
    CHECK(read_lone(r.view, 10 * 32 + 5, 1).second == 10 * kWords + 5 * 16 + 1);
    // A write to page 10 takes it out of both frames; another choice than 128 B keeps no second frame.
    ThreadGroup g{0};
    CpuMover m;
    std::byte* a = acquire(v, 10, true, g, m, 8, 8);
    CHECK(a == v.host_page(10));
    release(v, 10, g, a, true);
    CHECK(s.second[10] == 0);
    CHECK(second_frame_with(v, 10, 1u << 3) == Pte::max_frames);
}

// A frame is one address for the whole access: a read whose blocks lie some in a page's first frame and some in its
// second cannot be served from either.
TEST_CASE("a read across blocks in a page's two frames reads host memory, not another page's slot") {
    SharingStart s(64, 4, true);
    PagerView& v = s.view;
    share_some(s);                 // frame 3: page 10's block 1 in slot 1, page 3's block 3 in slot 3
    read_lone(v, 10, 3 * 16 + 5);  // page 10's block 3: into its second frame (its slot in frame 3 is page 3's)
    const std::uint32_t f2 = static_cast<std::uint32_t>(s.second[10] >> 32) - 1;
    REQUIRE(f2 < 3);
    REQUIRE(read_lone(v, 10, 2 * 16).first == v.frame_data(3));  // its block 2: into frame 3, slot 2
    ThreadGroup g{0};
    CpuMover m;
    // A 256-byte row over blocks 2 and 3, and a 16-byte element across their border: every word the page's own.
    for (auto [offset, bytes] : {std::pair<std::uint64_t, std::uint64_t>{256, 256}, {3 * 128 - 8, 16}}) {
        INFO("bytes " << offset << " + " << bytes);
        std::byte* a = acquire(v, 10, false, g, m, bytes, offset);
        CHECK(a == v.host_page(10));
        for (std::uint64_t w = offset / 8; w < (offset + bytes) / 8; ++w) CHECK(word(a, w) == 10 * kWords + w);
        release(v, 10, g, a, false);
        CHECK(Pte{v.pte[10]}.pins() == 0);
    }
    // Each block alone still hits where it is.
    CHECK(read_lone(v, 10, 2 * 16 + 1) ==
          std::pair<const std::byte*, std::uint64_t>{v.frame_data(3), 10 * kWords + 33});
    CHECK(read_lone(v, 10, 3 * 16 + 1) ==
          std::pair<const std::byte*, std::uint64_t>{v.frame_data(f2), 10 * kWords + 49});
}

TEST_CASE(
    "threads reading lone elements through shared frames, and writing, stay exact; the change to 128 B keeps it") {
    const std::uint64_t pages = 64;
    SharingStart s(pages, 6, true);
    PagerView& v = s.view;
    constexpr unsigned threads = 8;
    std::vector<std::uint64_t> bad(threads, 0);
    // Thread t reads random words and writes ~(its number) into word 16 t + 3 of page 2 t (a write does not share:
    // it takes its page out of a shared frame), whose slot readers' blocks want too. Readers leave the written words
    // alone: a read of a word while another thread writes it is a race of the program's own, in a frame as in any
    // memory (TSan).
    on_threads(threads, [&](unsigned t) {
        std::mt19937_64 rng(t + 1);
        ThreadGroup g{t};
        CpuMover m;
        for (int i = 0; i < 3000; ++i) {
            const std::uint64_t page = rng() % pages;
            std::uint64_t w = rng() % kWords;
            if (page % 2 == 0 && page / 2 < threads && w == 8 * page + 3) ++w;
            if (i % 10 == 0) {
                const std::uint64_t wp = 2 * t, ww = 16 * t + 3;
                std::byte* a = acquire(v, wp, true, g, m, 8, ww * 8);
                const std::uint64_t x = ~(wp * kWords + ww);
                std::memcpy(a + ww * 8, &x, 8);
                if (a != v.host_page(wp)) note_write(v, wp, ww * 8, 8);
                release(v, wp, g, a, true);
                continue;
            }
            std::byte* a = acquire(v, page, false, g, m, 8, w * 8);
            const std::uint64_t x = word(a, w), want = page * kWords + w;
            bad[t] += x != want;
            release(v, page, g, a, false);
        }
    });
    for (unsigned t = 0; t < threads; ++t) CHECK(bad[t] == 0);
    // No slot is two pages', and each page's blocks are in its frame's slots or its second frame's.
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> slot_of;
    std::uint64_t in_shared = 0, in_second = 0;
    for (std::uint64_t q = 0; q < pages; ++q) {
        const Pte e{v.pte[q]};
        CHECK(e.pins() == 0);
        CHECK(e.writers() == 0);
        if (e.state() != PageState::resident || s.shared[e.frame()] == 0) continue;
        const std::uint32_t have = static_cast<std::uint32_t>(s.sectors[q]);
        CHECK((have & ~s.shared[e.frame()]) == 0);
        for (std::uint32_t k = 0; k < 32; ++k)
            if ((have >> k) & 1u) CHECK(slot_of.emplace(std::pair{e.frame(), k}, q).second);
        ++in_shared;
        if (s.second[q] == 0 || s.second[q] >= placing_second) continue;
        const std::uint32_t f2 = static_cast<std::uint32_t>(s.second[q] >> 32) - 1,
                            there = static_cast<std::uint32_t>(s.second[q]);
        CHECK(f2 != e.frame());
        CHECK((there & have) == 0);
        CHECK((there & ~s.shared[f2]) == 0);
        for (std::uint32_t k = 0; k < 32; ++k)
            if ((there >> k) & 1u) CHECK(slot_of.emplace(std::pair{f2, k}, q).second);
        in_second += there != 0;
    }
    CHECK(in_shared > 6);  // more pages than frames: they shared
    INFO("pages with blocks in a second frame: " << in_second);
    // The change to 128 B: every resident sub-page has a frame nobody else has, free frames hold none, and the data
    // is what it was (written words as written, once flushed).
    Relaid r(v, 7);
    relay_as_the_kernel(v, r);
    std::map<std::uint32_t, std::uint64_t> frame_of;
    for (std::uint64_t q = 0; q < r.view.pages; ++q) {
        const Pte e{r.pte[q]};
        if (e.state() != PageState::resident) continue;
        CHECK(frame_of.emplace(e.frame(), q).second);
        CHECK(r.owner[e.frame()] == q);
    }
    for (std::uint32_t f = 0; f < r.view.frames_n; ++f) CHECK((r.owner[f] == free_frame) != frame_of.contains(f));
    // The blocks read in place for want of a slot (marked while the threads ran), filled into free sub-frames of
    // their page's frame where there are any (these frames are mostly full): still no frame twice, each what host
    // memory holds (a write displaced from a slot was written there, in place).
    CHECK(std::any_of(s.displaced.begin(), s.displaced.end(), [](std::uint32_t m) { return m != 0; }));
    INFO("displaced blocks filled: " << fill_all_displaced(v, r.view));
    for (std::uint64_t q = 0; q < r.view.pages; ++q) {
        const Pte e{r.pte[q]};
        if (e.state() != PageState::resident) continue;
        const auto relaid = frame_of.find(e.frame());
        if (relaid != frame_of.end() && relaid->second == q) continue;
        CHECK(relaid == frame_of.end());
        frame_of.emplace(e.frame(), q);
        CHECK(r.owner[e.frame()] == q);
        CHECK(std::memcmp(r.view.frame_data(e.frame()), r.view.host_page(q), 128) == 0);
    }
    ThreadGroup g{0};
    CpuMover m;
    flush_all(r.view, g, m);
    for (unsigned t = 0; t < threads; ++t) {
        const std::uint64_t wp = 2 * t, ww = 16 * t + 3;
        CHECK(s.data[wp * kWords + ww] == ~(wp * kWords + ww));
    }
}

TEST_CASE("threads' lone reads and 256-byte row writes through shared frames stay exact, read back and flushed") {
    // Before the first choice, with the tally empty, proposing 128 B, proposing 4 KiB, or turning to 4 KiB halfway:
    // lone reads put pages in shared frames (or frames of their own), and rows written across three blocks find some
    // of theirs in the frame and the slots of others taken (write_out_of_shared).
    const std::uint64_t pages = 32;
    auto written_word = [](std::uint64_t i) {  // the row of even page p: words [64 r + 8, 64 r + 40), r = p / 2 % 8
        const std::uint64_t page = i / kWords, w = i % kWords, from = 64 * (page / 2 % 8) + 8;
        return page % 2 == 0 && w >= from && w < from + 32;
    };
    std::uint64_t dense[2];
    region_tally(0xffffffffu, dense);
    for (int mode = 0; mode < 4; ++mode) {
        INFO("tally: " << (mode == 0 ? "empty" : mode == 1 ? "128 B" : mode == 2 ? "4 KiB" : "4 KiB halfway"));
        SharingStart s(pages, 8, true);
        PagerView& v = s.view;
        auto propose = [&](const std::uint64_t* t) {
            atom::store(&s.slots[profile_tally], 16 * t[0]);
            atom::store(&s.slots[profile_tally + 1], 16 * t[1]);
        };
        const std::uint64_t none[2] = {0, 0};
        if (mode == 0) propose(none);
        if (mode == 2) propose(dense);
        std::vector<std::atomic<bool>> row_written(pages);
        constexpr unsigned threads = 8;
        std::vector<std::uint64_t> bad(threads, 0);
        on_threads(threads, [&](unsigned t) {
            std::mt19937_64 rng(t + 1);
            ThreadGroup g{t};
            CpuMover m;
            for (int i = 0; i < 20000; ++i) {
                if (mode == 3 && t == 0 && i == 5000) propose(dense);
                if (i % 16 == 15) {  // a row of thread t's even pages: ~i into each of its words
                    const std::uint64_t page = 2 * (t + threads * (rng() % (pages / 2 / threads))),
                                        first = 64 * (page / 2 % 8) + 8;
                    std::byte* a = acquire(v, page, true, g, m, 256, first * 8);
                    for (std::uint64_t w = first; w < first + 32; ++w) {
                        const std::uint64_t x = ~(page * kWords + w);
                        std::memcpy(a + w * 8, &x, 8);
                    }
                    if (a != v.host_page(page)) note_write(v, page, first * 8, 256);
                    release(v, page, g, a, true);
                    row_written[page] = true;
                    continue;
                }
                std::uint64_t idx = (rng() % pages) * kWords + rng() % kWords;
                if (written_word(idx)) idx += 32;  // past the row: never written
                if (idx >= pages * kWords) continue;
                const std::uint64_t page = idx / kWords, w = idx % kWords;
                std::byte* a = acquire(v, page, false, g, m, 8, w * 8);
                bad[t] += word(a, w) != idx;
                release(v, page, g, a, false);
            }
        });
        for (unsigned t = 0; t < threads; ++t) CHECK(bad[t] == 0);
        CHECK(s.pager.stats()[c_fills] > 0);
        auto want = [&](std::uint64_t i) { return written_word(i) && row_written[i / kWords] ? ~i : i; };
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < pages * kWords; ++i)
            wrong += read_lone(v, i / kWords, i % kWords).second != want(i);
        CHECK(wrong == 0);  // every word read back as the last write left it
        ThreadGroup g{0};
        CpuMover m;
        flush_all(v, g, m);
        wrong = 0;
        for (std::uint64_t i = 0; i < pages * kWords; ++i) wrong += s.data[i] != want(i);
        CHECK(wrong == 0);  // and in host memory after the flush
    }
}

TEST_CASE("where nothing is ever evicted a page's frame is its own, and a read hit needs only the page's bit") {
    const std::uint64_t pages = 16;
    std::vector<std::uint64_t> data = numbered(pages);
    HostPager p(config(pages, pages), bytes(data));
    const PagerView& v = p.view();
    REQUIRE(v.whole != nullptr);
    ThreadGroup g{0};
    CpuMover m;
    // Filled in an order of their own, each lands in its own frame.
    const std::vector<std::uint64_t> order = {5, 2, 11, 0, 15, 7};
    for (std::uint64_t k : order) {
        std::byte* a = acquire(v, k, false, g, m);
        CHECK(a == v.frame_data(static_cast<std::uint32_t>(k)));
        CHECK(Pte{v.pte[k]}.frame() == k);
        release(v, k, g, a, false);
    }
    for (std::uint64_t page = 0; page < pages; ++page) {
        INFO("page " << page);
        const bool filled = std::find(order.begin(), order.end(), page) != order.end();
        CHECK(whole_bit(v, page) == filled);
        const std::byte* r = find_resident(v, page);
        CHECK(r == (filled ? v.frame_data(static_cast<std::uint32_t>(page)) : nullptr));
        if (r != nullptr)
            for (std::uint64_t w : {std::uint64_t{0}, std::uint64_t{17}, kWords - 1})
                CHECK(word(r, w) == page * kWords + w);
    }
    // A write hit takes the word (the page turns dirty); a read hit after it reads the write.
    std::byte* a = acquire(v, 5, true, g, m);
    std::uint64_t x = word(a, 3) + 1000;
    std::memcpy(a + 3 * 8, &x, 8);
    release(v, 5, g, a, true);
    CHECK(Pte{v.pte[5]}.is(Pte::dirty));
    CHECK(word(find_resident(v, 5), 3) == 5 * kWords + 3 + 1000);
    flush_all(v, g, m);
    CHECK(data[5 * kWords + 3] == 5 * kWords + 3 + 1000);
    // A pool that cannot hold every page keeps no bits: its frames move.
    std::vector<std::uint64_t> data2 = numbered(pages);
    HostPager small(config(pages, 4), bytes(data2));
    CHECK(small.view().whole == nullptr);
}

TEST_CASE("a lane's hit in a batch of reads: pinned only where frames can be evicted; anything else left as it was") {
    const std::uint64_t pages = 8;
    for (std::uint64_t frames : {pages, std::uint64_t{4}}) {
        INFO("frames " << frames);
        AutomaticStart start(pages, frames, Admission::migrate);
        HostPager& p = start.pager;
        PagerView& v = start.view;
        ThreadGroup g{0};
        CpuMover m;
        std::uint32_t f = 0;
        const std::uint64_t host = v.pte[2];
        CHECK_FALSE(try_hit(v, 2, f));  // in host memory
        CHECK(v.pte[2] == host);
        release(v, 2, g, acquire(v, 2, false, g, m), false);  // the whole page in
        CHECK(try_hit(v, 2, f));
        CHECK(f == Pte{v.pte[2]}.frame());
        CHECK(Pte{v.pte[2]}.pins() == (frames < pages ? 1u : 0u));
        CHECK(held(v, 2, v.frame_data(f), false) == (frames < pages ? Pte::pin_one : 0));
        end_access(v, 2, v.frame_data(f), false);
        CHECK(Pte{v.pte[2]}.pins() == 0);
        CHECK_FALSE(Pte{v.pte[2]}.is(Pte::dirty));
        CHECK(p.stats()[c_hits] == 0);                                  // the caller counts a batch's hits
        release(v, 3, g, acquire(v, 3, false, g, m, 256, 512), false);  // a partial page: its blocks may be missing
        const std::uint64_t partial = v.pte[3];
        CHECK(Pte{partial}.is(Pte::partial));
        CHECK_FALSE(try_hit(v, 3, f));
        CHECK(v.pte[3] == partial);
        v.pte[4] = static_cast<std::uint64_t>(PageState::migrating);  // another filler's
        CHECK_FALSE(try_hit(v, 4, f));
        CHECK(v.pte[4] == static_cast<std::uint64_t>(PageState::migrating));
        v.pte[4] = host;
    }
}

// Threads standing in for warps: in each of 3000 rounds a thread reads what `reads` reads (it counts the wrong words
// it saw in `bad` and returns a page it read), and every second round adds one to the thread's own counter in that
// page (word 200 + t), written a page at a time. After a flush every counter is exact and no pin is left.
template <class Reads>
void check_readers_and_writers(HostPager& p, const std::vector<std::uint64_t>& d, Reads reads) {
    const PagerView v = p.view();
    const int threads = 6, ops = 3000;
    std::vector<std::vector<std::uint64_t>> expect(threads, std::vector<std::uint64_t>(v.pages, 0));
    std::vector<int> bad(threads, 0);
    on_threads(threads, [&](int t) {
        std::mt19937_64 rng(t * 104729 + 5);
        ThreadGroup g{static_cast<unsigned>(t)};
        CpuMover m;
        for (int i = 0; i < ops; ++i) {
            const std::uint64_t page = reads(g, m, rng, i, bad[t]);
            if (i % 2 == 1) {
                std::byte* w = acquire(v, page, true, g, m);
                const std::uint64_t x = word(w, 200 + t) + 1;
                std::memcpy(w + (200 + t) * 8, &x, 8);
                ++expect[t][page];
                release(v, page, g, w, true);
            }
        }
    });
    p.flush();
    for (int t = 0; t < threads; ++t) {
        CHECK(bad[t] == 0);
        for (std::uint64_t pg = 0; pg < v.pages; ++pg)
            REQUIRE(d[pg * kWords + 200 + t] == pg * kWords + 200 + t + expect[t][pg]);
    }
    for (std::uint64_t pg = 0; pg < v.pages; ++pg) CHECK(Pte{v.pte[pg]}.pins() == 0);
}

TEST_CASE("threads reading four pages at once (hits first, the rest one by one) through a small pool stay exact") {
    const std::uint64_t pages = 64;
    std::vector<std::uint64_t> d = numbered(pages);
    HostPager p(config(pages, 8, Admission::migrate), bytes(d));
    const PagerView v = p.view();
    check_readers_and_writers(p, d, [&](ThreadGroup& g, CpuMover& m, std::mt19937_64& rng, int i, int& bad) {
        std::uint64_t page[4];
        std::byte* data[4];
        for (int k = 0; k < 4; ++k) page[k] = rng() % (i % 3 == 0 ? 12 : pages);  // some hot, some repeated
        for (int k = 0; k < 4; ++k) {
            std::uint32_t f = 0;
            data[k] = try_hit(v, page[k], f) ? v.frame_data(f) : nullptr;
        }
        for (int k = 0; k < 4; ++k)
            if (data[k] == nullptr) data[k] = acquire(v, page[k], false, g, m);
        for (int k = 0; k < 4; ++k)
            if (word(data[k], 100) != page[k] * kWords + 100) ++bad;
        for (int k = 0; k < 4; ++k) end_access(v, page[k], data[k], false);
        return page[0];
    });
    CHECK(p.stats()[c_evictions] > 0);
}

// A read as Array::warp_acquire makes it: its own first look (the page's bit where nothing is ever evicted, else a
// pin), and on anything but a hit the protocol going on from what that look saw (acquire's `looked`).
std::byte* read_looking_first(const PagerView& v, std::uint64_t page, ThreadGroup& g, CpuMover& m) {
    if (v.never_evicts()) {
        if (std::byte* d = find_resident(v, page)) return d;
        return acquire(v, page, false, g, m, ~0ull, 0, Looked{Looked::bit_clear, {}});
    }
    Looked looked;
    if (pinned_hit(v, page, looked)) return v.frame_data(looked.word.frame());
    return acquire(v, page, false, g, m, ~0ull, 0, looked);
}

TEST_CASE("a read that looked first: the protocol goes on from its pin, which it holds once") {
    const std::uint64_t pages = 8;
    std::vector<std::uint64_t> d = numbered(pages);
    HostPager p(config(pages, 2), bytes(d));
    const PagerView v = p.view();
    ThreadGroup g{0};
    CpuMover m;
    std::byte* a = read_looking_first(v, 3, g, m);  // a fault: filled from the look's pin
    CHECK(Pte{v.pte[3]}.state() == PageState::resident);
    CHECK(Pte{v.pte[3]}.pins() == 1);
    CHECK(word(a, 7) == 3 * kWords + 7);
    std::byte* b = read_looking_first(v, 3, g, m);  // a hit: the look's pin is the access's
    CHECK(b == a);
    CHECK(Pte{v.pte[3]}.pins() == 2);
    end_access(v, 3, a, false);
    end_access(v, 3, b, false);
    CHECK(Pte{v.pte[3]}.pins() == 0);
    v.pte[5] +=
        static_cast<std::uint64_t>(PageState::migrating);  // another filler's, then host again: waits, then fills
    std::thread other([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        atom::fetch_sub(&v.pte[5], std::uint64_t{1});
    });
    std::byte* c = read_looking_first(v, 5, g, m);
    other.join();
    CHECK(word(c, 9) == 5 * kWords + 9);
    end_access(v, 5, c, false);
    for (std::uint64_t pg = 0; pg < pages; ++pg) CHECK(Pte{v.pte[pg]}.pins() == 0);
}

TEST_CASE("threads reading as warp_acquire does (a look first) and writing through a pool small or whole stay exact") {
    const std::uint64_t pages = 64;
    for (std::uint64_t frames : {std::uint64_t{8}, pages}) {
        INFO("frames " << frames);
        std::vector<std::uint64_t> d = numbered(pages);
        HostPager p(config(pages, frames, Admission::adaptive), bytes(d));
        const PagerView v = p.view();
        check_readers_and_writers(p, d, [&](ThreadGroup& g, CpuMover& m, std::mt19937_64& rng, int i, int& bad) {
            const std::uint64_t page = rng() % (i % 3 == 0 ? 12 : pages);  // some hot
            std::byte* r = read_looking_first(v, page, g, m);
            if (word(r, 100) != page * kWords + 100) ++bad;
            release(v, page, g, r, false);
            return page;
        });
        CHECK((p.stats()[c_evictions] > 0) == (frames < pages));
    }
}

TEST_CASE("a look changes the page size at once the first time, later only where the look before wanted the same") {
    // 100 sampled regions of lone 8-byte reads: the tally says 128 B.
    std::vector<std::uint64_t> slots(profile_words);
    for (std::uint32_t i = 0; i < 100; ++i)
        slots[i * 7 % profile_slots] = (std::uint64_t{i} + 1) << 32 | 1u << (i % 32);
    std::uint64_t t[2];
    recount(slots, t);
    PagerView v{};
    v.page_shift = 12;
    v.pages = 1000;
    v.frames_n = 250;  // a pool smaller than the array
    auto answer = [&](std::uint64_t filled, bool first, std::uint32_t wanted) {
        const LookAnswer a = look_answer(t, v, filled, first, wanted);
        return std::pair{a.shift, a.change};
    };
    CHECK(answer(0, true, 0) == std::pair{7u, true});    // the first choice: at once
    CHECK(answer(0, false, 0) == std::pair{7u, false});  // a later one: the look before wanted nothing
    CHECK(answer(0, false, 8) == std::pair{7u, false});  // ... or another size
    CHECK(answer(0, false, 7) == std::pair{7u, true});   // two looks in a row
    // Where nothing is ever evicted, smaller pages do not pay once half the array's bytes are in frames.
    v.frames_n = 1000;
    CHECK(answer(500ull << 12, true, 0) == std::pair{12u, false});
    CHECK(answer(499ull << 12, true, 0) == std::pair{7u, true});
    v.frames_n = 999;  // one frame fewer: such a pool evicts, and smaller pages hold more
    CHECK(answer(500ull << 12, true, 0) == std::pair{7u, true});
    // A tally that says the size in use: nothing to change.
    v.page_shift = 7;
    CHECK(answer(0, true, 0) == std::pair{7u, false});
}

TEST_CASE("a smaller page does not pay once a pool that holds the whole array holds half of it") {
    CHECK(change_pays(12, 7, true, 100, 1000));  // full pool, a tenth of its bytes in: smaller pages pay
    CHECK_FALSE(
        change_pays(12, 7, true, 500, 1000));     // half in (partial pages too): hits through the small table cost more
    CHECK(change_pays(12, 7, false, 500, 1000));  // a pool smaller than the array: small pages hold more
    CHECK_FALSE(change_pays(12, 11, true, 0, 1000));  // full pool, half the page: not worth a larger table
    CHECK(change_pays(12, 11, false, 0, 1000));       // a smaller pool: it is
    CHECK(change_pays(7, 12, true, 1000, 1000));      // larger pages: fewer translations, a smaller table
    CHECK_FALSE(change_pays(8, 8, false, 0, 1000));
}

TEST_CASE(
    "smaller pages in place: resident pages stay split in their frames, dirty where written, exact through eviction") {
    const std::uint64_t pages = 16;
    constexpr std::uint32_t to_shift = 8, d = 12 - to_shift, sub = 1u << d, sub_words = 256 / 8;
    for (std::uint64_t frames : {pages, std::uint64_t{4}}) {
        INFO("frames " << frames);
        std::vector<std::uint64_t> data = numbered(pages), want = numbered(pages);
        HostPager p(config(pages, frames, Admission::adaptive), bytes(data));
        std::vector<std::uint32_t> marks(pages);
        PagerView from = p.view();
        from.dirty_blocks = marks.data();
        // At 4 KiB: every page read, every third one written (word 0 of its sub-page k % 16), the write
        // noted (note_write) except on page 3: a write that marked nothing counts as everywhere.
        {
            ThreadGroup g{0};
            CpuMover m;
            for (std::uint64_t k = 0; k < pages; ++k) {
                const bool write = k % 3 == 0;
                std::byte* a = acquire(from, k, write, g, m);
                if (write) {
                    const std::uint64_t w = (k % sub) * sub_words;
                    std::uint64_t x;
                    std::memcpy(&x, a + w * 8, 8);
                    x += 1000;
                    std::memcpy(a + w * 8, &x, 8);
                    want[k * kWords + w] += 1000;
                    if (k != 3 && a != from.host_page(k)) note_write(from, k, w * 8, 8);
                }
                release(from, k, g, a, write);
            }
        }
        Relaid r(from, to_shift);
        PagerView& to = r.view;
        auto &pte = r.pte, &ctl = r.ctl;
        auto& owner = r.owner;
        REQUIRE(relay_fits(from, to_shift, to.frames_n));
        CHECK_FALSE(relay_fits(from, to_shift, to.frames_n - 1));  // a capped pool: flush instead
        // A host page's entries are not written (the table starts clear, and one cleared ahead on the GPU
        // must not be swept through L2 again): a mark left in them stays.
        constexpr std::uint64_t untouched = 0x5a5a5a5a5a5a5a5aull;
        auto host_entries = [&](auto&& f) {
            for (std::uint64_t page = 0; page < pages; ++page)
                if (Pte{from.pte[page]}.state() != PageState::resident)
                    for (std::uint32_t j = 0; j < sub; ++j) f(pte[page * sub + j]);
        };
        host_entries([&](std::uint64_t& w) { w = untouched; });
        for (std::uint64_t q = 0; q < to.pages; ++q) relay_page(from, to, q);
        std::uint64_t host_sub_pages = 0;
        host_entries([&](std::uint64_t& w) {
            CHECK(w == untouched);
            w = 0;
            ++host_sub_pages;
        });
        CHECK(host_sub_pages == (pages - std::min(pages, frames)) * sub);
        PagerView shared = from;  // the GPU pager's two tables share their control words
        std::copy(from.ctl, from.ctl + ctl_words, ctl.begin());
        shared.ctl = ctl.data();
        ctl[ctl_hand] = 12345;
        relay_ctl(shared, to);
        CHECK(ctl[ctl_fresh] == frames * sub);  // every frame was taken at 4 KiB
        CHECK(ctl[ctl_hand] == 0);              // the hand and the admission window start again
        std::uint64_t carried = 0;
        for (std::uint64_t page = 0; page < pages; ++page) {
            const Pte e{from.pte[page]};
            for (std::uint32_t j = 0; j < sub; ++j) {
                const Pte n{pte[page * sub + j]};
                CHECK(n.state() == e.state());
                if (e.state() != PageState::resident) continue;
                ++carried;
                CHECK(to.frame_data(n.frame()) == from.frame_data(e.frame()) + j * 256);  // the same bytes
                CHECK(owner[n.frame()] == page * sub + j);
                if (to.whole != nullptr) {  // nothing evicted: still its own frame, its bit set
                    CHECK(n.frame() == page * sub + j);
                    CHECK(whole_bit(to, page * sub + j));
                }
                // Dirty where written: the noted sub-page, every sub-page of the page written unnoted.
                CHECK(n.is(Pte::dirty) == (e.is(Pte::dirty) && (page == 3 || j == page % sub)));
                CHECK(n.pins() == 0);
            }
        }
        CHECK(carried == std::min(pages, frames) * sub);
        const std::uint64_t fills_before = p.stats()[c_fills];
        // At 256 B: 8 threads read every sub-page's words 8..31 (checked) and add 1 to word t of random ones.
        constexpr unsigned threads = 8;
        std::vector<std::uint64_t> bad(threads, 0);
        std::vector<std::vector<std::uint32_t>> writes(threads, std::vector<std::uint32_t>(to.pages));
        on_threads(threads, [&](unsigned t) {
            std::mt19937_64 rng(t + 7 * frames);
            ThreadGroup g = ThreadGroup::current();
            CpuMover m;
            for (int i = 0; i < 4000; ++i) {
                const std::uint64_t q = rng() % to.pages;
                const bool write = i % 4 == 0;
                std::byte* b = acquire(to, q, write, g, m);
                if (write) {
                    std::uint64_t x;
                    std::memcpy(&x, b + t * 8, 8);
                    ++x;
                    std::memcpy(b + t * 8, &x, 8);
                    ++writes[t][q];
                } else {
                    for (std::uint32_t w = 8; w < sub_words; ++w) {
                        std::uint64_t x;
                        std::memcpy(&x, b + w * 8, 8);
                        bad[t] += x != q * sub_words + w;
                    }
                }
                release(to, q, g, b, write);
            }
        });
        ThreadGroup g{0};
        CpuMover m;
        flush_all(to, g, m);
        for (unsigned t = 0; t < threads; ++t) {
            CHECK(bad[t] == 0);
            for (std::uint64_t q = 0; q < to.pages; ++q) want[q * sub_words + t] += writes[t][q];
        }
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < want.size(); ++i) wrong += data[i] != want[i];
        CHECK(wrong == 0);
        for (std::uint64_t q = 0; q < to.pages; ++q) CHECK(Pte{pte[q]}.pins() == 0);
        if (frames == pages) CHECK(p.stats()[c_fills] == fills_before);  // nothing filled again
    }
}

TEST_CASE("writes mark the 1/32-page blocks they write; a sub-page is written where its blocks are marked") {
    std::vector<std::uint32_t> marks(4);
    PagerView v{};
    v.dirty_blocks = marks.data();
    v.page_shift = 12;           // blocks of 128 B
    note_write(v, 1, 200, 300);  // bytes 200..499: blocks 1..3
    CHECK(marks[1] == 0xeu);
    note_write(v, 1, 4000, 96);  // the last block
    CHECK(marks[1] == (0xeu | 1u << 31));
    note_write(v, 2, 0, 4096);
    CHECK(marks[2] == 0xffffffffu);
    CHECK(written(v, 1, 0, 4));  // 256 B sub-pages (2 blocks each): sub-page 0 holds block 1
    CHECK(written(v, 1, 1, 4));  // blocks 2, 3
    CHECK_FALSE(written(v, 1, 2, 4));
    CHECK(written(v, 1, 15, 4));  // block 31
    CHECK(written(v, 0, 7, 4));   // nothing marked: everywhere
    v.page_shift = 8;             // 256 B pages: blocks of 8 B
    note_write(v, 3, 8, 8);
    CHECK(marks[3] == 2u);
    v.dirty_blocks = nullptr;  // no marks (fixed page size): nothing noted, every sub-page written
    note_write(v, 0, 0, 8);
    CHECK(written(v, 1, 2, 4));
}
