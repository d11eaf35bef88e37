#include "core/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/error.hpp"
#include "core/fd.hpp"

namespace bardrive::file {

namespace {

// Up to max_bytes of a file; on failure, nullopt with the operation in `op` and errno set. Opening never
// blocks (a FIFO nobody writes would hold open() forever): a directory is EISDIR; with regular_only anything
// but a regular file is EINVAL (sysfs attributes are regular files), else a pipe is read as it comes (a FIFO
// with no writer reads as empty at once).
std::optional<std::vector<std::uint8_t>> read_up_to(const std::string& path, std::size_t max_bytes, const char*& op,
                                                    bool regular_only) {
    op = "open";
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) return std::nullopt;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return std::nullopt;
    if (S_ISDIR(st.st_mode) || (regular_only && !S_ISREG(st.st_mode))) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return std::nullopt;
    }
    if (!S_ISREG(st.st_mode))
        ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);  // a pipe: wait for data
    op = "read";
    std::vector<std::uint8_t> out;
    std::uint8_t buf[4096];
    while (out.size() < max_bytes) {
        // Never ask for more than is wanted: sysfs config reads beyond it trap to the device (slow).
        ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, max_bytes - out.size()));
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::nullopt;
        }
        if (n == 0) break;
        out.insert(out.end(), buf, buf + n);
    }
    return out;
}

std::string trimmed(const std::vector<std::uint8_t>& bytes) {
    std::string s(bytes.begin(), bytes.end());
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\0')) s.pop_back();
    return s;
}

}  // namespace

std::vector<std::uint8_t> read_bytes(const std::string& path, std::size_t max_bytes) {
    const char* op = nullptr;
    auto out = read_up_to(path, max_bytes, op, false);
    if (!out) throw Error::from_errno(op, path, errno);
    return std::move(*out);
}

std::string read_text(const std::string& path) { return trimmed(read_bytes(path)); }

// Without exceptions: sysfs has many optional attributes, and a throw costs more than the read.
std::optional<std::string> try_read_text(const std::string& path) {
    const char* op = nullptr;
    auto bytes = read_up_to(path, 1u << 20, op, true);
    if (!bytes) return std::nullopt;
    return trimmed(*bytes);
}

void write_text(const std::string& path, const std::string& text) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) throw Error::from_errno("open for writing", path, errno);
    ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0) throw Error::from_errno("write '" + text + "' to", path, errno);
    if (static_cast<std::size_t>(n) != text.size()) throw Error("write", path, "short write");
}

}  // namespace bardrive::file
