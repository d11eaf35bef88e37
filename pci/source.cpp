#include "pci/source.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/file.hpp"
#include "core/log.hpp"
#include "pci/nvml.hpp"

namespace bardrive::pci {

namespace {
constexpr const char* magic = "bardrive-topo-snapshot";
constexpr std::size_t hex_per_line = 32;  // bytes per hex line

bool plain_path(const std::string& p) { return !p.empty() && p.find_first_of(" \t\r\n") == std::string::npos; }

std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        auto nl = s.find('\n', start);
        out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
        if (nl == std::string::npos) break;
        start = nl + 1;
    }
    return out;
}
}  // namespace

// ---- live ----

LiveSource::LiveSource(std::string sysfs_root, std::string proc_root)
    : sysfs_root_(std::move(sysfs_root)), proc_root_(std::move(proc_root)) {}

std::string LiveSource::map(const std::string& path) const {
    if (path.rfind("/sys/", 0) == 0) return sysfs_root_ + path.substr(4);
    if (path.rfind("/proc/", 0) == 0) return proc_root_ + path.substr(5);
    return path;
}

std::optional<std::string> LiveSource::text(const std::string& path) {
    // NVLinks are no file: NVML answers them, and only for this machine, not for a copied /sys.
    if (path == nvlink_table_path)
        return sysfs_root_ == "/sys" ? std::optional<std::string>(read_nvml_nvlink_table()) : std::nullopt;
    return file::try_read_text(map(path));
}

