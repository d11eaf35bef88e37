// Quiet by default; BARDRIVE_LOG=info or BARDRIVE_LOG=debug turns tracing on, to stderr.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace bardrive::log {

enum class Level { warn = 0, info = 1, debug = 2 };

Level level() noexcept;  // read once from BARDRIVE_LOG
void write(Level lvl, std::string_view msg) noexcept;

// Streams every argument into one line: log::debug("mapped ", size, " bytes at ", iova).
template <class... Args>
std::string concat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

template <class... Args>
void debug(Args&&... args) {
    if (level() >= Level::debug) write(Level::debug, concat(std::forward<Args>(args)...));
}

template <class... Args>
void info(Args&&... args) {
    if (level() >= Level::info) write(Level::info, concat(std::forward<Args>(args)...));
}

// Input echoed in a message: at most `max` characters of it (a 10 MB value from a file is not echoed whole).
inline std::string bounded(std::string_view s, std::size_t max = 64) {
    return s.size() <= max ? std::string(s) : std::string(s.substr(0, max)) + "...";
}

// Warnings always print: they tell the user something is off.
template <class... Args>
void warn(Args&&... args) {
    write(Level::warn, concat(std::forward<Args>(args)...));
}

}  // namespace bardrive::log
