#include "vfio/vf_token.hpp"

#include <cctype>

#include "core/error.hpp"

namespace bardrive::vfio {

VfToken VfToken::parse(std::string_view text) {
    VfToken t;
    bool ok = text.size() == 36;
    for (std::size_t i = 0, n = 0; ok && i < text.size(); ++i) {
        const char c = text[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            ok = c == '-';
            t.text_ += c;
            continue;
        }
        const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        ok = std::isxdigit(static_cast<unsigned char>(l)) != 0;
        const int v = l <= '9' ? l - '0' : l - 'a' + 10;
        t.bytes_[n / 2] = static_cast<std::uint8_t>(t.bytes_[n / 2] << 4 | v);
        ++n;
        t.text_ += l;
    }
    if (!ok)
        throw Error("read VF token", std::string(text), "not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                    "pass the UUID the PF's owner set (uuidgen makes one)");
    return t;
}

}  // namespace bardrive::vfio
