#include "bench/nic/kernel_port.hpp"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include "core/file.hpp"
#include "nic/test_frame.hpp"

namespace bardrive::bench {

std::string read_line(const std::string& path) { return file::try_read_text(path).value_or(""); }

KernelPort::KernelPort(const pci::Bdf& bdf) {
    std::string net = "/sys/bus/pci/devices/" + bdf.str() + "/net";
    if (!std::filesystem::exists(net))
        throw Error("open kernel port", bdf.str(), "no network interface",
                    "leave the NIC to the kernel's igb (lab/lab run PRESET --bind WINDOW)");
    name = std::filesystem::directory_iterator(net)->path().filename();
    std::ofstream("/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6") << "1";
    sock = UniqueFd(::socket(AF_PACKET, SOCK_RAW, htons(nic::TEST_ETHERTYPE)));
    if (!sock) throw Error::from_errno("open AF_PACKET socket", name, errno);
    set_up(true);
    ifindex = static_cast<int>(if_nametoindex(name.c_str()));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(nic::TEST_ETHERTYPE);
    sll.sll_ifindex = ifindex;
    if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0)
        throw Error::from_errno("bind AF_PACKET socket", name, errno);
    int one = 1, buf = 32 << 20;
    ::setsockopt(sock.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    ::setsockopt(sock.get(), SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    mac = nic::MacAddress::parse(read_line("/sys/class/net/" + name + "/address"));
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_line("/sys/class/net/" + name + "/carrier") != "1" && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void KernelPort::set_up(bool up) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ::ioctl(sock.get(), SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags = static_cast<short>(up ? ifr.ifr_flags | IFF_UP : ifr.ifr_flags & ~IFF_UP);
    if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) throw Error::from_errno("set interface up/down", name, errno);
}

void KernelPort::set_mtu(unsigned mtu) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_mtu = static_cast<int>(mtu);
    if (::ioctl(sock.get(), SIOCSIFMTU, &ifr) != 0) throw Error::from_errno("set MTU", name, errno);
}

}  // namespace bardrive::bench
