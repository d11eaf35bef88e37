// A VF token: the UUID a PF's owner shares with the owners of its VFs when the PF is bound to vfio-pci
// with SR-IOV enabled (vfio-pci's enable_sriov). vfio-pci then opens a VF only for the same token, so a
// process that does not know it cannot take a VF whose PF another process drives.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace bardrive::vfio {

class VfToken {
public:
    // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex, either case). Throws bardrive::Error otherwise.
    static VfToken parse(std::string_view text);

    const std::string& text() const noexcept { return text_; }  // lower case, as the kernel parses it
    const std::array<std::uint8_t, 16>& bytes() const noexcept { return bytes_; }

private:
    std::string text_;
    std::array<std::uint8_t, 16> bytes_{};
};

}  // namespace bardrive::vfio
