#include "config/config.h"

#include <arpa/inet.h>
#include <openssl/sha.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <variant>

#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::config {
namespace {

// "list" keys take a JSON array of strings, or one string of items separated by spaces or
// commas (which is also what their SANDRUN_<KEY> env override holds).
// "sets" keys (environments_prebuild) take a JSON array of arrays of strings, or one string
// of sets separated by ';', each of items separated by spaces or commas.
using Member = std::variant<std::string Config::*, int64_t Config::*, bool Config::*,
                            std::vector<std::string> Config::*,
                            std::vector<std::vector<std::string>> Config::*>;

// Whether a SIGHUP reload applies a key to the requests that start after it (each request
// reads it from the config it started with), or the key keeps its start-up value until a
// restart (sockets, paths, cgroups, the sandbox ids, the pool and queue sizes, ...).
enum Reload : bool { kRestart = false, kLive = true };

struct Key {
  const char* name;
  Member member;
  const char* type;
  int64_t min;  // for integers
  // As SANDRUN_<KEY> would give it (Config() parses it); "<state_dir>/..." for a path that
  // Finish derives from state_dir (the member stays "" until then).
  const char* default_value;
  Reload reload;
  const char* help;
};

// Where the daemon keeps its files, and how download links are made.
std::vector<Key> PlaceKeys() {
  return {
      {"state_dir", &Config::state_dir, "string", 0, ".state", kRestart,
       "directory for sockets, runs, artifacts"},
      {"fcgi_socket", &Config::fcgi_socket, "string", 0, "<state_dir>/sandrun.sock", kRestart,
       "FastCGI unix socket path"},
      {"artifacts_dir", &Config::artifacts_dir, "string", 0, "<state_dir>/artifacts", kRestart,
       "where generated files are published (nginx serves it)"},
      {"runs_dir", &Config::runs_dir, "string", 0, "<state_dir>/runs", kRestart,
       "scratch space of running sandboxes"},
      {"link_secret_file", &Config::link_secret_file, "string", 0, "<state_dir>/link_secret.conf",
       kRestart, "file shared with nginx: `set $sandrun_link_secret \"<secret>\";`"},
      {"public_url", &Config::public_url, "string", 0, "", kRestart,
       "scheme://host[:port][/prefix] for download links; empty = from the request"},
      {"trust_forwarded_headers", &Config::trust_forwarded_headers, "bool", 0, "true", kRestart,
       "build links from X-Forwarded-Proto/Host when public_url is empty"},
      {"link_ttl_s", &Config::link_ttl_s, "int", 1, "3600", kLive,
       "lifetime of a download link (s)"},
  };
}

// Who may call the service.
std::vector<Key> AccessKeys() {
  return {
      {"allow_anonymous", &Config::allow_anonymous, "bool", 0, "false", kLive,
       "accept requests without a bearer token (local quick-start only)"},
      {"tokens_file", &Config::tokens_file, "string", 0, "", kLive,
       "bearer tokens, one per line: `TOKEN` (acts as a user of its own), `TOKEN user=NAME` "
       "(acts as NAME only) or `TOKEN front_end` (names its users); `#` starts a comment"},
      {"bearer_tokens", &Config::bearer_tokens, "string", 0, "", kLive,
       "bearer tokens given here, separated by spaces or commas, each optionally followed by "
       "`user=NAME` or `front_end` as in tokens_file (tokens_file keeps them out of the config)"},
      {"allowed_origins", &Config::allowed_origins, "string", 0, "", kLive,
       "origins (scheme://host[:port], space/comma-separated) whose web pages may call /run; "
       "a request with another Origin header gets 403"},
  };
}

// How long published files stay, and how many one user may keep.
std::vector<Key> ArtifactKeys() {
  return {
      {"artifact_max_age_s", &Config::artifact_max_age_s, "int", 1, "86400", kRestart,
       "a run's published files are deleted this long after the run (s); links expire no later"},
      {"user_quota_files", &Config::user_quota_files, "int", 1, "4096", kLive,
       "files one user may keep published, sessions included; older runs are evicted first"},
      {"user_quota_mb", &Config::user_quota_mb, "int", 1, "256", kLive,
       "MiB on disk one user may keep published, sessions included; older runs are evicted first"},
      {"janitor_interval_s", &Config::janitor_interval_s, "int", 1, "60", kRestart,
       "how often the janitor deletes expired runs (s); it also runs at start-up"},
  };
}

// What the front may send, and how many runs are taken at once.
std::vector<Key> AdmissionKeys() {
  return {
      {"trusted_proxies", &Config::trusted_proxies, "string", 0, "", kRestart,
       "addresses or CIDR ranges of reverse proxies whose X-Forwarded-* headers nginx believes "
       "(space/comma-separated; rendered into nginx by scripts/serve)"},
      {"health_allow", &Config::health_allow, "string", 0, "", kLive,
       "addresses or CIDR ranges (space/comma-separated) that may read /healthz, /readyz and "
       "/metrics besides this host (loopback and its own addresses) and requests with a bearer "
       "token; nginx's client address, so trusted_proxies' X-Forwarded-For counts"},
      {"max_concurrent_runs", &Config::max_concurrent_runs, "int", 0, "0", kRestart,
       "sandboxes running at once (0 = number of CPUs)"},
      {"max_queue", &Config::max_queue, "int", 0, "16", kRestart,
       "requests waiting for a sandbox before 503"},
      {"queue_wait_s", &Config::queue_wait_s, "int", 0, "10", kRestart,
       "longest wait in the queue before 503 (s)"},
      {"max_body_bytes", &Config::max_body_bytes, "int", 1024, "16777216", kRestart,
       "largest request body (bytes)"},
  };
}

// The sandbox's ids, cgroup and clock.
std::vector<Key> SandboxKeys() {
  return {
      {"sandbox_uid", &Config::sandbox_uid, "int", 1, "64000", kRestart,
       "unprivileged host uid of the sandbox user; uid+1 is the sandbox's root"},
      {"sandbox_gid", &Config::sandbox_gid, "int", 1, "64000", kRestart,
       "host gid of the sandbox user (and gid+1)"},
      {"require_cgroups", &Config::require_cgroups, "bool", 0, "true", kRestart,
       "refuse to start without cgroup memory/pids control"},
      {"zygote", &Config::zygote, "bool", 0, "false", kRestart,
       "start fitting Python runs from a pre-started Python forked into each sandbox"},
      {"zygote_preload", &Config::zygote_preload, "list", 0, "", kRestart,
       "modules the zygote imports before it serves, e.g. [\"numpy\", \"pandas\", "
       "\"matplotlib.pyplot\"]; shared import-time state (DESIGN.md \"the zygote\")"},
      {"kernel_zygote", &Config::kernel_zygote, "bool", 0, "true", kRestart,
       "start kernels from a Python with ipykernel imported, forked into each sandbox"},
      {"cgroup_name", &Config::cgroup_name, "string", 0, "sandrun", kRestart,
       "directory created under the daemon's cgroup; one daemon per name on a host"},
      {"timezone", &Config::timezone, "string", 0, "", kRestart,
       "TZ inside the sandbox (empty = the host's)"},
  };
}

// Per-chat sessions.
std::vector<Key> SessionKeys() {
  return {
      {"session_wait_s", &Config::session_wait_s, "int", 0, "30", kRestart,
       "longest wait for a session's previous run before 409 (s)"},
      {"session_max_waiters", &Config::session_max_waiters, "int", 0, "2", kRestart,
       "runs that may wait at once for one busy session; more get 409 at once"},
      {"session_max_waiters_total", &Config::session_max_waiters_total, "int", 0, "0", kRestart,
       "runs that may wait for busy sessions at once, all sessions together (0 = a quarter of "
       "max_concurrent_runs + max_queue + 4); each holds a worker thread"},
      {"session_idle_s", &Config::session_idle_s, "int", 1, "86400", kRestart,
       "sessions unused this long are deleted (s)"},
  };
}

// Figures and images a run shows.
std::vector<Key> FigureKeys() {
  return {
      {"max_figures", &Config::max_figures, "int", 0, "20", kRestart,
       "figures and images a run may show (plt.show(), Image.show(), display()); more are "
       "listed in files_skipped as too_many_figures"},
      {"figure_max_dpi", &Config::figure_max_dpi, "int", 10, "150", kRestart,
       "largest DPI a shown figure is drawn at (a figure's own lower DPI is kept)"},
      {"figure_max_pixels", &Config::figure_max_pixels, "int", 10000, "4000000", kRestart,
       "largest shown figure in pixels (width x height); a larger one is drawn at a lower DPI"},
  };
}

// The network of runs, and pip inside them.
std::vector<Key> NetworkKeys() {
  return {
      {"network", &Config::network, "string", 0, "off", kRestart,
       "outbound network of runs: \"off\" (a request's \"network\": true gets 403), "
       "\"on_request\" (a request may ask with \"network\": true) or \"always\"; the public "
       "internet only, through sandrun-slirp (libslirp; docs/API.md \"Packages and network\")"},
      {"network_uid", &Config::network_uid, "int", 1, "64002", kRestart,
       "host uid and gid of each run's user-mode network (sandrun-slirp): a uid of no one "
       "else, neither sandbox_uid nor sandbox_uid+1"},
      {"network_allow_cidrs", &Config::network_allow_cidrs, "list", 0, "", kRestart,
       "networks a run may reach although private or special-purpose, e.g. an internal package "
       "mirror [\"10.0.5.20/32\"]; the host's own addresses stay refused"},
      {"pip_index_url", &Config::pip_index_url, "string", 0, "", kRestart,
       "package index of pip inside the sandbox (PIP_INDEX_URL), e.g. a company mirror; "
       "empty = PyPI"},
      {"pip_extra_index_urls", &Config::pip_extra_index_urls, "list", 0, "", kRestart,
       "more package indexes of pip inside (PIP_EXTRA_INDEX_URL)"},
      {"pip_trusted_hosts", &Config::pip_trusted_hosts, "list", 0, "", kRestart,
       "hosts pip inside trusts without valid HTTPS (PIP_TRUSTED_HOST), e.g. an http mirror"},
      {"install_wall_time_s", &Config::install_wall_time_s, "int", 1, "300", kRestart,
       "wall-clock budget of an install step (pip install ...), instead of the run's "
       "wall_time_s (s)"},
      {"install_disk_mb", &Config::install_disk_mb, "int", 1, "2048", kRestart,
       "workspace + /tmp size of a run with an install step, instead of its disk_mb (MiB)"},
  };
}

// Prepared environments (request "packages").
std::vector<Key> EnvironmentKeys() {
  return {
      {"environments_dir", &Config::environments_dir, "string", 0, "<state_dir>/environments",
       kRestart, "where prepared environments (request \"packages\") are kept"},
      {"environments_max_mb", &Config::environments_max_mb, "int", 1, "4096", kRestart,
       "size of the prepared environments together; past it the janitor deletes the least "
       "recently used ones that no run is using (MiB)"},
      {"environment_build_wall_time_s", &Config::environment_build_wall_time_s, "int", 1, "1800",
       kRestart, "wall time of building one prepared environment (pip, with the network) (s)"},
      {"environment_wait_s", &Config::environment_wait_s, "int", 0, "60", kRestart,
       "longest wait of a request for its environment's build before 503 environment_building "
       "(s)"},
      {"environments_prebuild", &Config::environments_prebuild, "sets", 0, "", kRestart,
       "sets of requirements built at start in the background, e.g. [[\"numpy\", "
       "\"pandas>=2\"]]; with \"network\": \"off\" only these are served"},
  };
}

// Stateful sessions' kernels, and this node among others.
std::vector<Key> KernelKeys() {
  return {
      {"kernel_idle_s", &Config::kernel_idle_s, "int", 1, "600", kRestart,
       "a stateful session's Python kernel ends after this long without a run (s); also when "
       "its session expires"},
      {"max_kernels", &Config::max_kernels, "int", 1, "4", kRestart,
       "Python kernels of stateful sessions alive at once; the least recently used is ended "
       "first"},
      {"kernel_pool_size", &Config::kernel_pool_size, "int", 0, "1", kRestart,
       "Python kernels kept booted (frozen) for notebook runs and new stateful kernels with "
       "the default limits, no network and no stdin, from the first kernel start on (at most "
       "8); 0 = every kernel starts on its run's request"},
      {"node_id", &Config::node_id, "string", 0, "", kRestart,
       "this node's name behind a front nginx (1-32 of a-z 0-9 -): download links become "
       "/files/<node_id>/...; empty = a single machine, links /files/..."},
  };
}

// The one key table: parsing, env overrides, validation and --help all read it, in this
// order (the groups above, one after the other).
const std::vector<Key>& Keys() {
  static const std::vector<Key> kKeys = [] {
    std::vector<Key> keys;
    for (auto group : {PlaceKeys, AccessKeys, ArtifactKeys, AdmissionKeys, SandboxKeys, SessionKeys,
                       FigureKeys, NetworkKeys, EnvironmentKeys, KernelKeys}) {
      std::vector<Key> part = group();
      keys.insert(keys.end(), part.begin(), part.end());
    }
    return keys;
  }();
  return kKeys;
}

// A key's default as docs/CONFIG.md and --help write it: "" for an empty string, [] for an
// empty list or sets.
std::string ShownDefault(const Key& key) {
  if (key.default_value[0] != '\0') return key.default_value;
  return std::string(key.type) == "string" ? "\"\"" : "[]";
}

Error KeyError(const std::string& key, const std::string& message) {
  return MakeError(ErrorKind::kInvalidInput, "key '" + key + "': " + message);
}

Status SetFromEnv(Config& config, const Key& key, const std::string& text);

Status SetFromJson(Config& config, const Key& key, const rapidjson::Value& v) {
  if (auto* s = std::get_if<std::string Config::*>(&key.member)) {
    if (!v.IsString()) return KeyError(key.name, "expected a string");
    config.*(*s) = std::string(v.GetString(), v.GetStringLength());
  } else if (auto* i = std::get_if<int64_t Config::*>(&key.member)) {
    if (!v.IsInt64()) return KeyError(key.name, "expected an integer");
    config.*(*i) = v.GetInt64();
  } else if (auto* b = std::get_if<bool Config::*>(&key.member)) {
    if (!v.IsBool()) return KeyError(key.name, "expected true or false");
    config.*(*b) = v.GetBool();
  } else if (auto* sets =
                 std::get_if<std::vector<std::vector<std::string>> Config::*>(&key.member)) {
    if (v.IsString())
      return SetFromEnv(config, key, std::string(v.GetString(), v.GetStringLength()));
    const char* expected = "expected an array of arrays of strings";
    if (!v.IsArray()) return KeyError(key.name, expected);
    (config.*(*sets)).clear();
    for (const auto& set : v.GetArray()) {
      if (!set.IsArray()) return KeyError(key.name, expected);
      std::vector<std::string> items;
      for (const auto& item : set.GetArray()) {
        if (!item.IsString()) return KeyError(key.name, expected);
        items.emplace_back(item.GetString(), item.GetStringLength());
      }
      (config.*(*sets)).push_back(std::move(items));
    }
  } else if (auto* l = std::get_if<std::vector<std::string> Config::*>(&key.member)) {
    if (v.IsString())
      return SetFromEnv(config, key, std::string(v.GetString(), v.GetStringLength()));
    if (!v.IsArray()) return KeyError(key.name, "expected an array of strings");
    (config.*(*l)).clear();
    for (const auto& item : v.GetArray()) {
      if (!item.IsString()) return KeyError(key.name, "expected an array of strings");
      (config.*(*l)).emplace_back(item.GetString(), item.GetStringLength());
    }
  }
  return OkStatus();
}

std::vector<std::string> SplitList(const std::string& text);

Status SetFromEnv(Config& config, const Key& key, const std::string& text) {
  if (auto* l = std::get_if<std::vector<std::string> Config::*>(&key.member)) {
    config.*(*l) = SplitList(text);
  } else if (auto* sets =
                 std::get_if<std::vector<std::vector<std::string>> Config::*>(&key.member)) {
    (config.*(*sets)).clear();
    std::stringstream in(text);
    for (std::string set; std::getline(in, set, ';');) {
      if (auto items = SplitList(set); !items.empty()) (config.*(*sets)).push_back(items);
    }
  } else if (auto* s = std::get_if<std::string Config::*>(&key.member)) {
    config.*(*s) = text;
  } else if (auto* i = std::get_if<int64_t Config::*>(&key.member)) {
    char* end = nullptr;
    long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') return KeyError(key.name, "expected an integer");
    config.*(*i) = value;
  } else if (auto* b = std::get_if<bool Config::*>(&key.member)) {
    if (text == "true" || text == "1") {
      config.*(*b) = true;
    } else if (text == "false" || text == "0") {
      config.*(*b) = false;
    } else {
      return KeyError(key.name, "expected true or false");
    }
  }
  return OkStatus();
}

// The config's "limits" or "ceilings" object. The ceiling check of "limits" is Finish's (a
// ceiling may come after the limit in the file).
Status ParseLimits(const rapidjson::Value& v, const std::string& key, Limits& limits) {
  std::optional<LimitError> error = DecodeLimits(v, nullptr, &limits);
  if (!error) return OkStatus();
  switch (error->kind) {
    case LimitError::Kind::kNotObject:
      return KeyError(key, "expected an object");
    case LimitError::Kind::kUnknown:
      return KeyError(key + "." + error->name, "unknown limit");
    case LimitError::Kind::kNotInteger:
    case LimitError::Kind::kBelowMinimum:
    case LimitError::Kind::kAboveCeiling:
      break;
  }
  return KeyError(key + "." + error->name,
                  "expected an integer >= " + std::to_string(error->key->min));
}

Status ParseLanguages(const rapidjson::Value& v, std::vector<Language>& out) {
  if (!v.IsObject()) return KeyError("languages", "expected an object of name -> {argv, file}");
  out.clear();
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    Language lang;
    lang.name = it->name.GetString();
    std::string key = "languages." + lang.name;
    const auto& def = it->value;
    if (!def.IsObject()) return KeyError(key, "expected an object");
    if (!def.HasMember("argv") || !def["argv"].IsArray() || def["argv"].Empty()) {
      return KeyError(key + ".argv", "expected a non-empty array of strings");
    }
    for (const auto& a : def["argv"].GetArray()) {
      if (!a.IsString()) return KeyError(key + ".argv", "expected strings");
      lang.argv.emplace_back(a.GetString());
    }
    if (lang.argv[0].empty() || lang.argv[0][0] != '/') {
      return KeyError(key + ".argv", "argv[0] must be an absolute path");
    }
    if (!def.HasMember("file") || !def["file"].IsString()) {
      return KeyError(key + ".file", "expected a file name such as main.py");
    }
    lang.file_name = def["file"].GetString();
    if (lang.file_name.empty() || lang.file_name.find('/') != std::string::npos) {
      return KeyError(key + ".file", "expected a plain file name");
    }
    if (def.HasMember("aliases")) {
      if (!def["aliases"].IsArray()) return KeyError(key + ".aliases", "expected an array");
      for (const auto& a : def["aliases"].GetArray()) {
        if (!a.IsString()) return KeyError(key + ".aliases", "expected strings");
        lang.aliases.emplace_back(a.GetString());
      }
    }
    out.push_back(std::move(lang));
  }
  return OkStatus();
}

