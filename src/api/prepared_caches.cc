// What every fresh sandbox would otherwise rebuild, built once at start-up in a sandbox:
// matplotlib's font cache, copied into each run's MPLCONFIGDIR
// (/tmp/matplotlib), so that `import matplotlib.pyplot` does not scan the fonts (and run
// fc-list); and the bytecode of the Python support files, placed in each run's
// .sandrun/python/__pycache__, so that every Python start does not compile them (~3 ms).
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

#include "api/service.h"
#include "python/support_files.h"
#include "storage/workspace_file.h"
#include "util/base64.h"

namespace sandrun::api {
namespace {

// A plain file name of matplotlib's font cache: fontlist-v<digits>.json.
bool FontCacheName(const std::string& name) {
  const std::string prefix = "fontlist-v", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  for (size_t i = prefix.size(); i < name.size() - suffix.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

// Whether `name` is one of the support files (python/support_files.h).
bool SupportFileName(const std::string& name) {
  for (const auto& file : python::SupportFiles()) {
    if (name == file.name) return true;
  }
  return false;
}

// The font cache of the build run's output; "" or why it is not usable.
std::string TakeFontCache(const rapidjson::Value& out, std::string* name, std::string* content) {
  if (!out.HasMember("font_cache")) return "matplotlib is not installed";
  const rapidjson::Value& cache = out["font_cache"];
  if (!cache.IsObject() || !cache.HasMember("name") || !cache["name"].IsString() ||
      !cache.HasMember("content") || !cache["content"].IsString()) {
    return "unexpected output of the build run";
  }
  *name = std::string(cache["name"].GetString(), cache["name"].GetStringLength());
  if (!FontCacheName(*name)) return "unexpected cache file name";
  content->assign(cache["content"].GetString(), cache["content"].GetStringLength());
  return "";
}

// The support files' bytecode of the build run's output, named as Python looks for it
// (<stem>.<cache tag>.pyc, PEP 3147); "" or why there is none.
std::string TakeBytecode(const rapidjson::Value& out, std::vector<run::SupportBytecode>* files) {
  if (!out.HasMember("cache_tag") || !out["cache_tag"].IsString() || !out.HasMember("bytecode") ||
      !out["bytecode"].IsObject()) {
    return "no bytecode built";
  }
  const std::string tag(out["cache_tag"].GetString(), out["cache_tag"].GetStringLength());
  if (tag.empty()) return "this Python does not cache bytecode";
  if (tag.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos) {
    return "unexpected cache tag " + tag;
  }
  for (const auto& m : out["bytecode"].GetObject()) {
    const std::string name(m.name.GetString(), m.name.GetStringLength());
    if (!SupportFileName(name) || !m.value.IsString()) return "unexpected support file " + name;
    auto bytes =
        util::DecodeBase64(std::string_view(m.value.GetString(), m.value.GetStringLength()));
    if (!bytes) return "bytecode of " + name + " is not base64";
    files->push_back({name.substr(0, name.size() - 3) + "." + tag + ".pyc", std::move(*bytes)});
  }
  if (files->empty()) return "no bytecode built";
  return "";
}

}  // namespace

std::vector<std::string> Service::PrepareCaches() {
  if (runner_ == nullptr || !health_error_.empty()) return {"no sandbox to build caches in"};
  rapidjson::StringBuffer body;
  {
    rapidjson::Writer<rapidjson::StringBuffer> w(body);
    w.StartObject();
    w.Key("language");
    w.String("python");
    w.Key("code");
    const std::string_view script = python::DaemonScript("build_caches.py");
    w.String(script.data(), static_cast<rapidjson::SizeType>(script.size()));
    w.Key("user");
    w.String("self-test");
    w.Key("limits");
    w.StartObject();
    w.Key("wall_time_s");
    w.Int64(std::min<int64_t>(60, config_.ceilings.wall_time_s));
    w.Key("cpu_time_s");
    w.Int64(std::min<int64_t>(60, config_.ceilings.cpu_time_s));
    w.EndObject();
    w.EndObject();
  }
  HttpRequest request;
  request.method = "POST";
  request.path = "/run";
  request.body.assign(body.GetString(), body.GetSize());
  request.request_id = "prepare-caches";
  request.headers["content-type"] = "application/json";
  const HttpResponse response = HandleRun(request, /*trusted=*/true);
  rapidjson::Document doc;
  doc.Parse(response.body.c_str(), response.body.size());
  if (response.status != 200 || doc.HasParseError() || !doc.IsObject() ||
      !doc.HasMember("stdout") || !doc["stdout"].IsString()) {
    return {"the build run failed: " + response.body.substr(0, 300)};
  }
  rapidjson::Document out;
  out.Parse(doc["stdout"].GetString(), doc["stdout"].GetStringLength());
  if (out.HasParseError() || !out.IsObject()) {
    return {"the build run printed no JSON object: " +
            std::string(doc["stdout"].GetString(),
                        std::min<size_t>(300, doc["stdout"].GetStringLength()))};
  }
  std::vector<std::string> missing;
  std::string font_cache_name, font_cache;
  std::vector<run::SupportBytecode> bytecode;
  if (std::string why = TakeFontCache(out, &font_cache_name, &font_cache); !why.empty()) {
    font_cache_name.clear();
    missing.push_back("no prepared font cache: " + why);
  }
  if (std::string why = TakeBytecode(out, &bytecode); !why.empty()) {
    bytecode.clear();
    missing.push_back("no prepared bytecode of the Python support files: " + why);
  }
  engine_.SetPreparedCaches(std::move(font_cache_name), std::move(font_cache), std::move(bytecode));
  return missing;
}

}  // namespace sandrun::api
