// matplotlib's font cache, built once at start-up in a sandbox and copied into each run's
// MPLCONFIGDIR (/tmp/matplotlib), so that `import matplotlib.pyplot` does not scan the fonts
// (and run fc-list) in every fresh sandbox (issue 11 part 3).
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

#include "api/service.h"
#include "storage/workspace_file.h"

namespace sandrun::api {
namespace {

// Prints {"name": <cache file name>, "content": <its text>} after matplotlib built it; prints
// nothing when matplotlib is not installed.
constexpr char kBuildFontCache[] = R"py(import json, os
try:
    import matplotlib
    import matplotlib.font_manager as fm
except ImportError:
    raise SystemExit(0)
path = os.path.join(matplotlib.get_cachedir(), "fontlist-v%s.json" % fm.FontManager.__version__)
if os.path.isfile(path):
    with open(path, encoding="utf-8") as f:
        print(json.dumps({"name": os.path.basename(path), "content": f.read()}))
)py";

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

}  // namespace

std::string Service::PrepareFontCache() {
  if (runner_ == nullptr || !health_error_.empty()) return "no sandbox";
  rapidjson::StringBuffer body;
  {
    rapidjson::Writer<rapidjson::StringBuffer> w(body);
    w.StartObject();
    w.Key("language");
    w.String("python");
    w.Key("code");
    w.String(kBuildFontCache);
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
  request.request_id = "font-cache";
  request.headers["content-type"] = "application/json";
  const HttpResponse response = HandleRun(request, /*trusted=*/true);
  rapidjson::Document doc;
  doc.Parse(response.body.c_str(), response.body.size());
  if (response.status != 200 || doc.HasParseError() || !doc.IsObject() ||
      !doc.HasMember("stdout") || !doc["stdout"].IsString()) {
    return "the build run failed: " + response.body.substr(0, 300);
  }
  const std::string out(doc["stdout"].GetString(), doc["stdout"].GetStringLength());
  if (out.empty()) return "matplotlib is not installed";
  rapidjson::Document cache;
  cache.Parse(out.c_str(), out.size());
  if (cache.HasParseError() || !cache.IsObject() || !cache.HasMember("name") ||
      !cache["name"].IsString() || !cache.HasMember("content") || !cache["content"].IsString()) {
    return "unexpected output of the build run";
  }
  const std::string name(cache["name"].GetString(), cache["name"].GetStringLength());
  if (!FontCacheName(name)) return "unexpected cache file name";
  font_cache_name_ = name;
  font_cache_.assign(cache["content"].GetString(), cache["content"].GetStringLength());
  return "";
}

void Service::PlaceFontCache(const std::string& tmp) const {
  if (font_cache_name_.empty()) return;
  // Best effort: without it matplotlib builds its own (0.3 s), nothing fails.
  (void)storage::PlaceFile(tmp, "matplotlib/" + font_cache_name_, font_cache_,
                           static_cast<uid_t>(config_.sandbox_uid),
                           static_cast<gid_t>(config_.sandbox_gid));
}

}  // namespace sandrun::api