// Reads only what is asked: sysfs "config" turns every dword asked for into a config cycle.
std::optional<std::vector<std::uint8_t>> LiveSource::bytes(const std::string& path, std::size_t offset,
                                                           std::size_t len) {
    if (path != open_path_ || !open_fd_) {
        open_path_.clear();
        // Non-blocking, and only a regular file: a FIFO in a copied sysfs folder would hold open() forever.
        open_fd_.reset(::open(map(path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
        struct stat st {};
        if (!open_fd_ || ::fstat(open_fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
            open_fd_.reset();
            return std::nullopt;
        }
        open_path_ = path;
    }
    std::vector<std::uint8_t> out(len);
    std::size_t got = 0;
    while (got < len) {
        ssize_t n = ::pread(open_fd_.get(), out.data() + got, len - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    out.resize(got);
    return out;
}

std::optional<std::string> LiveSource::link(const std::string& path) {
    char buf[4096];
    ssize_t n = ::readlink(map(path).c_str(), buf, sizeof buf - 1);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<std::size_t>(n));
}

std::optional<std::vector<std::string>> LiveSource::list(const std::string& dir) {
    DIR* d = ::opendir(map(dir).c_str());
    if (!d) return std::nullopt;
    std::vector<std::string> out;
    while (auto* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::string LiveSource::describe() const { return sysfs_root_; }

// ---- recording ----

std::optional<std::string> RecordingSource::text(const std::string& path) {
    auto v = inner_.text(path);
    data_.texts[path] = v;
    return v;
}
std::optional<std::vector<std::uint8_t>> RecordingSource::bytes(const std::string& path, std::size_t offset,
                                                                std::size_t len) {
    auto [it, first] = data_.blobs.try_emplace(path, std::vector<std::uint8_t>{});
    auto& rec = it->second;
    if (rec && !ended_.count(path) && rec->size() < offset + len) {
        std::size_t want = offset + len - rec->size();
        auto more = inner_.bytes(path, rec->size(), want);
        if (!more && first) rec.reset();
        if (more) rec->insert(rec->end(), more->begin(), more->end());
        if (!more || more->size() < want) ended_.insert(path);
    }
    if (!rec) return std::nullopt;
    if (offset >= rec->size()) return std::vector<std::uint8_t>{};
    auto end = rec->begin() + static_cast<std::ptrdiff_t>(std::min(rec->size(), offset + len));
    return std::vector<std::uint8_t>(rec->begin() + static_cast<std::ptrdiff_t>(offset), end);
}
std::optional<std::string> RecordingSource::link(const std::string& path) {
    auto v = inner_.link(path);
    data_.links[path] = v;
    return v;
}
std::optional<std::vector<std::string>> RecordingSource::list(const std::string& dir) {
    auto v = inner_.list(dir);
    data_.lists[dir] = v;
    return v;
}

// ---- replay ----

SnapshotSource::SnapshotSource(SnapshotData data, std::string name) : data_(std::move(data)), name_(std::move(name)) {}

std::optional<std::string> SnapshotSource::text(const std::string& path) {
    auto it = data_.texts.find(path);
    return it == data_.texts.end() ? std::nullopt : it->second;
}
std::optional<std::vector<std::uint8_t>> SnapshotSource::bytes(const std::string& path, std::size_t offset,
                                                               std::size_t len) {
    auto it = data_.blobs.find(path);
    if (it == data_.blobs.end() || !it->second) return std::nullopt;
    const auto& v = *it->second;
    if (offset >= v.size()) return std::vector<std::uint8_t>{};
    auto end = v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), offset + len));
    return std::vector<std::uint8_t>(v.begin() + static_cast<std::ptrdiff_t>(offset), end);
}
std::optional<std::string> SnapshotSource::link(const std::string& path) {
    auto it = data_.links.find(path);
    return it == data_.links.end() ? std::nullopt : it->second;
}
std::optional<std::vector<std::string>> SnapshotSource::list(const std::string& dir) {
    auto it = data_.lists.find(dir);
    return it == data_.lists.end() ? std::nullopt : it->second;
}

// ---- file format ----

void write_snapshot(const SnapshotData& data, const std::string& file) {
    std::ostringstream os;
    os << magic << ' ' << snapshot_version << '\n';
    for (const auto& c : data.comments) os << "# " << c << '\n';
    auto skip = [](const std::string& p) {
        if (plain_path(p)) return false;
        log::warn("snapshot: left out '", p, "' (white space in the path)");
        return true;
    };
    for (const auto& [p, v] : data.texts) {
        if (skip(p)) continue;
        if (!v) {
            os << "missing text " << p << '\n';
            continue;
        }
        auto lines = split_lines(*v);
        os << "text " << p << ' ' << lines.size() << '\n';
        for (const auto& l : lines) os << l << '\n';
    }
    for (const auto& [p, v] : data.blobs) {
        if (skip(p)) continue;
        if (!v) {
            os << "missing bytes " << p << '\n';
            continue;
        }
        os << "bytes " << p << ' ' << v->size() << '\n';
        static const char digits[] = "0123456789abcdef";
        for (std::size_t i = 0; i < v->size(); i += hex_per_line) {
            std::string line;
            for (std::size_t j = i; j < std::min(v->size(), i + hex_per_line); ++j) {
                line += digits[(*v)[j] >> 4];
                line += digits[(*v)[j] & 0xf];
            }
            os << line << '\n';
        }
    }
    for (const auto& [p, v] : data.links) {
        if (skip(p)) continue;
        if (!v || !plain_path(*v))
            os << "missing link " << p << '\n';
        else
            os << "link " << p << ' ' << *v << '\n';
    }
    for (const auto& [p, v] : data.lists) {
        if (skip(p)) continue;
        if (!v) {
            os << "missing list " << p << '\n';
            continue;
        }
        std::vector<std::string> names;
        for (const auto& n : *v)
            if (plain_path(n)) names.push_back(n);
        os << "list " << p << ' ' << names.size() << '\n';
        for (const auto& n : names) os << n << '\n';
    }
    os << "end\n";
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw Error::from_errno("create snapshot", file, errno, "check that the folder exists and is writable");
    out << os.str();
    out.close();
    if (!out) throw Error::from_errno("write snapshot", file, errno);
}

SnapshotData read_snapshot(const std::string& file) {
    auto bytes = file::read_bytes(file, std::size_t{256} << 20);
    return parse_snapshot(std::string(bytes.begin(), bytes.end()), file);
}

SnapshotData parse_snapshot(const std::string& content, const std::string& name) {
    auto lines = split_lines(content);
    std::size_t i = 0;
    auto fail = [&](std::size_t line, const std::string& what) -> Error {
        return Error("read snapshot", name, log::concat("line ", line, ": ", what),
                     "the file is not a complete bardrive topology snapshot; capture it again with "
                     "'bardrive topo snapshot FILE'");
    };
    {
        std::istringstream hdr(lines.empty() ? std::string() : lines[0]);
        std::string m;
        int version = 0;
        if (!(hdr >> m) || m != magic) throw fail(1, log::concat("does not start with '", magic, " N'"));
        if (!(hdr >> version)) throw fail(1, "format version missing");
        if (version != snapshot_version)
            throw Error("read snapshot", name,
                        log::concat("format version ", version, "; this bardrive reads version ", snapshot_version),
                        "capture the snapshot again with this bardrive, or read it with the bardrive that wrote it");
        i = 1;
    }
    SnapshotData d;
    auto parse_count = [&](const std::string& s, std::size_t line) {
        std::size_t n = 0;
        if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
            throw fail(line, "bad count '" + log::bounded(s) + "'");
        n = std::stoul(s);
        return n;
    };
    bool ended = false;
    while (i < lines.size()) {
        const std::size_t lineno = i + 1;
        const std::string& l = lines[i++];
        if (l.empty() || l[0] == '#') {
            if (!l.empty()) d.comments.push_back(l.size() > 2 ? l.substr(2) : std::string());
            continue;
        }
        std::istringstream ls(l);
        std::string kind, path, arg;
        ls >> kind >> path;
        if (kind == "end") {
            ended = true;
            break;
        }
        if (path.empty()) throw fail(lineno, "record '" + log::bounded(kind) + "' without a path");
        ls >> arg;
        if (kind == "missing") {
            if (path == "text")
                d.texts[arg] = std::nullopt;
            else if (path == "bytes")
                d.blobs[arg] = std::nullopt;
            else if (path == "link")
                d.links[arg] = std::nullopt;
            else if (path == "list")
                d.lists[arg] = std::nullopt;
            else
                throw fail(lineno, "unknown missing kind '" + log::bounded(path) + "'");
            if (arg.empty()) throw fail(lineno, "missing record without a path");
        } else if (kind == "link") {
            if (arg.empty()) throw fail(lineno, "link without a target");
            d.links[path] = arg;
        } else if (kind == "text" || kind == "list") {
            std::size_t n = parse_count(arg, lineno);
            if (n > lines.size() - i)
                throw fail(lineno, log::concat(kind, " record of ", n, " lines runs past the end"));
            std::vector<std::string> body(lines.begin() + static_cast<std::ptrdiff_t>(i),
                                          lines.begin() + static_cast<std::ptrdiff_t>(i + n));
            i += n;
            if (kind == "list") {
                d.lists[path] = std::move(body);
            } else {
                std::string t;
                for (std::size_t k = 0; k < body.size(); ++k) t += (k ? "\n" : "") + body[k];
                d.texts[path] = std::move(t);
            }
        } else if (kind == "bytes") {
            std::size_t n = parse_count(arg, lineno);
            std::vector<std::uint8_t> v;
            v.reserve(n);
            while (v.size() < n) {
                if (i >= lines.size())
                    throw fail(lineno, log::concat("bytes record of ", n, " bytes runs past the end"));
                const std::string& h = lines[i++];
                if (h.size() % 2 || h.empty() || h.size() / 2 > n - v.size())
                    throw fail(i, "hex line of the wrong length");
                for (std::size_t k = 0; k < h.size(); k += 2) {
                    auto nib = [&](char c) -> int {
                        if (c >= '0' && c <= '9') return c - '0';
                        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
                        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
                        throw fail(i, std::string("not a hex digit: '") + c + "'");
                    };
                    v.push_back(static_cast<std::uint8_t>(nib(h[k]) << 4 | nib(h[k + 1])));
                }
            }
            d.blobs[path] = std::move(v);
        } else {
            throw fail(lineno, "unknown record '" + log::bounded(kind) + "'");
        }
    }
    if (!ended) throw fail(lines.size(), "no 'end' line: the file is truncated");
    return d;
}

std::unique_ptr<Source> open_source(const std::string& dir_or_file) {
    struct stat st {};
    if (::stat(dir_or_file.c_str(), &st) != 0)
        throw Error::from_errno("open topology source", dir_or_file, errno,
                                "give a snapshot file written by 'bardrive topo snapshot' or a copied sysfs folder");
    if (S_ISDIR(st.st_mode)) return std::make_unique<LiveSource>(dir_or_file, dir_or_file + "/../proc");
    return std::make_unique<SnapshotSource>(read_snapshot(dir_or_file), dir_or_file);
}

}  // namespace bardrive::pci
