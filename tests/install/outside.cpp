// A program outside the tree, built against the installed library through pkg-config.
#include <bardrive/core/error.hpp>
#include <bardrive/pci/bdf.hpp>
#include <cstdio>

int main() {
    auto bdf = bardrive::pci::Bdf::parse("0000:02:00.0");
    try {
        bardrive::pci::Bdf::parse("garbage");
    } catch (const bardrive::Error& e) {
        std::printf("%s %s\n", bdf.str().c_str(), e.operation().c_str());
        return 0;
    }
    return 1;
}
