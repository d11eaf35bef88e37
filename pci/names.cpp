// Names through libpci, with the cache described in names.hpp.
// libpci's header has no extern "C" of its own.
extern "C" {
#include <pci/pci.h>
}

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "core/fd.hpp"
#include "core/log.hpp"
#include "pci/names.hpp"

namespace bardrive::pci {

namespace {

// Local pci.ids only: no DNS look-ups, no udev hwdb (its names come from another pci.ids, and differ
// for hundreds of devices), so a snapshot reads the same everywhere.
constexpr int lookup_flags = PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB;

constexpr const char* cache_name = "pci-names";
constexpr const char* cache_magic = "bardrive-pci-names 1";
constexpr std::size_t cache_max_bytes = std::size_t{1} << 20;
constexpr std::size_t cache_max_records = 4096;

// The IDs one device's names depend on. The subsystem is zero when it is not looked up.
struct Ids {
    std::uint16_t vendor = 0, device = 0, subsystem_vendor = 0, subsystem = 0, class_sub = 0;
    auto operator<=>(const Ids&) const = default;
};

Ids ids_of(const Device& d) {
    bool sub = d.subsystem_vendor_id != 0 && d.subsystem_vendor_id != 0xffff;
    return {d.vendor_id, d.device_id, sub ? d.subsystem_vendor_id : std::uint16_t{0},
            sub ? d.subsystem_id : std::uint16_t{0}, static_cast<std::uint16_t>(d.class_code >> 8)};
}

// libpci's answers for one Ids; nullopt where pci.ids has no name.
struct Names {
    std::optional<std::string> vendor, device, subsystem, class_name;
    bool operator==(const Names&) const = default;
};

void quiet_warning(char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log::debug("libpci: ", buf);
}

// One pci_access. pci.ids is parsed on the first lookup, not before.
class Libpci {
public:
    explicit Libpci(const std::string& ids_file) : acc_(pci_alloc()) {
        if (!acc_) return;
        acc_->warning = quiet_warning;
        acc_->debug = quiet_warning;
        if (!ids_file.empty()) pci_set_name_list_path(acc_, const_cast<char*>(ids_file.c_str()), 0);
    }
    ~Libpci() {
        if (acc_) pci_cleanup(acc_);
    }
    Libpci(const Libpci&) = delete;
    Libpci& operator=(const Libpci&) = delete;
    explicit operator bool() const { return acc_ != nullptr; }
    std::string ids_file() const { return acc_->id_file_name ? acc_->id_file_name : ""; }

