#include "bench/p2p/sweep.hpp"

#include <algorithm>
#include <charconv>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::bench {

bool SweepConfig::wants(std::string_view method) const {
    return methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
}

std::uint64_t parse_size(std::string_view text) {
    std::uint64_t v = 0;
    const char* b = text.data();
    const char* e = text.data() + text.size();
    auto [p, ec] = std::from_chars(b, e, v);
    const bool huge = ec == std::errc::result_out_of_range;  // digits past 2^64: too large, not "not a size"
    if ((ec != std::errc() && !huge) || p == b)
        throw Error("parse size", std::string(text), "not a size", "write a number with an optional K, M, G or T");
    int shift = 0;
    if (p != e) {
        switch (*p) {
            case 'K':
            case 'k':
                shift = 10;
                break;
            case 'M':
            case 'm':
                shift = 20;
                break;
            case 'G':
            case 'g':
                shift = 30;
                break;
            case 'T':
            case 't':
                shift = 40;
                break;
            default:
                shift = -1;
        }
        ++p;
        if (p != e && (*p == 'i' || *p == 'I')) ++p;  // "KiB" as well as "K"
        if (p != e && (*p == 'B' || *p == 'b')) ++p;
        if (shift < 0 || p != e)
            throw Error("parse size", std::string(text), "unknown suffix",
                        "use K, M, G or T (binary: 1K = 1024 bytes)");
    }
    if (huge || (shift && v > (UINT64_MAX >> shift)))
        throw Error("parse size", log::bounded(text), "more than 2^64 bytes", "give sizes such as 4K, 64M or 1G");
    v <<= shift;
    if (v < 16 || v % 16 != 0)
        throw Error("parse size", std::string(text), "sizes must be multiples of 16 bytes, at least 16",
                    "the copy kernels move 16-byte words");
    return v;
}

std::vector<std::uint64_t> parse_sizes(std::string_view text) {
    std::vector<std::uint64_t> out;
    if (auto dots = text.find(".."); dots != std::string_view::npos) {
        std::string_view rest = text.substr(dots + 2);
        std::uint64_t factor = 2;
        if (auto colon = rest.find(':'); colon != std::string_view::npos) {
            std::string_view f = rest.substr(colon + 1);
            auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), factor);
            if (ec != std::errc() || p != f.data() + f.size() || factor < 2)
                throw Error("parse sizes", std::string(text), "the step after ':' must be a whole factor of 2 or more");
            rest = rest.substr(0, colon);
        }
        std::uint64_t lo = parse_size(text.substr(0, dots)), hi = parse_size(rest);
        if (lo > hi) throw Error("parse sizes", std::string(text), "the range runs backwards", "write MIN..MAX");
        for (std::uint64_t s = lo; s <= hi; s *= factor) {
            out.push_back(s);
            if (s > hi / factor) break;
        }
        return out;
    }
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t comma = text.find(',', start);
        if (comma == std::string_view::npos) comma = text.size();
        out.push_back(parse_size(text.substr(start, comma - start)));
        start = comma + 1;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

double median(std::vector<double> s) {
    if (s.empty()) return 0;
    std::sort(s.begin(), s.end());
    std::size_t n = s.size();
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int batch_for(std::uint64_t bytes) {
    constexpr std::uint64_t target = 64ull << 20;
    constexpr int most = 1024;
    if (bytes >= target) return 1;
    return static_cast<int>(std::min<std::uint64_t>(most, (target + bytes - 1) / bytes));
}

}  // namespace bardrive::bench
