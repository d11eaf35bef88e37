// Internal: untrusted XML parsed once with libxml2 (no network, no DTD or entity loading, bounded size), for the
// NCCL reader and the hwloc reader's check of a file before hwloc sees it. Not installed.
#pragma once

#include <libxml/tree.h>

#include <memory>
#include <string>

namespace bardrive::pci::xml {

inline constexpr std::size_t max_file_bytes = 16u << 20;  // a large machine's topology is about 100 KiB

struct DocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

// The document with a root element; throws bardrive::Error(op, name, "line N: what", hint) for text past
// max_file_bytes or that is not well-formed XML, in words a user can act on.
Doc parse(const std::string& text, const std::string& name, const std::string& op, const std::string& hint);

std::string name_of(const xmlNode* n);

}  // namespace bardrive::pci::xml
