// Vendor, device and class names from the pci.ids database, through libpci.
// libpci's header has no extern "C" of its own.
extern "C" {
#include <pci/pci.h>
}

#include <cstdarg>
#include <cstdio>
#include <iomanip>

#include "core/log.hpp"
#include "pci/topology.hpp"

namespace bardrive::pci {

namespace {
void quiet_warning(char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log::debug("libpci: ", buf);
}
}  // namespace

void attach_names(Topology& topo) {
    pci_access* acc = pci_alloc();
    if (!acc) return;
    acc->warning = quiet_warning;
    acc->debug = quiet_warning;
    // Local pci.ids only: no DNS look-ups, no udev hwdb, so a snapshot reads the same everywhere.
    const int flags = PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB;
    char buf[256];
    for (auto& d : topo.devices) {
        // 0xffff is what a read of an absent function returns and what static topology files write for an
        // ID they do not know: unknown, not pci.ids' "Illegal Vendor ID".
        if (d.vendor_id == 0xffff)
            d.vendor_name = "vendor unknown";
        else if (const char* n = pci_lookup_name(acc, buf, sizeof buf, PCI_LOOKUP_VENDOR | flags, d.vendor_id))
            d.vendor_name = n;
        else
            d.vendor_name = log::concat("vendor ", std::hex, std::setfill('0'), std::setw(4), d.vendor_id);
        if (d.vendor_id == 0xffff && d.device_id == 0xffff)
            d.device_name = "device unknown";
        else if (const char* n =
                     pci_lookup_name(acc, buf, sizeof buf, PCI_LOOKUP_DEVICE | flags, d.vendor_id, d.device_id))
            d.device_name = n;
        else
            d.device_name = log::concat("device ", std::hex, std::setfill('0'), std::setw(4), d.device_id);
        if (d.subsystem_vendor_id != 0 && d.subsystem_vendor_id != 0xffff)
            if (const char* n = pci_lookup_name(acc, buf, sizeof buf, PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_DEVICE | flags,
                                                d.vendor_id, d.device_id, d.subsystem_vendor_id, d.subsystem_id))
                d.subsystem_name = n;
        if (const char* n = pci_lookup_name(acc, buf, sizeof buf, PCI_LOOKUP_CLASS | flags, d.class_code >> 8))
            d.class_name = n;
        else
            d.class_name = log::concat("class ", std::hex, std::setfill('0'), std::setw(4), d.class_code >> 8);
    }
    pci_cleanup(acc);
}

}  // namespace bardrive::pci
