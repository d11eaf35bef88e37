// Args: the CLI's one argument reader. Flags are "--name" or "--name VALUE" / "--name=VALUE";
// everything else is positional. Each subcommand says which flags take a value.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace bardrive::tools {

// Bad usage (an unknown option, a missing or malformed value, a wrong number of arguments): `bardrive`
// exits 2 for it, 1 for every other error, 0 on success (the one contract of every subcommand).
struct UsageError : Error {
    using Error::Error;
};

class Args {
public:
    // Throws UsageError for an unknown flag, a missing value or a value given to a switch, naming the subcommand.
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
