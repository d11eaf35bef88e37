// What the examples share: a tiny "--name value" reader and lab defaults for device addresses.
#pragma once

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "pci/bdf.hpp"

namespace bardrive::examples {

// "--name value" pairs and "--flag" switches (a flag followed by another flag or nothing).
class Options {
public:
    Options(int argc, char** argv, const char* usage) : usage_(usage) {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "-h" || a == "--help") throw Error("usage", "", usage_);
            if (a.rfind("--", 0) != 0) throw Error("parse arguments", a, "expected --name [value]", usage_);
            bool has_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
            values_[a.substr(2)] = has_value ? argv[++i] : "";
        }
    }
    bool has(const std::string& k) const { return values_.count(k) != 0; }
    std::string str(const std::string& k, const std::string& fallback) const {
        auto it = values_.find(k);
        return it == values_.end() ? fallback : it->second;
    }
    unsigned long num(const std::string& k, unsigned long fallback) const {
        auto it = values_.find(k);
        if (it == values_.end()) return fallback;
        char* end = nullptr;
        unsigned long v = std::strtoul(it->second.c_str(), &end, 0);
        if (it->second.empty() || *end)
            throw Error("parse arguments", "--" + k, "not a number: '" + it->second + "'", usage_);
        return v;
    }
    // A device address: --k BDF, else the n-th word of the lab variable `lab_var`, else an error.
    pci::Bdf bdf(const std::string& k, const char* lab_var, std::size_t n) const {
        if (has(k)) return pci::Bdf::parse(str(k, ""));
        std::istringstream words(std::getenv(lab_var) ? std::getenv(lab_var) : "");
        std::vector<std::string> w;
        for (std::string s; words >> s;) w.push_back(s);
        if (n < w.size()) return pci::Bdf::parse(w[n]);
        throw Error("pick device", "--" + k, "not given and not in a lab guest", usage_);
    }

private:
    std::string usage_;
    std::map<std::string, std::string> values_;
};

}  // namespace bardrive::examples
