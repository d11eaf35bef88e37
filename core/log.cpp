#include "core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bardrive::log {

Level level() noexcept {
    static const Level lvl = [] {
        const char* env = std::getenv("BARDRIVE_LOG");
        if (env == nullptr) return Level::warn;
        if (std::strcmp(env, "debug") == 0) return Level::debug;
        if (std::strcmp(env, "info") == 0) return Level::info;
        return Level::warn;
    }();
    return lvl;
}

void write(Level lvl, std::string_view msg) noexcept {
    static constexpr const char* tags[] = {"warning", "info", "debug"};
    std::fprintf(stderr, "bardrive %s: %.*s\n", tags[static_cast<int>(lvl)], static_cast<int>(msg.size()), msg.data());
}

}  // namespace bardrive::log
