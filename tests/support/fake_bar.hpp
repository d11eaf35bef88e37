// Plain memory standing in for a BAR in unit tests (widths, offsets, bounds, registers a test plays): `size`
// bytes, every one `fill`, named `name` in errors. The real devices are tested in the lab.
#pragma once

#include <sys/mman.h>

#include <catch2/catch_test_macros.hpp>
#include <cstddef>
#include <cstring>

#include "vfio/mmio.hpp"

namespace bardrive::testing {

inline vfio::Mmio fake_bar(std::size_t size, int fill = 0, const char* name = "fake BAR0") {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    if (fill != 0) std::memset(p, fill, size);  // anonymous memory comes zeroed
    return vfio::Mmio::adopt(p, size, name);
}

}  // namespace bardrive::testing
