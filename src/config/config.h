// Daemon configuration: one key table drives parsing, validation, --help and the documented
// example (DESIGN.md §7). File format: JSON with comments (RapidJSON kParseCommentsFlag);
// every top-level scalar key can be overridden by the environment as SANDRUN_<KEY in upper case>.
#pragma once

#include <rapidjson/fwd.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace sandrun::config {

// Resource limits of one run. Units are in the names. A default-constructed Limits holds each
// limit's default from LimitKeys(); DefaultCeilings() holds each one's default ceiling.
struct Limits {
  int64_t wall_time_s;
  int64_t cpu_time_s;
  int64_t memory_mb;
  int64_t processes;
  int64_t output_bytes;
  int64_t max_files;
  int64_t file_size_mb;
  int64_t disk_mb;
  Limits();
};

// The one table of the limits (config "limits" and "ceilings", a request's "limits", the
// response's "limits", --help, print-config and the OpenAPI limits block read it): one entry
// per limit, in the order they are documented.
struct LimitKey {
  const char* name;
  int64_t Limits::*member;
  const char* unit;         // "s", "MiB", "bytes" or "" (a count)
  int64_t default_value;    // a run's limit unless the config's "limits" or the request says
  int64_t min;              // the least the config or a request may set
  int64_t default_ceiling;  // the most a request may ask unless the config's "ceilings" says
  const char* help;
};
const std::vector<LimitKey>& LimitKeys();

// Each limit's default ceiling (LimitKey::default_ceiling).
Limits DefaultCeilings();

// Why DecodeLimits stopped; the caller words it (config: "key '...'", request: an ApiError).
struct LimitError {
  enum class Kind { kNotObject, kUnknown, kNotInteger, kBelowMinimum, kAboveCeiling };
  Kind kind;
  std::string name;               // the limit as given; "" for kNotObject
  const LimitKey* key = nullptr;  // nullptr for kNotObject and kUnknown
  int64_t value = 0;              // the value given (kBelowMinimum, kAboveCeiling)
  int64_t ceiling = 0;            // kAboveCeiling
};

// The one limit decoder, for the config's "limits"/"ceilings" and a request's "limits": sets
// in `limits` each member of the JSON object `v` (names from LimitKeys(), integers of at least
// the minimum and, when `ceilings` is given, at most the ceiling). Stops at the first problem,
// in document order, with the members before it already set. Pure.
std::optional<LimitError> DecodeLimits(const rapidjson::Value& v, const Limits* ceilings,
                                       Limits* limits);

// A configured language: how to run a program file.
struct Language {
  std::string name;                  // "python"
  std::vector<std::string> aliases;  // "py", "python3"
  std::string file_name;             // program file name in /home/user/.sandrun, e.g. "main.py"
  // "{file}" is replaced by the program path, "{loader}" by the path of the Python loader
  // that runs it as a notebook cell (src/python/sandrun_main.py)
  std::vector<std::string> argv;
};

// A bearer token and whom it may act for (tokens_file / bearer_tokens, DESIGN.md additions).
struct Token {
  enum class Kind {
    kOwnUser,    // a plain token: acts as its own user, OwnUserName(secret); names no other
    kBoundUser,  // `TOKEN user=NAME`: acts as NAME only
    kFrontEnd,   // `TOKEN front_end`: a trusted front end that names its users
  };
  std::string secret;
  Kind kind = Kind::kOwnUser;
  std::string user;  // kBoundUser: NAME; kOwnUser: OwnUserName(secret); kFrontEnd: ""
};

// The user a plain token acts as: "token-" + the first 16 hex digits of SHA-256(secret), so
// that two plain tokens never share quotas or sessions and the secret never appears.
std::string OwnUserName(const std::string& secret);

