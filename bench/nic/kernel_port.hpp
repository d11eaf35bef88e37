// The kernel's side of a NIC benchmark: a NIC left to the kernel's driver (igb, igbvf, virtio_net), its
// interface up and an AF_PACKET socket on it, so a bench can move the same bytes through the kernel that
// bardrive moves from userspace (bench/nic/igb-pps, bench/umem/umem-nic-bench), and what NIC benches share about the
// lab guest: its NICs, pktgen, interface counters and carrier, channels, per-CPU busy time, IRQ and
// thread pinning (bench/nic/nic-vs-xdp, nic-rss).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// The network interface of the kernel's driver on `bdf` (igb's, igbvf's, virtio_net's), "" when none.
std::string netdev_of(const pci::Bdf& bdf);

// The lab's NICs in order (BARDRIVE_LAB_NICS: NIC A, NIC B, ...); empty outside the lab.
std::vector<pci::Bdf> lab_nics();

// Pins the calling thread to one CPU (receivers and senders on their own vCPU, so that per-CPU time
// says who spent it). False when the CPU does not exist.
bool pin_thread(unsigned cpu);

// One of the interface's counters (/sys/class/net/IF/statistics/STAT, e.g. rx_packets); 0 when unreadable.
std::uint64_t if_counter(const std::string& ifname, const char* stat);

// Waits up to 10 s for the interface's carrier (a driver that attaches XDP restarts the link).
void wait_carrier(const std::string& name);

// Busy time of one CPU from /proc/stat (user + nice + system + irq + softirq), in seconds.
double cpu_busy_seconds(unsigned cpu);

// Sends every MSI/MSI-X vector of interface `name`'s PCI function to `cpu` (igb's TxRx vectors, virtio_net's
// input/output/config ones); a name that is no interface matches /proc/interrupts' names.
void pin_irqs(const std::string& name, unsigned cpu);
// Sends every MSI/MSI-X vector of PCI function `bdf` to `cpu`, whatever drives it (vfio-pci's too).
void pin_device_irqs(const std::string& bdf, unsigned cpu);

// modprobe from the lab guest's module tree (BARDRIVE_LAB_MODULES) or the system's; false when it fails.
bool load_module(const std::string& module);

// The interface's combined channel count (ETHTOOL_SCHANNELS): 1 keeps every frame on queue 0, where
// AF_XDP and the kernel path are measured. False when the driver refuses.
bool set_channels(const std::string& name, unsigned combined);

// pktgen, the kernel's in-kernel packet generator, on one interface (its kthread kpktgend_0 runs on
// CPU 0). Frames are IPv4/UDP with pktgen's header (magic, sequence number) after the UDP header.
struct Pktgen {
    static constexpr std::uint32_t magic = 0xbe9be955;  // pktgen_hdr.pgh_magic, big endian on the wire
    static constexpr std::uint32_t header_offset = 42;  // Ethernet 14 + IPv4 20 + UDP 8
    // Loads the module (BARDRIVE_LAB_MODULES); false when it cannot.
    static bool load();
    // Sends `count` frames of `len` bytes (without CRC) to `to` from interface `dev`, `burst` per xmit_more
    // batch (one frame sent `burst` times), as fast as it can; returns when they are all sent, with
    // pktgen's own rate (0 on failure). `clone` > 0 reuses each frame that many times (pktgen's clone_skb:
    // the driver's cost without building frames); 0 builds every frame. A multiple of `burst` may be sent.
    static double send(const std::string& dev, const nic::MacAddress& to, std::uint32_t len, std::uint32_t burst,
                       std::uint64_t count, std::uint64_t clone = 0);
};

}  // namespace bardrive::bench
