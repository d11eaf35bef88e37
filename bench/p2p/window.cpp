#include "bench/p2p/window.hpp"

#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "bench/p2p/pattern.hpp"
#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/log.hpp"

namespace bardrive::bench {

WindowSpec parse_window(std::string_view text) {
    auto slash = text.rfind('/');
    const char* form = "write BDF/BAR, e.g. 0000:00:05.0/2 (the BAR index 0..5, 'bar2' also works)";
    if (slash == std::string_view::npos) throw Error("parse window", std::string(text), "no BAR index", form);
    auto bdf = pci::Bdf::try_parse(text.substr(0, slash));
    std::string_view bar = text.substr(slash + 1);
    if (bar.size() > 3 && (bar.substr(0, 3) == "bar" || bar.substr(0, 3) == "BAR")) bar.remove_prefix(3);
    int index = -1;
    auto [p, ec] = std::from_chars(bar.data(), bar.data() + bar.size(), index);
    if (!bdf || ec != std::errc() || p != bar.data() + bar.size() || index < 0 || index > 5)
        throw Error("parse window", std::string(text), "not a device BAR", form);
    return {*bdf, index};
}

BarMapping::BarMapping(const std::string& path, std::size_t bytes) : size_(bytes) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_SYNC));
    if (!fd) throw Error::from_errno("open", path, errno, errno == EACCES || errno == EPERM ? "run as root" : "");
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED)
        throw Error::from_errno("mmap", path, errno, "only memory BARs can be mapped; pick a memory BAR");
    data_ = static_cast<unsigned char*>(p);
}

BarMapping::~BarMapping() { ::munmap(data_, size_); }

namespace {

// Writes: plain stores; the fence drains the write-combining buffers before the clock stops.
void write_window(unsigned char* win, const unsigned char* src, std::size_t n) {
    std::memcpy(win, src, n);
    _mm_sfence();
}

// Reads through a WC mapping are uncached too, but SSE4.1 streaming loads fetch a whole 64-byte
// line per access from WC memory (Intel SDM vol. 1, 12.10.3), which is the fast way to read a BAR.
__attribute__((target("sse4.1"))) void stream_read(unsigned char* dst, const unsigned char* win, std::size_t n) {
    auto* s = reinterpret_cast<__m128i*>(const_cast<unsigned char*>(win));
    auto* d = reinterpret_cast<__m128i*>(dst);
    for (std::size_t i = 0; i < n / 16; i += 4) {
        __m128i a = _mm_stream_load_si128(s + i), b = _mm_stream_load_si128(s + i + 1);
        __m128i c = _mm_stream_load_si128(s + i + 2), e = _mm_stream_load_si128(s + i + 3);
        _mm_storeu_si128(d + i, a);
        _mm_storeu_si128(d + i + 1, b);
        _mm_storeu_si128(d + i + 2, c);
        _mm_storeu_si128(d + i + 3, e);
    }
}

void read_window(unsigned char* dst, const unsigned char* win, std::size_t n, bool streaming) {
    if (streaming && n % 64 == 0)
        stream_read(dst, win, n);
    else
        std::memcpy(dst, win, n);
}

void fill(std::vector<std::uint64_t>& v, std::size_t words, std::uint64_t seed) {
    for (std::size_t i = 0; i < words; ++i) v[i] = pattern(i, seed);
}

std::size_t wrong_words(const std::vector<std::uint64_t>& v, std::size_t words, std::uint64_t seed) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < words; ++i) bad += v[i] != pattern(i, seed);
    return bad;
}

}  // namespace

