// Names through the cache (pci/names.hpp) against libpci asked directly: over every fixture's IDs,
// after pci.ids changes, over damaged and hostile cache files, and with a cache folder that cannot be
// written. Each test uses its own pci.ids copy and cache folder under TMPDIR.
#include "pci/names.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file.hpp"
#include "pci/source.hpp"

using namespace bardrive;
using namespace bardrive::pci;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "bardrive-names-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()));
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// The system's pci.ids (Debian: pci.ids package; Fedora: hwdata); empty when there is none.
std::string system_ids() {
    for (const char* p : {"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"})
        if (fs::is_regular_file(p)) return p;
    return {};
}

void write_file(const fs::path& p, const std::string& text) {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(std::fwrite(text.data(), 1, text.size(), f) == text.size());
    REQUIRE(std::fclose(f) == 0);
}

std::string read_file(const fs::path& p) {
    auto b = file::read_bytes(p.string(), 64 << 20);
    return std::string(b.begin(), b.end());
}

Device device(std::uint16_t v, std::uint16_t d, std::uint16_t sv, std::uint16_t sd, std::uint32_t cls) {
    Device x;
    x.vendor_id = v;
    x.device_id = d;
    x.subsystem_vendor_id = sv;
    x.subsystem_id = sd;
    x.class_code = cls;
    return x;
}

// Every device's four names, in order.
std::vector<std::string> names_of(const Topology& t) {
    std::vector<std::string> out;
    for (const auto& d : t.devices) {
        out.push_back(d.vendor_name);
        out.push_back(d.device_name);
        out.push_back(d.subsystem_name);
        out.push_back(d.class_name);
    }
    return out;
}

// Names from libpci alone.
std::vector<std::string> libpci_names(Topology t, const std::string& ids) {
    REQUIRE(attach_names(t, {ids, "", false}) == NameCache::off);
    return names_of(t);
}

// A small pci.ids: what is unknown to it is known.
const std::string small_ids =
    "# test pci.ids\n"
    "1234  Test Vendor\n"
    "\t5678  Test Device\n"
    "\t\t1234 0001  Test Subsystem\n"
    "\t5679  Other Device\n"
    "C 02  Network controller\n"
    "\t00  Ethernet controller\n"
    "C 03  Display controller\n";

Topology small_topology() {
    Topology t;
    t.devices.push_back(device(0x1234, 0x5678, 0x1234, 0x0001, 0x020000));  // all known
    t.devices.push_back(device(0x1234, 0x5678, 0x1234, 0x0002, 0x030200));  // unknown subsystem, class 03 only
    t.devices.push_back(device(0x1234, 0x7777, 0x0000, 0x0000, 0x7a0000));  // unknown device and class
    t.devices.push_back(device(0xabcd, 0x0001, 0xffff, 0xffff, 0x020000));  // unknown vendor
    return t;
}

// Runs f with stderr sent to a file; returns what was written there.
template <class F>
std::string stderr_of(F&& f) {
    std::fflush(stderr);
    TempDir tmp;
    auto path = tmp.path / "stderr";
    int saved = ::dup(2);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
    f();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    return read_file(path);
}

std::uint64_t fnv1a(const std::string& s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// A cache file's text with its end line made right again for the records above it: what a
// well-formed but hand-made file looks like.
std::string reseal(const std::string& text) {
    auto last = text.rfind('\n', text.size() - 2);
    std::string body = text.substr(0, last + 1);
    std::size_t records = 0;
    for (std::size_t p = body.find('\n', body.find('\n') + 1) + 1; p < body.size(); p = body.find('\n', p) + 1)
        ++records;
    char end[64];
    std::snprintf(end, sizeof end, "end %zu %016llx\n", records, static_cast<unsigned long long>(fnv1a(body)));
    return body + end;
}

}  // namespace

