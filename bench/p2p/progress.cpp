#include "bench/p2p/progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace bardrive::bench {

bool Progress::on_terminal() { return ::isatty(STDOUT_FILENO) && ::isatty(STDERR_FILENO); }

void Progress::step(const std::string& what) {
    ++done_;
    if (!enabled_) return;
    constexpr int width = 30;
    int total = std::max(total_, done_);
    int filled = width * done_ / total;
    std::fprintf(out_, "\r[%.*s%*s] %3d%% %-44.44s", filled, "##############################", width - filled, "",
                 100 * done_ / total, what.c_str());
    std::fflush(out_);
    drawn_ = true;
}

void Progress::finish() {
    if (!drawn_) return;
    std::fprintf(out_, "\r%*s\r", 84, "");
    std::fflush(out_);
    drawn_ = false;
}

}  // namespace bardrive::bench
