// What lab/lab tells a test in the guest (docs/lab.md): the NICs and windows of the preset, and
// BARDRIVE_LAB_OUT for files the runner checks on the host. SKIPs outside a lab guest.
#pragma once

#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pci/bdf.hpp"

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

}  // namespace labenv
