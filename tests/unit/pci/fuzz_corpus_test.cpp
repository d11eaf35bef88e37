// Replays fuzz/corpus through the fuzz target (fuzz/fuzz_config.cpp): every input that once mattered
// to the capability walker stays a regression test. The target aborts on any broken invariant.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST_CASE("the fuzz corpus replays through the capability walker", "[pci][fuzz]") {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(FUZZ_CORPUS))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 20);
    bool regression_seen = false;
    for (const auto& f : files) {
        INFO(f.string());
        auto bytes = bardrive::file::read_bytes(f.string(), 1 << 20);
        CHECK(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) == 0);
        regression_seen |= f.filename().string().rfind("regress-", 0) == 0;
    }
    CHECK(regression_seen);
}
