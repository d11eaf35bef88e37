// Small, checked file helpers shared by the layers (sysfs attributes, config space, /proc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bardrive::file {

// Whole file as bytes; throws bardrive::Error naming the path on failure (a directory included). Never blocks
// in open(): a FIFO nobody writes reads as empty; a pipe with a writer is read until it closes.
std::vector<std::uint8_t> read_bytes(const std::string& path, std::size_t max_bytes = 1u << 20);

// Whole file as text with trailing whitespace removed; throws on failure.
std::string read_text(const std::string& path);

// Same, but std::nullopt when the file is missing, unreadable, or not a regular file (sysfs attributes
// that may not exist, or a copied sysfs folder holding a FIFO).
std::optional<std::string> try_read_text(const std::string& path);

// Writes text to a sysfs-style attribute; throws bardrive::Error with errno on failure.
void write_text(const std::string& path, const std::string& text);

}  // namespace bardrive::file
