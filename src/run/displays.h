// `displays` of a run's response: the rich outputs a program showed, in the
// order it showed them. The stateless loader (src/python/) and a stateful kernel fill the same
// list; run_codec.cc encodes it.
//
// JSON of one entry: {"kind": "image", "mime": "image/png", "file": {name, path, size, mime,
// sha256, url, expires_at}} (the file is also listed in `files`), or {"kind": "table",
// "mime": "text/markdown", "text": "| a | b |\n|---|---|\n..."}. Exactly one of `text` and
// `file` is present.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "storage/artifact_store.h"

namespace sandrun::run {

// Kinds of a display. Clients show an image inline, a table as Markdown, text as preformatted
// text (a plain-text form already in stdout is never repeated as a "text" display).
inline constexpr char kDisplayImage[] = "image";  // mime image/png, image/jpeg, ...; has `file`
inline constexpr char kDisplayTable[] = "table";  // mime text/markdown; has `text`
inline constexpr char kDisplayText[] = "text";    // mime text/plain, text/markdown; has `text`

struct Display {
  std::string kind;  // kDisplayImage, kDisplayTable or kDisplayText
  std::string mime;
  std::optional<std::string> text;            // table and text: the content (UTF-8)
  std::optional<storage::ArtifactFile> file;  // image: the published file
};

}  // namespace sandrun::run
