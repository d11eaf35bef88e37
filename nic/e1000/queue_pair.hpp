// One igb queue pair's raw pieces, for a driver outside nic::Igb (IgbOptions::external_queues): plain
// pointers that code on a CPU thread or on a GPU thread (where the GPU can reach the NIC's BAR and the
// ring memory) uses to write descriptors, ring doorbells and read completions.
#pragma once

#include <cstdint>

#include "../e1000e/regs.hpp"
#include "desc.hpp"

namespace bardrive::nic {

struct QueuePair {
    e1000::AdvRxDesc* rx;  // rx_size descriptors, empty (head = tail = 0) when handed out
    std::uint32_t rx_size;
    e1000::AdvTxDesc* tx;
    std::uint32_t tx_size;
    volatile std::uint32_t* rdt;  // tail doorbells (BAR 0)
    volatile std::uint32_t* tdt;
    volatile std::uint32_t* rxdctl;  // writing 0 stops DMA into posted buffers (igb: RXDCTL; e1000e: RCTL)
    // TX head: igb's head write-back word; the 82574 has none, so its TDH register.
    const volatile std::uint32_t* tx_head;
    // Header buffers in DMA memory: rx_size slots for RX header split, then tx_size slots for headers to
    // send, header_slot bytes each; the CPU address and the device's.
    std::uint8_t* headers;
    std::uint64_t headers_iova;
    std::uint32_t header_slot;
    // The 82574 (nic::E1000e): its packet split receive descriptors instead of `rx` (then null), and
    // extended transmit data descriptors; null for the 82576.
    e1000e::PsRxDesc* rx_ps = nullptr;
};

}  // namespace bardrive::nic
