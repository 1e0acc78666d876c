#include "run/requirements.h"

#include <algorithm>
#include <cctype>

#include "run/packages.h"

namespace sandrun::run {
namespace {

bool AlnumAscii(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

bool NameChar(char c) { return AlnumAscii(c) || c == '.' || c == '-' || c == '_'; }

bool VersionChar(char c) {
  return AlnumAscii(c) || c == '.' || c == '*' || c == '+' || c == '!' || c == '_' || c == '-';
}

void SkipSpaces(const std::string& s, size_t* at) {
  while (*at < s.size() && s[*at] == ' ') ++*at;
}

// A NAME at *at (also an extra's); "" when there is none.
std::string TakeName(const std::string& s, size_t* at) {
  const size_t start = *at;
  while (*at < s.size() && NameChar(s[*at])) ++*at;
  std::string name = s.substr(start, *at - start);
  if (!name.empty() && (!AlnumAscii(name.front()) || !AlnumAscii(name.back()))) return "";
  return name;
}

template <typename T>
void SortUnique(std::vector<T>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// The "[extra, ...]" after a name, at *at (just past the '['), into `extras`; "" or why not.
std::string TakeExtras(const std::string& text, size_t* at, std::vector<std::string>* extras) {
  while (true) {
    SkipSpaces(text, at);
    const std::string extra = TakeName(text, at);
    if (extra.empty() || extra.size() > kMaxPackageNameBytes) return "has a malformed extra";
    extras->push_back(NormalizePackageName(extra));
    SkipSpaces(text, at);
    if (*at < text.size() && text[*at] == ',') {
      ++*at;
      continue;
    }
    if (*at < text.size() && text[*at] == ']') {
      ++*at;
      return "";
    }
    return "has a malformed list of extras";
  }
}

// The version specifiers from *at to the end ("op version", ',' between), into `specs`;
// "" or why not.
std::string TakeSpecs(const std::string& text, size_t* at, std::vector<std::string>* specs) {
  while (*at < text.size()) {
    static const char* const kOps[] = {"===", "==", "!=", "<=", ">=", "~=", "<", ">"};
    std::string op;
    for (const char* candidate : kOps) {
      if (text.compare(*at, std::char_traits<char>::length(candidate), candidate) == 0) {
        op = candidate;
        break;
      }
    }
    if (op.empty()) {
      if (text[*at] == '@') return "is a direct reference (name @ URL); only index packages";
      if (text[*at] == ';') return "has an environment marker; they are not supported";
      return "has '" + std::string(1, text[*at]) +
             "' where a version specifier (==, >=, <=, !=, ~=, <, >) was expected";
    }
    *at += op.size();
    SkipSpaces(text, at);
    const size_t start = *at;
    while (*at < text.size() && VersionChar(text[*at])) ++*at;
    if (*at == start) return "has a version operator without a version";
    specs->push_back(op + text.substr(start, *at - start));
    SkipSpaces(text, at);
    if (*at < text.size()) {
      if (text[*at] != ',') {
        return text[*at] == ';' ? "has an environment marker; they are not supported"
                                : "has '" + std::string(1, text[*at]) + "' after a version";
      }
      ++*at;
      SkipSpaces(text, at);
      if (*at == text.size()) return "ends with ','";
    }
  }
  return "";
}

}  // namespace

std::string Requirement::Text() const {
  std::string out = name;
  if (!extras.empty()) {
    out += "[";
    for (size_t i = 0; i < extras.size(); ++i) out += (i ? "," : "") + extras[i];
    out += "]";
  }
  for (size_t i = 0; i < specs.size(); ++i) out += (i ? "," : "") + specs[i];
  return out;
}

std::string ParseRequirement(const std::string& text, Requirement* out) {
  if (text.size() > kMaxRequirementBytes) {
    return "is longer than " + std::to_string(kMaxRequirementBytes) + " bytes";
  }
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      return "holds a control or non-ASCII character";
    }
  }
  *out = Requirement{};
  size_t at = 0;
  SkipSpaces(text, &at);
  if (at < text.size() && text[at] == '-') {
    return "is a pip option; only package names with optional extras and versions are allowed";
  }
  const std::string name = TakeName(text, &at);
  if (name.empty()) {
    return "does not start with a package name (letters, digits, '.', '-', '_'); paths, URLs "
           "and options are not allowed";
  }
  if (name.size() > kMaxPackageNameBytes) {
    return "has a name longer than " + std::to_string(kMaxPackageNameBytes) + " bytes";
  }
  out->name = NormalizePackageName(name);
  SkipSpaces(text, &at);
  if (at < text.size() && text[at] == '[') {
    ++at;
    if (std::string why = TakeExtras(text, &at, &out->extras); !why.empty()) return why;
  }
  SkipSpaces(text, &at);
  if (std::string why = TakeSpecs(text, &at, &out->specs); !why.empty()) return why;
  SortUnique(&out->extras);
  SortUnique(&out->specs);
  return "";
}

std::vector<std::string> NormalizeSet(const std::vector<Requirement>& requirements) {
  std::vector<std::string> texts;
  for (const auto& r : requirements) texts.push_back(r.Text());
  SortUnique(&texts);
  return texts;
}

std::vector<std::string> NamesOf(const std::vector<std::string>& texts) {
  std::vector<std::string> names;
  for (const auto& t : texts) {
    names.push_back(t.substr(0, t.find_first_of("[<>=!~")));
  }
  SortUnique(&names);
  return names;
}

}  // namespace sandrun::run
