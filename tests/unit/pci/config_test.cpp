// Capability walk over hand-built config space: decoding, and malformed lists that must end cleanly.
#include "pci/config.hpp"

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <vector>

using namespace bardrive::pci;

namespace {

struct Cfg {
    std::vector<std::uint8_t> b = std::vector<std::uint8_t>(4096, 0);
    void u8(std::size_t o, std::uint8_t v) { b[o] = v; }
    void u16(std::size_t o, std::uint16_t v) {
        b[o] = v & 0xff;
        b[o + 1] = v >> 8;
    }
    void u32(std::size_t o, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) b[o + i] = (v >> (8 * i)) & 0xff;
    }
    void ext(std::size_t o, std::uint16_t id, std::size_t next) {
        u32(o, id | (1u << 16) | (static_cast<std::uint32_t>(next) << 20));
    }
};

// A PCIe endpoint: vendor 10de, class 030200, PCIe capability at 0x40 (link Gen4 x16 capable,
// running Gen3 x8), then MSI at 0x60; extended: AER 0x100 -> ACS 0x140 -> SR-IOV 0x160 -> ReBAR 0x1a0.
Cfg endpoint() {
    Cfg c;
    c.u16(0x00, 0x10de);
    c.u16(0x02, 0x20b0);
    c.u16(0x06, 0x0010);
    c.u32(0x08, 0x030200a1);
    c.u16(0x2c, 0x10de);
    c.u16(0x2e, 0x134f);
    c.u8(0x34, 0x40);
    c.u8(0x40, 0x10);
    c.u8(0x41, 0x60);
    c.u16(0x42, 0x0002);                 // v2, endpoint
    c.u32(0x40 + 0x0c, 4 | (16u << 4));  // Gen4 x16
    c.u16(0x40 + 0x12, 3 | (8u << 4));   // Gen3 x8
    c.u8(0x60, 0x05);
    c.u8(0x61, 0x00);
    c.ext(0x100, 0x0001, 0x140);
    c.ext(0x140, 0x000d, 0x160);
    c.u16(0x144, 0x001f);  // SV TB RR CR UF
    c.u16(0x146, 0x000c);  // RR CR enabled
    c.ext(0x160, 0x0010, 0x1a0);
    c.u16(0x160 + 0x0e, 16);
    c.u16(0x160 + 0x10, 4);
    c.u16(0x160 + 0x1a, 0x20b1);
    c.ext(0x1a0, 0x0015, 0);
    c.u32(0x1a4, (1u << 10) | (1u << 14) | (1u << 20));  // 64 MiB, 1 GiB, 64 GiB
    c.u32(0x1a8, 1u | (1u << 5) | (8u << 8));            // BAR1, one entry, 256 MiB now
    return c;
}

// Config space read on demand from `b`, as sysfs gives it (a prefix): remembers every dword read.
struct OnDemand {
    std::vector<std::uint8_t> b;
    std::vector<bool> read = std::vector<bool>(1024, false);
    std::size_t calls = 0;
    ConfigInfo parse() {
        return parse_config([this](std::size_t off, std::span<std::uint8_t> out) -> std::size_t {
            ++calls;
            if (off >= b.size()) return 0;
            std::size_t n = std::min(out.size(), b.size() - off);
            std::copy_n(b.begin() + static_cast<std::ptrdiff_t>(off), n, out.begin());
            for (std::size_t i = off / 4; i < (off + n + 3) / 4; ++i) read[i] = true;
            return n;
        });
    }
    std::size_t dwords_read() const { return static_cast<std::size_t>(std::count(read.begin(), read.end(), true)); }
};

// What read on demand must report for captured bytes of length n: the readable tier (a full dump's
// sizes), or the exact length of a short header.
std::size_t tier(std::size_t n) { return n < 64 ? n : n < 256 ? 64 : n < 4096 ? 256 : 4096; }

}  // namespace