Status ParsePool(const rapidjson::Value& v, std::map<std::string, int64_t>& out) {
  if (!v.IsObject()) {
    return KeyError("pool", "expected an object of language name -> sandboxes kept ready");
  }
  out.clear();
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    const std::string key = std::string("pool.") + it->name.GetString();
    if (!it->value.IsInt64() || it->value.GetInt64() < 0 || it->value.GetInt64() > 64) {
      return KeyError(key, "expected an integer from 0 to 64");
    }
    out[it->name.GetString()] = it->value.GetInt64();
  }
  return OkStatus();
}

std::vector<Language> DefaultLanguages() {
  return {
      {"python", {"py", "python3", "py3"}, "main.py", {"/usr/bin/python3", "{loader}", "{file}"}},
      {"bash", {"sh", "shell", "zsh"}, "main.sh", {"/bin/bash", "{file}"}},
  };
}

// The link secret file holds one nginx directive, `set $sandrun_link_secret "<secret>";`,
// so that nginx can include it and the daemon read it: one secret, one file.
Result<std::string> ReadLinkSecret(const std::string& path) {
  auto text = sys::ReadFile(path, 4096);
  if (!text.ok()) return KeyError("link_secret_file", text.error().message);
  size_t a = text->find('"');
  size_t b = a == std::string::npos ? a : text->find('"', a + 1);
  if (a == std::string::npos || b == std::string::npos || b - a - 1 < 16) {
    return KeyError("link_secret_file",
                    path + ": expected `set $sandrun_link_secret \"<at least 16 chars>\";`");
  }
  return text->substr(a + 1, b - a - 1);
}