// Every member that is a key of the one key table (config.cc Keys(): name, type, minimum,
// default, whether a reload applies it live, help) starts at the table's default (Config()).
struct Config {
  Config();
  std::string state_dir;
  std::string fcgi_socket;           // default <state_dir>/sandrun.sock
  std::string artifacts_dir;         // default <state_dir>/artifacts
  std::string runs_dir;              // default <state_dir>/runs (see RunsDirReachable)
  bool runs_dir_configured = false;  // set explicitly (file or env), not derived
  std::string link_secret_file;      // default <state_dir>/link_secret.conf
  std::string link_secret;           // read from link_secret_file
  std::string public_url;            // e.g. "http://127.0.0.1:8080"; "" = from the request
  bool trust_forwarded_headers;      // peer is our own nginx on loopback
  int64_t link_ttl_s;
  bool allow_anonymous;
  std::string tokens_file;    // one bearer token per line, optionally `user=NAME` or `front_end`
  std::string bearer_tokens;  // tokens given in the config itself, space/comma-separated
  std::vector<Token> tokens;  // bearer_tokens + those read from tokens_file
  // Origins (scheme://host[:port], space/comma-separated) whose browsers may call /run; a
  // request with any other Origin header gets 403. Empty = no browser origin at all.
  std::string allowed_origins;
  std::vector<std::string> origins;  // allowed_origins split
  // Artifact store (DESIGN.md §4): per-user quota, file age, janitor.
  int64_t artifact_max_age_s;  // a run's files are deleted this long after publishing
  int64_t user_quota_files;    // files one user may keep published
  int64_t user_quota_mb;       // bytes (MiB) one user may keep published
  int64_t janitor_interval_s;  // how often the janitor deletes expired runs
  // Peers (addresses or CIDR ranges, space/comma-separated) whose X-Forwarded-* headers nginx
  // believes (realip); scripts/serve renders them into nginx. Empty = no proxy is trusted.
  std::string trusted_proxies;
  // Clients (addresses or CIDR ranges) that may read /healthz, /readyz and /metrics besides
  // this host's own addresses and requests with a bearer token. Empty = no others.
  std::string health_allow;
  std::vector<std::string> health_allow_ranges;  // health_allow split
  int64_t max_concurrent_runs;                   // 0 = number of CPUs
  int64_t max_queue;
  int64_t queue_wait_s;
  int64_t max_body_bytes;
  int64_t sandbox_uid;  // unprivileged host uid the sandbox user maps to
  int64_t sandbox_gid;
  bool require_cgroups;
  // Start the stateless Python runs the warm pool would fit (and that find no pooled sandbox)
  // from a zygote: a Python started once and forked into each new sandbox
  // (sandbox/zygote.h). Restart to change.
  bool zygote;
  // Modules the zygote imports before it serves (e.g. numpy pandas matplotlib.pyplot), so a
  // run's import of them costs nothing; their import-time state is shared by every run it
  // serves (DESIGN.md "the zygote"). Restart to change.
  std::vector<std::string> zygote_preload;
  // Start kernels (stateful runs, notebook answers, the Jupyter API, the kernel pool) from a
  // second zygote, one with ipykernel imported: a kernel then starts in a fraction of its
  // import's CPU (DESIGN.md "the kernel zygote"). Restart to change.
  bool kernel_zygote;
  std::string cgroup_name;
  std::string timezone;         // "" = host's
  int64_t session_wait_s;       // a run waits this long for its session's previous run
  int64_t session_max_waiters;  // runs waiting at once for one busy session; more: 409
  // Runs waiting for busy sessions at once, all sessions together; 0 = a quarter of the
  // worker threads of the other kinds (Finish resolves it). Each holds a worker thread.
  int64_t session_max_waiters_total;
  int64_t session_idle_s;  // sessions unused this long are deleted
  // Notebook display: figures and images a Python program shows.
  int64_t max_figures;        // per run; more: files_skipped "too_many_figures"
  int64_t figure_max_dpi;     // a shown figure is drawn at most at this DPI ...
  int64_t figure_max_pixels;  // ... and at most this many pixels (width x height)
  // Packages and network (docs/API.md "Packages and network"). network: "off" (a
  // request's "network": true gets 403), "on_request", "always".
  std::string network;
  std::vector<std::string> network_allow_cidrs;  // reachable although in a refused range
  int64_t network_uid;        // host uid and gid of runs' sandrun-slirp; owns no sandbox
  std::string pip_index_url;  // PIP_INDEX_URL inside; "" = pip's default
  std::vector<std::string> pip_extra_index_urls;  // PIP_EXTRA_INDEX_URL inside
  std::vector<std::string> pip_trusted_hosts;     // PIP_TRUSTED_HOST inside
  int64_t install_wall_time_s;                    // wall time of an install step (its own budget)
  int64_t install_disk_mb;  // workspace + /tmp of a run with an install step (MiB)
  // Prepared environments (docs/API.md "Packages and network").
  std::string environments_dir;           // default <state_dir>/environments
  int64_t environments_max_mb;            // the janitor evicts least-recently-used past it
  int64_t environment_build_wall_time_s;  // wall time of one environment's build
  int64_t environment_wait_s;             // a request waits this long for a build, then 503
  // Sets of requirement strings built at start, in the background (with the network even
  // when `network` is "off": the admin's choice).
  std::vector<std::vector<std::string>> environments_prebuild;
  // Stateful runs: a session's kernel ends after this long without a run;
  // at most max_kernels live at once (least recently used ended first).
  int64_t kernel_idle_s;
  int64_t max_kernels;
  // Kernels booted ahead for notebook and stateful runs of the default limits (kernel/
  // kernel_pool.h); 0: none. At most 8.
  int64_t kernel_pool_size;
  // This node's name in a cluster (docs/CLUSTER.md): download links are
  // /files/<node_id>/... so that the front nginx routes them here. "" = one machine, links
  // /files/... as always. 1 to 32 of [a-z0-9-], not starting with '-'.
  std::string node_id;
  Limits limits;                        // a run's limits unless its request says
  Limits ceilings = DefaultCeilings();  // the most a request may ask
  std::vector<Language> languages;      // default: python, bash
  // The warm pool (run/warm_pool.h): language name -> sandboxes kept started
  // and waiting for a run; 0 or absent: none for that language. Python (the "{loader}" argv)
  // and bash can be pooled. Default {"python": 2, "bash": 1}; {} turns the pool off.
  std::map<std::string, int64_t> pool = {{"python", 2}, {"bash", 1}};
};

