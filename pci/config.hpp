// Config space decoding: the capability walk over captured config bytes or over reads it asks for.
// Register offsets follow the PCI Local Bus Specification 3.0 (header, capability list) and the
// PCI Express Base Specification 5.0 (chapter 7: PCIe capability, extended capabilities).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bardrive::pci {

// PCIe Base Spec 5.0, 7.5.3.2 (PCI Express Capabilities Register, Device/Port Type field).
enum class PortType : std::uint8_t {
    endpoint = 0x0,
    legacy_endpoint = 0x1,
    root_port = 0x4,
    switch_upstream = 0x5,
    switch_downstream = 0x6,
    pcie_to_pci_bridge = 0x7,
    pci_to_pcie_bridge = 0x8,
    rc_integrated_endpoint = 0x9,
    rc_event_collector = 0xa,
};
const char* port_type_name(PortType t);

// Link speed in GT/s for the Link Capabilities / Status speed encoding (7.5.3.6, 7.5.3.8); 0 if unknown.
double link_speed_gts(unsigned encoding);

struct LinkInfo {
    double max_gts = 0;  // Link Capabilities, Max Link Speed
    unsigned max_width = 0;
    double cur_gts = 0;  // Link Status, Current Link Speed (0 when the link is down)
    unsigned cur_width = 0;
    bool downgraded() const { return cur_width != 0 && (cur_gts < max_gts || cur_width < max_width); }
    bool operator==(const LinkInfo&) const = default;
};

// ACS capability and control register bits (7.7.8.2 / 7.7.8.3): same layout in both registers.
namespace acs {
inline constexpr std::uint16_t source_validation = 1u << 0;
inline constexpr std::uint16_t translation_blocking = 1u << 1;
inline constexpr std::uint16_t p2p_request_redirect = 1u << 2;
inline constexpr std::uint16_t p2p_completion_redirect = 1u << 3;
inline constexpr std::uint16_t upstream_forwarding = 1u << 4;
inline constexpr std::uint16_t p2p_egress_control = 1u << 5;
inline constexpr std::uint16_t direct_translated_p2p = 1u << 6;
std::string describe(std::uint16_t bits);  // "SV TB RR CR UF EC DT" subset, "-" when none
}  // namespace acs

struct AcsInfo {
    std::uint16_t capability = 0;
    std::uint16_t control = 0;
    bool operator==(const AcsInfo&) const = default;
};

struct SriovInfo {  // 7.8.3 SR-IOV Extended Capability
    std::uint16_t total_vfs = 0;
    std::uint16_t num_vfs = 0;
    std::uint16_t vf_device_id = 0;
    bool operator==(const SriovInfo&) const = default;
};

struct ResizableBar {  // 7.8.6 Resizable BAR Extended Capability, one entry per resizable BAR
    unsigned bar = 0;
    std::uint64_t current_size = 0;
    std::vector<std::uint64_t> supported_sizes;  // ascending, bytes
    bool operator==(const ResizableBar&) const = default;
};

struct CapEntry {
    std::uint16_t id = 0;
    std::uint16_t offset = 0;
    std::uint8_t version = 0;  // extended capabilities only
    bool operator==(const CapEntry&) const = default;
};

// Everything bardrive decodes from one device's config space. Optional fields are absent when the
// bytes that hold them were not captured (unprivileged reads give only the first 64 bytes).
struct ConfigInfo {
    std::size_t size = 0;  // bytes available: all captured ones; read on demand: 4096, 256, 64 or a shorter header
    std::uint16_t vendor_id = 0xffff;
    std::uint16_t device_id = 0xffff;
    std::uint32_t class_code = 0;  // base << 16 | sub << 8 | prog-if
    std::uint8_t header_type = 0;  // bits 6:0 of offset 0x0e
    std::optional<std::uint16_t> subsystem_vendor_id, subsystem_id;
    bool has_cap_list = false;
    bool caps_readable = false;      // the standard capability area (0x40..0xff) was captured
    bool ext_caps_readable = false;  // extended config space (0x100..0xfff) was captured and is not all-ones
    std::vector<CapEntry> caps;
    std::vector<CapEntry> ext_caps;
    std::optional<PortType> port_type;  // from the PCI Express capability
    std::optional<LinkInfo> link;
    std::optional<AcsInfo> acs;
    std::optional<SriovInfo> sriov;
    std::vector<ResizableBar> rebar;
    bool ats = false, pri = false, pasid = false, aer = false;
    std::vector<std::string> warnings;  // malformed lists, truncation; never fatal

    bool is_bridge() const { return header_type == 1; }
    bool has_ext_cap(std::uint16_t id) const;
    bool operator==(const ConfigInfo&) const = default;
};

// Standard and extended capability IDs used here (PCI Code and ID Assignment Spec 1.11).
namespace cap_id {
inline constexpr std::uint16_t pcie = 0x10;
inline constexpr std::uint16_t msi = 0x05;
inline constexpr std::uint16_t msix = 0x11;
inline constexpr std::uint16_t ext_aer = 0x0001;
inline constexpr std::uint16_t ext_acs = 0x000d;
inline constexpr std::uint16_t ext_ats = 0x000f;
inline constexpr std::uint16_t ext_sriov = 0x0010;
inline constexpr std::uint16_t ext_pri = 0x0013;
inline constexpr std::uint16_t ext_rebar = 0x0015;
inline constexpr std::uint16_t ext_pasid = 0x001b;
}  // namespace cap_id

// Decodes config bytes of any length. Loops, out-of-range pointers and truncation end the walk with
// a warning; the function never reads outside `bytes` and always terminates.
ConfigInfo parse_config(std::span<const std::uint8_t> bytes);

// Reads up to out.size() bytes of config space at `offset` into `out` and returns how many it read:
// fewer where readable space ends (what can be read is a prefix, as sysfs's `config` gives it).
using ConfigRead = std::function<std::size_t(std::size_t offset, std::span<std::uint8_t> out)>;

// The same decoding, reading only what it decodes: the header registers, each capability's header
// and the registers of those it knows, and the last dword of the header, the capability area and
// extended space (how much is readable). Every dword read can be a config cycle that traps to a
// hypervisor or crosses the fabric, so it reads no more than that.
ConfigInfo parse_config(const ConfigRead& read);

}  // namespace bardrive::pci
