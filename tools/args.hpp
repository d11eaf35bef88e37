// Args: the CLI's one argument reader. Flags are "--name" or "--name VALUE" / "--name=VALUE";
// everything else is positional. Each subcommand says which flags take a value.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::tools {

using log::bounded;

// Bad usage (an unknown option, a missing or malformed value, a wrong number of arguments): `bardrive`
// exits 2 for it, 1 for every other error, 0 on success (the one contract of every subcommand).
struct UsageError : Error {
    using Error::Error;
    explicit UsageError(const Error& e) : Error(e) {}
};

// A command-line value read by a parser that throws bardrive::Error (a BDF, a size): its refusal is bad usage.
template <class Parse>
auto usage_value(Parse&& parse) -> decltype(parse()) {
    try {
        return parse();
    } catch (const UsageError&) {
        throw;
    } catch (const Error& e) {
        throw UsageError(e);
    }
}

class Args {
public:
    // Throws UsageError for an unknown flag, a missing value or a value given to a switch, naming the subcommand.
    // "-h" is --help where the subcommand has one.
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
