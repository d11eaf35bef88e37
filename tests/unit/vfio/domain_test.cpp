#include "vfio/domain.hpp"

#include <sys/stat.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "vfio/backend.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("a missing /dev/vfio says how to enable VFIO and the IOMMU") {
    struct stat st {};
    if (::stat("/dev/vfio", &st) == 0) SKIP("/dev/vfio exists here; the lab tests cover a working VFIO");
    CHECK_THROWS_WITH(vfio::Domain(), ContainsSubstring("/dev/vfio/vfio") && ContainsSubstring("modprobe vfio-pci") &&
                                          ContainsSubstring("intel_iommu=on"));
}

namespace {

// A backend that accepts whatever reaches it and records it: what Domain itself refuses never does.
class FakeBackend : public vfio::detail::DomainBackend {
public:
    std::vector<std::pair<std::uint64_t, std::uint64_t>>* mapped;  // (iova, size) of each map call
    explicit FakeBackend(std::vector<std::pair<std::uint64_t, std::uint64_t>>* m) : mapped(m) {}
    vfio::Backend kind() const noexcept override { return vfio::Backend::type1; }
    UniqueFd attach(const pci::Bdf&, const vfio::VfToken*) override { return UniqueFd(); }
    bool ready() const noexcept override { return true; }
    const std::vector<vfio::IovaRange>& iova_ranges() const noexcept override { return ranges_; }
    std::uint64_t page_sizes() const noexcept override { return 4096; }
    int map(const void*, std::uint64_t iova, std::uint64_t size, bool) noexcept override {
        mapped->emplace_back(iova, size);
        return 0;
    }
    int unmap(std::uint64_t, std::uint64_t) noexcept override { return 0; }

private:
    std::vector<vfio::IovaRange> ranges_{{0, (1ull << 48) - 1}};
};

}  // namespace

TEST_CASE("map refuses a range overlapping another by one page at either end, and takes exact neighbours") {
    constexpr std::uint64_t page = 4096, a = 0x100000, a_size = 4 * page;  // the mapping in place: [a, a + 4 pages)
    std::vector<std::pair<std::uint64_t, std::uint64_t>> mapped;
    vfio::Domain d(std::make_unique<FakeBackend>(&mapped));
    auto* vaddr = reinterpret_cast<const void*>(std::uintptr_t{0x7f0000000000});  // never touched: the fake maps
    d.map(vaddr, a, a_size);

    // Starts in the last page of the mapping in place (the lower-boundary check, prev + size > iova).
    CHECK_THROWS_WITH(d.map(vaddr, a + a_size - page, 2 * page),
                      ContainsSubstring("overlaps the existing mapping IOVA 0x100000-0x103fff"));
    // Ends in its first page (the upper-boundary check, next < iova + size).
    CHECK_THROWS_WITH(d.map(vaddr, a - page, 2 * page),
                      ContainsSubstring("overlaps the existing mapping IOVA 0x100000-0x103fff"));
    // Covers it whole, and sits inside it.
    CHECK_THROWS_WITH(d.map(vaddr, a - page, a_size + 2 * page), ContainsSubstring("overlaps"));
    CHECK_THROWS_WITH(d.map(vaddr, a + page, page), ContainsSubstring("overlaps"));
    CHECK(mapped.size() == 1);  // none of those reached the backend

    // The exact neighbours on both sides are no overlap.
    d.map(vaddr, a - page, page);
    d.map(vaddr, a + a_size, page);
    CHECK(mapped.size() == 3);
    // Now a hole of one page between two mappings takes exactly one page, not two.
    d.map(vaddr, a + a_size + 2 * page, page);
    CHECK_THROWS_WITH(d.map(vaddr, a + a_size + page, 2 * page), ContainsSubstring("IOVA 0x106000-0x106fff"));
    d.map(vaddr, a + a_size + page, page);
    CHECK(mapped.size() == 5);

    for (const auto& [iova, size] : mapped) d.unmap(iova, size);
}