    Names lookup(const Ids& k) {
        Names n;
        char buf[256];
        auto got = [](const char* s) { return s ? std::optional<std::string>(s) : std::nullopt; };
        n.vendor = got(pci_lookup_name(acc_, buf, sizeof buf, PCI_LOOKUP_VENDOR | lookup_flags, k.vendor));
        n.device = got(pci_lookup_name(acc_, buf, sizeof buf, PCI_LOOKUP_DEVICE | lookup_flags, k.vendor, k.device));
        if (k.subsystem_vendor != 0)
            n.subsystem =
                got(pci_lookup_name(acc_, buf, sizeof buf, PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_DEVICE | lookup_flags,
                                    k.vendor, k.device, k.subsystem_vendor, k.subsystem));
        n.class_name = got(pci_lookup_name(acc_, buf, sizeof buf, PCI_LOOKUP_CLASS | lookup_flags, k.class_sub));
        return n;
    }

private:
    pci_access* acc_;
};

bool printable(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return false;
    return true;
}

std::string stat_line(const struct stat& st) {
    char t[96];
    std::snprintf(t, sizeof t, "mtime %lld.%09ld ctime %lld.%09ld", static_cast<long long>(st.st_mtim.tv_sec),
                  st.st_mtim.tv_nsec, static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
    return log::concat("dev ", st.st_dev, " ino ", st.st_ino, " size ", st.st_size, " ", t);
}

// What the names depend on, as one line: the pci.ids libpci will read (it opens NAME, else NAME
// without ".gz") and the libpci that reads it. Empty when pci.ids cannot be opened: nothing to cache.
std::string identity(std::string ids) {
    UniqueFd fd(::open(ids.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd && ids.size() > 3 && ids.ends_with(".gz")) {
        ids.resize(ids.size() - 3);
        fd.reset(::open(ids.c_str(), O_RDONLY | O_CLOEXEC));
    }
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !printable(ids)) return {};
    std::string line = log::concat("pci.ids ", ids, " ", stat_line(st), " libpci ", std::hex, PCI_LIB_VERSION, std::dec,
                                   " flags ", lookup_flags);
    Dl_info lib{};
    struct stat lst {};
    if (::dladdr(reinterpret_cast<void*>(&pci_lookup_name), &lib) && lib.dli_fname && printable(lib.dli_fname) &&
        ::stat(lib.dli_fname, &lst) == 0)
        line += log::concat(" ", lib.dli_fname, " ", stat_line(lst));
    return line;
}

std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// The cache file:
//   bardrive-pci-names 1
//   identity LINE
//   vvvv dddd ssvv ssss cccc<TAB>vendor<TAB>device<TAB>subsystem<TAB>class    (a name is "=NAME", "" if none)
//   end RECORDS FNV1A64-OF-ALL-BYTES-BEFORE-THIS-LINE
std::string format_cache(const std::string& id, const std::map<Ids, Names>& records) {
    std::string out = log::concat(cache_magic, "\nidentity ", id, "\n");
    char key[32];
    for (const auto& [k, n] : records) {
        std::snprintf(key, sizeof key, "%04x %04x %04x %04x %04x", k.vendor, k.device, k.subsystem_vendor, k.subsystem,
                      k.class_sub);
        out += key;
        for (const auto* f : {&n.vendor, &n.device, &n.subsystem, &n.class_name}) out += *f ? "\t=" + **f : "\t";
        out += '\n';
    }
    char end[64];
    std::snprintf(end, sizeof end, "end %zu %016llx\n", records.size(), static_cast<unsigned long long>(fnv1a(out)));
    return out + end;
}

std::optional<std::uint16_t> hex4(std::string_view s) {
    if (s.size() != 4) return std::nullopt;
    unsigned v = 0;
    for (char c : s) {
        if (c >= '0' && c <= '9')
            v = v * 16 + static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + static_cast<unsigned>(c - 'a' + 10);
        else
            return std::nullopt;
    }
    return static_cast<std::uint16_t>(v);
}

// The records of a cache file that is exactly what format_cache() writes for `id`; nullopt otherwise.
std::optional<std::map<Ids, Names>> parse_cache(const std::string& text, const std::string& id) {
    if (text.empty() || text.back() != '\n') return std::nullopt;
    auto last = text.rfind('\n', text.size() - 2);
    if (last == std::string::npos) return std::nullopt;
    std::string_view body(text.data(), last + 1);
    char end[64];
    std::snprintf(end, sizeof end, "%016llx\n", static_cast<unsigned long long>(fnv1a(body)));
    std::string_view tail(text.data() + last + 1, text.size() - last - 1);
    const std::string expect_head = log::concat(cache_magic, "\nidentity ", id, "\n");
    if (!body.starts_with(expect_head) || !tail.ends_with(end)) return std::nullopt;  // stale, or bytes changed

    std::map<Ids, Names> records;
    std::size_t pos = expect_head.size();
    while (pos < body.size()) {
        auto nl = body.find('\n', pos);
        std::string_view line = body.substr(pos, nl - pos);
        pos = nl + 1;
        if (line.size() < 24 || line[4] != ' ' || line[9] != ' ' || line[14] != ' ' || line[19] != ' ')
            return std::nullopt;
        auto v = hex4(line.substr(0, 4)), d = hex4(line.substr(5, 4)), sv = hex4(line.substr(10, 4)),
             sd = hex4(line.substr(15, 4)), c = hex4(line.substr(20, 4));
        if (!v || !d || !sv || !sd || !c) return std::nullopt;
        Names n;
        std::string_view rest = line.substr(24);
        for (auto* f : {&n.vendor, &n.device, &n.subsystem, &n.class_name}) {
            if (rest.empty() || rest[0] != '\t') return std::nullopt;
            rest.remove_prefix(1);
            auto field = rest.substr(0, rest.find('\t'));
            rest.remove_prefix(field.size());
            if (field.empty()) continue;
            if (field.size() < 2 || field[0] != '=' || !printable(std::string(field))) return std::nullopt;
            *f = std::string(field.substr(1));
        }
        if (!rest.empty()) return std::nullopt;
        if (!records.emplace(Ids{*v, *d, *sv, *sd, *c}, std::move(n)).second) return std::nullopt;
    }
    if (tail != log::concat("end ", records.size(), " ", end)) return std::nullopt;
    return records;
}

// The cache folder, opened without following a link, when it is this user's and only this user's to
// write (a cache others can write could lie about names). With `create`, missing folders are made.
UniqueFd open_cache_dir(const std::string& dir, bool create) {
    if (create)
        for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
            std::string prefix = dir.substr(0, slash);
            if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
                log::debug("pci names: cannot create ", prefix, ": ", std::strerror(errno));
                return {};
            }
            if (slash == std::string::npos) break;
        }
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) {
        if (create) log::debug("pci names: cannot open ", dir, ": ", std::strerror(errno));
        return {};
    }
    if (st.st_uid != ::geteuid() || (st.st_mode & 022)) {
        log::debug("pci names: ", dir, " is not only this user's to write; cache not used");
        return {};
    }
    return fd;
}