// One top-level key of the table, as docs/CONFIG.md and --help show it.
struct KeyInfo {
  std::string name;
  std::string type;  // "string", "int", "bool", "list" or "sets"
  // As documented: "" for an empty string, [] for an empty list, "<state_dir>/..." for a path
  // derived from state_dir when the key is not set.
  std::string default_value;
  // A SIGHUP reload applies it to the requests that start after (config/reload.h); else it
  // keeps its start-up value until a restart.
  bool live;
};
// Every top-level key (not "limits", "ceilings", "languages", "pool"), in documented order.
std::vector<KeyInfo> KeyTable();

// Sets in `to` each live key of `from` (KeyTable), "limits" and "ceilings", and what Load
// derives from them (tokens, origins, health_allow_ranges). Pure.
void CopyLiveKeys(const Config& from, Config* to);

// Where `sandrund check` reads its config when no --config is given.
inline constexpr char kDefaultConfigPath[] = "/etc/sandrun/sandrun.jsonc";

// FastCGI worker threads: one per sandbox slot, per queue place, per session waiter and per
// environment waiter (as many as session waiters, run/environments.cc), and 4
// more that only quick requests (/healthz, refusals) can take, so that none of the slow waits
// can starve them.
int64_t WorkerThreads(const Config& config);

// Parses the words of one tokens_file line or of bearer_tokens: each word that is not an
// attribute is a token; `user=NAME` and `front_end` qualify the token before them. Errors
// (kInvalidInput) name `key`: an attribute before any token, both attributes on one token,
// an empty user name.
Result<std::vector<Token>> ParseTokens(const std::vector<std::string>& words,
                                       const std::string& key);

// Loads `path` (may be "" for defaults only), applies SANDRUN_* env overrides, reads secret
// files and validates. Errors: kInvalidInput; the message has one line per problem, naming the
// key ("key 'x': ...") and, for the problems a first install meets (the config file, JSON
// syntax, unknown keys, the link secret file, the tokens, ceilings), ending in " -- fix: "
// and what to run or edit. The link secret, tokens and trusted_proxies are all checked before
// returning, so one error lists each of their problems. `read_secrets` false (print-config)
// reads neither the link secret file nor the tokens (no problem of theirs is reported; link_secret
// and tokens stay empty); everything else is loaded and checked the same.
Result<Config> Load(const std::string& path, bool read_secrets = true);

// The effective config `Load` made (defaults, the file, SANDRUN_* overrides and the derived
// paths merged) as a pretty-printed JSON object in the file's format: every key of the table,
// "limits", "ceilings", "languages" and "pool". Secrets are not in it: bearer_tokens prints as
// "(secret)" when set, link_secret and tokens not at all. Pure.
std::string EffectiveConfigJson(const Config& config);

// Text for --help: one line per key with type, default and description.
std::string HelpText();

// The keys whose values differ between `a` and `b`, named as in the file: top-level keys,
// "limits.<name>", "ceilings.<name>", "languages", "pool", and "tokens" / "link_secret" for what
// tokens_file / link_secret_file held when loaded (a SIGHUP reload, config/reload.h). Pure.
std::vector<std::string> ChangedKeys(const Config& a, const Config& b);

// Finds a language by name or alias; nullptr if unknown.
const Language* FindLanguage(const Config& config, const std::string& name);

}  // namespace sandrun::config
