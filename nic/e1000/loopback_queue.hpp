// LoopbackQueue: one igb (or e1000e) queue pair in MAC loopback used as a DMA copy engine, driven by whoever calls
// it: a CPU thread, or a GPU thread whose GPU can reach the NIC's BAR and the ring memory. Header-only
// and __host__ __device__ so both run the same code.
//
// A copy is cut into frames of at most `payload` data bytes. Each frame is sent as two descriptors: a
// 42-byte Ethernet/IPv4/UDP header from this queue's header slot, then the data read straight from the
// source IOVA. Receive header split (SRRCTL.DESCTYPE 101b) puts the header into the RX descriptor's
// header slot and the data, and nothing else, at the destination IOVA: no header lands in the
// destination or next to it. (The 82574 does the same with its packet split descriptors: header to
// buffer 0, data to buffer 1; QueuePair::rx_ps.) RSS brings the frame back to this queue's own RX ring because the UDP
// source port was chosen so (nic/rss.hpp). The CPU copies no data byte.
//
// Nothing the device writes back is believed unchecked: a frame counts as landed only with DD and EOP
// set, no error bit, the expected data length, a 42-byte split header, and that header carrying this
// queue's port and the frame's sequence number. Anything else breaks the queue: its RX queue is disabled
// at once (the device writes no more into posted buffers) and every later copy fails.
//
// The device cannot be trusted to notice DMA that went nowhere (QEMU's igb reports a frame to an
// unmapped IOVA as done): callers that need certainty check content, as the tests do.
#pragma once

#include <cstdint>

#include "../../core/hd.hpp"
#include "../packet.hpp"
#include "desc.hpp"
#include "queue_pair.hpp"

namespace bardrive::nic {

struct LoopbackQueue {
    static constexpr std::uint32_t header_bytes = 42;  // Ethernet 14 + IPv4 20 + UDP 8
    static constexpr std::uint32_t header_slot = 64;   // header buffer per descriptor (SRRCTL.BSIZEHEADER)
    // Shortest data a frame may carry: a frame that fits the header buffer stays there whole (split
    // always), and one below 60 bytes would be padded by the device.
    static constexpr std::uint32_t min_data = header_slot + 1 - header_bytes;
    static_assert(header_bytes + min_data >= ETH_MIN_FRAME);
    static constexpr std::uint32_t max_copies = 32;  // copies in flight per queue
    enum class Status : std::uint32_t { ok, broken };

    // --- set-up (LoopbackQueue::make in loopback_copy.hpp fills these) ---
    QueuePair qp;
    std::uint32_t payload;              // data bytes per frame
    std::uint16_t port;                 // UDP source port that RSS maps to this queue
    std::uint8_t header[header_bytes];  // template: addresses, ports; lengths, id and checksums per frame

    // --- running state ---
    std::uint32_t rx_tail, rx_clean;  // RX descriptors posted / harvested
    std::uint32_t tx_tail, tx_clean;  // TX descriptors queued / completed (head write-back)
    std::uint16_t tx_seq, rx_seq;     // IPv4 id of the next frame sent / expected
    struct Copy {
        std::uint64_t left;  // bytes of this copy not yet landed
    };
    Copy copies[max_copies];  // FIFO of copies in flight
    std::uint32_t copy_head, copy_count;
    Status status;
    std::uint32_t failed_check;  // which check broke the queue (Check), for diagnostics
    std::uint64_t frames, bytes, doorbells, copies_done;

    enum Check : std::uint32_t {
        check_none,
        check_status,   // DD without EOP, or an error bit
        check_length,   // data length other than sent
        check_split,    // header not split off, or not 42 bytes
        check_header,   // the header is not this queue's next frame
        check_head,     // TX head write-back outside what was queued
        check_timeout,  // a copy did not land in time
    };

    // Frames a copy of `size` bytes takes (0: too small to send without padding).
    BARDRIVE_HD std::uint32_t frames_for(std::uint64_t size) const {
        if (size < min_data) return 0;
        std::uint64_t n = (size + payload - 1) / payload;
        return static_cast<std::uint32_t>(n);
    }

    // Data bytes of the next frame when `left` bytes remain: `payload`, except that the last two frames
    // share the rest so that neither is below min_data.
    BARDRIVE_HD std::uint32_t frame_data(std::uint64_t left) const {
        if (left <= payload) return static_cast<std::uint32_t>(left);
        if (left - payload < min_data) return static_cast<std::uint32_t>(left - min_data);
        return payload;
    }