std::vector<PathResult> run_window_paths(const std::optional<WindowSpec>& window, const SweepConfig& cfg,
                                         Progress& progress, std::uint64_t max_bytes,
                                         const std::string& sysfs_devices) {
    std::vector<PathResult> rows;
    const bool want_wc = cfg.wants("mmio-wc"), want_uc = cfg.wants("mmio-uc");
    if (!want_wc && !want_uc) return rows;
    auto add = [&](const char* m, bool write) {
        rows.push_back(make_path(m, write ? "host" : "bar", write ? "bar" : "host", false));
    };
    for (bool write : {true, false}) {
        if (want_uc) add("mmio-uc", write);
        if (want_wc) add("mmio-wc", write);
    }
    if (!window) {
        for (auto& r : rows) r.reason = "no window given (--window BDF/BAR names a memory BAR the bench may overwrite)";
        return rows;
    }
    const std::string bdf = window->bdf.str();
    const std::string dir = sysfs_devices + "/" + bdf;
    const std::string uc_path = dir + "/resource" + std::to_string(window->bar);
    const std::string wc_path = uc_path + "_wc";

    std::error_code ec;
    auto driver = std::filesystem::read_symlink(dir + "/driver", ec);
    if (!ec && driver.filename() != "vfio-pci")
        throw Error("open window", bdf, "bound to the kernel driver " + driver.filename().string(),
                    "the bench overwrites the BAR: unbind it first (echo " + bdf + " > " + dir + "/driver/unbind)");
    struct stat st {};
    if (::stat(uc_path.c_str(), &st) != 0)
        throw Error::from_errno("stat", uc_path, errno,
                                "is the device there and does it have BAR " + std::to_string(window->bar) + "?");
    const std::uint64_t bar_bytes = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t cap = std::min(bar_bytes, max_bytes);
    std::vector<std::uint64_t> sizes;
    for (auto s : cfg.sizes)
        if (s <= cap) sizes.push_back(s);
    if (sizes.empty()) {
        for (auto& r : rows)
            r.reason = log::concat("every size in the sweep exceeds the window (", format_size(bar_bytes),
                                   " BAR, bench cap ", format_size(max_bytes), ")");
        return rows;
    }
    const std::uint64_t largest = sizes.back();

    BarMapping uc(uc_path, largest);
    std::optional<BarMapping> wc;
    std::string wc_reason;
    if (::access(wc_path.c_str(), F_OK) == 0)
        wc.emplace(wc_path, largest);
    else
        wc_reason =
            log::concat("BAR ", window->bar, " of ", bdf,
                        " is not prefetchable: the kernel offers no write-combining mapping (no ", wc_path, ")");
    const bool streaming = __builtin_cpu_supports("sse4.1");

    std::vector<std::uint64_t> host(largest / 8);
    auto* hb = reinterpret_cast<unsigned char*>(host.data());
    const std::string bar_name = log::concat(bdf, " BAR ", window->bar, " (", format_size(bar_bytes), ")");
    int runnable = 0;
    for (auto& r : rows) {
        r.dst_bdf = r.dst == "bar" ? bdf : "";
        r.src_bdf = r.src == "bar" ? bdf : "";
        if (r.method == "mmio-wc" && !wc) r.reason = wc_reason;
        runnable += r.available();
    }
    progress.add_total(runnable * static_cast<int>(sizes.size()));

    for (auto& r : rows) {
        if (!r.available()) continue;
        const bool write = r.dst == "bar";
        const bool is_wc = r.method == "mmio-wc";
        unsigned char* win = is_wc ? wc->data() : uc.data();
        r.topology = "CPU to " + bar_name;
        // The WC row's reference is the UC row just before it: same direction, same run.
        const PathResult* uc_row = nullptr;
        if (is_wc)
            for (const auto& o : rows)
                if (o.method == "mmio-uc" && o.src == r.src && o.available()) uc_row = &o;
        r.reference = uc_row ? "uncached mapping (resource" + std::to_string(window->bar) + ")" : "";
        fill(host, largest / 8, 1);
        for (std::uint64_t b : sizes) {
            progress.step(r.id + " " + format_size(b));
            const int batch = std::max(1, static_cast<int>(std::min<std::uint64_t>(1024, (4u << 20) / b)));
            auto once = [&] {
                auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < batch; ++i) {
                    if (write)
                        write_window(win, hb, b);
                    else
                        read_window(hb, win, b, is_wc && streaming);
                }
                return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            };
            for (int i = 0; i < cfg.warmup; ++i) once();
            std::vector<double> t;
            for (int i = 0; i < cfg.repetitions; ++i) t.push_back(once());
            double m = median(t);
            Point p;
            p.bytes = b;
            p.gbps = m > 0 ? static_cast<double>(b) * batch / m / 1e9 : 0;
            if (uc_row)
                for (const auto& q : uc_row->points)
                    if (q.bytes == b) p.ref_gbps = q.gbps;
            r.points.push_back(p);
        }
        if (cfg.latency && !write) {
            // One 4-byte uncached read is a full round trip to the device (a write would only post).
            std::vector<double> t;
            auto* w = reinterpret_cast<volatile std::uint32_t*>(win);
            std::uint32_t sink = 0;
            for (int i = 0; i < 1000; ++i) {
                auto t0 = std::chrono::steady_clock::now();
                sink += w[i % 64];
                t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
            }
            r.latency_us = median(t);
            r.latency_bytes = 4;
            (void)sink;
        }
        // Check: fresh bytes through this mapping, read back (or written) through the uncached one.
        const std::uint64_t seed = is_wc ? 11 : 13;
        if (write) {
            fill(host, largest / 8, seed);
            write_window(win, hb, largest);
            std::memset(hb, 0, largest);
            read_window(hb, uc.data(), largest, false);
        } else {
            fill(host, largest / 8, seed);
            write_window(uc.data(), hb, largest);
            std::memset(hb, 0, largest);
            read_window(hb, win, largest, is_wc && streaming);
        }
        if (std::size_t bad = wrong_words(host, largest / 8, seed))
            r.failure = log::concat(bad, " of ", largest / 8, " 64-bit words wrong after a ", format_size(largest),
                                    write ? " write to " : " read from ", bar_name,
                                    "; is memory decoding on (echo 1 > ", dir, "/enable)?");
    }
    return rows;
}

}  // namespace bardrive::bench