// The records of the cache for `id`; empty when there is none or it is not to be trusted.
std::map<Ids, Names> load_cache(const std::string& dir, const std::string& id) {
    auto dfd = open_cache_dir(dir, false);
    if (!dfd) return {};
    UniqueFd fd(::openat(dfd.get(), cache_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) return {};
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) ||
        static_cast<std::size_t>(st.st_size) > cache_max_bytes) {
        log::debug("pci names: ", dir, "/", cache_name, " is not a file only this user writes; ignored");
        return {};
    }
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < text.size()) {
        ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    auto records = parse_cache(text, id);
    if (!records) {
        log::debug("pci names: ", dir, "/", cache_name, " is stale or damaged; asking libpci");
        return {};
    }
    return std::move(*records);
}

// Writes the cache whole under a temporary name and renames it into place, so a reader sees the old
// file or the new one. False when it cannot.
bool store_cache(const std::string& dir, const std::string& id, const std::map<Ids, Names>& records) {
    for (const auto& [k, n] : records)
        for (const auto* f : {&n.vendor, &n.device, &n.subsystem, &n.class_name})
            if (*f && (f->value().empty() || !printable(**f))) return false;  // not representable: no cache
    auto dfd = open_cache_dir(dir, true);
    if (!dfd) return false;
    const std::string text = format_cache(id, records);
    const std::string tmp = log::concat(cache_name, ".", ::getpid(), ".tmp");
    ::unlinkat(dfd.get(), tmp.c_str(), 0);  // left by a process of the same pid that died
    UniqueFd fd(::openat(dfd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
        log::debug("pci names: cannot write ", dir, "/", tmp, ": ", std::strerror(errno));
        return false;
    }
    std::size_t put = 0;
    while (put < text.size()) {
        ssize_t n = ::write(fd.get(), text.data() + put, text.size() - put);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        put += static_cast<std::size_t>(n);
    }
    bool ok = put == text.size() && ::close(fd.release()) == 0 &&
              ::renameat(dfd.get(), tmp.c_str(), dfd.get(), cache_name) == 0;
    if (!ok) {
        log::debug("pci names: cannot write ", dir, "/", cache_name, ": ", std::strerror(errno));
        ::unlinkat(dfd.get(), tmp.c_str(), 0);
    }
    return ok;
}

std::string hex_name(const char* what, unsigned id) {
    return log::concat(what, " ", std::hex, std::setfill('0'), std::setw(4), id);
}

}  // namespace