TEST_CASE("endpoint config space decodes IDs, link, ACS, SR-IOV and resizable BAR", "[pci][config]") {
    auto c = endpoint();
    auto info = parse_config(c.b);
    CHECK(info.warnings.empty());
    CHECK(info.vendor_id == 0x10de);
    CHECK(info.device_id == 0x20b0);
    CHECK(info.class_code == 0x030200);
    CHECK(info.subsystem_id == 0x134f);
    REQUIRE(info.caps.size() == 2);
    CHECK(info.caps[0].id == cap_id::pcie);
    CHECK(info.caps[1].id == cap_id::msi);
    REQUIRE(info.port_type);
    CHECK(*info.port_type == PortType::endpoint);
    REQUIRE(info.link);
    CHECK(info.link->max_gts == 16.0);
    CHECK(info.link->max_width == 16);
    CHECK(info.link->cur_gts == 8.0);
    CHECK(info.link->cur_width == 8);
    CHECK(info.link->downgraded());
    CHECK(info.ext_caps_readable);
    REQUIRE(info.ext_caps.size() == 4);
    CHECK(info.aer);
    REQUIRE(info.acs);
    CHECK(info.acs->capability == 0x1f);
    CHECK(info.acs->control == (acs::p2p_request_redirect | acs::p2p_completion_redirect));
    CHECK(acs::describe(info.acs->control) == "RR CR");
    REQUIRE(info.sriov);
    CHECK(info.sriov->total_vfs == 16);
    CHECK(info.sriov->num_vfs == 4);
    CHECK(info.sriov->vf_device_id == 0x20b1);
    REQUIRE(info.rebar.size() == 1);
    CHECK(info.rebar[0].bar == 1);
    CHECK(info.rebar[0].current_size == (std::uint64_t{256} << 20));
    CHECK(info.rebar[0].supported_sizes ==
          std::vector<std::uint64_t>{std::uint64_t{64} << 20, std::uint64_t{1} << 30, std::uint64_t{64} << 30});
}

TEST_CASE("unprivileged 64-byte config space: IDs only, capabilities unknown, no warning storm", "[pci][config]") {
    auto c = endpoint();
    c.b.resize(64);
    auto info = parse_config(c.b);
    CHECK(info.vendor_id == 0x10de);
    CHECK_FALSE(info.caps_readable);
    CHECK_FALSE(info.ext_caps_readable);
    CHECK(info.caps.empty());
    CHECK_FALSE(info.link);
    CHECK(info.warnings.empty());
}

TEST_CASE("256-byte config space or all-ones extended space: no extended capabilities", "[pci][config]") {
    auto c = endpoint();
    auto short_cfg = c.b;
    short_cfg.resize(256);
    auto info = parse_config(short_cfg);
    CHECK(info.link);
    CHECK_FALSE(info.ext_caps_readable);
    CHECK_FALSE(info.acs);
    c.u32(0x100, 0xffffffffu);
    info = parse_config(c.b);
    CHECK_FALSE(info.ext_caps_readable);
    CHECK(info.ext_caps.empty());
}

TEST_CASE("a standard capability list that loops ends with a warning", "[pci][config][bad-input]") {
    auto c = endpoint();
    c.u8(0x61, 0x40);  // MSI points back to the PCIe capability
    auto info = parse_config(c.b);
    CHECK(info.caps.size() == 2);
    REQUIRE(info.warnings.size() == 1);
    CHECK(info.warnings[0].find("loops") != std::string::npos);
}

TEST_CASE("a capability pointer into the header or a self-loop is refused", "[pci][config][bad-input]") {
    auto c = endpoint();
    c.u8(0x34, 0x20);
    auto info = parse_config(c.b);
    CHECK(info.caps.empty());
    REQUIRE(info.warnings.size() == 1);
    CHECK(info.warnings[0].find("outside 0x40..0xff") != std::string::npos);

    c = endpoint();
    c.u8(0x41, 0x40);
    info = parse_config(c.b);
    CHECK(info.caps.size() == 1);
    CHECK(info.warnings.size() == 1);
}

TEST_CASE("extended capability lists that loop, leave the space or run past the bytes end cleanly",
          "[pci][config][bad-input]") {
    auto c = endpoint();
    c.ext(0x1a0, 0x0015, 0x100);  // back to the start
    auto info = parse_config(c.b);
    CHECK(info.ext_caps.size() == 4);
    REQUIRE_FALSE(info.warnings.empty());
    CHECK(info.warnings.back().find("loops") != std::string::npos);

    c = endpoint();
    c.ext(0x100, 0x0001, 0x0f0);  // into standard space
    info = parse_config(c.b);
    CHECK(info.ext_caps.size() == 1);
    CHECK(info.warnings.back().find("outside 0x100..0xffc") != std::string::npos);

    c = endpoint();
    c.b.resize(0x150);  // ACS header readable, SR-IOV header at 0x160 not
    info = parse_config(c.b);
    CHECK(info.ext_caps.size() == 2);
    CHECK(info.warnings.back().find("beyond the config bytes captured") != std::string::npos);
}

