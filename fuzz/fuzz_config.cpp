// libFuzzer target for the config-space capability walker (pci/config.cpp). Any input is a config
// space; the walk must terminate, stay inside the bytes and report only what lies inside them.
// Built by fuzz/run.sh with clang -fsanitize=fuzzer; the same function replays fuzz/corpus in the
// unit suite (tests/unit/pci), so every input that once found a bug stays a regression test.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "pci/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace bardrive::pci;
    auto info = parse_config(std::span<const std::uint8_t>(data, size));
    if (info.size != size) std::abort();
    for (const auto& c : info.caps)
        if (c.offset < 0x40 || c.offset + 2u > size) std::abort();
    for (const auto& c : info.ext_caps)
        if (c.offset < 0x100 || c.offset + 4u > size) std::abort();
    // A list can visit each dword once at most.
    if (info.caps.size() > 48 || info.ext_caps.size() > (4096 - 256) / 4) std::abort();
    for (const auto& rb : info.rebar)
        if (rb.bar > 7 || rb.supported_sizes.size() > 28) std::abort();
    if (info.link && (info.link->max_width > 63 || info.link->cur_width > 63)) std::abort();
    return 0;
}