TEST_CASE("names through the cache equal libpci's for every fixture's IDs", "[pci][names]") {
    if (system_ids().empty()) SKIP("no pci.ids on this machine (Debian: apt-get install pci.ids)");
    TempDir cache;
    std::size_t checked = 0;
    for (const auto& e : fs::directory_iterator(PCI_FIXTURES)) {
        if (e.path().extension() != ".snapshot") continue;
        INFO(e.path().string());
        auto src = open_source(e.path().string());
        auto t = read_topology(*src);
        auto direct = libpci_names(t, "");
        auto first = t;
        auto r = attach_names(first, {"", cache.path.string(), true});
        CHECK((r == NameCache::written || r == NameCache::hit));  // an earlier fixture may share every ID
        CHECK(names_of(first) == direct);
        auto second = t;
        CHECK(attach_names(second, {"", cache.path.string(), true}) == NameCache::hit);
        CHECK(names_of(second) == direct);
        checked += t.devices.size();
    }
    CHECK(checked > 40);
    // The names libpci gives the dual-socket fixture's GPU, as lspci prints them.
    auto t = read_topology(*open_source(PCI_FIXTURES "/dual-socket.snapshot"));
    REQUIRE(attach_names(t, {"", cache.path.string(), true}) == NameCache::hit);
    const auto& gpu = t.devices[*t.find(Bdf::parse("1a:00.0"))];
    CHECK(gpu.vendor_name == "NVIDIA Corporation");
    CHECK(gpu.class_name == "3D controller");
}

TEST_CASE("IDs pci.ids lacks stay numeric, through the cache too", "[pci][names]") {
    TempDir tmp;
    auto ids = tmp.path / "pci.ids";
    write_file(ids, small_ids);
    auto direct = libpci_names(small_topology(), ids.string());
    CHECK(direct == std::vector<std::string>{"Test Vendor", "Test Device", "Test Subsystem", "Ethernet controller",  //
                                             "Test Vendor", "Test Device", "", "Display controller [0302]",          //
                                             "Test Vendor", "device 7777", "", "class 7a00",                         //
                                             "vendor abcd", "device 0001", "", "Ethernet controller"});              //
    for (auto expect : {NameCache::written, NameCache::hit}) {
        auto t = small_topology();
        CHECK(attach_names(t, {ids.string(), (tmp.path / "cache").string(), true}) == expect);
        CHECK(names_of(t) == direct);
    }
}

TEST_CASE("a changed pci.ids makes the cache ask libpci again", "[pci][names]") {
    if (system_ids().empty()) SKIP("no pci.ids on this machine (Debian: apt-get install pci.ids)");
    TempDir tmp;
    auto ids = tmp.path / "pci.ids";
    std::string text = read_file(system_ids());
    write_file(ids, text);
    NameOptions opt{ids.string(), (tmp.path / "cache").string(), true};
    auto topo = read_topology(*open_source(PCI_FIXTURES "/dual-socket.snapshot"));
    auto t = topo;
    REQUIRE(attach_names(t, opt) == NameCache::written);
    t = topo;
    REQUIRE(attach_names(t, opt) == NameCache::hit);
    const auto gpu = *t.find(Bdf::parse("1a:00.0"));
    REQUIRE(t.devices[gpu].vendor_name == "NVIDIA Corporation");

    // A longer name: size and mtime change.
    auto at = text.find("10de  NVIDIA Corporation\n");
    REQUIRE(at != std::string::npos);
    text.replace(at, 25, "10de  NVIDIA Corporation, edited\n");
    write_file(ids, text);
    t = topo;
    CHECK(attach_names(t, opt) == NameCache::written);
    CHECK(t.devices[gpu].vendor_name == "NVIDIA Corporation, edited");
    CHECK(names_of(t) == libpci_names(topo, ids.string()));

    // Same size, mtime put back: the ctime still tells.
    struct stat before {};
    REQUIRE(::stat(ids.c_str(), &before) == 0);
    text.replace(text.find("NVIDIA Corporation, edited"), 26, "NVIDIA Corporation, EDITED");
    write_file(ids, text);
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, ids.c_str(), times, 0) == 0);
    t = topo;
    CHECK(attach_names(t, opt) == NameCache::written);
    CHECK(t.devices[gpu].vendor_name == "NVIDIA Corporation, EDITED");
}