TEST_CASE("a PCIe capability with a reserved port type or truncated link registers warns", "[pci][config][bad-input]") {
    auto c = endpoint();
    c.u16(0x42, 0x00f2);
    auto info = parse_config(c.b);
    CHECK_FALSE(info.port_type);
    CHECK(info.warnings.size() == 1);

    c = endpoint();
    c.u8(0x41, 0x00);
    c.u8(0x34, 0xf8);  // PCIe capability at the very end: link registers fall outside 0x100
    c.u8(0xf8, 0x10);
    c.u16(0xfa, 0x0002);
    std::vector<std::uint8_t> b(c.b.begin(), c.b.begin() + 0x100);
    info = parse_config(b);
    CHECK(info.port_type);
    CHECK_FALSE(info.link);
    CHECK(info.warnings.size() == 1);
}

TEST_CASE("every truncation of a valid config space decodes without reading past the end", "[pci][config][bad-input]") {
    auto c = endpoint();
    for (std::size_t n = 0; n <= c.b.size(); n += (n < 0x200 ? 1 : 61)) {
        std::vector<std::uint8_t> b(c.b.begin(), c.b.begin() + static_cast<std::ptrdiff_t>(n));
        auto info = parse_config(b);
        CHECK(info.size == n);
        for (const auto& cap : info.caps) CHECK(cap.offset + 2u <= n);
        for (const auto& cap : info.ext_caps) CHECK(cap.offset + 4u <= n);
    }
}

TEST_CASE("unknown header types stop decoding with a warning", "[pci][config][bad-input]") {
    auto c = endpoint();
    c.u8(0x0e, 0x7f);
    auto info = parse_config(c.b);
    CHECK(info.caps.empty());
    REQUIRE(info.warnings.size() == 1);
    CHECK(info.warnings[0].find("header type") != std::string::npos);
}

TEST_CASE("read on demand: the same decoding from the registers it decodes, not a dump", "[pci][config]") {
    OnDemand d{endpoint().b};
    auto lazy = d.parse();
    auto full = parse_config(d.b);
    CHECK(lazy == full);
    CHECK(lazy.size == 4096);
    // Header registers (6 dwords), 3 size probes, the PCIe capability (header, link capabilities, link
    // status) and MSI's header, 4 extended capability headers, ACS (1), SR-IOV (3) and resizable BAR (2)
    // registers: 23 of 1024 dwords.
    CHECK(d.dwords_read() == 23);
    CHECK(d.calls <= d.dwords_read());
    for (std::size_t dw = 0x64 / 4; dw < 0xfc / 4; ++dw) CHECK_FALSE(d.read[dw]);  // nothing past MSI's header
    CHECK_FALSE(d.read[0x200 / 4]);
}

TEST_CASE("read on demand, unprivileged (64 bytes) or a short header: what a full read says", "[pci][config]") {
    OnDemand d{endpoint().b};
    d.b.resize(64);
    auto lazy = d.parse();
    CHECK(lazy.size == 64);
    CHECK_FALSE(lazy.caps_readable);
    CHECK(lazy.caps.empty());
    CHECK(lazy.warnings.empty());
    CHECK(lazy.vendor_id == 0x10de);

    d = OnDemand{endpoint().b};
    d.b.resize(8);
    lazy = d.parse();
    CHECK(lazy.size == 8);
    REQUIRE(lazy.warnings.size() == 1);
    CHECK(lazy.warnings[0] == "config space truncated: 8 bytes, the header alone is 64");
}

TEST_CASE("read on demand decodes every truncation as the captured bytes do", "[pci][config][bad-input]") {
    auto c = endpoint();
    for (std::size_t n = 0; n <= c.b.size(); n += (n < 0x200 ? 1 : 61)) {
        OnDemand d{std::vector<std::uint8_t>(c.b.begin(), c.b.begin() + static_cast<std::ptrdiff_t>(n))};
        auto lazy = d.parse();
        auto full = parse_config(d.b);
        INFO("bytes: " << n);
        CHECK(lazy.size == tier(n));
        lazy.size = full.size;
        CHECK(lazy == full);
    }
}
