// The kernel's side of a NIC benchmark: a NIC left to the kernel's igb driver, its interface up and an
// AF_PACKET socket on it, so a bench can move the same bytes through the kernel that bardrive moves
// from userspace (bench/nic/igb-pps, bench/umem/umem-nic-bench).
#pragma once

#include <string>

#include "core/fd.hpp"
#include "nic/mac_address.hpp"
#include "pci/bdf.hpp"

namespace bardrive::bench {

// A one-line sysfs attribute, "" when it cannot be read.
std::string read_line(const std::string& path);

// Brings the NIC's interface up (IPv6 off: no traffic of its own) and binds an AF_PACKET socket for
// nic::TEST_ETHERTYPE frames to it; waits up to 10 s for carrier. Throws bardrive::Error when the NIC has
// no network interface (it is not on a kernel driver) or the socket cannot be set up.
struct KernelPort {
    explicit KernelPort(const pci::Bdf& bdf);
    void set_up(bool up);
    void set_mtu(unsigned mtu);  // jumbo frames need it on both ends
    std::string name;
    int ifindex = 0;
    UniqueFd sock;
    nic::MacAddress mac;
};

}  // namespace bardrive::bench
