// A one-line progress bar on stderr for long sweeps; silent when stdout is not a terminal, so
// redirected output and --json stay clean.
#pragma once

#include <cstdio>
#include <string>

namespace bardrive::bench {

class Progress {
public:
    // enabled = false draws nothing; Progress(Progress::on_terminal()) is the usual choice.
    explicit Progress(bool enabled, std::FILE* out = stderr) : enabled_(enabled), out_(out) {}
    static bool on_terminal();  // stdout and stderr are both terminals
    ~Progress() { finish(); }
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void add_total(int steps) { total_ += steps; }
    void step(const std::string& what);  // one step done; `what` names the one now running
    void finish();                       // clears the line
    int done() const { return done_; }
    int total() const { return total_; }

private:
    bool enabled_;
    std::FILE* out_;
    int total_ = 0;
    int done_ = 0;
    bool drawn_ = false;
};

}  // namespace bardrive::bench
