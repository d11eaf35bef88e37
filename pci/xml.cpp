#include "pci/xml.hpp"

#include <libxml/parser.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bardrive::pci::xml {

namespace {

struct CtxtFree {
    void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};

// libxml2 keeps the last error; the first says what went wrong (a tag left open, not the end of file).
struct FirstError {
    int line = 0;
    std::string message;
};
template <class E>  // xmlError, const in libxml2 2.12 and later
void keep_first_error(void* ctxt, E* e) {
    auto* first = static_cast<FirstError*>(static_cast<xmlParserCtxt*>(ctxt)->_private);
    if (first && first->message.empty() && e && e->message && e->level >= XML_ERR_ERROR) {
        first->line = e->line;
        first->message = e->message;
    }
}

}  // namespace

std::string name_of(const xmlNode* n) { return reinterpret_cast<const char*>(n->name); }

Doc parse(const std::string& text, const std::string& name, const std::string& op, const std::string& hint) {
    if (text.size() > max_file_bytes)
        throw Error(op, name, log::concat("larger than ", max_file_bytes >> 20, " MiB"), hint);
    xmlInitParser();
    std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
    if (!ctxt) throw Error(op, name, "libxml2 could not allocate a parser");
    FirstError first;
    ctxt->_private = &first;
    ctxt->sax->serror = keep_first_error;  // called with ctxt->userData, the context itself
    // No network, no DTD loading, no entity expansion beyond libxml2's limits, and no printing to stderr.
    Doc doc(xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()), name.c_str(), nullptr,
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
    if (!doc) {
        if (first.message.empty())
            if (const xmlError* e = xmlCtxtGetLastError(ctxt.get()); e && e->message) {
                first.line = e->line;
                first.message = e->message;
            }
        std::string msg = first.message.empty() ? "not well-formed XML" : first.message;
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
        // libxml2 names its own flag as the fix; a user cannot set it, and a topology nests a few dozen deep.
        if (msg.find("XML_PARSE_HUGE") != std::string::npos)
            msg = "elements nest deeper than 256 levels (a machine's topology nests a few dozen)";
        throw Error(op, name, first.line > 0 ? log::concat("line ", first.line, ": ", msg) : msg, hint);
    }
    if (!xmlDocGetRootElement(doc.get())) throw Error(op, name, "no root element", hint);
    return doc;
}

}  // namespace bardrive::pci::xml
