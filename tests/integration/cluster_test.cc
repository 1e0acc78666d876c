// integration.Cluster: scripts/cluster with 3 nodes (each nginx + sandrund +
// its own state, in a network namespace of its own) behind the front nginx on 127.0.0.1.
// 8 clients run code for 20 users, each user in one session, and download the file every run
// writes, for SANDRUN_CLUSTER_TEST_S seconds (default 45). At a third of that time the node
// with the most users loses its nginx and sandrund to SIGKILL. Checked:
//   - users of the live nodes: every run and every download answers 200, with the session's
//     count going on (no session_restarted);
//   - users of the dead node: a failed request is a JSON 502/503/504 with Retry-After, and
//     nothing else; then they are served by another node, whose first answer says
//     session_restarted: true and starts the count afresh;
//   - every link issued by a live node downloads during the traffic and after it;
//   - the dead node's links answer the JSON 502 while it is down, and serve again (the same
//     bytes) once scripts/cluster has started it again (SIGUSR1);
//   - a user reaches one node however its requests name it: bound token with and without
//     X-Sandrun-User, a front end's token or no token with X-Sandrun-User (the front's
//     affinity map of the nodes' tokens), and Jupyter's /api/kernels with the token in
//     ?token=, `Authorization: token` or Bearer; each node's cgroup_name carries the state dir;
//   - after Ctrl-C (SIGINT to its process group) scripts/cluster exits 0 with no error line,
//     and nothing it started is left: no scripts/serve, and no
//     node's sandrund or nginx (a restarted node's included), no front nginx.
// Traffic goes only to 127.0.0.1 (the front); the front reaches the nodes in the namespaces
// scripts/cluster made (it checks their routes before any traffic).
#define BOOST_TEST_MODULE SandrunCluster
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "processes.h"
#include "streamed.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using sandrun::integration::Event;
using sandrun::integration::Identify;
using sandrun::integration::NginxProcesses;
using sandrun::integration::PostStreamedTo;
using sandrun::integration::ProcessArgvs;
using sandrun::integration::ProcessId;
using sandrun::integration::ProcessTree;
using sandrun::integration::StackProcesses;
using sandrun::integration::Streamed;
using sandrun::integration::Survivors;

constexpr int kNodes = 3;
constexpr int kClients = 8;
constexpr int kUsers = 20;
// Users of bound tokens (tokens_file `TOKEN user=NAME`), and a front end's token.
constexpr int kBoundUsers = 5;
constexpr const char* kFrontEndToken = "cluster-test-front-end-token-0123456789abcdef";

std::string BoundUser(int i) { return "bound-" + std::to_string(i); }
std::string BoundToken(int i) {
  return "cluster-test-bound-token-" + std::to_string(i) + "-fedcba9876543210";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) out += (out.empty() ? "" : " ") + arg;
  return out;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// The node a link names: /files/<node>/...; "" if none.
std::string LinkNode(const std::string& url) {
  const size_t at = url.find("/files/");
  if (at == std::string::npos) return "";
  const size_t start = at + 7;
  const size_t end = url.find('/', start);
  return end == std::string::npos ? "" : url.substr(start, end - start);
}

std::string PathOf(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return slash == std::string::npos ? url : url.substr(slash);
}

struct Answer {
  int status = 0;  // 0: no HTTP answer at all
  std::string body;
  std::string retry_after;
  std::string content_type;
};

Answer FromResult(const httplib::Result& r) {
  Answer a;
  if (!r) return a;
  a.status = r->status;
  a.body = r->body;
  a.retry_after = r->get_header_value("Retry-After");
  a.content_type = r->get_header_value("Content-Type");
  return a;
}

// The front's own error: JSON {"error":{...}} with Retry-After, status 502/503/504.
bool IsUnavailableJson(const Answer& a) {
  if (a.status != 502 && a.status != 503 && a.status != 504) return false;
  rapidjson::Document doc;
  doc.Parse(a.body.c_str());
  return !doc.HasParseError() && doc.IsObject() && doc.HasMember("error") &&
         doc["error"].IsObject() && !a.retry_after.empty() &&
         a.content_type.find("application/json") != std::string::npos;
}

struct Issued {
  std::string path;  // path and query of the link
  std::string node;
  std::string content;
};

