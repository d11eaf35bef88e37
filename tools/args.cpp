#include "tools/args.hpp"

#include "core/error.hpp"

namespace bardrive::tools {

Args::Args(const std::string& command, const std::vector<std::string>& argv, const std::set<std::string>& switches,
           const std::set<std::string>& valued) {
    for (std::size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a == "-h" && switches.count("help")) {
            flags_.emplace("help", "");
            continue;
        }
        if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
            positional_.push_back(a);
            continue;
        }
        std::string name = a.substr(2);
        std::optional<std::string> inline_value;
        if (auto eq = name.find('='); eq != std::string::npos) {
            inline_value = name.substr(eq + 1);
            name.resize(eq);
        }
        if (switches.count(name) && !inline_value) {
            flags_.emplace(name, "");
        } else if (valued.count(name)) {
            if (inline_value) {
                flags_.emplace(name, *inline_value);
            } else if (i + 1 < argv.size()) {
                flags_.emplace(name, argv[++i]);
            } else {
                throw UsageError("bardrive " + command, "--" + name, "needs a value",
                                 "see 'bardrive " + command + " --help'");
            }
        } else if (switches.count(name)) {
            throw UsageError("bardrive " + command, "--" + name + "=" + *inline_value, "--" + name + " takes no value",
                             "give it alone: --" + name);
        } else {
            throw UsageError("bardrive " + command, "--" + name, "unknown option",
                             "see 'bardrive " + command + " --help'");
        }
    }
}

std::optional<std::string> Args::value(const std::string& flag) const {
    auto it = flags_.find(flag);
    if (it == flags_.end()) return std::nullopt;
    return it->second;
}

std::vector<std::string> Args::values(const std::string& flag) const {
    std::vector<std::string> out;
    auto [b, e] = flags_.equal_range(flag);
    for (auto it = b; it != e; ++it) out.push_back(it->second);
    return out;
}

}  // namespace bardrive::tools
