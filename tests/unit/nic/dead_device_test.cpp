// A NIC that stopped answering completes every register read with all ones (surprise removal, powered
// down, its link down). The set-up steps igb and e1000e share must say so, promptly, instead of taking
// all ones for "reset done", "link up" or a MAC address. Through VFIO the lab cannot make a device read
// all ones (vfio-pci raises SIGBUS instead: tests/lab/fault_test.cpp), so the registers here are memory.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstring>

#include "core/error.hpp"
#include "nic/e1000/common.hpp"
#include "nic/igb/regs.hpp"
#include "support/fake_bar.hpp"
#include "vfio/mmio.hpp"

using namespace bardrive;
using Catch::Matchers::ContainsSubstring;

namespace {

// 128 KiB of "BAR 0" filled with `byte`.
vfio::Mmio fake_bar(int byte) { return testing::fake_bar(128 << 10, byte); }

// Every write lands in memory, so a fake all-ones device must be refilled after each step.
void all_ones(const vfio::Mmio& bar) { std::memset(const_cast<std::uint8_t*>(bar.data()), 0xff, bar.size()); }

}  // namespace

TEST_CASE("a device reading all ones is an error at every set-up step, not a hang or a success", "[nic]") {
    auto bar = fake_bar(0xff);
    CHECK_FALSE(nic::e1000::answering(bar));
    CHECK_FALSE(nic::e1000::link_up(bar));
    CHECK_THROWS_WITH(nic::e1000::reset(bar, "0000:01:00.0", true), ContainsSubstring("reset NIC") &&
                                                                        ContainsSubstring("0xffffffff") &&
                                                                        ContainsSubstring("not answering"));
    all_ones(bar);
    // "not answering", not the link timeout's "STATUS.LU still 0": it did not wait for the link.
    CHECK_THROWS_WITH(nic::e1000::bring_link_up(bar, "0000:01:00.0", nic::Loopback::none, 5000),
                      ContainsSubstring("bring link up") && ContainsSubstring("not answering"));
    all_ones(bar);
    CHECK_THROWS_WITH(nic::e1000::phy_write(bar, "0000:01:00.0", nic::e1000::phy::BMCR, 0),
                      ContainsSubstring("not answering"));
    all_ones(bar);
    CHECK_THROWS_WITH(nic::e1000::read_mac(bar, "0000:01:00.0"), ContainsSubstring("not answering"));
}

TEST_CASE("a device that stops answering while the link comes up is reported as such", "[nic]") {
    auto bar = fake_bar(0);
    // A live device: STATUS reads 0 (link down), MDIC ready after the write.
    bar.write32(nic::e1000::STATUS, 0);
    CHECK(nic::e1000::answering(bar));
    CHECK_FALSE(nic::e1000::link_up(bar));
    bar.write32(nic::e1000::STATUS, nic::e1000::status::LU);
    CHECK(nic::e1000::link_up(bar));
    bar.write32(nic::e1000::STATUS, ~0u);
    CHECK_FALSE(nic::e1000::link_up(bar));  // all ones is not "link up"
}
