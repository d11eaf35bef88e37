// nic::VfMailbox against a PF played by a thread on plain memory: what Igbvf's set-up retries (a request the PF
// took and left unanswered, MailboxTimeout, as the kernel's igb does with a VF it has not cleared to send) and
// what it does not (a message too long for the mailbox, the caller's mistake). The lab's igbvf tests run the
// real PF; the lab cannot make the kernel drop a request at a chosen moment, so the drop is played here.
#include <array>
#include <atomic>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_exception.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "nic/igbvf/igbvf.hpp"
#include "support/fake_bar.hpp"
#include "vfio/mmio.hpp"

using namespace bardrive;
using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;

namespace {

// 16 KiB of zeroed "BAR 0": V2PMAILBOX and VMBMEM live in it.
vfio::Mmio fake_bar() { return testing::fake_bar(16 << 10); }

// The PF's side: takes each request (PFACK) and answers it (its type with ACK, then PFSTS) unless `drop` says to
// leave it unanswered. Requests seen are counted.
class FakePf {
public:
    FakePf(const vfio::Mmio& bar, std::vector<bool> drop) : bar_(bar), drop_(std::move(drop)) {
        thread_ = std::thread([this] { serve(); });
    }
    ~FakePf() {
        stop_ = true;
        thread_.join();
    }
    int requests() const { return requests_.load(); }

private:
    void serve() {
        while (!stop_) {
            if ((bar_.read32(nic::igbvf::V2PMAILBOX) & nic::igbvf::mbx::REQ) == 0) {
                std::this_thread::sleep_for(20us);
                continue;
            }
            const std::uint32_t word0 = bar_.read32(nic::igbvf::VMBMEM);
            const int n = requests_++;
            bar_.write32(nic::igbvf::V2PMAILBOX, nic::igbvf::mbx::PFACK);  // taken: REQ cleared
            if (n < static_cast<int>(drop_.size()) && drop_[static_cast<std::size_t>(n)]) continue;
            bar_.write32(nic::igbvf::VMBMEM,
                         (word0 & nic::igbvf::msg::TYPE_MASK) | nic::igbvf::msg::ACK | nic::igbvf::msg::CTS);
            bar_.write32(nic::igbvf::VMBMEM + 4, 0x1234);
            bar_.write32(nic::igbvf::V2PMAILBOX, nic::igbvf::mbx::PFACK | nic::igbvf::mbx::PFSTS);
        }
    }

    const vfio::Mmio& bar_;
    std::vector<bool> drop_;
    std::atomic<bool> stop_{false};
    std::atomic<int> requests_{0};
    std::thread thread_;
};

}  // namespace

TEST_CASE("a request the PF takes and leaves unanswered is a MailboxTimeout, and the next request is answered",
          "[nic]") {
    auto bar = fake_bar();
    FakePf pf(bar, {true, false});  // the first request dropped, as igb drops a VF's not cleared to send
    nic::VfMailbox mailbox(bar, "0000:01:10.0");
    const std::array<std::uint32_t, 2> lpe{nic::igbvf::msg::SET_LPE, 1522};
    std::array<std::uint32_t, 2> reply{};
    CHECK_THROWS_MATCHES(mailbox.call(lpe, reply, 50), nic::MailboxTimeout,
                         Catch::Matchers::MessageMatches(ContainsSubstring("SET_LPE") &&
                                                         ContainsSubstring("did not answer within 50 ms")));
    mailbox.call(lpe, reply, 1000);  // what Igbvf's set-up does after resetting the VF again
    CHECK(reply[0] == (nic::igbvf::msg::SET_LPE | nic::igbvf::msg::ACK | nic::igbvf::msg::CTS));
    CHECK(reply[1] == 0x1234);
    CHECK(pf.requests() == 2);
}

TEST_CASE("a PF that never takes a request is a MailboxTimeout too", "[nic]") {
    auto bar = fake_bar();  // nobody answers: REQ stays, PFACK never comes
    nic::VfMailbox mailbox(bar, "0000:01:10.0");
    const std::array<std::uint32_t, 1> reset{nic::igbvf::msg::RESET};
    std::array<std::uint32_t, 3> reply{};
    CHECK_THROWS_MATCHES(mailbox.call(reset, reply, 20), nic::MailboxTimeout,
                         Catch::Matchers::MessageMatches(ContainsSubstring("RESET") &&
                                                         ContainsSubstring("did not take it within 20 ms")));
}

TEST_CASE("a message longer than the mailbox is the caller's mistake: an Error, not a MailboxTimeout to retry",
          "[nic]") {
    auto bar = fake_bar();
    FakePf pf(bar, {});
    nic::VfMailbox mailbox(bar, "0000:01:10.0");
    std::vector<std::uint32_t> long_message(nic::igbvf::MAILBOX_WORDS + 1, 0);
    long_message[0] = nic::igbvf::msg::SET_MULTICAST;
    std::array<std::uint32_t, 1> reply{};
    bool timeout = false, error = false;
    try {
        mailbox.call(long_message, reply, 50);
    } catch (const nic::MailboxTimeout&) {
        timeout = true;
    } catch (const Error& e) {
        error = true;
        CHECK_THAT(std::string(e.what()), ContainsSubstring("at most 16 words"));
    }
    CHECK(error);
    CHECK_FALSE(timeout);
    CHECK(pf.requests() == 0);  // nothing was sent
}
