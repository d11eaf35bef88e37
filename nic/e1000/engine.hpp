// What the e1000 family's loopback engines share (nic::Igb and nic::E1000e opened with EngineOptions):
// the payload check, the UDP source port RSS steers to a queue, and a LoopbackQueue's header template.
#pragma once

#include <cstdint>
#include <string>

#include "../mac_address.hpp"
#include "loopback_queue.hpp"
#include "queue_pair.hpp"

namespace bardrive::nic::e1000 {

// Throws bardrive::Error naming `who` unless `payload` is 1 KiB up to what a frame of `longest_frame`
// bytes holds, in whole KiB.
void check_engine_payload(const std::string& who, std::uint32_t payload, std::uint32_t longest_frame);
// The first UDP source port that RSS (as nic::Igb programs it) maps to `queue` of `queues`.
std::uint16_t engine_udp_port(std::uint16_t queue, std::uint16_t queues);
// An engine on one queue pair: frames of `payload` data bytes from `udp_port`, to and from `mac`.
LoopbackQueue make_engine_queue(const QueuePair& qp, std::uint32_t payload, std::uint16_t udp_port,
                                const MacAddress& mac);

}  // namespace bardrive::nic::e1000