TEST_CASE("a damaged or hostile cache file is not believed, and is rewritten", "[pci][names][bad-input]") {
    TempDir tmp;
    auto ids = tmp.path / "pci.ids";
    write_file(ids, small_ids);
    auto dir = tmp.path / "cache";
    auto file = dir / "pci-names";
    NameOptions opt{ids.string(), dir.string(), true};
    const auto direct = libpci_names(small_topology(), ids.string());
    auto t = small_topology();
    REQUIRE(attach_names(t, opt) == NameCache::written);
    const std::string good = read_file(file);
    REQUIRE(good.find("\t=Test Vendor\t") != std::string::npos);

    const std::string records = good.substr(0, good.rfind("end "));  // header and record lines
    const auto line3 = good.find('\n', good.find('\n') + 1) + 1;
    const std::string first_record = good.substr(line3, good.find('\n', line3) + 1 - line3);
    std::string padding;  // valid records, 20000 of them: 1.2 MB
    for (unsigned i = 0; i < 20000; ++i) {
        char line[96];
        std::snprintf(line, sizeof line, "%04x %04x 0000 0000 0200\t=A vendor name long enough to add up\t\t\t\n",
                      0x2000 + i / 100, i % 100);
        padding += line;
    }
    auto lie = good;  // a well-formed file whose names lie, made as bardrive would make it
    lie.replace(lie.find("=Test Vendor\t"), 12, "=Evil Vendor");
    struct Case {
        const char* what;
        std::string text;
    };
    std::vector<Case> cases = {
        {"empty", ""},
        {"truncated", good.substr(0, good.size() / 2)},
        {"no end line", good.substr(0, good.rfind("end "))},
        {"a name changed, end line not", lie},
        {"garbage", std::string(5000, '\x7f')},
        {"another format version", reseal("bardrive-pci-names 2" + good.substr(good.find('\n')))},
        {"another pci.ids", reseal(std::string(good).replace(good.find("pci.ids "), 8, "pci.ids /elsewhere"))},
        {"a control character in a name",
         reseal(std::string(good).replace(good.find("=Test Device"), 12, "=Test \x1b[2JDevice"))},
        {"a record twice", reseal(records + first_record + "end\n")},
        {"a record without its fields", reseal(records + "1234 5678 0000 0000 0200\nend\n")},
        {"an upper-case ID", reseal(records + "ABCD 5678 0000 0000 0200\t\t\t\t\nend\n")},
        {"a count that lies", std::string(good).replace(good.rfind("end ") + 4, 1, "9")},
        {"well-formed but over a megabyte", reseal(records + padding + "end\n")},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        write_file(file, c.text);
        ::chmod(file.c_str(), 0600);
        t = small_topology();
        CHECK(attach_names(t, opt) == NameCache::written);
        CHECK(names_of(t) == direct);
        CHECK(read_file(file) == good);
    }

    // The well-formed liar is believed only when bardrive could have written it: this shows the
    // checks above are what rejected the others.
    write_file(file, reseal(lie));
    t = small_topology();
    CHECK(attach_names(t, opt) == NameCache::hit);
    CHECK(t.devices[0].vendor_name == "Evil Vendor");

    // Not only this user's to write: ignored.
    write_file(file, reseal(lie));
    ::chmod(file.c_str(), 0666);
    t = small_topology();
    CHECK(attach_names(t, opt) == NameCache::written);
    CHECK(names_of(t) == direct);
    if (::geteuid() == 0) {
        write_file(file, reseal(lie));
        REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
        t = small_topology();
        CHECK(attach_names(t, opt) == NameCache::written);
        CHECK(names_of(t) == direct);
    }
    // A link in its place: not followed.
    auto elsewhere = tmp.path / "elsewhere";
    write_file(elsewhere, reseal(lie));
    fs::remove(file);
    fs::create_symlink(elsewhere, file);
    t = small_topology();
    CHECK(attach_names(t, opt) == NameCache::written);
    CHECK(names_of(t) == direct);
    CHECK_FALSE(fs::is_symlink(file));
    CHECK(read_file(elsewhere) == reseal(lie));  // untouched
}