class ClusterRun {
 public:
  ClusterRun() {
    char dir[] = "/tmp/sandrun-cl.XXXXXX";
    BOOST_REQUIRE(mkdtemp(dir) != nullptr);
    chmod(dir, 0755);
    state_ = dir;
    port_ = FreeLoopbackPort();
    const int uid = 90000 + 6 * (port_ % 1000);
    // Tokens beside anonymous use (scripts/serve allows it): bound ones and a front end's.
    {
      std::ofstream tokens(state_ + "/tokens");
      tokens << "# the cluster test's tokens\n";
      for (int i = 0; i < kBoundUsers; ++i) {
        tokens << BoundToken(i) << " user=" << BoundUser(i) << "\n";
      }
      tokens << kFrontEndToken << " front_end\n";
    }
    // No cgroup_name: scripts/cluster derives the nodes' from the state directory.
    std::ofstream(state_ + "/extra.json")
        << "{\"sandbox_uid\": " << uid << ", \"sandbox_gid\": " << uid << ", \"tokens_file\": \""
        << state_ << "/tokens\""
        << ", \"max_concurrent_runs\": 2, \"queue_wait_s\": 30, \"link_ttl_s\": 900, "
           "\"session_wait_s\": 20}\n";
    Start();
  }
  ~ClusterRun() { Stop(); }

  int port() const { return port_; }
  const std::string& state() const { return state_; }
  pid_t pid() const { return pid_; }

  std::string LogTails() const {
    std::string out;
    for (const std::string& f :
         {std::string("/cluster.log"), std::string("/front/logs/error.log"),
          std::string("/nodes/1/serve.log"), std::string("/nodes/2/serve.log"),
          std::string("/nodes/3/serve.log")}) {
      std::string text = ReadText(state_ + f);
      if (text.size() > 3000) text = text.substr(text.size() - 3000);
      out += "----- " + state_ + f + " -----\n" + text + "\n";
    }
    return out;
  }

