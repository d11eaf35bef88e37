// Guest instructions per vCPU, read from inside a lab guest run with `lab/lab run --count-instructions`
// (docs/lab.md, "Counting guest instructions"): QEMU's insn_count plugin (lab/plugins/insn_count.c) counts
// every instruction each vCPU executes, user and kernel. mark() executes the plugin's marker, a NOP the
// plugin watches for, with a tag in RAX; the plugin appends every vCPU's count at that instant to
// $BARDRIVE_LAB_OUT/insn-counts before the marking vCPU goes on. mark() does no I/O, so two marks bracket
// exactly the instructions in between; read the snapshots afterwards with get(). insn_start() and insn_add<B>()
// cost no I/O either: the plugin adds what the vCPU ran from the one to the other to its bucket B (0 or 1), which
// snapshots report, e.g. the polls of a receive loop that found frames apart from the empty ones.
// Header-only: the parser is unit-tested on the host (tests/unit/bench/insn_count_test.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bardrive::bench {

// One line of the plugin's log: "seq=S vcpu=V tag=T counts=C0,C1,... b0=X0,X1,... b1=Y0,Y1,...".
struct InsnSnapshot {
    std::uint64_t seq = 0;              // the plugin's snapshot number, from 1
    unsigned vcpu = 0;                  // the vCPU that executed the marker
    std::uint64_t tag = 0;              // its RAX
    std::vector<std::uint64_t> counts;  // instructions each vCPU executed since QEMU started
    std::vector<std::uint64_t> b0, b1;  // each vCPU's buckets (insn_add<0>, insn_add<1>)

    // Instructions vCPU `cpu` executed from `earlier` to this snapshot; 0 when either lacks that vCPU.
    std::uint64_t since(const InsnSnapshot& earlier, unsigned cpu) const {
        if (cpu >= counts.size() || cpu >= earlier.counts.size() || counts[cpu] < earlier.counts[cpu]) return 0;
        return counts[cpu] - earlier.counts[cpu];
    }
    // The same for bucket `b` (0 or 1).
    std::uint64_t bucket_since(const InsnSnapshot& earlier, unsigned b, unsigned cpu) const {
        const auto &now = b ? b1 : b0, &then = b ? earlier.b1 : earlier.b0;
        if (cpu >= now.size() || cpu >= then.size() || now[cpu] < then[cpu]) return 0;
        return now[cpu] - then[cpu];
    }
};

namespace detail {
inline bool parse_u64(std::string_view s, std::uint64_t& v) {
    if (s.empty()) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}
// "key=value" at the front of `line` (up to the next space): the value, and `line` advanced past it.
inline std::optional<std::string_view> field(std::string_view& line, std::string_view key) {
    if (line.substr(0, key.size()) != key || line.substr(key.size(), 1) != "=") return std::nullopt;
    std::size_t end = line.find(' ');
    std::string_view value = line.substr(key.size() + 1, end == std::string_view::npos ? end : end - key.size() - 1);
    line = end == std::string_view::npos ? std::string_view{} : line.substr(end + 1);
    return value;
}
}  // namespace detail

// Parses one log line (without its newline); nullopt when it is not one the plugin writes.
inline std::optional<InsnSnapshot> parse_insn_snapshot(std::string_view line) {
    InsnSnapshot s;
    std::uint64_t v = 0;
    if (line.empty() || line.back() == ' ') return std::nullopt;
    auto seq = detail::field(line, "seq");
    auto vcpu = detail::field(line, "vcpu");
    auto tag = detail::field(line, "tag");
    auto counts = detail::field(line, "counts");
    auto b0 = detail::field(line, "b0");
    auto b1 = detail::field(line, "b1");
    if (!seq || !vcpu || !tag || !counts || !b0 || !b1 || !line.empty()) return std::nullopt;
    if (!detail::parse_u64(*seq, s.seq) || s.seq == 0 || !detail::parse_u64(*vcpu, v) || v > 4096 ||
        !detail::parse_u64(*tag, s.tag))
        return std::nullopt;
    s.vcpu = static_cast<unsigned>(v);
    for (auto [text, out] : {std::pair{*counts, &s.counts}, std::pair{*b0, &s.b0}, std::pair{*b1, &s.b1}})
        for (std::string_view rest = text;;) {
            std::size_t comma = rest.find(',');
            if (!detail::parse_u64(rest.substr(0, comma), v)) return std::nullopt;
            out->push_back(v);
            if (comma == std::string_view::npos) break;
            rest = rest.substr(comma + 1);
        }
    if (s.vcpu >= s.counts.size() || s.b0.size() != s.counts.size() || s.b1.size() != s.counts.size())
        return std::nullopt;
    return s;
}

