// Vendor, device, subsystem and class names from pci.ids through libpci, and a cache of them.
//
// libpci parses all of pci.ids (1.3 MB) before it answers the first name: on a small machine that was
// most of `bardrive topo`'s CPU time. So the names a machine asks for are kept in a cache file keyed
// by the identity of the pci.ids libpci reads (path, device, inode, size, mtime, ctime) and of libpci
// itself: an updated pci.ids or libpci makes the next run ask libpci again. libpci stays the source of
// every name; the cache only holds its answers, and a cache file that is not exactly what bardrive
// writes (truncated, corrupt, someone else's) is ignored and rewritten.
#pragma once

#include <string>

#include "topology.hpp"

namespace bardrive::pci {

struct NameOptions {
    std::string ids_file;   // the pci.ids for libpci to read; empty: libpci's own
    std::string cache_dir;  // empty: default_name_cache_dir()
    bool use_cache = true;
};

// What attach_names did with the cache.
enum class NameCache {
    off,         // not used: turned off, no cache folder, or pci.ids not readable
    hit,         // every name came from the cache; pci.ids was not parsed
    written,     // libpci answered and the cache was (re)written
    unwritable,  // libpci answered; the cache could not be written (said only with BARDRIVE_LOG=debug)
};

// Fills the names of every device: libpci's, or numeric ("vendor 1234") for IDs pci.ids lacks.
NameCache attach_names(Topology& topo, const NameOptions& options);

// The options attach_names(Topology&) uses: the cache unless BARDRIVE_NO_NAME_CACHE is set (and not 0).
NameOptions default_name_options();

// $XDG_CACHE_HOME/bardrive, else /var/cache/bardrive for root, else $HOME/.cache/bardrive; empty when
// none of these applies.
std::string default_name_cache_dir();

}  // namespace bardrive::pci
