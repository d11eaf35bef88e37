// What lab/lab tells a test in the guest (docs/lab.md): the NICs and windows of the preset, and
// BARDRIVE_LAB_OUT for files the runner checks on the host. SKIPs outside a lab guest.
#pragma once

#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nic/igb/regs.hpp"
#include "pci/bdf.hpp"
#include "vfio/mmio.hpp"

namespace labenv {

struct Lab {
    std::vector<bardrive::pci::Bdf> nics;
    std::vector<bardrive::pci::Bdf> windows;
    std::string out;
};

inline std::vector<bardrive::pci::Bdf> bdfs(const char* var) {
    std::vector<bardrive::pci::Bdf> out;
    std::istringstream words(std::getenv(var) ? std::getenv(var) : "");
    for (std::string w; words >> w;) out.push_back(bardrive::pci::Bdf::parse(w));
    return out;
}

inline Lab lab_or_skip() {
    if (!std::getenv("BARDRIVE_LAB"))
        SKIP("not in a lab guest: run it with lab/lab run basic --bind all -- <this binary>");
    Lab lab{bdfs("BARDRIVE_LAB_NICS"), bdfs("BARDRIVE_LAB_WINDOWS"),
            std::getenv("BARDRIVE_LAB_OUT") ? std::getenv("BARDRIVE_LAB_OUT") : ""};
    REQUIRE(lab.nics.size() >= 2);
    REQUIRE(lab.windows.size() >= 1);
    return lab;
}

// Polls until pred() holds or the timeout passes; device models run on other host threads.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

// Reset (8.2.1 CTRL.RST), mask every interrupt, set link up and restart auto-negotiation in the PHY
// through MDIC (8.2.4); returns once STATUS.LU is set (QEMU completes auto-negotiation on a timer).
inline void igb_reset_and_link(const bardrive::vfio::Mmio& r) {
    namespace igb = bardrive::nic::igb;
    r.write32(igb::CTRL, r.read32(igb::CTRL) | igb::ctrl::RST);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(wait_for([&] { return (r.read32(igb::CTRL) & igb::ctrl::RST) == 0; }, std::chrono::seconds(2)));
    r.write32(igb::IMC, ~0u);
    r.write32(igb::CTRL_EXT, r.read32(igb::CTRL_EXT) | igb::ctrl_ext::DRV_LOAD);
    r.write32(igb::CTRL, r.read32(igb::CTRL) | igb::ctrl::SLU);
    std::uint32_t bmcr =
        igb::phy::BMCR_AUTONEG | igb::phy::BMCR_ANRESTART | igb::phy::BMCR_SPEED1000 | igb::phy::BMCR_FULL_DUPLEX;
    r.write32(igb::MDIC, bmcr | igb::phy::BMCR << igb::mdic::REG_SHIFT |
                             igb::mdic::INTERNAL_PHY << igb::mdic::PHY_SHIFT | igb::mdic::OP_WRITE);
    REQUIRE(wait_for([&] { return (r.read32(igb::MDIC) & igb::mdic::READY) != 0; }, std::chrono::seconds(1)));
    REQUIRE((r.read32(igb::MDIC) & igb::mdic::ERROR) == 0);
    REQUIRE(wait_for([&] { return (r.read32(igb::STATUS) & igb::status::LU) != 0; }, std::chrono::seconds(5)));
}

// Asks the host to take NIC n's link down (up = false) or up, as a pulled cable would (lab/lab's
// request-set_link: QMP set_link on netdev nicN); returns the runner's answer, "ok" or "error: ...".
inline std::string host_set_link(unsigned nic, bool up) {
    const char* out = std::getenv("BARDRIVE_LAB_OUT");
    if (!out) return "error: BARDRIVE_LAB_OUT is not set";
    std::string req = std::string(out) + "/request-set_link", done = req + ".done";
    std::remove(done.c_str());
    std::ofstream(req + ".tmp") << "nic" << nic << (up ? " on" : " off") << "\n";
    std::rename((req + ".tmp").c_str(), req.c_str());  // the runner never reads half a request
    std::string answer = "error: the runner did not answer in 10 s (a lab/lab without request-set_link?)";
    wait_for([&] { return std::ifstream(done).good(); }, std::chrono::seconds(10));
    if (std::ifstream f(done); f && std::getline(f, answer)) std::remove(done.c_str());
    return answer;
}

}  // namespace labenv
