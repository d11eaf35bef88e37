// The bardrive CLI's subcommands. Each lives in its own file (cmd_<name>.cpp) and is listed once,
// in bardrive.cpp's table.
#pragma once

#include <string>
#include <vector>

namespace bardrive::tools {

using CommandArgs = std::vector<std::string>;  // arguments after the subcommand's name

struct Command {
    const char* name;
    const char* summary;
    int (*run)(const CommandArgs& args);  // returns the process exit code; may throw bardrive::Error
};

}  // namespace bardrive::tools
