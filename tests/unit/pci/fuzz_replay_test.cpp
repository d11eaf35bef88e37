// Replays a fuzz corpus (FUZZ_CORPUS) through its fuzz target (linked in: fuzz/fuzz_snapshot.cpp or
// fuzz/fuzz_lspci_tree.cpp): inputs that once found new paths stay regression tests. The targets
// abort on any broken invariant (a parent loop, a host bridge index out of range).
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST_CASE("the fuzz corpus replays through its target", "[pci][fuzz]") {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(FUZZ_CORPUS))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    INFO(FUZZ_CORPUS);
    REQUIRE(files.size() >= 20);
    for (const auto& f : files) {
        INFO(f.string());
        auto bytes = bardrive::file::read_bytes(f.string(), 1 << 20);
        CHECK(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) == 0);
    }
}