    // Queues a copy of `size` bytes from `src` to `dst` (IOVAs in the port's domain) and rings both
    // doorbells. False, with nothing queued, when the queue is broken, the size is below min_data or
    // the rings or the copy FIFO lack room (poll() first).
    BARDRIVE_HD bool start(std::uint64_t dst, std::uint64_t src, std::uint64_t size) {
        reclaim_tx();
        std::uint32_t n = frames_for(size);
        std::uint32_t rx_free = qp.rx_size - 1 - ((rx_tail - rx_clean) & (qp.rx_size - 1));
        std::uint32_t tx_free = qp.tx_size - 1 - ((tx_tail - tx_clean) & (qp.tx_size - 1));
        if (status != Status::ok || n == 0 || n > rx_free || 2 * n > tx_free || copy_count == max_copies) return false;
        // Receive buffers first: nothing can arrive unposted.
        std::uint64_t off = 0;
        for (std::uint32_t k = 0; k < n; ++k) {
            std::uint32_t len = frame_data(size - off);
            std::uint32_t i = rx_tail & (qp.rx_size - 1);
            post_rx(i, dst + off, qp.headers_iova + std::uint64_t{i} * qp.header_slot);
            rx_tail = (rx_tail + 1) & (qp.rx_size - 1);
            off += len;
        }
        copies[(copy_head + copy_count) % max_copies] = Copy{size};
        ++copy_count;
        io::wmb();
        // The 82574 counts RDH/RDT in 16-byte units even for its 32-byte packet split descriptors (so does
        // QEMU's model, and Linux's e1000e driver writes its tail the same way): twice the index.
        *qp.rdt = qp.rx_ps ? 2 * rx_tail : rx_tail;
        off = 0;
        for (std::uint32_t k = 0; k < n; ++k) {
            std::uint32_t len = frame_data(size - off);
            std::uint32_t t = tx_tail & (qp.tx_size - 1);
            std::uint64_t slot = std::uint64_t{qp.rx_size + t} * qp.header_slot;
            write_header(qp.headers + slot, len, tx_seq++);
            // The 82574's extended data descriptor: another type, and no PAYLEN (those bits are its VLAN).
            const std::uint32_t data_desc = (qp.rx_ps ? e1000::txd::DTYP_E1000E_DATA : e1000::txd::DTYP_DATA) |
                                            e1000::txd::CMD_DEXT | e1000::txd::CMD_IFCS;
            qp.tx[t].read.buffer_addr = qp.headers_iova + slot;
            qp.tx[t].read.cmd_type_len = header_bytes | data_desc;
            qp.tx[t].read.olinfo_status = qp.rx_ps ? 0 : (header_bytes + len) << e1000::txd::PAYLEN_SHIFT;
            std::uint32_t u = (t + 1) & (qp.tx_size - 1);
            qp.tx[u].read.buffer_addr = src + off;
            qp.tx[u].read.cmd_type_len =
                len | data_desc | e1000::txd::CMD_EOP | (k + 1 == n ? e1000::txd::CMD_RS : 0u);  // one head write-back
            qp.tx[u].read.olinfo_status = 0;
            tx_tail = (u + 1) & (qp.tx_size - 1);
            off += len;
        }
        io::wmb();
        *qp.tdt = tx_tail;
        doorbells += 2;
        return true;
    }

    // Harvests landed frames and finished sends; returns how many copies completed (all their frames
    // landed and checked). A failed check breaks the queue (see above).
    BARDRIVE_HD std::uint32_t poll() {
        std::uint32_t done = 0;
        while (status == Status::ok && copy_count != 0) {
            std::uint32_t i = rx_clean;
            RxDone r = read_rx(i);
            if (!(r.status & e1000::rxd::DD)) break;
            Copy& c = copies[copy_head];
            std::uint32_t want = frame_data(c.left);
            const std::uint8_t* h = qp.headers + std::uint64_t{i} * qp.header_slot;
            if (!(r.status & e1000::rxd::EOP) || r.error) return fail(check_status);
            if (r.length != want) return fail(check_length);
            if (!r.split || r.header_length != header_bytes) return fail(check_split);
            if (be16(h + 34) != port || be16(h + 18) != rx_seq || be16(h + 16) != 28 + want) return fail(check_header);
            ++rx_seq;
            ++frames;
            bytes += want;
            rx_clean = (rx_clean + 1) & (qp.rx_size - 1);
            c.left -= want;
            if (c.left == 0) {
                copy_head = (copy_head + 1) % max_copies;
                --copy_count;
                ++copies_done;
                ++done;
            }
        }
        reclaim_tx();
        return done;
    }

    BARDRIVE_HD bool idle() const { return copy_count == 0; }

