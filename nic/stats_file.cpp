#include "nic/stats_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/log.hpp"

namespace bardrive::nic {

namespace {

using Body = StatsFileLayout::Body;
constexpr std::size_t kWords = sizeof(Body) / 8;
constexpr std::size_t kHeaderBytes = offsetof(StatsFileLayout, body);

// The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22), 0 if unknown.
std::uint64_t process_start(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto paren = text.rfind(')');  // the command name may hold spaces and parentheses
    if (paren == std::string::npos) return 0;
    std::istringstream rest(text.substr(paren + 1));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    }
    return 0;
}

void copy_text(char (&dst)[16], const std::string& src) {
    std::memset(dst, 0, sizeof dst);
    std::memcpy(dst, src.data(), std::min(src.size(), sizeof dst - 1));
}

std::uint64_t now_unix_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

void make_dir(const std::string& dir) {
    for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
        if (pos != dir.size() && dir[pos] != '/') continue;
        std::string part = dir.substr(0, pos);
        if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
            throw Error::from_errno("create statistics directory", part, errno,
                                    "set BARDRIVE_STATS_DIR to a writable directory (the reader needs the same)");
        }
    }
}

// Process-shared seqlock over plain memory, without fences (which ThreadSanitizer cannot follow): each
// word is stored with release, so the odd sequence number is visible before it, and loaded with acquire,
// so the reader's second look at the sequence number comes after it. Both are plain moves on x86.
void store_words(Body& dst, const Body& src) noexcept {
    auto* d = reinterpret_cast<std::uint64_t*>(&dst);
    auto* s = reinterpret_cast<const std::uint64_t*>(&src);
    for (std::size_t i = 0; i < kWords; ++i)
        std::atomic_ref<std::uint64_t>(d[i]).store(s[i], std::memory_order_release);
}

void load_words(Body& dst, const Body& src) noexcept {
    auto* d = reinterpret_cast<std::uint64_t*>(&dst);
    auto* s = const_cast<std::uint64_t*>(reinterpret_cast<const std::uint64_t*>(&src));
    for (std::size_t i = 0; i < kWords; ++i)
        d[i] = std::atomic_ref<std::uint64_t>(s[i]).load(std::memory_order_acquire);
}

std::string text_field(const char (&f)[16]) { return std::string(f, strnlen(f, sizeof f)); }

}  // namespace

std::string stats_file_path(const pci::Bdf& bdf, const std::string& dir) {
    std::string d = dir;
    if (d.empty()) {
        const char* env = std::getenv("BARDRIVE_STATS_DIR");
        d = env && *env ? env : "/run/bardrive";
    }
    return d + "/nic-" + bdf.str() + ".stats";
}

StatsPublisher::StatsPublisher(const pci::Bdf& bdf, const std::string& driver, const std::string& dir)
    : path_(stats_file_path(bdf, dir)) {
    make_dir(path_.substr(0, path_.rfind('/')));
    // Written whole under a temporary name, then renamed: readers never see half a header.
    std::string tmp = log::concat(path_, ".tmp-", ::getpid());
    UniqueFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd)
        throw Error::from_errno("create statistics file", tmp, errno, "set BARDRIVE_STATS_DIR to a writable directory");
    StatsFileLayout init{};
    std::memcpy(init.magic, StatsFileLayout::magic_text, sizeof init.magic);
    init.version = stats_file_version;
    init.size = sizeof(StatsFileLayout);
    init.owner_pid = static_cast<std::uint64_t>(::getpid());
    init.owner_start = process_start(::getpid());
    copy_text(init.bdf, bdf.str());
    copy_text(init.driver, driver);
    if (::pwrite(fd.get(), &init, sizeof init, 0) != static_cast<ssize_t>(sizeof init)) {
        int err = errno;
        ::unlink(tmp.c_str());
        throw Error::from_errno("write statistics file", tmp, err);
    }
    void* p = ::mmap(nullptr, sizeof(StatsFileLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) {
        int err = errno;
        ::unlink(tmp.c_str());
        throw Error::from_errno("map statistics file", tmp, err);
    }
    if (::rename(tmp.c_str(), path_.c_str()) != 0) {
        int err = errno;
        ::munmap(p, sizeof(StatsFileLayout));
        ::unlink(tmp.c_str());
        throw Error::from_errno("publish statistics file", path_, err);
    }
    file_ = static_cast<StatsFileLayout*>(p);
}

