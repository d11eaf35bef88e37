// libFuzzer target for the config-space capability walker (pci/config.cpp). Any input is a config
// space; the walk must terminate, stay inside the bytes and report only what lies inside them, and
// reading it on demand (as from sysfs) must decode the same.
// Built by fuzz/run.sh with clang -fsanitize=fuzzer; the same function replays fuzz/corpus in the
// unit suite (tests/unit/pci), so every input that once found a bug stays a regression test.
#include <algorithm>
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
    // On demand: only offsets below 4096 exist, and the size is the readable tier (4096, 256, 64) or a
    // short header's length.
    if (size <= 4096) {
        auto lazy = parse_config([&](std::size_t off, std::span<std::uint8_t> out) -> std::size_t {
            if (off >= size) return 0;
            std::size_t n = std::min(out.size(), size - off);
            std::copy_n(data + off, n, out.begin());
            return n;
        });
        std::size_t tier = size < 64 ? size : size < 256 ? 64 : size < 4096 ? 256 : 4096;
        if (lazy.size != tier) std::abort();
        lazy.size = info.size;
        if (!(lazy == info)) std::abort();
    }
    return 0;
}
