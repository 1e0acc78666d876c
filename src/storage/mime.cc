#include "storage/mime.h"

#include <magic.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string_view>

namespace sandrun::storage {
namespace {

// How a name's type relates to what libmagic can tell from the bytes.
enum class Kind {
  kText,    // a text format libmagic mostly calls text/plain (or a vaguer text/* guess)
  kZip,     // a ZIP container libmagic may call application/zip
  kBinary,  // a binary format libmagic usually knows; the name only fills in its blanks
};

struct ExtensionType {
  std::string_view ext;
  std::string_view mime;
  Kind kind;
};

// Registered types (IANA media types) for what generated code usually writes.
constexpr ExtensionType kExtensionTypes[] = {
    {"csv", "text/csv", Kind::kText},
    {"tsv", "text/tab-separated-values", Kind::kText},
    {"txt", "text/plain", Kind::kText},
    {"log", "text/plain", Kind::kText},
    {"md", "text/markdown", Kind::kText},
    {"json", "application/json", Kind::kText},
    {"jsonl", "application/jsonl", Kind::kText},
    {"ipynb", "application/x-ipynb+json", Kind::kText},
    {"xml", "application/xml", Kind::kText},
    {"yaml", "application/yaml", Kind::kText},
    {"yml", "application/yaml", Kind::kText},
    {"toml", "application/toml", Kind::kText},
    {"html", "text/html", Kind::kText},
    {"htm", "text/html", Kind::kText},
    {"css", "text/css", Kind::kText},
    {"js", "text/javascript", Kind::kText},
    {"svg", "image/svg+xml", Kind::kText},
    {"py", "text/x-python", Kind::kText},
    {"sh", "text/x-shellscript", Kind::kText},
    {"tex", "text/x-tex", Kind::kText},
    {"sql", "application/sql", Kind::kText},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", Kind::kZip},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", Kind::kZip},
    {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation",
     Kind::kZip},
    {"odt", "application/vnd.oasis.opendocument.text", Kind::kZip},
    {"ods", "application/vnd.oasis.opendocument.spreadsheet", Kind::kZip},
    {"odp", "application/vnd.oasis.opendocument.presentation", Kind::kZip},
    {"zip", "application/zip", Kind::kBinary},
    {"png", "image/png", Kind::kBinary},
    {"jpg", "image/jpeg", Kind::kBinary},
    {"jpeg", "image/jpeg", Kind::kBinary},
    {"gif", "image/gif", Kind::kBinary},
    {"webp", "image/webp", Kind::kBinary},
    {"pdf", "application/pdf", Kind::kBinary},
    {"xls", "application/vnd.ms-excel", Kind::kBinary},
    {"parquet", "application/vnd.apache.parquet", Kind::kBinary},
    {"gz", "application/gzip", Kind::kBinary},
    {"tar", "application/x-tar", Kind::kBinary},
    {"mp3", "audio/mpeg", Kind::kBinary},
    {"wav", "audio/wav", Kind::kBinary},
    {"mp4", "video/mp4", Kind::kBinary},
};

const ExtensionType* FindExtension(const std::string& name) {
  const size_t slash = name.rfind('/');
  const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  const size_t dot = base.rfind('.');
  if (dot == std::string::npos || dot == 0) return nullptr;  // ".bashrc" has no extension
  std::string ext = base.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const ExtensionType& entry : kExtensionTypes) {
    if (entry.ext == ext) return &entry;
  }
  return nullptr;
}

// libmagic's answers that say "I could not tell" rather than "this is something else".
bool IsUnknownContent(std::string_view mime) {
  return mime.empty() || mime == "application/octet-stream" || mime == "inode/x-empty" ||
         mime == "application/x-empty";
}

// Any text-like answer: libmagic guesses among text types from a few keywords (CSV often
// comes back as text/plain, Python as text/x-script.python, Markdown as text/plain).
bool IsTextContent(std::string_view mime) {
  return mime.starts_with("text/") || mime.find("json") != std::string_view::npos ||
         mime.find("xml") != std::string_view::npos || mime.find("csv") != std::string_view::npos;
}

// One magic_t per thread: a magic_t must not be used by two threads at once (libmagic keeps
// per-cookie scratch state; see e.g. ahupp/python-magic#85), and Publish runs on several
// worker threads. The database is loaded once per thread and kept.
class MagicCookie {
 public:
  MagicCookie() {
    // magic_open/magic_load are serialised: concurrent first loads have been reported to
    // corrupt the heap (hey-red/Mime#34); it happens once per thread, so the lock is cheap.
    static std::mutex load_mutex;
    std::lock_guard<std::mutex> lock(load_mutex);
    // MAGIC_NO_CHECK_COMPRESS skips the compressed-data test outright. Looking inside
    // compressed data (only with MAGIC_COMPRESS, never set here) can fork a decompressor, and
    // a worker thread of the daemon must not fork; this keeps that path shut for good.
    cookie_ = magic_open(MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS);
    if (cookie_ != nullptr && magic_load(cookie_, nullptr) != 0) {
      magic_close(cookie_);
      cookie_ = nullptr;
    }
  }
  ~MagicCookie() {
    if (cookie_ != nullptr) magic_close(cookie_);
  }
  MagicCookie(const MagicCookie&) = delete;
  MagicCookie& operator=(const MagicCookie&) = delete;

  magic_t get() const { return cookie_; }

 private:
  magic_t cookie_ = nullptr;
};

}  // namespace

std::string MimeForContent(const void* head, size_t size) {
  thread_local MagicCookie cookie;
  if (cookie.get() == nullptr) return {};
  const char* mime = magic_buffer(cookie.get(), head, size);
  return mime == nullptr ? std::string() : std::string(mime);
}

std::string CombineMime(const std::string& content_mime, const std::string& name) {
  const ExtensionType* entry = FindExtension(name);
  if (entry == nullptr) return content_mime.empty() ? "application/octet-stream" : content_mime;
  bool use_name = IsUnknownContent(content_mime);
  switch (entry->kind) {
    case Kind::kText:
      use_name = use_name || IsTextContent(content_mime);
      break;
    case Kind::kZip:
      use_name = use_name || content_mime == "application/zip";
      break;
    case Kind::kBinary:
      // Content wins: a text file named "plot.png" is text, whatever its name says.
      break;
  }
  return use_name ? std::string(entry->mime) : content_mime;
}

std::string GuessMime(const void* head, size_t size, const std::string& name) {
  return CombineMime(MimeForContent(head, size), name);
}

}  // namespace sandrun::storage