// Executes the marker with `tag` in RAX. Outside the plugin (or outside QEMU) it is a NOP.
inline void insn_marker(std::uint64_t tag) {
#if defined(__x86_64__)
    asm volatile(".byte 0x0f, 0x1f, 0x80, 0x62, 0x64, 0x69, 0x63" : : "a"(tag) : "memory");  // nopl 0x63696462(%rax)
#else
    (void)tag;
#endif
}

// Start a stretch for a bucket (the plugin notes this vCPU's count), and add the stretch to bucket B.
inline void insn_start() {
#if defined(__x86_64__)
    asm volatile(".byte 0x0f, 0x1f, 0x80, 0x62, 0x64, 0x69, 0x73" ::: "memory");  // nopl 0x73696462(%rax)
#endif
}
template <unsigned B>
inline void insn_add() {
    static_assert(B < 2, "two buckets: 0 and 1");
#if defined(__x86_64__)
    if constexpr (B == 0)
        asm volatile(".byte 0x0f, 0x1f, 0x80, 0x62, 0x64, 0x69, 0x30" ::: "memory");  // nopl 0x30696462(%rax)
    else
        asm volatile(".byte 0x0f, 0x1f, 0x80, 0x62, 0x64, 0x69, 0x31" ::: "memory");  // nopl 0x31696462(%rax)
#endif
}

// The guest's side: marks and reads the log. available() is false outside a run with --count-instructions.
class InsnCounter {
public:
    InsnCounter() {
        // the runner names the log (BARDRIVE_LAB_INSN_COUNTS, empty without --count-instructions)
        const char* log = std::getenv("BARDRIVE_LAB_INSN_COUNTS");
        const char* out = std::getenv("BARDRIVE_LAB_OUT");
        if (log && *log)
            fd_ = ::open(log, O_RDONLY | O_CLOEXEC);
        else if (!log && out)
            fd_ = ::open((std::string(out) + "/insn-counts").c_str(), O_RDONLY | O_CLOEXEC);
        next_tag_ = (static_cast<std::uint64_t>(::getpid()) << 32) + 1;  // tags of other processes differ
    }
    ~InsnCounter() {
        if (fd_ >= 0) ::close(fd_);
    }
    InsnCounter(const InsnCounter&) = delete;
    InsnCounter& operator=(const InsnCounter&) = delete;

    bool available() const { return fd_ >= 0; }

    // A snapshot of every vCPU's count, now; returns its tag for get(). No system call, no I/O.
    std::uint64_t mark() {
        std::uint64_t tag = next_tag_++;
        insn_marker(tag);
        return tag;
    }

    // The snapshot mark() took with `tag`, reading what the log gained since the last call; nullopt when
    // it is not there (no plugin) or malformed lines were met (malformed() counts them).
    std::optional<InsnSnapshot> get(std::uint64_t tag) {
        read_more();
        for (const InsnSnapshot& s : seen_)
            if (s.tag == tag) return s;
        return std::nullopt;
    }

    std::optional<InsnSnapshot> now() { return get(mark()); }
    std::uint64_t malformed() const { return malformed_; }

private:
    void read_more() {
        if (fd_ < 0) return;
        char buf[4096];
        for (ssize_t n; (n = ::pread(fd_, buf, sizeof buf, offset_)) > 0;) {
            offset_ += n;
            pending_.append(buf, static_cast<std::size_t>(n));
        }
        std::size_t start = 0;
        for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
            auto s = parse_insn_snapshot(std::string_view(pending_).substr(start, nl - start));
            if (!s)
                ++malformed_;
            else if (s->tag >> 32 == next_tag_ >> 32)  // ours; others' are dropped
                seen_.push_back(std::move(*s));
        }
        pending_.erase(0, start);
        if (seen_.size() > 256) seen_.erase(seen_.begin(), seen_.end() - 64);
    }

    int fd_ = -1;
    off_t offset_ = 0;
    std::string pending_;
    std::vector<InsnSnapshot> seen_;
    std::uint64_t next_tag_ = 1;
    std::uint64_t malformed_ = 0;
};

}  // namespace bardrive::bench