// Items of a list written as one string, separated by spaces, tabs, newlines or commas.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  for (const char ch : text + " ") {
    if (ch == ' ' || ch == ',' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (!item.empty()) items.push_back(std::move(item));
      item.clear();
    } else {
      item.push_back(ch);
    }
  }
  return items;
}

// An IPv4/IPv6 address, optionally with a /prefix length: what nginx's set_real_ip_from and
// geo accept. Checked here so that a typo fails at start-up, not as an nginx error later.
bool IsAddressOrCidr(const std::string& item) {
  const size_t slash = item.find('/');
  const std::string address = item.substr(0, slash);
  unsigned char buf[sizeof(in6_addr)];
  int max_bits = 0;
  if (inet_pton(AF_INET, address.c_str(), buf) == 1) {
    max_bits = 32;
  } else if (inet_pton(AF_INET6, address.c_str(), buf) == 1) {
    max_bits = 128;
  } else {
    return false;
  }
  if (slash == std::string::npos) return true;
  const std::string bits = item.substr(slash + 1);
  if (bits.empty() || bits.size() > 3 || bits.find_first_not_of("0123456789") != bits.npos) {
    return false;
  }
  return std::stoi(bits) <= max_bits;
}

// `error` with how to repair it, on the same line (Load's contract: one line per problem).
Error WithFix(Error error, const std::string& fix) {
  error.message += " -- fix: " + fix;
  return error;
}