StatsPublisher::~StatsPublisher() {
    if (!file_) return;
    ::munmap(file_, sizeof(StatsFileLayout));
    ::unlink(path_.c_str());
}

void StatsPublisher::publish(const StatsSnapshot& s) noexcept {
    Body b{};
    b.updated_unix_ns = now_unix_ns();
    b.publishes = ++publishes_;
    b.link_up = s.link_up;
    b.speed_mbps = s.speed_mbps;
    b.link_changes = s.link_changes;
    b.rx_queues = std::min(s.rx_queues, stats_max_queues);
    b.tx_queues = std::min(s.tx_queues, stats_max_queues);
    b.device = s.device;
    b.rx = s.rx;
    b.tx = s.tx;
    std::atomic_ref<std::uint64_t> seq(file_->seq);
    std::uint64_t v = seq.load(std::memory_order_relaxed);
    seq.store(v + 1, std::memory_order_relaxed);  // odd: readers retry
    store_words(file_->body, b);
    seq.store(v + 2, std::memory_order_release);
}

void StatsPublisher::publish(Port& port) noexcept {
    StatsSnapshot s;
    s.link_up = port.link_up();
    s.speed_mbps = port.link_speed_mbps();
    s.link_changes = port.link_changes();
    s.rx_queues = std::min<unsigned>(port.rx_queues(), stats_max_queues);
    s.tx_queues = std::min<unsigned>(port.tx_queues(), stats_max_queues);
    for (unsigned q = 0; q < s.rx_queues; ++q) s.rx[q] = port.rx_stats(static_cast<std::uint16_t>(q));
    for (unsigned q = 0; q < s.tx_queues; ++q) s.tx[q] = port.tx_stats(static_cast<std::uint16_t>(q));
    s.device = port.device_stats();
    publish(s);
}

