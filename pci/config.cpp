#include "pci/config.hpp"

#include <algorithm>
#include <array>
#include <bitset>

#include "core/log.hpp"

namespace bardrive::pci {

namespace {

constexpr std::size_t std_header = 0x40;   // PCI 3.0, 6.1: the predefined header
constexpr std::size_t std_space = 0x100;   // end of the capability area
constexpr std::size_t ext_space = 0x1000;  // PCIe extended config space

// Config bytes as the walk sees them: has() says whether [off, off+len) can be read, fetching it first
// when the bytes come on demand.
class Reader {
public:
    virtual ~Reader() = default;
    virtual bool has(std::size_t off, std::size_t len) = 0;
    std::optional<std::uint8_t> u8(std::size_t off) {
        if (!has(off, 1)) return std::nullopt;
        return at(off);
    }
    std::optional<std::uint16_t> u16(std::size_t off) {
        if (!has(off, 2)) return std::nullopt;
        return static_cast<std::uint16_t>(at(off) | (at(off + 1) << 8));
    }
    std::optional<std::uint32_t> u32(std::size_t off) {
        if (!has(off, 4)) return std::nullopt;
        return static_cast<std::uint32_t>(at(off)) | (static_cast<std::uint32_t>(at(off + 1)) << 8) |
               (static_cast<std::uint32_t>(at(off + 2)) << 16) | (static_cast<std::uint32_t>(at(off + 3)) << 24);
    }

protected:
    virtual std::uint8_t at(std::size_t off) const = 0;
};

// Captured bytes (a snapshot's, a fuzzer's): exactly these.
class SpanReader final : public Reader {
public:
    explicit SpanReader(std::span<const std::uint8_t> b) : b_(b) {}
    bool has(std::size_t off, std::size_t len) override { return off <= b_.size() && len <= b_.size() - off; }

private:
    std::uint8_t at(std::size_t off) const override { return b_[off]; }
    std::span<const std::uint8_t> b_;
};

// Bytes read on demand, each dword at most once, a run of missing dwords per read. What can be read
// is a prefix (as sysfs gives it): a short read marks where it ends.
class LazyReader final : public Reader {
public:
    explicit LazyReader(const ConfigRead& read) : read_(read) {}
    bool has(std::size_t off, std::size_t len) override {
        if (off > end_ || len > end_ - off) {
            if (off < end_) fetch(off, end_);  // learns where readable space ends
            return false;
        }
        fetch(off, off + len);
        return off + len <= end_;
    }
    std::size_t end() const { return end_; }  // first byte known unreadable (ext_space until a read comes short)

private:
    void fetch(std::size_t from, std::size_t to) {
        from &= ~std::size_t{3};
        to = std::min((to + 3) & ~std::size_t{3}, end_);
        while (from < to && have_.test(from / 4)) from += 4;
        while (to > from && to % 4 == 0 && have_.test(to / 4 - 1)) to -= 4;
        if (from >= to) return;
        std::size_t n = std::min(read_(from, std::span<std::uint8_t>(buf_.data() + from, to - from)), to - from);
        for (std::size_t d = from / 4; d < (from + n) / 4; ++d) have_.set(d);
        if (n < to - from) end_ = from + n;
    }
    std::uint8_t at(std::size_t off) const override { return buf_[off]; }