// Printable ASCII without blanks or quotes: what an index URL or a host name can be, and
// nothing that would split or end a PIP_* variable or a pip.conf line.
bool PlainText(const std::string& text) {
  if (text.empty()) return false;
  for (const char ch : text) {
    if (ch <= ' ' || ch > '~' || ch == '"' || ch == '\'' || ch == '\\') return false;
  }
  return true;
}

bool IndexUrl(const std::string& url) {
  return PlainText(url) && (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0);
}

// The kernel pool's bound: each pooled kernel is an idle IPython held frozen.
void CheckKernelKeys(const Config& c, std::vector<Error>& problems) {
  if (c.kernel_pool_size > 8) {
    problems.push_back(
        WithFix(KeyError("kernel_pool_size", "must be <= 8"),
                "each pooled kernel holds an idle IPython (tens of MB); 1 or 2 is enough"));
  }
}

// network, network_allow_cidrs and the pip_* keys, each problem on its own line.
// A dotted Python module name of ASCII identifiers (what `import NAME` takes).
bool ModuleName(const std::string& name) {
  bool start = true;
  for (char ch : name) {
    const bool letter = std::isalpha(static_cast<unsigned char>(ch)) || ch == '_';
    const bool digit = std::isdigit(static_cast<unsigned char>(ch)) != 0;
    if (ch == '.' && !start) {
      start = true;
    } else if (letter || (digit && !start)) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

void CheckZygoteKeys(const Config& c, std::vector<Error>& problems) {
  for (const std::string& name : c.zygote_preload) {
    if (!ModuleName(name)) {
      problems.push_back(
          WithFix(KeyError("zygote_preload", "'" + name + "' is not a module name"),
                  "list modules as `import` takes them, e.g. [\"numpy\", \"matplotlib.pyplot\"]"));
    }
  }
}

// cgroup_name is a path below the daemon's own cgroup, swept at each start and thawed by the
// thaw watch: "", "." or ".." would name the daemon's cgroup or one above it (other
// services' cgroups).
void CheckCgroupName(const Config& c, std::vector<Error>& problems) {
  bool ok = !c.cgroup_name.empty();
  size_t at = 0;
  while (ok && at <= c.cgroup_name.size()) {
    const size_t slash = std::min(c.cgroup_name.find('/', at), c.cgroup_name.size());
    const std::string part = c.cgroup_name.substr(at, slash - at);
    ok = !part.empty() && part != "." && part != "..";
    at = slash + 1;
  }
  if (!ok) {
    problems.push_back(WithFix(KeyError("cgroup_name", "'" + c.cgroup_name +
                                                           "' does not name a directory below the "
                                                           "daemon's cgroup"),
                               "give a name such as \"sandrun\" (no empty, '.' or '..' part)"));
  }
}

// What sandboxes start from ahead of a run: the kernel pool's and the zygote's keys, and
// where their cgroups go.
void CheckStartKeys(const Config& c, std::vector<Error>& problems) {
  CheckKernelKeys(c, problems);
  CheckZygoteKeys(c, problems);
  CheckCgroupName(c, problems);
}

void CheckNetworkKeys(const Config& c, std::vector<Error>& problems) {
  if (c.network != "off" && c.network != "on_request" && c.network != "always") {
    problems.push_back(WithFix(KeyError("network", "'" + c.network + "' is not a network mode"),
                               "use \"off\", \"on_request\" or \"always\""));
  }
  if (c.network_uid == c.sandbox_uid || c.network_uid == c.sandbox_uid + 1 ||
      c.network_uid == c.sandbox_gid || c.network_uid == c.sandbox_gid + 1) {
    problems.push_back(WithFix(
        KeyError("network_uid", "is the sandbox's uid or gid (" + std::to_string(c.network_uid) +
                                    "): the network helper must own no sandbox"),
        "give it a uid of its own, e.g. " + std::to_string(c.sandbox_uid + 2)));
  }
  for (const std::string& item : c.network_allow_cidrs) {
    if (!IsAddressOrCidr(item)) {
      problems.push_back(WithFix(
          KeyError("network_allow_cidrs", "'" + item + "' is not an IP address or CIDR range"),
          "list addresses or ranges such as 10.0.5.20/32"));
    }
  }
  if (!c.pip_index_url.empty() && !IndexUrl(c.pip_index_url)) {
    problems.push_back(
        WithFix(KeyError("pip_index_url", "'" + c.pip_index_url + "' is not an http(s) URL"),
                "e.g. http://10.0.5.20/simple"));
  }
  for (const std::string& url : c.pip_extra_index_urls) {
    if (!IndexUrl(url)) {
      problems.push_back(
          WithFix(KeyError("pip_extra_index_urls", "'" + url + "' is not an http(s) URL"),
                  "e.g. https://mirror.example.com/simple"));
    }
  }
  for (const std::string& host : c.pip_trusted_hosts) {
    if (!PlainText(host) || host.find('/') != std::string::npos) {
      problems.push_back(WithFix(KeyError("pip_trusted_hosts", "'" + host + "' is not a host"),
                                 "a host name or address, optionally :port"));
    }
  }
}

std::string LinkSecretFix(const std::string& path) {
  return "make one: umask 027; printf 'set $sandrun_link_secret \"%s\";\\n' "
         "\"$(openssl rand -hex 32)\" > " +
         path;
}

const char kAnonymousFix[] = "or, for a local test only, set \"allow_anonymous\": true";

// The tokens of a tokens_file: per line, words as ParseTokens reads them; a word starting
// with `#` starts a comment to the end of the line. Leading blanks are skipped first, so an
// indented `# retired: tokOLD` is a comment, not two tokens.
Result<std::vector<Token>> ReadTokensFile(const std::string& path) {
  auto text = sys::ReadFile(path, 1 << 20);
  if (!text.ok()) {
    return WithFix(KeyError("tokens_file", text.error().message),
                   "make it, one token a line (clients send `Authorization: Bearer <token>`): "
                   "umask 077; openssl rand -hex 32 > " +
                       path + "; " + kAnonymousFix);
  }
  std::vector<Token> tokens;
  std::istringstream lines(*text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::vector<std::string> words;
    for (std::string& word : SplitList(line)) {
      if (word[0] == '#') break;
      words.push_back(std::move(word));
    }
    auto parsed = ParseTokens(words, "tokens_file line " + std::to_string(number));
    if (!parsed.ok()) return parsed.error();
    tokens.insert(tokens.end(), parsed->begin(), parsed->end());
  }
  return tokens;
}

// Bearer tokens from bearer_tokens and tokens_file; an error (with its fix) when the file cannot
// be read, or when there is no token and anonymous use is not allowed.
Status ReadTokens(Config& c) {
  auto tokens = ParseTokens(SplitList(c.bearer_tokens), "bearer_tokens");
  if (!tokens.ok()) return tokens.error();
  c.tokens = std::move(*tokens);
  if (!c.tokens_file.empty()) {
    auto from_file = ReadTokensFile(c.tokens_file);
    if (!from_file.ok()) return from_file.error();
    c.tokens.insert(c.tokens.end(), from_file->begin(), from_file->end());
  }
  if (!c.allow_anonymous && c.tokens.empty()) {
    std::string fix =
        c.tokens_file.empty()
            ? std::string(
                  "set \"tokens_file\" to a file of tokens, one a line (make one: "
                  "umask 077; openssl rand -hex 32 > /etc/sandrun/tokens); ") +
                  kAnonymousFix
            : "add a token: openssl rand -hex 32 >> " + c.tokens_file + "; " + kAnonymousFix;
    return WithFix(
        KeyError("tokens_file", "no bearer token configured and allow_anonymous is false"), fix);
  }
  return OkStatus();
}

// node_id: empty, or 1 to 32 of [a-z0-9-] not starting with '-' (a URL path segment and an
// nginx location without quoting).
bool ValidNodeId(const std::string& id) {
  if (id.empty()) return true;
  if (id.size() > 32 || id[0] == '-') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// `read_secrets`: false leaves the link secret and the tokens unread (print-config).
Status Finish(Config& c, bool read_secrets) {
  if (c.state_dir.empty()) return KeyError("state_dir", "must not be empty");
  if (c.fcgi_socket.empty()) c.fcgi_socket = c.state_dir + "/sandrun.sock";
  if (c.artifacts_dir.empty()) c.artifacts_dir = c.state_dir + "/artifacts";
  c.runs_dir_configured = !c.runs_dir.empty();
  if (c.runs_dir.empty()) c.runs_dir = c.state_dir + "/runs";
  if (c.environments_dir.empty()) c.environments_dir = c.state_dir + "/environments";
  if (c.link_secret_file.empty()) c.link_secret_file = c.state_dir + "/link_secret.conf";
  if (c.max_concurrent_runs == 0) {
    c.max_concurrent_runs = std::max(1u, std::thread::hardware_concurrency());
  }
  while (!c.public_url.empty() && c.public_url.back() == '/') c.public_url.pop_back();
  if (!ValidNodeId(c.node_id)) {
    return WithFix(KeyError("node_id", "'" + c.node_id + "' is not 1 to 32 of a-z 0-9 -"),
                   "name the node like n1 or sandbox-2, or leave it empty on a single machine");
  }
  for (const auto& key : Keys()) {
    if (auto* i = std::get_if<int64_t Config::*>(&key.member); i && c.*(*i) < key.min) {
      return KeyError(key.name, "must be >= " + std::to_string(key.min));
    }
  }
  for (const auto& lk : LimitKeys()) {
    if (c.limits.*(lk.member) > c.ceilings.*(lk.member)) {
      return WithFix(KeyError(std::string("limits.") + lk.name,
                              "above its ceiling " + std::to_string(c.ceilings.*(lk.member))),
                     std::string("lower it, or raise ceilings.") + lk.name);
    }
  }
  if (c.languages.empty()) c.languages = DefaultLanguages();
  // The files the config names and the proxies: all checked, so one start lists them all.
  std::vector<Error> problems;
  if (!read_secrets) {
    // Not read: print-config shows where they are, not what they hold.
  } else if (auto secret = ReadLinkSecret(c.link_secret_file); secret.ok()) {
    c.link_secret = *secret;
  } else {
    problems.push_back(WithFix(secret.error(), LinkSecretFix(c.link_secret_file)));
  }
  for (const std::string& item : SplitList(c.trusted_proxies)) {
    if (!IsAddressOrCidr(item)) {
      problems.push_back(
          WithFix(KeyError("trusted_proxies", "'" + item + "' is not an IP address or CIDR range"),
                  "list addresses or ranges such as 127.0.0.1, 10.0.0.0/8, ::1"));
    }
  }
  c.health_allow_ranges.clear();
  for (const std::string& item : SplitList(c.health_allow)) {
    if (!IsAddressOrCidr(item)) {
      problems.push_back(
          WithFix(KeyError("health_allow", "'" + item + "' is not an IP address or CIDR range"),
                  "list addresses or ranges such as 192.0.2.10, 10.0.0.0/8, 2001:db8::/32"));
      continue;
    }
    c.health_allow_ranges.push_back(item);
  }
  if (Status s = read_secrets ? ReadTokens(c) : OkStatus(); !s.ok()) {
    problems.push_back(s.error());
  }
  CheckNetworkKeys(c, problems);
  CheckStartKeys(c, problems);
  c.origins.clear();
  for (std::string origin : SplitList(c.allowed_origins)) {
    while (!origin.empty() && origin.back() == '/') origin.pop_back();
    if (origin.find("://") == std::string::npos) {
      problems.push_back(
          WithFix(KeyError("allowed_origins", "'" + origin + "' is not scheme://host[:port]"),
                  "list origins as a browser sends them, e.g. https://chat.example.com"));
      continue;
    }
    c.origins.push_back(std::move(origin));
  }
  if (c.session_max_waiters_total == 0) {
    c.session_max_waiters_total =
        std::max<int64_t>(1, (c.max_concurrent_runs + c.max_queue + 4) / 4);
  }
  if (problems.empty()) return OkStatus();
  std::string lines;
  for (const Error& e : problems) lines += (lines.empty() ? "" : "\n") + e.message;
  return MakeError(ErrorKind::kInvalidInput, lines);
}

}  // namespace

std::string OwnUserName(const std::string& secret) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), digest);
  return "token-" + util::HexEncode(std::string_view(reinterpret_cast<const char*>(digest), 8));
}

