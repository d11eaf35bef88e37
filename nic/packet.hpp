// Packet: one frame in one DMA buffer, as rx_burst hands it out and tx_burst takes it.
#pragma once

#include <cstdint>

namespace bardrive::dma {
class BufferPool;
}

namespace bardrive::nic {

struct Packet {
    std::uint8_t* data = nullptr;     // CPU address of the frame's first byte (host memory or a peer window)
    std::uint64_t iova = 0;           // the same byte as the device sees it
    std::uint32_t len = 0;            // frame length in bytes, Ethernet header included, CRC excluded
    std::uint32_t buf = 0;            // index of the buffer in its pool
    dma::BufferPool* pool = nullptr;  // where the buffer goes back when done (null: the caller's own memory)
};

inline constexpr std::uint32_t ETH_HEADER_LEN = 14;
inline constexpr std::uint32_t ETH_MIN_FRAME = 60;  // without CRC; shorter frames are padded on the wire

}  // namespace bardrive::nic