    // Polls until every queued copy landed, or `timeout_ns` passes (then the queue breaks).
    BARDRIVE_HD bool wait(std::uint64_t timeout_ns) {
        std::uint64_t end = io::now_ns() + timeout_ns;
        while (status == Status::ok && copy_count != 0) {
            poll();
            if (copy_count != 0 && io::now_ns() > end) fail(check_timeout);
        }
        return status == Status::ok;
    }

    // Stops the device from writing into anything posted on this queue; the queue stays broken.
    BARDRIVE_HD void abandon() {
        status = Status::broken;
        *qp.rxdctl = 0;
        io::mb();
    }

private:
    // One receive write-back, whichever descriptor format the queue has.
    struct RxDone {
        std::uint32_t status;  // DD and EOP in bits 0 and 1 in both formats
        bool error;
        std::uint32_t length;  // data bytes at the destination
        bool split;
        std::uint32_t header_length;
    };

    BARDRIVE_HD void post_rx(std::uint32_t i, std::uint64_t dst, std::uint64_t header) {
        if (qp.rx_ps) {
            qp.rx_ps[i].read.buffer_addr[0] = header;
            qp.rx_ps[i].read.buffer_addr[1] = dst;  // even (the caller's alignment): clears DD
            qp.rx_ps[i].read.buffer_addr[2] = 0;
            qp.rx_ps[i].read.buffer_addr[3] = 0;
        } else {
            qp.rx[i].read.pkt_addr = dst;
            qp.rx[i].read.hdr_addr = header;  // even: clears DD
        }
    }

    BARDRIVE_HD RxDone read_rx(std::uint32_t i) const {
        RxDone r{};
        if (qp.rx_ps) {
            const volatile e1000e::PsRxDesc* d = qp.rx_ps + i;
            r.status = d->wb.status_error;
            if (!(r.status & e1000::rxd::DD)) return r;
            io::rmb();  // the rest of the write-back and the header after the done bit
            r.error = (r.status & e1000e::psd::ERR_MASK) != 0;
            r.length = d->wb.length[0];
            std::uint16_t hs = d->wb.header_status;
            r.split = (hs & e1000e::psd::HDRSP) != 0 && d->wb.length0 == (hs & e1000e::psd::HDRLEN_MASK);
            r.header_length = hs & e1000e::psd::HDRLEN_MASK;
        } else {
            const volatile e1000::AdvRxDesc* d = qp.rx + i;
            r.status = d->wb.status_error;
            if (!(r.status & e1000::rxd::DD)) return r;
            io::rmb();
            r.error = (r.status & e1000::rxd::ERR_MASK) != 0;
            r.length = d->wb.length;
            std::uint16_t hdr_info = d->wb.hdr_info;
            r.split = (hdr_info & e1000::rxd::HDR_SPH) != 0;
            r.header_length = (hdr_info >> e1000::rxd::HDR_LEN_SHIFT) & e1000::rxd::HDR_LEN_MASK;
        }
        return r;
    }

    BARDRIVE_HD std::uint32_t fail(Check c) {
        failed_check = c;
        abandon();
        return 0;
    }

    BARDRIVE_HD void reclaim_tx() {
        std::uint32_t head = *qp.tx_head;
        std::uint32_t mask = qp.tx_size - 1;
        if (head > mask || ((head - tx_clean) & mask) > ((tx_tail - tx_clean) & mask)) {
            if (status == Status::ok) fail(check_head);
            return;
        }
        tx_clean = head;
    }

    BARDRIVE_HD static std::uint16_t be16(const std::uint8_t* p) {
        return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
    }
    BARDRIVE_HD static void put16(std::uint8_t* p, std::uint32_t v) {
        p[0] = static_cast<std::uint8_t>(v >> 8);
        p[1] = static_cast<std::uint8_t>(v);
    }

    // The template with this frame's IPv4 total length, id and header checksum, and UDP length.
    BARDRIVE_HD void write_header(std::uint8_t* out, std::uint32_t data, std::uint16_t seq) const {
        for (std::uint32_t b = 0; b < header_bytes; ++b) out[b] = header[b];
        put16(out + 16, 28 + data);  // IPv4 total length: IP + UDP headers + data
        put16(out + 18, seq);
        put16(out + 38, 8 + data);  // UDP length; checksum 0 = none (IPv4)
        std::uint32_t sum = 0;
        for (unsigned b = 14; b < 34; b += 2) sum += be16(out + b);
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        put16(out + 24, ~sum & 0xffff);
    }
};

}  // namespace bardrive::nic