TEST_CASE("a cache folder that cannot be used: libpci's names, no cache, nothing printed", "[pci][names][bad-input]") {
    TempDir tmp;
    auto ids = tmp.path / "pci.ids";
    write_file(ids, small_ids);
    const auto direct = libpci_names(small_topology(), ids.string());
    auto blocker = tmp.path / "a-file";
    write_file(blocker, "not a folder\n");
    std::vector<fs::path> dirs = {blocker / "cache"};
    auto open_to_all = tmp.path / "open-to-all";
    fs::create_directory(open_to_all);
    ::chmod(open_to_all.c_str(), 0777);
    dirs.push_back(open_to_all);
    if (::geteuid() == 0) {  // root writes anywhere; a folder someone else owns is refused instead
        auto theirs = tmp.path / "theirs";
        fs::create_directory(theirs);
        REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
        dirs.push_back(theirs);
    } else {
        auto read_only = tmp.path / "read-only";
        fs::create_directory(read_only);
        ::chmod(read_only.c_str(), 0500);
        dirs.push_back(read_only);
    }
    for (const auto& dir : dirs) {
        INFO(dir.string());
        for (int run = 0; run < 2; ++run) {
            auto t = small_topology();
            NameCache r{};
            CHECK(stderr_of([&] { r = attach_names(t, {ids.string(), dir.string(), true}); }).empty());
            CHECK(r == NameCache::unwritable);
            CHECK(names_of(t) == direct);
        }
        CHECK_FALSE(fs::exists(dir / "pci-names"));
    }
}

TEST_CASE("where the cache lives, and BARDRIVE_NO_NAME_CACHE", "[pci][names]") {
    auto keep = [](const char* name) {
        const char* v = std::getenv(name);
        return std::pair<std::string, bool>(v ? v : "", v != nullptr);
    };
    auto restore = [](const char* name, const std::pair<std::string, bool>& v) {
        if (v.second)
            ::setenv(name, v.first.c_str(), 1);
        else
            ::unsetenv(name);
    };
    auto xdg = keep("XDG_CACHE_HOME"), home = keep("HOME"), off = keep("BARDRIVE_NO_NAME_CACHE");

    ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
    // Root takes XDG_CACHE_HOME only when root owns it (sudo -E keeps the user's).
    CHECK(default_name_cache_dir() == (::geteuid() == 0 ? "/var/cache/bardrive" : "/x/cache/bardrive"));
    if (::geteuid() == 0) {
        ::setenv("XDG_CACHE_HOME", "/root", 1);
        CHECK(default_name_cache_dir() == "/root/bardrive");
        ::setenv("XDG_CACHE_HOME", "/tmp", 1);  // root-owned too
        CHECK(default_name_cache_dir() == "/tmp/bardrive");
        char users[] = "/tmp/bardrive-xdg-XXXXXX";  // a user's cache folder, as sudo -E passes it
        REQUIRE(::mkdtemp(users) != nullptr);
        REQUIRE(::chown(users, 65534, 65534) == 0);
        ::setenv("XDG_CACHE_HOME", users, 1);
        CHECK(default_name_cache_dir() == "/var/cache/bardrive");
        ::rmdir(users);
    }
    ::setenv("XDG_CACHE_HOME", "relative", 1);  // the XDG spec says to ignore a relative path
    ::setenv("HOME", "/home/someone", 1);
    CHECK(default_name_cache_dir() == (::geteuid() == 0 ? "/var/cache/bardrive" : "/home/someone/.cache/bardrive"));
    ::unsetenv("XDG_CACHE_HOME");
    CHECK(default_name_cache_dir() == (::geteuid() == 0 ? "/var/cache/bardrive" : "/home/someone/.cache/bardrive"));

    ::unsetenv("BARDRIVE_NO_NAME_CACHE");
    CHECK(default_name_options().use_cache);
    ::setenv("BARDRIVE_NO_NAME_CACHE", "0", 1);
    CHECK(default_name_options().use_cache);
    ::setenv("BARDRIVE_NO_NAME_CACHE", "1", 1);
    CHECK_FALSE(default_name_options().use_cache);

    restore("XDG_CACHE_HOME", xdg);
    restore("HOME", home);
    restore("BARDRIVE_NO_NAME_CACHE", off);
}