Result<std::vector<Token>> ParseTokens(const std::vector<std::string>& words,
                                       const std::string& key) {
  std::vector<Token> tokens;
  bool qualified = false;  // the last token already has an attribute
  for (const std::string& word : words) {
    const bool front_end = word == "front_end";
    const bool user = word.compare(0, 5, "user=") == 0;
    if (!front_end && !user) {
      tokens.push_back({word, Token::Kind::kOwnUser, OwnUserName(word)});
      qualified = false;
      continue;
    }
    if (tokens.empty()) return KeyError(key, "'" + word + "' must follow a token");
    if (qualified) return KeyError(key, "a token takes one of user=NAME and front_end");
    qualified = true;
    Token& token = tokens.back();
    if (front_end) {
      token.kind = Token::Kind::kFrontEnd;
      token.user.clear();
    } else {
      token.kind = Token::Kind::kBoundUser;
      token.user = word.substr(5);
      if (token.user.empty() || token.user.size() > 256) {
        return KeyError(key, "user= needs a name of 1 to 256 bytes");
      }
    }
  }
  return tokens;
}

int64_t WorkerThreads(const Config& config) {
  // Requests waiting for an environment's build are bounded like session waiters (as many).
  return config.max_concurrent_runs + config.max_queue + 2 * config.session_max_waiters_total + 4;
}

