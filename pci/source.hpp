// Where topology facts come from: the live /sys and /proc (or a copied tree), a snapshot file, or a
// recorder that remembers exactly what was read so it can be written out as a snapshot.
// Paths are always given in their live form ("/sys/bus/pci/devices", "/proc/cpuinfo"); "/nvml/nvlinks"
// is a pseudo file: the NVLink table the live machine's NVML gives (pci/nvml.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../core/fd.hpp"

namespace bardrive::pci {

class Source {
public:
    virtual ~Source() = default;
    // Each returns std::nullopt when the file is missing or unreadable; callers decide whether that matters.
    virtual std::optional<std::string> text(const std::string& path) = 0;  // trailing whitespace removed
    // Up to `len` bytes from `offset`: fewer at the file's end, none past it.
    virtual std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                           std::size_t len) = 0;
    virtual std::optional<std::string> link(const std::string& path) = 0;              // readlink target
    virtual std::optional<std::vector<std::string>> list(const std::string& dir) = 0;  // names, sorted
    virtual std::string describe() const = 0;  // for messages: "/sys", "snapshot FILE"
    // `path` for messages: the file actually read where that differs (a copied tree's own path).
    virtual std::string where(const std::string& path) const { return path; }
};

// The running system. `sysfs_root` replaces "/sys" (a copied tree), `proc_root` replaces "/proc".
// Only with the real "/sys" does it answer "/nvml/nvlinks" (through NVML); a copied tree has none.
class LiveSource final : public Source {
public:
    explicit LiveSource(std::string sysfs_root = "/sys", std::string proc_root = "/proc");
    std::optional<std::string> text(const std::string& path) override;
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                   std::size_t len) override;
    std::optional<std::string> link(const std::string& path) override;
    std::optional<std::vector<std::string>> list(const std::string& dir) override;
    std::string describe() const override;
    std::string where(const std::string& path) const override { return map(path); }

private:
    std::string map(const std::string& path) const;
    std::string sysfs_root_, proc_root_;
    // The file bytes() read last, kept open: config space is read a few dwords at a time.
    std::string open_path_;
    UniqueFd open_fd_;
};

// One recorded answer per (kind, path). A snapshot file is a list of these.
struct SnapshotData {
    std::map<std::string, std::optional<std::string>> texts, links;
    std::map<std::string, std::optional<std::vector<std::uint8_t>>> blobs;
    std::map<std::string, std::optional<std::vector<std::string>>> lists;
    std::vector<std::string> comments;  // "# ..." header lines: who captured it, when, where
};

// Snapshot file format, version 1 (docs/topology.md): a text file, first line
// "bardrive-topo-snapshot 1", then records "text|bytes|link|list|missing ..." and a final "end".
inline constexpr int snapshot_version = 1;
void write_snapshot(const SnapshotData& data, const std::string& file);
// Throws bardrive::Error naming the file and line for a malformed file or another format version.
SnapshotData read_snapshot(const std::string& file);
SnapshotData parse_snapshot(const std::string& content, const std::string& name);

// Replays a snapshot: answers exactly what was recorded; anything else reads as missing.
class SnapshotSource final : public Source {
public:
    SnapshotSource(SnapshotData data, std::string name);
    std::optional<std::string> text(const std::string& path) override;
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                   std::size_t len) override;
    std::optional<std::string> link(const std::string& path) override;
    std::optional<std::vector<std::string>> list(const std::string& dir) override;
    std::string describe() const override { return "snapshot " + name_; }

private:
    SnapshotData data_;
    std::string name_;
};

// Forwards to another source and records every answer, including failures. A snapshot holds a prefix
// of each binary file, so bytes() records everything up to the furthest byte asked for.
class RecordingSource final : public Source {
public:
    explicit RecordingSource(Source& inner) : inner_(inner) {}
    std::optional<std::string> text(const std::string& path) override;
    std::optional<std::vector<std::uint8_t>> bytes(const std::string& path, std::size_t offset,
                                                   std::size_t len) override;
    std::optional<std::string> link(const std::string& path) override;
    std::optional<std::vector<std::string>> list(const std::string& dir) override;
    std::string describe() const override { return inner_.describe(); }
    SnapshotData& recorded() { return data_; }

private:
    Source& inner_;
    SnapshotData data_;
    std::set<std::string> ended_;  // binary files whose end has been read
};

// `--sysfs DIR|FILE`: a directory is a copied /sys, a regular file a snapshot.
std::unique_ptr<Source> open_source(const std::string& dir_or_file);

}  // namespace bardrive::pci