PublishedStats read_published_stats(const std::string& path, bool allow_stale) {
    const char* fix_owner =
        "the program that owns the device publishes with nic::StatsPublisher; check that it runs "
        "and uses the same BARDRIVE_STATS_DIR";
    // Non-blocking: a FIFO put in its place would hold open() forever.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) {
        if (errno == ENOENT)
            throw Error("read NIC statistics", path, "nobody publishes statistics there (no such file)", fix_owner);
        throw Error::from_errno("read NIC statistics", path, errno);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw Error::from_errno("read NIC statistics", path, errno);
    auto bad = [&](const std::string& what, const std::string& fix) {
        return Error("read NIC statistics", path, what, fix);
    };
    const char* fix_remove = "remove the file; its owner recreates it when it starts";
    if (!S_ISREG(st.st_mode)) {
        throw bad(std::string("not a statistics file: it is ") + (S_ISDIR(st.st_mode)    ? "a directory"
                                                                  : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                                                         : "not a regular file"),
                  "remove it; the owner of the device publishes a regular file there when it starts");
    }
    if (static_cast<std::size_t>(st.st_size) < kHeaderBytes) {
        throw bad(log::concat("the file is truncated: ", st.st_size, " bytes, a header alone is ", kHeaderBytes),
                  fix_remove);
    }
    void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) throw Error::from_errno("map NIC statistics", path, errno);
    struct Unmap {
        void* p;
        std::size_t n;
        ~Unmap() { ::munmap(p, n); }
    } unmap{p, static_cast<std::size_t>(st.st_size)};
    const auto* f = static_cast<const StatsFileLayout*>(p);
    if (std::memcmp(f->magic, StatsFileLayout::magic_text, sizeof f->magic) != 0) {
        throw bad("not a bardrive NIC statistics file (wrong magic)", fix_remove);
    }
    if (f->version != stats_file_version) {
        throw bad(log::concat("file format version ", f->version, ", this bardrive reads version ", stats_file_version),
                  "read it with the bardrive build that the owning program links");
    }
    if (f->size != sizeof(StatsFileLayout) || static_cast<std::size_t>(st.st_size) < sizeof(StatsFileLayout)) {
        throw bad(log::concat("the file is truncated or malformed: ", st.st_size, " bytes, header says ", f->size,
                              ", version ", stats_file_version, " files are ", sizeof(StatsFileLayout)),
                  fix_remove);
    }
    if (f->owner_pid == 0 || f->owner_pid > 0x7fffffff || memchr(f->bdf, 0, sizeof f->bdf) == nullptr ||
        memchr(f->driver, 0, sizeof f->driver) == nullptr) {
        throw bad("malformed header (owner pid or names out of range)", fix_remove);
    }
    // The names reach terminals: printable ASCII only (an escape sequence in a crafted file would drive the
    // reader's terminal). A driver writes names like "igb" and "0000:01:00.0".
    for (const char* name : {f->bdf, f->driver})
        for (const char* c = name; *c != '\0'; ++c)
            if (*c < 0x20 || *c > 0x7e)
                throw bad(log::concat("malformed header: the ", name == f->bdf ? "address" : "driver name",
                                      " holds byte 0x", std::hex, static_cast<unsigned>(static_cast<unsigned char>(*c)),
                                      ", not printable ASCII"),
                          fix_remove);

    PublishedStats out;
    out.bdf = text_field(f->bdf);
    out.driver = text_field(f->driver);
    // A file named for one device (stats_file_path's nic-BDF.stats) holds that device's numbers: a copy under
    // another device's name was shown as that device's.
    const std::string base = path.substr(path.rfind('/') + 1);  // npos + 1 == 0: the whole path
    if (base.size() > 10 && base.rfind("nic-", 0) == 0 && base.compare(base.size() - 6, 6, ".stats") == 0) {
        const std::string named = base.substr(4, base.size() - 10);
        if (named != out.bdf)
            throw bad("the file is " + out.bdf + "'s, not " + named + "'s",
                      "remove it; the owner of " + named + " publishes its own when it runs");
    }
    out.owner_pid = static_cast<std::int64_t>(f->owner_pid);
    Body b{};
    bool consistent = false;
    auto& seq_word = const_cast<std::uint64_t&>(f->seq);
    for (int attempt = 0; attempt < 1000 && !consistent; ++attempt) {
        std::atomic_ref<std::uint64_t> seq(seq_word);
        std::uint64_t s1 = seq.load(std::memory_order_acquire);
        if (s1 % 2 == 0) {
            load_words(b, f->body);
            consistent = seq.load(std::memory_order_relaxed) == s1;
        }
        if (!consistent) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!consistent) {
        throw bad("the owner was writing on each of 1000 attempts (sequence number odd or changing)",
                  "try again; if it persists the owner died while writing: remove the file");
    }
    if (b.rx_queues > stats_max_queues || b.tx_queues > stats_max_queues) {
        throw bad(log::concat("malformed: ", b.rx_queues, " rx / ", b.tx_queues, " tx queues (at most ",
                              stats_max_queues, ")"),
                  fix_remove);
    }
    out.updated_unix_ns = b.updated_unix_ns;
    out.publishes = b.publishes;
    out.stats.link_up = b.link_up != 0;
    out.stats.speed_mbps = static_cast<unsigned>(b.speed_mbps);
    out.stats.link_changes = b.link_changes;
    out.stats.rx_queues = static_cast<unsigned>(b.rx_queues);
    out.stats.tx_queues = static_cast<unsigned>(b.tx_queues);
    out.stats.device = b.device;
    out.stats.rx = b.rx;
    out.stats.tx = b.tx;

    long pid = static_cast<long>(f->owner_pid);
    bool exists = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    std::uint64_t start = exists ? process_start(pid) : 0;
    out.owner_alive = exists && (f->owner_start == 0 || start == 0 || start == f->owner_start);
    if (!out.owner_alive && !allow_stale) {
        std::uint64_t now = now_unix_ns();
        long long ago = now > b.updated_unix_ns ? static_cast<long long>((now - b.updated_unix_ns) / 1000000000) : 0;
        throw bad(log::concat("stale: the owner, pid ", pid, exists ? ", is another process now" : ", is gone",
                              "; the numbers stopped ", ago, " s ago"),
                  "the program that owned the device ended without cleaning up: remove the file, or read the last "
                  "numbers with --stale");
    }
    return out;
}

}  // namespace bardrive::nic