    const ConfigRead& read_;
    std::array<std::uint8_t, ext_space> buf_{};
    std::bitset<ext_space / 4> have_;
    std::size_t end_ = ext_space;
};

std::string hex(unsigned v) { return log::concat("0x", std::hex, v); }

// PCI 3.0, 6.7: the list starts at 0x34 (0x14 for CardBus), entries are dword aligned in 0x40..0xff.
void walk_standard(Reader& r, ConfigInfo& info) {
    auto status = r.u16(0x06);
    info.has_cap_list = status && (*status & (1u << 4));
    if (!info.has_cap_list) return;
    std::size_t ptr_off = (info.header_type == 2) ? 0x14 : 0x34;
    auto first = r.u8(ptr_off);
    if (!first) return;
    std::bitset<std_space / 4> seen;
    std::size_t off = *first & 0xfcu;
    while (off != 0) {
        if (off < std_header || off >= std_space) {
            info.warnings.push_back(log::concat("capability pointer ", hex(static_cast<unsigned>(off)),
                                                " outside 0x40..0xff; list ignored from there"));
            return;
        }
        if (!r.has(off, 2)) return;  // not captured: caps_readable says so
        if (seen.test(off / 4)) {
            info.warnings.push_back(log::concat("capability list loops back to ", hex(static_cast<unsigned>(off))));
            return;
        }
        seen.set(off / 4);
        std::uint8_t id = *r.u8(off);
        info.caps.push_back({id, static_cast<std::uint16_t>(off), 0});
        off = *r.u8(off + 1) & 0xfcu;
    }
}

// PCIe 5.0, 7.6.3: extended capabilities start at 0x100; header = id[15:0] version[19:16] next[31:20].
void walk_extended(Reader& r, ConfigInfo& info) {
    auto first = r.u32(std_space);
    if (!first) return;
    // All ones: extended space not accessible (conventional PCI or no ECAM). Zero: no extended caps.
    if (*first == 0xffffffffu) return;
    info.ext_caps_readable = true;
    if (*first == 0) return;
    std::bitset<ext_space / 4> seen;
    std::size_t off = std_space;
    while (off != 0) {
        if (off < std_space || off >= ext_space || (off & 3)) {
            info.warnings.push_back(log::concat("extended capability pointer ", hex(static_cast<unsigned>(off)),
                                                " outside 0x100..0xffc; list ignored from there"));
            return;
        }
        auto hdr = r.u32(off);
        if (!hdr) {
            info.warnings.push_back(log::concat("extended capability at ", hex(static_cast<unsigned>(off)),
                                                " lies beyond the config bytes captured"));
            return;
        }
        if (seen.test(off / 4)) {
            info.warnings.push_back(
                log::concat("extended capability list loops back to ", hex(static_cast<unsigned>(off))));
            return;
        }
        seen.set(off / 4);
        info.ext_caps.push_back({static_cast<std::uint16_t>(*hdr & 0xffff), static_cast<std::uint16_t>(off),
                                 static_cast<std::uint8_t>((*hdr >> 16) & 0xf)});
        off = (*hdr >> 20) & 0xffcu;
    }
}

// 7.5.3.2 capabilities register at +2; Link Capabilities +0x0c; Link Status +0x12.
void decode_pcie(Reader& r, std::size_t off, ConfigInfo& info) {
    auto caps = r.u16(off + 2);
    if (!caps) return;
    auto type = static_cast<std::uint8_t>((*caps >> 4) & 0xf);
    switch (type) {
        case 0x0:
        case 0x1:
        case 0x4:
        case 0x5:
        case 0x6:
        case 0x7:
        case 0x8:
        case 0x9:
        case 0xa:
            info.port_type = static_cast<PortType>(type);
            break;
        default:
            info.warnings.push_back(log::concat("PCI Express capability has reserved device/port type ", hex(type)));
            return;
    }
    // Root-complex integrated endpoints and event collectors have no link (7.5.3.6).
    if (type == 0x9 || type == 0xa) return;
    auto lcap = r.u32(off + 0x0c);
    auto lsta = r.u16(off + 0x12);
    if (!lcap || !lsta) {
        info.warnings.push_back("PCI Express capability truncated before the link registers");
        return;
    }
    LinkInfo l;
    l.max_gts = link_speed_gts(*lcap & 0xf);
    l.max_width = (*lcap >> 4) & 0x3f;
    l.cur_gts = link_speed_gts(*lsta & 0xf);
    l.cur_width = (*lsta >> 4) & 0x3f;
    // SR-IOV VFs and other functions without a link of their own report zeros (7.5.3.6).
    if (l.max_gts > 0 && l.max_width > 0) info.link = l;
}

// 7.8.6: entry n at +4+8n: capability (sizes bits 31:4, bit n => 2^(n+16) bytes), control (+8+8n):
// BAR index [2:0], number of resizable BARs [7:5] (entry 0 only), current size [13:8] (0 => 1 MiB).
void decode_rebar(Reader& r, std::size_t off, ConfigInfo& info) {
    auto ctrl0 = r.u32(off + 8);
    if (!ctrl0) return;
    unsigned count = (*ctrl0 >> 5) & 0x7;
    if (count == 0 || count > 6) {
        info.warnings.push_back(log::concat("resizable BAR capability claims ", count, " BARs (valid: 1..6)"));
        count = count == 0 ? 0 : 6;
    }
    for (unsigned i = 0; i < count; ++i) {
        auto cap = r.u32(off + 4 + 8 * i);
        auto ctrl = r.u32(off + 8 + 8 * i);
        if (!cap || !ctrl) break;
        ResizableBar rb;
        rb.bar = *ctrl & 0x7;
        // Sizes 0..43 encode 1 MiB..8 EiB; larger values are reserved (and would overflow).
        unsigned enc = (*ctrl >> 8) & 0x3f;
        if (enc > 43) {
            info.warnings.push_back(log::concat("resizable BAR", rb.bar, " has reserved size encoding ", enc));
            continue;
        }
        rb.current_size = std::uint64_t{1} << (enc + 20);
        for (unsigned bit = 4; bit < 32; ++bit)
            if (*cap & (1u << bit)) rb.supported_sizes.push_back(std::uint64_t{1} << (bit + 16));
        info.rebar.push_back(std::move(rb));
    }
}

}  // namespace

const char* port_type_name(PortType t) {
    switch (t) {
        case PortType::endpoint:
            return "endpoint";
        case PortType::legacy_endpoint:
            return "legacy endpoint";
        case PortType::root_port:
            return "root port";
        case PortType::switch_upstream:
            return "switch upstream port";
        case PortType::switch_downstream:
            return "switch downstream port";
        case PortType::pcie_to_pci_bridge:
            return "PCIe-to-PCI bridge";
        case PortType::pci_to_pcie_bridge:
            return "PCI-to-PCIe bridge";
        case PortType::rc_integrated_endpoint:
            return "root complex integrated endpoint";
        case PortType::rc_event_collector:
            return "root complex event collector";
    }
    return "unknown";
}

double link_speed_gts(unsigned encoding) {
    switch (encoding) {
        case 1:
            return 2.5;
        case 2:
            return 5.0;
        case 3:
            return 8.0;
        case 4:
            return 16.0;
        case 5:
            return 32.0;
        case 6:
            return 64.0;
        default:
            return 0.0;
    }
}

std::string acs::describe(std::uint16_t bits) {
    static const char* const names[] = {"SV", "TB", "RR", "CR", "UF", "EC", "DT"};
    std::string out;
    for (unsigned i = 0; i < 7; ++i) {
        if (!(bits & (1u << i))) continue;
        if (!out.empty()) out += ' ';
        out += names[i];
    }
    return out.empty() ? "-" : out;
}

bool ConfigInfo::has_ext_cap(std::uint16_t id) const {
    for (const auto& c : ext_caps)
        if (c.id == id) return true;
    return false;
}

namespace {

// `info.size` is set; the rest comes from `r`.
void decode(Reader& r, ConfigInfo& info) {
    if (info.size < std_header) {
        info.warnings.push_back(log::concat("config space truncated: ", info.size, " bytes, the header alone is 64"));
    }
    if (auto v = r.u16(0x00)) info.vendor_id = *v;
    if (auto v = r.u16(0x02)) info.device_id = *v;
    if (auto v = r.u32(0x08)) info.class_code = *v >> 8;
    if (auto v = r.u8(0x0e)) info.header_type = *v & 0x7f;
    if (info.header_type == 0) {
        if (auto v = r.u16(0x2c)) info.subsystem_vendor_id = *v;
        if (auto v = r.u16(0x2e)) info.subsystem_id = *v;
    } else if (info.header_type > 2) {
        info.warnings.push_back(log::concat("unknown header type ", hex(info.header_type)));
        return;
    }
    info.caps_readable = info.size >= std_space;
    walk_standard(r, info);
    for (const auto& c : info.caps)
        if (c.id == cap_id::pcie) decode_pcie(r, c.offset, info);

    walk_extended(r, info);
    for (const auto& c : info.ext_caps) {
        switch (c.id) {
            case cap_id::ext_aer:
                info.aer = true;
                break;
            case cap_id::ext_ats:
                info.ats = true;
                break;
            case cap_id::ext_pri:
                info.pri = true;
                break;
            case cap_id::ext_pasid:
                info.pasid = true;
                break;
            case cap_id::ext_acs: {  // 7.7.8: capability at +4, control at +6
                auto cap = r.u16(c.offset + 4u);
                auto ctl = r.u16(c.offset + 6u);
                if (cap && ctl) info.acs = AcsInfo{*cap, *ctl};
                break;
            }
            case cap_id::ext_sriov: {  // 7.8.3: TotalVFs +0x0e, NumVFs +0x10, VF Device ID +0x1a
                auto total = r.u16(c.offset + 0x0eu);
                auto num = r.u16(c.offset + 0x10u);
                auto vfdev = r.u16(c.offset + 0x1au);
                if (total && num && vfdev) info.sriov = SriovInfo{*total, *num, *vfdev};
                break;
            }
            case cap_id::ext_rebar:
                decode_rebar(r, c.offset, info);
                break;
            default:
                break;
        }
    }
}

}  // namespace

ConfigInfo parse_config(std::span<const std::uint8_t> bytes) {
    SpanReader r(bytes);
    ConfigInfo info;
    info.size = bytes.size();
    decode(r, info);
    return info;
}

ConfigInfo parse_config(const ConfigRead& read) {
    LazyReader r(read);
    ConfigInfo info;
    // How much is readable, from the last dword of the header, the capability area and extended space;
    // a short header is read whole to learn its exact length.
    if (!r.has(std_header - 4, 4)) {
        r.has(0, std_header);
        info.size = r.end();
    } else {
        info.size = !r.has(std_space - 4, 4) ? std_header : !r.has(ext_space - 4, 4) ? std_space : ext_space;
    }
    decode(r, info);
    return info;
}

}  // namespace bardrive::pci