const std::vector<LimitKey>& LimitKeys() {
  // name, member, unit, default, minimum, default ceiling, help
  static const std::vector<LimitKey> kLimitKeys = {
      {"wall_time_s", &Limits::wall_time_s, "s", 10, 1, 300, "wall-clock time of a run (s)"},
      {"cpu_time_s", &Limits::cpu_time_s, "s", 10, 1, 300,
       "CPU time: of each process (RLIMIT_CPU) and of the whole run (cgroup) (s)"},
      {"memory_mb", &Limits::memory_mb, "MiB", 512, 16, 8192,
       "memory of the whole run, no swap (MiB)"},
      {"processes", &Limits::processes, "", 64, 2, 1024,
       "processes and threads of the run, sandrun's init and the program included (so at least 2)"},
      {"output_bytes", &Limits::output_bytes, "bytes", 1 << 20, 1024, 64 << 20,
       "stdout + stderr captured (bytes)"},
      {"max_files", &Limits::max_files, "", 100, 0, 10000, "generated files exported"},
      {"file_size_mb", &Limits::file_size_mb, "MiB", 10, 1, 1024,
       "largest file written or exported (MiB)"},
      {"disk_mb", &Limits::disk_mb, "MiB", 100, 1, 8192,
       "size of the workspace + /tmp (one tmpfs), and of /dev/shm (MiB)"},
  };
  return kLimitKeys;
}