std::string default_name_cache_dir() {
    const bool root = ::geteuid() == 0;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') {
        // Under `sudo -E` XDG_CACHE_HOME is still the user's: root's files there would lock the user out
        // of their own cache, so root takes it only when root owns it.
        struct stat st {};
        if (!root || (::stat(x, &st) == 0 && st.st_uid == 0)) return log::concat(x, "/bardrive");
    }
    if (root) return "/var/cache/bardrive";
    if (const char* h = std::getenv("HOME"); h && h[0] == '/') return log::concat(h, "/.cache/bardrive");
    return {};
}

NameOptions default_name_options() {
    NameOptions o;
    const char* off = std::getenv("BARDRIVE_NO_NAME_CACHE");
    o.use_cache = !off || !off[0] || std::strcmp(off, "0") == 0;
    return o;
}

NameCache attach_names(Topology& topo, const NameOptions& options) {
    std::set<Ids> wanted;
    for (const auto& d : topo.devices) wanted.insert(ids_of(d));
    Libpci lib(options.ids_file);
    std::map<Ids, Names> names;
    NameCache result = NameCache::off;
    std::string dir, id;
    std::map<Ids, Names> cached;
    if (lib && options.use_cache && !wanted.empty()) {
        dir = options.cache_dir.empty() ? default_name_cache_dir() : options.cache_dir;
        id = identity(lib.ids_file());
        if (!dir.empty() && !id.empty()) cached = load_cache(dir, id);
    }
    std::vector<Ids> missing;
    for (const auto& k : wanted) {
        auto it = cached.find(k);
        if (it != cached.end())
            names.emplace(k, it->second);
        else
            missing.push_back(k);
    }
    if (!missing.empty() && lib) {
        for (const auto& k : missing) names.emplace(k, lib.lookup(k));
        if (!dir.empty() && !id.empty()) {
            auto records =
                cached.size() + missing.size() <= cache_max_records ? std::move(cached) : std::map<Ids, Names>{};
            for (const auto& k : missing) records.emplace(k, names.at(k));
            result = store_cache(dir, id, records) ? NameCache::written : NameCache::unwritable;
        }
    } else if (missing.empty() && !wanted.empty() && !cached.empty()) {
        result = NameCache::hit;
    }
    log::debug("pci names: ", wanted.size(), " ID sets, ", missing.size(), " asked of libpci, cache ",
               dir.empty() ? "(none)" : dir);

    for (auto& d : topo.devices) {
        auto it = names.find(ids_of(d));
        const Names none;
        const Names& n = it != names.end() ? it->second : none;
        // 0xffff is what a read of an absent function returns and what static topology files write for an
        // ID they do not know: unknown, not pci.ids' "Illegal Vendor ID".
        const bool no_vendor = d.vendor_id == 0xffff;
        d.vendor_name = no_vendor ? "vendor unknown" : n.vendor.value_or(hex_name("vendor", d.vendor_id));
        d.device_name =
            no_vendor && d.device_id == 0xffff ? "device unknown" : n.device.value_or(hex_name("device", d.device_id));
        d.subsystem_name = d.subsystem_vendor_id == 0xffff ? "" : n.subsystem.value_or("");
        d.class_name = n.class_name.value_or(hex_name("class", d.class_code >> 8));
    }
    return result;
}

void attach_names(Topology& topo) { attach_names(topo, default_name_options()); }

}  // namespace bardrive::pci
