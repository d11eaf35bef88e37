// A software stand-in for an igb port in MAC loopback with receive header split, for tests of the code
// that drives nic::LoopbackQueue: it follows the descriptors the way QEMU's igb does (TX frames gathered
// from their descriptors, received on the same queue, the first 42 bytes into the RX header buffer and
// the rest at the packet address, a frame that fits the 64-byte header buffer kept there whole) and can
// lie: `lie` edits the next receive write-back, `deaf` sends nothing back. Device addresses are IOVAs
// into memory regions the test registers. The real device is tested in the lab.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "nic/e1000/desc.hpp"
#include "nic/e1000/queue_pair.hpp"

namespace bardrive::testing {

class FakeLoopbackPort {
public:
    static constexpr std::uint32_t header_slot = 64;

    // Rings, doorbells and header slots in memory the caller provides (pinned host memory when a GPU
    // drives the queue), `ring` descriptors each; header slots at IOVA `headers_iova`.
    struct Memory {
        nic::e1000::AdvRxDesc* rx;
        nic::e1000::AdvTxDesc* tx;
        std::uint8_t* headers;  // 2 * ring * header_slot bytes
        std::uint32_t* regs;    // rdt, tdt, rxdctl, tx head write-back: 4 words
    };
    FakeLoopbackPort(Memory m, std::uint32_t ring, std::uint64_t headers_iova)
        : m_(m), ring_(ring), headers_iova_(headers_iova) {
        std::memset(m_.rx, 0, sizeof(*m_.rx) * ring);
        std::memset(m_.tx, 0, sizeof(*m_.tx) * ring);
        for (int i = 0; i < 4; ++i) m_.regs[i] = 0;
        m_.regs[2] = 1u << 25;  // RXDCTL.ENABLE
        map(headers_iova, m_.headers, 2ull * ring * header_slot);
    }

    // Device memory the port may reach: [iova, iova + bytes) is `host`.
    void map(std::uint64_t iova, void* host, std::uint64_t bytes) {
        regions_.push_back({iova, static_cast<std::uint8_t*>(host), bytes});
    }

    nic::QueuePair queue_pair() const {
        return nic::QueuePair{m_.rx,       ring_,       m_.tx,      ring_,         &m_.regs[0], &m_.regs[1],
                              &m_.regs[2], &m_.regs[3], m_.headers, headers_iova_, header_slot};
    }
    std::uint32_t rxdctl() const { return load(&m_.regs[2]); }
    void set_tx_head(std::uint32_t h) { store(&m_.regs[3], h); }

    // Runs the device once: sends every queued frame and receives it on the same queue.
    void run() {
        if (deaf) return;
        std::vector<std::uint8_t> frame;
        const std::uint32_t tdt = load(&m_.regs[1]);  // acquire: descriptors written before the doorbell
        while (tdh_ != tdt && (load(&m_.regs[2]) & (1u << 25))) {
            const nic::e1000::AdvTxDesc& d = m_.tx[tdh_];
            std::uint32_t len = d.read.cmd_type_len & nic::e1000::txd::DTALEN_MASK;
            const std::uint8_t* src = at(d.read.buffer_addr, len);
            frame.insert(frame.end(), src, src + len);
            std::uint32_t cmd = d.read.cmd_type_len;
            tdh_ = (tdh_ + 1) % ring_;
            if (cmd & nic::e1000::txd::CMD_RS) store(&m_.regs[3], tdh_);
            if (!(cmd & nic::e1000::txd::CMD_EOP)) continue;
            if (rdh_ == load(&m_.regs[0])) throw std::logic_error("fake port: a frame arrived with no buffer posted");
            receive(frame);
            frame.clear();
        }
    }

    std::function<void(nic::e1000::AdvRxDesc&, std::uint8_t* header)> lie;
    bool deaf = false;

private:
    struct Region {
        std::uint64_t iova;
        std::uint8_t* host;
        std::uint64_t bytes;
    };

    static std::uint32_t load(const std::uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static void store(std::uint32_t* p, std::uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

    std::uint8_t* at(std::uint64_t iova, std::uint64_t bytes) const {
        for (const Region& r : regions_)
            if (iova >= r.iova && iova - r.iova + bytes <= r.bytes) return r.host + (iova - r.iova);
        throw std::logic_error("fake port: DMA to an unmapped IOVA");
    }

    void receive(const std::vector<std::uint8_t>& frame) {
        nic::e1000::AdvRxDesc& r = m_.rx[rdh_];
        // Split always: a frame that fits the header buffer stays there whole.
        std::uint32_t hlen = frame.size() <= header_slot ? static_cast<std::uint32_t>(frame.size()) : 42;
        std::uint32_t data = static_cast<std::uint32_t>(frame.size() - hlen);
        std::uint8_t* hdr = at(r.read.hdr_addr, hlen);
        std::memcpy(hdr, frame.data(), hlen);
        if (data) std::memcpy(at(r.read.pkt_addr, data), frame.data() + hlen, data);
        nic::e1000::AdvRxDesc wb{};
        wb.wb.length = static_cast<std::uint16_t>(data);
        wb.wb.hdr_info = static_cast<std::uint16_t>(hlen << nic::e1000::rxd::HDR_LEN_SHIFT | nic::e1000::rxd::HDR_SPH);
        wb.wb.status_error = nic::e1000::rxd::DD | nic::e1000::rxd::EOP;
        if (lie) {
            lie(wb, hdr);
            lie = nullptr;
        }
        // The write-back with DD last, as the device writes it.
        std::uint32_t status = wb.wb.status_error;
        wb.wb.status_error = 0;
        std::memcpy(&r, &wb, sizeof r);
        store(&r.wb.status_error, status);  // release: the rest of the write-back before DD
        rdh_ = (rdh_ + 1) % ring_;
    }

    Memory m_;
    std::uint32_t ring_;
    std::uint64_t headers_iova_;
    std::vector<Region> regions_;
    std::uint32_t rdh_ = 0, tdh_ = 0;
};

}  // namespace bardrive::testing
