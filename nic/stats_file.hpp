// Statistics a running driver publishes for other processes. VFIO lets one process own a device, so
// `bardrive nic stats BDF` cannot ask the device: the owner copies its queue and device counters into a
// small shared file, DIR/nic-<BDF>.stats (DIR: $BARDRIVE_STATS_DIR, else /run/bardrive), under a
// sequence lock, whenever it calls StatsPublisher::publish() (from its own loop, between bursts: the
// data path itself never pays). Readers map the file, copy it between two equal even sequence numbers,
// and check that the owner process still lives.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "../pci/bdf.hpp"
#include "port.hpp"
#include "stats.hpp"

namespace bardrive::nic {

inline constexpr std::uint32_t stats_file_version = 1;
inline constexpr unsigned stats_max_queues = 8;  // queues published per direction (a port with more: the first 8)

// One publication: what the owner knew at one moment.
struct StatsSnapshot {
    bool link_up = false;
    unsigned speed_mbps = 0;
    std::uint64_t link_changes = 0;  // up/down transitions the driver saw since init (poll_link)
    unsigned rx_queues = 0, tx_queues = 0;
    std::array<QueueStats, stats_max_queues> rx{}, tx{};
    DeviceStats device;
};

// The file as its owner publishes it: created whole under a temporary name and renamed into place,
// so a reader sees a complete header or no file. Every field is a 64-bit word (or fixed text), so a
// reader can copy it word by word while the owner writes.
struct StatsFileLayout {
    static constexpr char magic_text[8] = {'B', 'D', 'N', 'I', 'C', 'S', 'T', '1'};
    char magic[8];
    std::uint32_t version;
    std::uint32_t size;  // sizeof(StatsFileLayout) of the writer
    std::uint64_t owner_pid;
    std::uint64_t owner_start;  // the owner's start time (/proc/PID/stat field 22): a reused PID is not the owner
    char bdf[16];
    char driver[16];
    std::uint64_t seq;  // odd while the owner writes what follows
    struct Body {
        std::uint64_t updated_unix_ns;  // CLOCK_REALTIME of the last publish()
        std::uint64_t publishes;
        std::uint64_t link_up, speed_mbps, link_changes;
        std::uint64_t rx_queues, tx_queues;
        DeviceStats device;
        std::array<QueueStats, stats_max_queues> rx, tx;
    } body;
};
static_assert(sizeof(StatsFileLayout::Body) % 8 == 0 && sizeof(DeviceStats) % 8 == 0 && sizeof(QueueStats) % 8 == 0,
              "the body is copied as 64-bit words");

// Where the owner of `bdf` publishes: dir (when empty: $BARDRIVE_STATS_DIR, else /run/bardrive) + "/nic-BDF.stats".
std::string stats_file_path(const pci::Bdf& bdf, const std::string& dir = {});

// The owner's side. Construction creates the directory (if missing) and the file; destruction removes
// it. publish() never throws or allocates; one thread publishes.
class StatsPublisher {
public:
    // Throws bardrive::Error when the directory or file cannot be created (naming the path, and
    // BARDRIVE_STATS_DIR as the way out).
    StatsPublisher(const pci::Bdf& bdf, const std::string& driver, const std::string& dir = {});
    // For `port`: its device's BDF and its driver's name.
    explicit StatsPublisher(const Port& port, const std::string& dir = {})
        : StatsPublisher(port.device().bdf(), port.driver(), dir) {}
    ~StatsPublisher();
    StatsPublisher(const StatsPublisher&) = delete;
    StatsPublisher& operator=(const StatsPublisher&) = delete;

    void publish(const StatsSnapshot& s) noexcept;
    // Snapshot of a port (reads its clear-on-read device counters, so call it from the port's owner
    // thread, not beside another device_stats() reader), then publish.
    void publish(Port& port) noexcept;

    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
    StatsFileLayout* file_ = nullptr;
    std::uint64_t publishes_ = 0;
};

// The reader's side.
struct PublishedStats {
    std::string bdf, driver;
    std::int64_t owner_pid = 0;
    bool owner_alive = false;
    std::uint64_t updated_unix_ns = 0;
    std::uint64_t publishes = 0;
    StatsSnapshot stats;
};

// Reads `path`. Throws bardrive::Error saying what is wrong and what to do: no such file (nobody
// publishes that device), a file too short, not a stats file, another version, impossible queue
// counts, a copy that never came out consistent; and, unless allow_stale, an owner that is gone.
PublishedStats read_published_stats(const std::string& path, bool allow_stale = false);

}  // namespace bardrive::nic