Config::Config() {
  for (const auto& key : Keys()) {
    const bool derived = key.default_value[0] == '<';
    // A default the table cannot parse is a typo in it: every Config, and so every test, stops.
    if (!SetFromEnv(*this, key, derived ? "" : key.default_value).ok()) std::abort();
  }
}

std::vector<KeyInfo> KeyTable() {
  std::vector<KeyInfo> table;
  for (const auto& key : Keys()) {
    table.push_back({key.name, key.type, ShownDefault(key), key.reload == kLive});
  }
  return table;
}

void CopyLiveKeys(const Config& from, Config* to) {
  for (const auto& key : Keys()) {
    if (key.reload != kLive) continue;
    std::visit([&](auto member) { to->*member = from.*member; }, key.member);
  }
  to->limits = from.limits;
  to->ceilings = from.ceilings;
  // What Load derives from the live keys: they change with them.
  to->tokens = from.tokens;
  to->origins = from.origins;
  to->health_allow_ranges = from.health_allow_ranges;
}

Limits::Limits() {
  for (const auto& key : LimitKeys()) this->*(key.member) = key.default_value;
}

Limits DefaultCeilings() {
  Limits ceilings;
  for (const auto& key : LimitKeys()) ceilings.*(key.member) = key.default_ceiling;
  return ceilings;
}

std::optional<LimitError> DecodeLimits(const rapidjson::Value& v, const Limits* ceilings,
                                       Limits* limits) {
  using Kind = LimitError::Kind;
  if (!v.IsObject()) return LimitError{Kind::kNotObject, ""};
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const LimitKey* key = nullptr;
    for (const auto& k : LimitKeys()) {
      if (name == k.name) key = &k;
    }
    if (key == nullptr) return LimitError{Kind::kUnknown, name};
    if (!it->value.IsInt64()) return LimitError{Kind::kNotInteger, name, key};
    const int64_t value = it->value.GetInt64();
    if (value < key->min) return LimitError{Kind::kBelowMinimum, name, key, value};
    if (ceilings != nullptr && value > ceilings->*(key->member)) {
      return LimitError{Kind::kAboveCeiling, name, key, value, ceilings->*(key->member)};
    }
    limits->*(key->member) = value;
  }
  return std::nullopt;
}

// A key given twice in one object of the file: RapidJSON keeps both and the later one
// would win unseen (a line added above a key the file already has, as `sed` or a hand does).
Status NoKeyTwice(const rapidjson::Value& object, const std::string& where) {
  std::set<std::string> seen;
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) {
    const std::string name = it->name.GetString();
    const std::string key = where.empty() ? name : where + "." + name;
    if (!seen.insert(name).second) {
      return WithFix(KeyError(key, "is given twice (the later one would win)"), "keep one of them");
    }
    if (it->value.IsObject()) {
      if (Status s = NoKeyTwice(it->value, key); !s.ok()) return s;
    }
  }
  return OkStatus();
}

Result<Config> Load(const std::string& path, bool read_secrets) {
  Config config;
  if (!path.empty()) {
    auto text = sys::ReadFile(path, 1 << 20);
    if (!text.ok()) {
      return WithFix(MakeError(ErrorKind::kInvalidInput, text.error().message),
                     "copy docs/sandrun.example.jsonc of the source tree to " + path +
                         " and edit it, or name another file with --config FILE");
    }
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseCommentsFlag | rapidjson::kParseTrailingCommasFlag>(text->c_str(),
                                                                                   text->size());
    if (doc.HasParseError()) {
      return WithFix(MakeError(ErrorKind::kInvalidInput,
                               path + ": " + rapidjson::GetParseError_En(doc.GetParseError()) +
                                   " at offset " + std::to_string(doc.GetErrorOffset())),
                     "correct the JSON there (comments and trailing commas are allowed)");
    }
    if (!doc.IsObject())
      return MakeError(ErrorKind::kInvalidInput, path + ": expected a JSON object");
    if (Status twice = NoKeyTwice(doc, ""); !twice.ok()) return twice.error();
    // Iterated as const: RapidJSON 1.1's non-const member iterators compare ambiguously
    // under C++20's reversed operators (clang -Wambiguous-reversed-operator).
    const rapidjson::Value& root = doc;
    for (auto it = root.MemberBegin(); it != root.MemberEnd(); ++it) {
      std::string name = it->name.GetString();
      Status s = OkStatus();
      if (name == "limits") {
        s = ParseLimits(it->value, name, config.limits);
      } else if (name == "ceilings") {
        s = ParseLimits(it->value, name, config.ceilings);
      } else if (name == "languages") {
        s = ParseLanguages(it->value, config.languages);
      } else if (name == "pool") {
        s = ParsePool(it->value, config.pool);
      } else {
        const Key* key = nullptr;
        for (const auto& k : Keys()) {
          if (name == k.name) key = &k;
        }
        if (key == nullptr) {
          return WithFix(KeyError(name, "unknown key"),
                         "remove it or correct its spelling (sandrund --help lists every key)");
        }
        s = SetFromJson(config, *key, it->value);
      }
      if (!s.ok()) return s.error();
    }
  }
  for (const auto& key : Keys()) {
    std::string env = "SANDRUN_";
    for (const char* p = key.name; *p; ++p) env.push_back(static_cast<char>(std::toupper(*p)));
    if (const char* value = std::getenv(env.c_str())) {
      Status s = SetFromEnv(config, key, value);
      if (!s.ok()) return s.error();
    }
  }
  Status s = Finish(config, read_secrets);
  if (!s.ok()) return s.error();
  return config;
}

