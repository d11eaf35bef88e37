// Args: the CLI's one argument reader. Flags are "--name" or "--name VALUE" / "--name=VALUE";
// everything else is positional. Each subcommand says which flags take a value.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace bardrive::tools {

class Args {
public:
    // Throws bardrive::Error for an unknown flag or a missing value, naming the subcommand.
    Args(const std::string& command, const std::vector<std::string>& argv, const std::set<std::string>& switches,
         const std::set<std::string>& valued);

    bool has(const std::string& flag) const { return flags_.count(flag) != 0; }
    std::optional<std::string> value(const std::string& flag) const;
    std::vector<std::string> values(const std::string& flag) const;  // a flag given several times
    const std::vector<std::string>& positional() const { return positional_; }

private:
    std::multimap<std::string, std::string> flags_;
    std::vector<std::string> positional_;
};

}  // namespace bardrive::tools
