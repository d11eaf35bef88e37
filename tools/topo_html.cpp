// The page itself is tools/topo_page.html, built into the binary by tools/embed_text.py (topo_page).
#include "tools/topo_html.hpp"

#include <string_view>

#include "core/error.hpp"

namespace bardrive::tools {

extern const std::string_view topo_page;  // generated topo_page.cpp

std::string topology_html(const std::string& json_text) {
    static constexpr std::string_view slot = "@TOPOLOGY_JSON@";
    auto at = topo_page.find(slot);
    if (at == std::string_view::npos)
        throw Error("bardrive topo --html", "tools/topo_page.html", "the page has no @TOPOLOGY_JSON@ slot",
                    "rebuild bardrive from an intact source tree");
    // In JSON '<' occurs only inside strings, where \u003c means the same: no name can end the script
    // element ("</script>") or open an HTML comment inside it ("<!--").
    std::string json;
    json.reserve(json_text.size());
    for (char c : json_text) {
        if (c == '<')
            json += "\\u003c";
        else
            json += c;
    }
    std::string page(topo_page.substr(0, at));
    page += json;
    page += topo_page.substr(at + slot.size());
    return page;
}

}  // namespace bardrive::tools