std::vector<std::string> ChangedKeys(const Config& a, const Config& b) {
  std::vector<std::string> changed;
  for (const auto& key : Keys()) {
    const bool same = std::visit([&](auto member) { return a.*member == b.*member; }, key.member);
    if (!same) changed.emplace_back(key.name);
  }
  for (const auto& lk : LimitKeys()) {
    if (a.limits.*(lk.member) != b.limits.*(lk.member)) {
      changed.push_back(std::string("limits.") + lk.name);
    }
    if (a.ceilings.*(lk.member) != b.ceilings.*(lk.member)) {
      changed.push_back(std::string("ceilings.") + lk.name);
    }
  }
  auto same_language = [](const Language& x, const Language& y) {
    return x.name == y.name && x.aliases == y.aliases && x.file_name == y.file_name &&
           x.argv == y.argv;
  };
  if (!std::equal(a.languages.begin(), a.languages.end(), b.languages.begin(), b.languages.end(),
                  same_language)) {
    changed.emplace_back("languages");
  }
  auto same_token = [](const Token& x, const Token& y) {
    return x.secret == y.secret && x.kind == y.kind && x.user == y.user;
  };
  if (!std::equal(a.tokens.begin(), a.tokens.end(), b.tokens.begin(), b.tokens.end(), same_token)) {
    changed.emplace_back("tokens");
  }
  if (a.link_secret != b.link_secret) changed.emplace_back("link_secret");
  if (a.pool != b.pool) changed.emplace_back("pool");
  return changed;
}

std::string EffectiveConfigJson(const Config& config) {
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buffer);
  w.SetIndent(' ', 2);
  auto string = [&w](const std::string& text) {
    w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  };
  auto strings = [&](const std::vector<std::string>& items) {
    w.StartArray();
    for (const std::string& item : items) string(item);
    w.EndArray();
  };
  w.StartObject();
  for (const auto& key : Keys()) {
    w.Key(key.name);
    if (std::string(key.name) == "bearer_tokens") {
      string(config.bearer_tokens.empty() ? "" : "(secret)");
    } else if (auto* s = std::get_if<std::string Config::*>(&key.member)) {
      string(config.*(*s));
    } else if (auto* i = std::get_if<int64_t Config::*>(&key.member)) {
      w.Int64(config.*(*i));
    } else if (auto* b = std::get_if<bool Config::*>(&key.member)) {
      w.Bool(config.*(*b));
    } else if (auto* l = std::get_if<std::vector<std::string> Config::*>(&key.member)) {
      strings(config.*(*l));
    } else if (auto* sets =
                   std::get_if<std::vector<std::vector<std::string>> Config::*>(&key.member)) {
      w.StartArray();
      for (const auto& set : config.*(*sets)) strings(set);
      w.EndArray();
    }
  }
  for (const char* block : {"limits", "ceilings"}) {
    const Limits& limits = std::string(block) == "limits" ? config.limits : config.ceilings;
    w.Key(block);
    w.StartObject();
    for (const auto& lk : LimitKeys()) {
      w.Key(lk.name);
      w.Int64(limits.*(lk.member));
    }
    w.EndObject();
  }
  w.Key("languages");
  w.StartObject();
  for (const Language& lang : config.languages) {
    w.Key(lang.name.c_str());
    w.StartObject();
    w.Key("argv");
    strings(lang.argv);
    w.Key("file");
    string(lang.file_name);
    w.Key("aliases");
    strings(lang.aliases);
    w.EndObject();
  }
  w.EndObject();
  w.Key("pool");
  w.StartObject();
  for (const auto& [language, size] : config.pool) {
    w.Key(language.c_str());
    w.Int64(size);
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

std::string HelpText() {
  std::ostringstream out;
  out << "Configuration keys (file: JSON with comments; env: SANDRUN_<KEY>):\n";
  for (const auto& key : Keys()) {
    out << "  " << key.name << " (" << key.type << "): " << key.help << " [default "
        << ShownDefault(key) << (key.reload == kLive ? "; live on SIGHUP" : "") << "]\n";
  }
  out << "  (list keys: a JSON array of strings, or one string separated by spaces or commas)\n";
  out << "  (sets keys: a JSON array of arrays of strings, or one string of sets separated by "
         "';')\n";
  out << "  limits (object): defaults of a run; ceilings (object): the most a request may ask\n";
  out << "  pool (object): language -> sandboxes kept started and waiting for a run (default "
         "{\"python\": 2, \"bash\": 1}; {} = no warm pool)\n";
  for (const auto& lk : LimitKeys()) {
    out << "    " << lk.name << ": " << lk.help << " [default " << lk.default_value << ", minimum "
        << lk.min << ", ceiling " << lk.default_ceiling << "]\n";
  }
  out << "  languages (object): name -> {argv: [abs path, ..., \"{file}\"], file, aliases}; "
         "\"{loader}\" in argv: sandrun's Python loader (notebook display)\n";
  return out.str();
}

const Language* FindLanguage(const Config& config, const std::string& name) {
  for (const auto& lang : config.languages) {
    if (lang.name == name) return &lang;
    for (const auto& alias : lang.aliases) {
      if (alias == name) return &lang;
    }
  }
  return nullptr;
}

}  // namespace sandrun::config
