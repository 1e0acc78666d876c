// The `packages` of a run: PEP 508 requirement strings of a strict subset,
// and the normalised set that names a prepared environment. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sandrun::run {

inline constexpr size_t kMaxPackages = 32;           // entries of one `packages` list
inline constexpr size_t kMaxRequirementBytes = 200;  // one entry
inline constexpr size_t kMaxPackageNameBytes = 100;  // the name of one entry

// A requirement taken apart: NAME [ "[" EXTRA ("," EXTRA)* "]" ] [ SPEC ("," SPEC)* ] with
// NAME and each EXTRA letters, digits, '.', '-', '_' (starting and ending with a letter or
// digit), each SPEC an operator (== != <= >= < > ~= ===) and a version of letters, digits and
// ". * + ! _ -". Spaces between the parts are allowed. Nothing else: no URL (`name @ url`),
// no environment marker (`;`), no path, no pip option — none of which can be checked to stay
// on the configured index.
struct Requirement {
  std::string name;                 // PEP 503 normalised (lower case, runs of -_. as -)
  std::vector<std::string> extras;  // normalised, sorted, without duplicates
  std::vector<std::string> specs;   // e.g. ">=2", sorted, without duplicates
  // The canonical text: name[extra,...]spec,spec (what pip is given, and what is hashed).
  std::string Text() const;
};

// Parses one entry. Returns "" and fills `out`, or why the entry is refused (a sentence
// without the entry itself, which the caller quotes sanitised).
std::string ParseRequirement(const std::string& text, Requirement* out);

// The canonical texts of `requirements`, sorted, duplicates removed. Pure.
std::vector<std::string> NormalizeSet(const std::vector<Requirement>& requirements);

// The normalised names of the packages in `texts` (canonical texts, as NormalizeSet gives).
std::vector<std::string> NamesOf(const std::vector<std::string>& texts);

}  // namespace sandrun::run
