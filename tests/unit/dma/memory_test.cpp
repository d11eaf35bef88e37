#include "dma/memory.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>

#include "core/error.hpp"
#include "core/file.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {
long free_hugepages(const char* kb) {
    auto t = file::try_read_text(std::string("/sys/kernel/mm/hugepages/hugepages-") + kb + "kB/free_hugepages");
    return t ? std::stol(*t) : -1;
}
}  // namespace

TEST_CASE("4 KiB DMA memory is rounded up, populated and writable") {
    dma::MemoryOptions opt;
    opt.page_size = dma::page_4k;
    dma::Memory m = dma::Memory::allocate(10000, opt);
    CHECK(m.size() == 3 * 4096);
    CHECK(m.page_size() == dma::page_4k);
    std::memset(m.data(), 0xab, m.size());
    CHECK(static_cast<unsigned char>(m.data()[m.size() - 1]) == 0xab);
    dma::Memory moved = std::move(m);
    CHECK_FALSE(static_cast<bool>(m));
    CHECK(moved.size() == 3 * 4096);
}

TEST_CASE("missing hugepages give an error saying how to reserve them, or an opt-in fallback") {
    if (free_hugepages("1048576") > 0) SKIP("this machine has free 1 GiB hugepages; the error path cannot be provoked");
    dma::MemoryOptions opt;
    opt.page_size = dma::page_1g;
    CHECK_THROWS_WITH(dma::Memory::allocate(1, opt), ContainsSubstring("1 GiB in 1 GiB pages") &&
                                                         ContainsSubstring("nr_hugepages") &&
                                                         ContainsSubstring("allow_small_pages"));
    opt.allow_small_pages = true;
    dma::Memory m = dma::Memory::allocate(8192, opt);
    CHECK(m.page_size() == dma::page_4k);
    CHECK(m.size() == 8192);
}

TEST_CASE("bad DMA memory requests are refused") {
    dma::MemoryOptions opt;
    opt.page_size = 65536;
    CHECK_THROWS_WITH(dma::Memory::allocate(4096, opt), ContainsSubstring("not 4 KiB, 2 MiB or 1 GiB"));
    CHECK_THROWS_WITH(dma::Memory::allocate(0), ContainsSubstring("nothing to allocate"));
    opt = {};
    opt.page_size = dma::page_4k;
    opt.numa_node = 63;
    CHECK_THROWS_WITH(dma::Memory::allocate(4096, opt), ContainsSubstring("NUMA node 63"));
}
