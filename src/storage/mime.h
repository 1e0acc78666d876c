// MIME type of an exported file, from its content (libmagic) and its name (DESIGN.md §4).
#pragma once

#include <cstddef>
#include <string>

namespace sandrun::storage {

// libmagic's MAGIC_MIME_TYPE answer for the buffer, or "" when libmagic is unavailable.
// Thread-safe: each thread uses its own magic_t. Not safe after fork.
std::string MimeForContent(const void* head, size_t size);

// Combines both: content decides, except where libmagic can only give a generic or container
// answer for a type the name makes precise (CSV is "text/plain", XLSX is "application/zip").
std::string CombineMime(const std::string& content_mime, const std::string& name);

// MimeForContent + CombineMime. `head` is the first bytes of the file (64 KiB is plenty).
std::string GuessMime(const void* head, size_t size, const std::string& name);

}  // namespace sandrun::storage
