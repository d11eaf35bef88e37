#include "bench/nic/kernel_port.hpp"

#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/file.hpp"
#include "nic/test_frame.hpp"

namespace bardrive::bench {

std::string read_line(const std::string& path) { return file::try_read_text(path).value_or(""); }

std::string netdev_of(const pci::Bdf& bdf) {
    namespace fs = std::filesystem;
    const fs::path dev = "/sys/bus/pci/devices/" + bdf.str();
    std::error_code ec;
    std::vector<fs::path> dirs{dev / "net"};
    for (const auto& e : fs::directory_iterator(dev, ec))  // virtio_net's interface hangs off its virtio device
        if (e.path().filename().string().starts_with("virtio")) dirs.push_back(e.path() / "net");
    for (const auto& d : dirs) {
        fs::directory_iterator it(d, ec);
        if (!ec && it != fs::directory_iterator()) return it->path().filename().string();
        ec.clear();
    }
    return "";
}

KernelPort::KernelPort(const pci::Bdf& bdf) {
    name = netdev_of(bdf);
    if (name.empty())
        throw Error("open kernel port", bdf.str(), "no network interface",
                    "leave the NIC to the kernel's driver (lab/lab run PRESET --bind WINDOW)");
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
    wait_carrier(name);
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

std::vector<pci::Bdf> lab_nics() {
    std::vector<pci::Bdf> out;
    std::istringstream in(std::getenv("BARDRIVE_LAB_NICS") ? std::getenv("BARDRIVE_LAB_NICS") : "");
    for (std::string w; in >> w;) out.push_back(pci::Bdf::parse(w));
    return out;
}

std::uint64_t if_counter(const std::string& ifname, const char* stat) {
    return std::strtoull(read_line("/sys/class/net/" + ifname + "/statistics/" + stat).c_str(), nullptr, 10);
}

void wait_carrier(const std::string& name) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_line("/sys/class/net/" + name + "/carrier") != "1" && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

bool pin_thread(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

double cpu_busy_seconds(unsigned cpu) {
    std::ifstream in("/proc/stat");
    const std::string want = "cpu" + std::to_string(cpu);
    for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string name;
        unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
        f >> name >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
        if (name == want)
            return static_cast<double>(user + nice + system + irq + softirq) /
                   static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    return 0;
}

namespace {
void set_affinity(const std::string& irq, unsigned cpu) {
    std::ofstream("/proc/irq/" + irq + "/smp_affinity_list") << cpu << '\n';
}

// The PCI function under a sysfs device directory (a network interface's device may be a virtio device,
// whose parent is the PCI function): the nearest directory up that has msi_irqs; "" when none.
std::filesystem::path pci_function_of(std::filesystem::path dir) {
    std::error_code ec;
    dir = std::filesystem::canonical(dir, ec);
    for (; !ec && dir.has_relative_path(); dir = dir.parent_path())
        if (std::filesystem::exists(dir / "msi_irqs")) return dir;
    return {};
}
}  // namespace

void pin_irqs(const std::string& name, unsigned cpu) {
    if (auto fn = pci_function_of("/sys/class/net/" + name + "/device"); !fn.empty()) {
        pin_device_irqs(fn.filename().string(), cpu);
        return;
    }
    std::ifstream in("/proc/interrupts");
    for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string irq;
        f >> irq;
        if (irq.empty() || irq.back() != ':' || line.find(" " + name) == std::string::npos) continue;
        irq.pop_back();
        set_affinity(irq, cpu);
    }
}

void pin_device_irqs(const std::string& bdf, unsigned cpu) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/devices/" + bdf + "/msi_irqs", ec))
        set_affinity(e.path().filename().string(), cpu);
}

bool load_module(const std::string& module) {
    const char* mods = std::getenv("BARDRIVE_LAB_MODULES");
    std::string cmd = std::string("modprobe ") + (mods && *mods ? std::string("-d ") + mods + " " : "") + module;
    return std::system(cmd.c_str()) == 0;
}

bool set_channels(const std::string& name, unsigned combined) {
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM, 0));
    ethtool_channels ch{};
    ch.cmd = ETHTOOL_GCHANNELS;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&ch);
    if (!fd || ::ioctl(fd.get(), SIOCETHTOOL, &ifr) != 0) return false;
    if (ch.combined_count == combined) return true;
    ch.cmd = ETHTOOL_SCHANNELS;
    ch.combined_count = combined;
    return ::ioctl(fd.get(), SIOCETHTOOL, &ifr) == 0;
}

namespace {
bool put(const std::string& file, const std::string& cmd) {
    std::ofstream f(file);
    f << cmd << '\n';
    return static_cast<bool>(f.flush());
}
}  // namespace

bool Pktgen::load() { return load_module("pktgen"); }

double Pktgen::send(const std::string& dev, const nic::MacAddress& to, std::uint32_t len, std::uint32_t burst,
                    std::uint64_t count, std::uint64_t clone) {
    const std::string ctl = "/proc/net/pktgen/" + dev;
    if (!put("/proc/net/pktgen/kpktgend_0", "rem_device_all") ||
        !put("/proc/net/pktgen/kpktgend_0", "add_device " + dev))
        return 0;
    for (const std::string& c :
         {"count " + std::to_string(count), "pkt_size " + std::to_string(len + 4), "burst " + std::to_string(burst),
          std::string("delay 0"), "dst_mac " + to.str(), "clone_skb " + std::to_string(clone)})
        if (!put(ctl, c)) return 0;
    put("/proc/net/pktgen/pgctrl", "start");  // returns when pktgen has sent them all
    std::ifstream res(ctl);
    std::string text((std::istreambuf_iterator<char>(res)), std::istreambuf_iterator<char>());
    std::smatch m;
    return std::regex_search(text, m, std::regex(R"((\d+)pps)")) ? std::stod(m[1]) : 0;
}

}  // namespace bardrive::bench