  // SIGKILL to node n's nginx (master and workers) and sandrund.
  void KillNode(int n) {
    const std::string dir = state_ + "/nodes/" + std::to_string(n);
    const pid_t daemon = std::atoi(ReadText(dir + "/daemon.pid").c_str());
    const pid_t master = std::atoi(ReadText(dir + "/nginx/nginx.pid").c_str());
    BOOST_REQUIRE(daemon > 1 && master > 1);
    std::vector<pid_t> victims = {master, daemon};
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = ReadText("/proc/" + name + "/stat");
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream fields(stat.substr(paren + 2));
      std::string state;
      pid_t ppid = 0;
      fields >> state >> ppid;
      if (ppid == master) victims.push_back(std::atoi(name.c_str()));
    }
    for (pid_t p : victims) kill(p, SIGKILL);
  }

  void RestartStopped() { kill(pid_, SIGUSR1); }

 private:
  void Start() {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      if (name == "PORT" || name == "NODES" || name == "NODE_PORT" ||
          name.rfind("SANDRUN_", 0) == 0) {
        continue;
      }
      env.push_back(entry);
    }
    env.push_back("PORT=" + std::to_string(port_));
    env.push_back("NODES=" + std::to_string(kNodes));
    env.push_back("NODE_PORT=8080");
    env.push_back("SANDRUN_STATE_DIR=" + state_);
    env.push_back("SANDRUN_SKIP_INSTALL=1");
    env.push_back("SANDRUN_SKIP_BUILD=1");
    env.push_back(std::string("SANDRUN_BUILD_DIR=") + SANDRUN_BUILD_DIR);
    env.push_back("SANDRUN_CONFIG_EXTRA=" + state_ + "/extra.json");
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    const std::string script = std::string(SANDRUN_SOURCE_DIR) + "/scripts/cluster";
    std::string bash = "/bin/bash";
    std::vector<char*> argv = {bash.data(), const_cast<char*>(script.c_str()), nullptr};
    const int log =
        open((state_ + "/cluster.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    BOOST_REQUIRE(log >= 0 && null_fd >= 0);
    const pid_t parent = getpid();
    pid_ = fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      dup2(null_fd, 0);
      dup2(log, 1);
      dup2(log, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(log);
    close(null_fd);
    const auto deadline = Clock::now() + std::chrono::seconds(180);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        BOOST_FAIL("scripts/cluster exited during start-up\n" << LogTails());
      }
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(2, 0);
      if (auto r = c.Get("/healthz");
          r && r->status == 200 &&
          ReadText(state_ + "/cluster.log").find("cluster is up") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    BOOST_FAIL("the cluster did not come up within 180 s\n" << LogTails());
  }

  // The processes of every node's stack (sandrund, nginx and its workers) and of the front
  // nginx, found by their state directories: a stack whose scripts/serve died is no longer
  // below scripts/cluster.
  std::vector<pid_t> StateDirProcesses() const {
    std::vector<pid_t> pids = NginxProcesses(state_ + "/front");
    for (int n = 1; n <= kNodes; ++n) {
      for (pid_t p : StackProcesses(state_ + "/nodes/" + std::to_string(n))) pids.push_back(p);
    }
    return pids;
  }

  void Stop() {
    if (pid_ < 0) return;
    // Everything scripts/cluster started, as it is before the stop: the processes below it
    // (each node's scripts/serve, sandrund, nginx, sandboxes; the front) and the stacks.
    std::vector<pid_t> started = ProcessTree(pid_);
    for (pid_t p : StateDirProcesses()) started.push_back(p);
    std::set<ProcessId> seen = Identify(started);
    // As Ctrl-C in a terminal: SIGINT to scripts/cluster's process group.
    kill(-pid_, SIGINT);
    bool stopped = false;
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    while (Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        stopped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!stopped) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    BOOST_CHECK_MESSAGE(stopped, "scripts/cluster stopped within 90 s of Ctrl-C (SIGINT)");
    // A clean stop: status 0, and no error line (it once said "ERROR: the front nginx exited
    // (status 0)").
    const std::string log = ReadText(state_ + "/cluster.log");
    BOOST_CHECK_MESSAGE(!stopped || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                        "scripts/cluster after Ctrl-C: wait status " << status);
    BOOST_CHECK_MESSAGE(log.find("ERROR") == std::string::npos,
                        "scripts/cluster's output has an error after Ctrl-C:\n"
                            << log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
    // Nothing it started outlives it: neither what ran before the stop nor a stack started
    // meanwhile (a node restarted by SIGUSR1 as the stop began). A leaked sandrund keeps the
    // fds it inherited (the integration lock, scripts/test's isolation lock) and so hangs
    // the next test run: it fails this one instead, and is killed.
    for (const ProcessId& p : Identify(StateDirProcesses())) seen.insert(p);
    const std::vector<pid_t> left = Survivors(seen, 10);
    const auto argvs = ProcessArgvs();
    for (pid_t p : left) {
      const auto it = argvs.find(p);
      BOOST_ERROR("process " << p << " (" << (it == argvs.end() ? "?" : CommandLine(it->second))
                             << ") of the cluster is still running after scripts/cluster "
                             << "stopped; state kept in " << state_);
      kill(p, SIGKILL);
    }
    // Its namespaces are gone with it.
    const std::string prefix = "sr" + std::to_string(port_) + "n";
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns")) {
      BOOST_CHECK_MESSAGE(entry.path().filename().string().rfind(prefix, 0) != 0,
                          "network namespace " << entry.path() << " left behind");
    }
    pid_ = -1;
    if (left.empty() && std::getenv("SANDRUN_KEEP_STATE") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(state_, ec);
    }
  }

  std::string state_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// One user's state as its client sees it.
struct User {
  std::string name;
  std::string node;   // the node its last successful run was on
  std::string home;   // the node of its first run
  int64_t count = 0;  // the session's counter as of the last successful run
  bool seen = false;  // had an answer for its session (X-Sandrun-Session-Seen: 1)
};

struct Figures {
  std::mutex mutex;
  int64_t runs = 0, downloads = 0;
  std::map<std::string, int64_t> failures;  // kind -> count
  std::vector<std::string> problems;        // failed checks, for the log
  double remap_s = -1;                      // kill -> last dead-node user served elsewhere
  std::vector<Issued> live_links, dead_links;
  int restarted_sessions = 0;

  void Problem(const std::string& kind, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    failures[kind] += 1;
    if (problems.size() < 20) problems.push_back(kind + ": " + what);
  }
};

int64_t EnvSeconds() {
  const char* text = std::getenv("SANDRUN_CLUSTER_TEST_S");
  const int64_t s = text != nullptr ? std::atoll(text) : 45;
  return std::clamp<int64_t>(s, 9, 120);
}

// The node that served a run writing out.txt (the node its link names), or "" with the answer
// in *error.
std::string NodeOfRun(httplib::Client& c, const httplib::Headers& h, std::string* error) {
  const std::string body =
      R"j({"language":"python","code":"open('out.txt', 'w').write('x')\nprint(1)"})j";
  Answer a = FromResult(c.Post("/run", h, body, "application/json"));
  rapidjson::Document doc;
  doc.Parse(a.body.c_str());
  if (a.status == 200 && !doc.HasParseError() && doc.IsObject() && doc.HasMember("files") &&
      doc["files"].IsArray()) {
    for (const auto& f : doc["files"].GetArray()) {
      if (std::string(f["name"].GetString()) == "out.txt") return LinkNode(f["url"].GetString());
    }
  }
  *error = std::to_string(a.status) + " " + a.body.substr(0, 300);
  return "";
}

// The front hashes on the user the node acts for: a bound token with X-Sandrun-User naming
// its own user and without the header, the front end's token naming that user, and an
// anonymous request naming it all reach one node. Before the front knew the tokens, the
// first two hashed differently: a bound user had two nodes' quotas, rate limits and
// sessions. With 5 users on 3 nodes, chance alone puts all four on one node for every user
// with probability (1/27)^5.
void CheckAffinityByIdentity(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  for (int i = 0; i < kBoundUsers; ++i) {
    const std::string bearer = "Bearer " + BoundToken(i);
    const std::vector<std::pair<std::string, httplib::Headers>> ways = {
        {"bound token, X-Sandrun-User: itself",
         {{"Authorization", bearer}, {"X-Sandrun-User", BoundUser(i)}}},
        {"bound token, no X-Sandrun-User", {{"Authorization", bearer}}},
        {"front end's token, X-Sandrun-User",
         {{"Authorization", std::string("Bearer ") + kFrontEndToken},
          {"X-Sandrun-User", BoundUser(i)}}},
        {"no token, X-Sandrun-User", {{"X-Sandrun-User", BoundUser(i)}}},
    };
    std::string first;
    bool one_node = true;
    for (const auto& [way, headers] : ways) {
      std::string error;
      const std::string node = NodeOfRun(c, headers, &error);
      BOOST_REQUIRE_MESSAGE(!node.empty(), BoundUser(i) << ", " << way << ": " << error);
      if (first.empty()) first = node;
      one_node = one_node && node == first;
      BOOST_CHECK_MESSAGE(node == first, BoundUser(i)
                                             << ", " << way << ": node " << node << ", not "
                                             << first << " as with its bound token and header");
    }
    if (one_node) {
      BOOST_TEST_MESSAGE("cluster: " << BoundUser(i) << ": one node (" << first << ") for "
                                     << ways.size() << " ways of naming it");
    }
  }
  // A bound token may not name another user through the front either (the node refuses).
  Answer other = FromResult(c.Post(
      "/run", {{"Authorization", "Bearer " + BoundToken(0)}, {"X-Sandrun-User", BoundUser(1)}},
      R"j({"language":"python","code":"print(1)"})j", "application/json"));
  BOOST_CHECK_MESSAGE(other.status == 403 && other.body.find("user_forbidden") != std::string::npos,
                      "a bound token naming another user: " << other.status << " " << other.body);
}

// The nodes (n<N>) whose cgroups hold a kernel a client made (k-<hex>; a pooled one is
// pool-k-<hex> until handed out). `state`: the cluster's, for the cgroup names.
std::set<std::string> NodesWithKernels(const std::string& state) {
  std::set<std::string> nodes;
  for (int n = 1; n <= kNodes; ++n) {
    rapidjson::Document doc;
    doc.Parse(ReadText(state + "/nodes/" + std::to_string(n) + "/node-config.json").c_str());
    if (doc.HasParseError() || !doc.HasMember("cgroup_name")) continue;
    // The node's cgroup is made below the daemon's own (wherever scripts/cluster put it).
    const std::string name = doc["cgroup_name"].GetString();
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it("/sys/fs/cgroup/memory", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      if (it.depth() > 6 || !it->is_directory(ec)) {
        it.disable_recursion_pending();
        continue;
      }
      const std::string leaf = it->path().filename().string();
      if (leaf.rfind("k-", 0) == 0 && it->path().parent_path().filename() == name) {
        nodes.insert("n" + std::to_string(n));
      }
      if (leaf.rfind("k-", 0) == 0 || leaf.rfind("pool-", 0) == 0) {
        it.disable_recursion_pending();  // a sandbox's own cgroups: nothing of ours below
      }
    }
  }
  return nodes;
}

// Jupyter's server API through the front: a bound user's kernel is on the node of its runs
// (and of its session "jupyter"), whether the token comes as ?token=, `Authorization: token`
// or `Authorization: Bearer`.
void CheckJupyterAffinity(int port, const std::string& state) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  for (int i = 0; i < kBoundUsers; ++i) {
    const std::string token = BoundToken(i);
    std::string error;
    const std::string run_node = NodeOfRun(c, {{"Authorization", "Bearer " + token}}, &error);
    BOOST_REQUIRE_MESSAGE(!run_node.empty(), BoundUser(i) << ": " << error);
    Answer created = FromResult(c.Post("/api/kernels?token=" + token, "", "application/json"));
    BOOST_REQUIRE_MESSAGE(created.status == 201, BoundUser(i)
                                                     << ": POST /api/kernels: " << created.status
                                                     << " " << created.body);
    rapidjson::Document doc;
    doc.Parse(created.body.c_str());
    BOOST_REQUIRE(!doc.HasParseError() && doc.HasMember("id") && doc["id"].IsString());
    const std::string id = doc["id"].GetString();
    const std::set<std::string> nodes = NodesWithKernels(state);
    BOOST_CHECK_MESSAGE(nodes == std::set<std::string>{run_node},
                        BoundUser(i)
                            << ": its kernel is on " << nodes.size() << " node(s), not (only) on "
                            << run_node << ", the node of its runs");
    Answer got = FromResult(c.Get("/api/kernels/" + id, {{"Authorization", "token " + token}}));
    BOOST_CHECK_MESSAGE(got.status == 200, BoundUser(i) << ": GET with Authorization: token: "
                                                        << got.status << " " << got.body);
    Answer gone =
        FromResult(c.Delete("/api/kernels/" + id, {{"Authorization", "Bearer " + token}}));
    BOOST_CHECK_MESSAGE(gone.status == 204, BoundUser(i) << ": DELETE with Bearer: " << gone.status
                                                         << " " << gone.body);
  }
  BOOST_TEST_MESSAGE("cluster: " << kBoundUsers << " bound users' Jupyter kernels on their nodes");
}

// Each node's cgroup_name, derived by scripts/cluster from its state directory:
// sandrun-<8 hex digits>-n<n>, one per node, none the fixed sandrun-n<n> of before.
// A streamed run through the front: the node's lines pass the front's proxy as they are
// printed (X-Accel-Buffering: no goes through), not when the run ends. The program prints,
// sleeps 2 s and prints again; the first line must arrive well before the second.
void CheckStreamingThroughFront(int port) {
  const std::string body =
      "{\"language\":\"python\",\"code\":\"import time\\nprint('first', flush=True)\\n"
      "time.sleep(2)\\nprint('second')\\n\"}";
  const Streamed s = PostStreamedTo(port, {{"X-Sandrun-User", "user-stream"}}, body,
                                    [](const Event&) { return false; });
  BOOST_REQUIRE_EQUAL(s.status, 200);
  double first = -1, second = -1;
  for (const Event& e : s.events) {
    if (e.name != "stdout") continue;
    const std::string text = e.doc["text"].GetString();
    if (text.find("first") != std::string::npos && first < 0) first = e.at_s;
    if (text.find("second") != std::string::npos && second < 0) second = e.at_s;
  }
  BOOST_TEST_MESSAGE("through the front: first line at " << first << " s, second at " << second
                                                         << " s");
  BOOST_REQUIRE_MESSAGE(first >= 0 && second >= 0, "both lines streamed: " << s.body);
  BOOST_CHECK_MESSAGE(second - first > 1.0, "the first line waited for the run's end");
  BOOST_CHECK_EQUAL(s.events.back().name, "result");
}

void CheckCgroupNames(const std::string& state) {
  std::set<std::string> names;
  for (int n = 1; n <= kNodes; ++n) {
    rapidjson::Document doc;
    const std::string text = ReadText(state + "/nodes/" + std::to_string(n) + "/node-config.json");
    doc.Parse(text.c_str());
    BOOST_REQUIRE(!doc.HasParseError() && doc.HasMember("cgroup_name"));
    const std::string name = doc["cgroup_name"].GetString();
    const std::string suffix = "-n" + std::to_string(n);
    BOOST_CHECK_MESSAGE(name.size() == 8 + 8 + suffix.size() && name.rfind("sandrun-", 0) == 0 &&
                            name.find_first_not_of("0123456789abcdef", 8) == 16 &&
                            name.substr(16) == suffix,
                        "node n" << n << "'s cgroup_name " << name
                                 << " is not sandrun-<8 hex of the state directory>" << suffix);
    names.insert(name.substr(0, 16));
  }
  BOOST_CHECK_EQUAL(names.size(), 1u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Cluster)

BOOST_AUTO_TEST_CASE(NodeLossKeepsLiveUsersAndLinks) {
  ClusterRun cluster;
  const int64_t duration_s = EnvSeconds();
  Figures fig;
  std::vector<User> users(kUsers);
  for (int i = 0; i < kUsers; ++i) users[i].name = "user-" + std::to_string(i);

  const std::string code =
      "import os\n"
      "n = int(open('count').read()) + 1 if os.path.exists('count') else 1\n"
      "open('count', 'w').write(str(n))\n"
      "open('out.txt', 'w').write('%s %d' % (os.environ.get('SR_USER', ''), n))\n"
      "print(n)\n";
  auto body_for = [&](const User& u) {
    std::string escaped;
    for (char c : code) {
      if (c == '\n') {
        escaped += "\\n";
      } else if (c == '"') {
        escaped += "\\\"";
      } else {
        escaped += c;
      }
    }
    // The user's name reaches the file through the code, so that each download is checked.
    std::string with_user = escaped;
    const std::string needle = "os.environ.get('SR_USER', '')";
    with_user.replace(with_user.find(needle), needle.size(), "'" + u.name + "'");
    return "{\"language\":\"python\",\"code\":\"" + with_user + "\"}";
  };

  // One run per user first: its home node, from the link's node.
  httplib::Client warm("127.0.0.1", cluster.port());
  warm.set_read_timeout(60, 0);
  std::map<std::string, int> per_node;
  for (auto& u : users) {
    httplib::Headers h = {{"X-Sandrun-User", u.name}, {"X-Sandrun-Session", "chat-" + u.name}};
    Answer a = FromResult(warm.Post("/run", h, body_for(u), "application/json"));
    BOOST_REQUIRE_MESSAGE(a.status == 200, "warm-up run of " << u.name << ": " << a.status << " "
                                                             << a.body << cluster.LogTails());
    rapidjson::Document doc;
    doc.Parse(a.body.c_str());
    BOOST_REQUIRE(!doc.HasParseError() && doc["files"].IsArray() && doc["files"].Size() >= 1);
    std::string url;
    for (const auto& f : doc["files"].GetArray()) {
      if (std::string(f["name"].GetString()) == "out.txt") url = f["url"].GetString();
    }
    u.home = u.node = LinkNode(url);
    BOOST_REQUIRE_MESSAGE(!u.home.empty(), "no node in the link " << url);
    BOOST_CHECK(doc.HasMember("session_restarted") && !doc["session_restarted"].GetBool());
    u.count = 1;
    u.seen = true;
    per_node[u.home] += 1;
  }
  std::string victim;
  for (const auto& [node, n] : per_node) {
    if (victim.empty() || n > per_node[victim]) victim = node;
  }
  std::ostringstream spread;
  for (const auto& [node, n] : per_node) spread << node << ": " << n << " users; ";
  BOOST_TEST_MESSAGE("cluster: affinity " << spread.str() << "killing " << victim << " at "
                                          << duration_s / 3 << " s of " << duration_s << " s");
  BOOST_REQUIRE_MESSAGE(per_node.size() >= 2, "all users hash to one node: " << spread.str());
  CheckAffinityByIdentity(cluster.port());
  CheckStreamingThroughFront(cluster.port());
  CheckCgroupNames(cluster.state());
  CheckJupyterAffinity(cluster.port(), cluster.state());

  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::seconds(duration_s);
  std::atomic<bool> killed{false};
  Clock::time_point killed_at;
  std::mutex kill_mutex;

  auto client = [&](int index) {
    httplib::Client c("127.0.0.1", cluster.port());
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(60, 0);
    size_t next = 0;
    std::vector<User*> mine;
    for (int i = index; i < kUsers; i += kClients) mine.push_back(&users[i]);
    while (Clock::now() < stop_at) {
      User& u = *mine[next++ % mine.size()];
      const bool dead_user = u.home == victim;
      const bool after_kill = killed.load();
      httplib::Headers h = {{"X-Sandrun-User", u.name},
                            {"X-Sandrun-Session", "chat-" + u.name},
                            {"X-Sandrun-Session-Seen", u.seen ? "1" : "0"}};
      Answer a = FromResult(c.Post("/run", h, body_for(u), "application/json"));
      {
        std::lock_guard<std::mutex> lock(fig.mutex);
        fig.runs += 1;
      }
      if (a.status != 200) {
        if (dead_user && (after_kill || killed.load()) && IsUnavailableJson(a)) {
          fig.Problem("dead node: JSON " + std::to_string(a.status) + " with Retry-After", u.name);
          continue;
        }
        fig.Problem(dead_user ? "dead node: other failure" : "live node: failed run",
                    u.name + " -> " + std::to_string(a.status) + " " + a.body.substr(0, 200));
        continue;
      }
      rapidjson::Document doc;
      doc.Parse(a.body.c_str());
      if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("files") ||
          !doc.HasMember("session_restarted")) {
        fig.Problem("bad answer", u.name + ": " + a.body.substr(0, 200));
        continue;
      }
      std::string url;
      for (const auto& f : doc["files"].GetArray()) {
        if (std::string(f["name"].GetString()) == "out.txt") url = f["url"].GetString();
      }
      const std::string node = LinkNode(url);
      const bool restarted = doc["session_restarted"].GetBool();
      const int64_t count = std::atoll(doc["stdout"].GetString());
      if (node != u.node) {
        // Only the dead node's users move, and only after the kill, to a fresh session.
        if (!dead_user || !after_kill || node == victim || !restarted || count != 1) {
          fig.Problem("wrong move", u.name + " from " + u.node + " to " + node + " restarted " +
                                        (restarted ? "true" : "false") + " count " +
                                        std::to_string(count));
        } else {
          std::lock_guard<std::mutex> lock(fig.mutex);
          fig.restarted_sessions += 1;
          fig.remap_s = std::max(fig.remap_s,
                                 std::chrono::duration<double>(Clock::now() - killed_at).count());
        }
      } else if (restarted || count != u.count + 1) {
        fig.Problem("session broken", u.name + " on " + node + ": count " + std::to_string(count) +
                                          " after " + std::to_string(u.count) +
                                          (restarted ? ", restarted" : ""));
      }
      u.node = node;
      u.count = count;
      u.seen = true;
      const std::string expected = u.name + " " + std::to_string(count);
      Issued issued{PathOf(url), node, expected};
      Answer d = FromResult(c.Get(issued.path));
      {
        std::lock_guard<std::mutex> lock(fig.mutex);
        fig.downloads += 1;
      }
      if (node == victim && killed.load() && IsUnavailableJson(d)) {
        // Issued just before the kill, fetched just after: checked again after the restart.
        fig.Problem("dead node: JSON " + std::to_string(d.status) + " with Retry-After (link)",
                    issued.path);
      } else if (d.status != 200 || d.body != expected) {
        fig.Problem("live link failed", issued.path + " -> " + std::to_string(d.status));
      }
      std::lock_guard<std::mutex> lock(fig.mutex);
      (node == victim ? fig.dead_links : fig.live_links).push_back(issued);
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) threads.emplace_back(client, i);
  std::this_thread::sleep_for(std::chrono::seconds(duration_s / 3));
  {
    std::lock_guard<std::mutex> lock(kill_mutex);
    killed_at = Clock::now();
    const int n = std::atoi(victim.c_str() + 1);
    // Set before the kill: a client whose request the kill fails can have the front's 502
    // before this thread runs its next line (seen under load as "dead node: other failure").
    killed = true;
    cluster.KillNode(n);
  }
  for (auto& t : threads) t.join();

  // After the traffic: every live node's link still downloads; the dead node's give the
  // front's JSON 502 with Retry-After.
  httplib::Client after("127.0.0.1", cluster.port());
  after.set_read_timeout(30, 0);
  int live_after_ok = 0;
  for (const auto& l : fig.live_links) {
    Answer d = FromResult(after.Get(l.path));
    if (d.status == 200 && d.body == l.content) {
      ++live_after_ok;
    } else {
      fig.Problem("live link failed after", l.path + " -> " + std::to_string(d.status));
    }
  }
  // Links the dead node issued before the kill (its warm-up and early runs).
  BOOST_REQUIRE_MESSAGE(!fig.dead_links.empty(), "the killed node issued no link");
  Answer down = FromResult(after.Get(fig.dead_links.front().path));
  BOOST_CHECK_MESSAGE(IsUnavailableJson(down),
                      "a dead node's link while it is down: " << down.status << " " << down.body);

  // The node comes back: its older links serve again, the same bytes.
  const auto back_from = Clock::now();
  cluster.RestartStopped();
  bool back = false;
  while (Clock::now() < back_from + std::chrono::seconds(120)) {
    Answer d = FromResult(after.Get(fig.dead_links.front().path));
    if (d.status == 200) {
      back = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double back_s = std::chrono::duration<double>(Clock::now() - back_from).count();
  BOOST_CHECK_MESSAGE(back, "the restarted node's links did not serve within 120 s\n"
                                << cluster.LogTails());
  int dead_after_ok = 0;
  for (const auto& l : fig.dead_links) {
    Answer d = FromResult(after.Get(l.path));
    if (d.status == 200 && d.body == l.content) ++dead_after_ok;
  }

  int dead_users = 0;
  for (const auto& u : users) dead_users += u.home == victim ? 1 : 0;
  std::ostringstream kinds;
  for (const auto& [kind, n] : fig.failures) kinds << "\n  " << kind << ": " << n;
  BOOST_TEST_MESSAGE("cluster: " << fig.runs << " runs and " << fig.downloads << " downloads in "
                                 << duration_s << " s by " << kClients << " clients for " << kUsers
                                 << " users on " << kNodes << " nodes; " << victim << " ("
                                 << dead_users << " users) killed at " << duration_s / 3 << " s");
  BOOST_TEST_MESSAGE(
      "cluster: failed requests by kind:" << (kinds.str().empty() ? " none" : kinds.str()));
  BOOST_TEST_MESSAGE("cluster: " << fig.restarted_sessions
                                 << " sessions restarted on another node; last dead-node user "
                                    "served elsewhere "
                                 << fig.remap_s << " s after the kill");
  BOOST_TEST_MESSAGE("cluster: live nodes' links after the traffic: "
                     << live_after_ok << "/" << fig.live_links.size() << " served; the dead node's "
                     << dead_after_ok << "/" << fig.dead_links.size() << " served again " << back_s
                     << " s after its restart");
  for (const auto& p : fig.problems) BOOST_TEST_MESSAGE("cluster: " << p);
  bool unexpected = false;
  for (const auto& [kind, n] : fig.failures) unexpected |= kind.rfind("dead node: JSON ", 0) != 0;
  if (unexpected) BOOST_TEST_MESSAGE(cluster.LogTails());

  // Only the dead node's JSON 502/503/504 are allowed failures.
  for (const auto& [kind, n] : fig.failures) {
    BOOST_CHECK_MESSAGE(kind.rfind("dead node: JSON ", 0) == 0,
                        n << " failures of kind '" << kind << "'");
  }
  BOOST_CHECK_EQUAL(fig.restarted_sessions, dead_users);
  BOOST_CHECK(fig.remap_s >= 0 && fig.remap_s < duration_s);
  BOOST_CHECK_EQUAL(live_after_ok, static_cast<int>(fig.live_links.size()));
  BOOST_CHECK_EQUAL(dead_after_ok, static_cast<int>(fig.dead_links.size()));
  BOOST_CHECK(fig.runs > kUsers);
}

BOOST_AUTO_TEST_SUITE_END()
