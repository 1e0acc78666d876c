#include "kernel/kernel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "kernel/jupyter_messaging.h"
#include "python/support_files.h"
#include "sys/syscalls.h"
#include "util/base64.h"
#include "util/text.h"

namespace sandrun::kernel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kSocketDirInside[] = "/tmp/.sandrun-kernel";
constexpr char kSocketDirName[] = ".sandrun-kernel";
// What a kernel can make the daemon hold (its code may send anything): frames per message,
// bytes per frame (ZMQ_MAXMSGSIZE: larger drops the connection, and the kernel is lost),
// messages queued per socket (ZMQ_RCVHWM; a PUB drops past it). Between runs the queues are
// emptied every second (DrainOutput), during a run continuously.
constexpr int kMaxFrames = 64;
constexpr int64_t kMaxFrameBytes = 16 << 20;
constexpr int kMaxQueuedMessages = 64;
// How long a cell that replied may go without its idle status before its output counts as
// lost (FollowCell).
constexpr int kIdleGraceMs = 2000;
// ipykernel's sockets: shell, iopub, stdin, control (the heartbeat is not used: the pidfd
// says whether the kernel lives).
constexpr const char* kSocketNames[] = {"k-1", "k-2", "k-3", "k-4"};
// Every socket ipykernel binds, the heartbeat's (k-5) included: the directory becomes root's
// only once all are there. ipykernel binds the heartbeat last, from a thread of its own
// (IPKernelApp.init_heartbeat after init_sockets); taking the directory before that made the
// bind fail and the kernel exit with code 1 now and then ("the kernel ended while starting").
constexpr const char* kBoundSocketNames[] = {"k-1", "k-2", "k-3", "k-4", "k-5"};

// The start-up line of a kernel (an item of IPKernelApp.exec_lines): runs
// python/kernel_setup.py in a dict of its own, so that no name reaches the user's namespace.
// The file's text is a Python string literal in the line (backslashes, quotes and control
// characters escaped).
std::string KernelSetupLine() {
  std::string literal = "'";
  for (const char ch : python::DaemonScript("kernel_setup.py")) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\\' || ch == '\'') {
      literal += '\\';
      literal += ch;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      literal += escaped;
    } else {
      literal += ch;
    }
  }
  literal += "'";
  return "exec(" + literal + ", {'get_ipython': get_ipython})";
}

Error KernelError(const std::string& what) { return MakeError(ErrorKind::kSystem, what); }

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::string IsoNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
  return buf;
}

Status MakeOwnedDir(const std::string& path, int mode, uid_t uid, gid_t gid) {
  if (::mkdir(path.c_str(), 0700) != 0) return sys::ErrnoError("mkdir " + path);
  if (::chown(path.c_str(), uid, gid) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return sys::ErrnoError("chown/chmod " + path);
  }
  return OkStatus();
}

std::string Member(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

int IntMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  return it != object.MemberEnd() && it->value.IsInt() ? it->value.GetInt() : 0;
}

// The richest form of a mime bundle that is not plain text: an image, a table, Markdown.
std::optional<RichOutput> RichForm(const rapidjson::Value& data) {
  const std::string png = Member(data, "image/png");
  if (!png.empty()) {
    // Jupyter sends image data with line breaks (MIME base64).
    auto bytes = util::DecodeBase64(png, util::Base64Whitespace::kSkipped);
    if (!bytes) return std::nullopt;
    return RichOutput{"image", "image/png", "", std::move(*bytes)};
  }
  const std::string markdown = Member(data, "text/markdown");
  if (!markdown.empty()) {
    const bool table = markdown.rfind('|', 0) == 0;
    return RichOutput{table ? "table" : "text", "text/markdown", markdown, ""};
  }
  const std::string html = Member(data, "text/html");
  if (html.find("<table") != std::string::npos) {
    return RichOutput{"table", "text/html", html, ""};
  }
  return std::nullopt;
}

}  // namespace

struct Kernel::Sockets {
  void* shell = nullptr;
  void* iopub = nullptr;
  void* stdin_socket = nullptr;
  void* control = nullptr;
  ~Sockets() {
    for (void* s : {shell, iopub, stdin_socket, control}) {
      if (s != nullptr) zmq_close(s);
    }
  }
};

namespace {

// Receives one multipart message without waiting; false when none is there. Frames past
// kMaxFrames are read and dropped.
bool Receive(void* socket, std::vector<std::string>* frames) {
  frames->clear();
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      return !frames->empty();
    }
    if (static_cast<int>(frames->size()) < kMaxFrames) {
      frames->emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    }
    const bool more = zmq_msg_more(&msg) != 0;
    zmq_msg_close(&msg);
    if (!more) return true;
  }
}

}  // namespace

Kernel::Kernel(std::string dir, std::string id, KernelSpec spec)
    : dir_(std::move(dir)), id_(std::move(id)), spec_(std::move(spec)) {
  workspace_ = dir_ + "/fs/ws";
  tmp_ = dir_ + "/fs/tmp";
}

Kernel::~Kernel() {
  Shutdown();
  socket_dir_.Reset();
  if (mounted_) (void)sys::Unmount(dir_ + "/fs");
  (void)sys::RemoveTree(dir_);
}

Result<std::unique_ptr<Kernel>> Kernel::Create(std::string dir, std::string id, KernelSpec spec) {
  std::unique_ptr<Kernel> k(new Kernel(std::move(dir), std::move(id), std::move(spec)));
  const uid_t uid = k->spec_.host_uid;
  const gid_t gid = k->spec_.host_gid;
  Status s = sys::MakeDirs(k->dir_ + "/fs", 0755);
  if (s.ok()) s = sys::MountTmpfs(k->dir_ + "/fs", k->spec_.limits.disk_bytes, 0, 0, 0755);
  k->mounted_ = s.ok();
  if (s.ok()) s = MakeOwnedDir(k->workspace_, 0755, uid, gid);
  if (s.ok()) s = MakeOwnedDir(k->tmp_, 01777, uid, gid);
  const std::string socket_dir = k->tmp_ + "/" + kSocketDirName;
  if (s.ok()) s = MakeOwnedDir(socket_dir, 0700, uid, gid);
  if (!s.ok()) return KernelError(s.error().message);
  k->socket_dir_ =
      sys::UniqueFd(::open(socket_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!k->socket_dir_.valid()) return sys::ErrnoError("open " + socket_dir);
  k->key_ = util::RandomHex(32);
  k->session_id_ = util::RandomHex(16);
  const std::string connection = socket_dir + "/connection.json";
  s = sys::WriteFile(connection, ConnectionFileJson(std::string(kSocketDirInside) + "/k", k->key_),
                     0600);
  if (s.ok() && ::chown(connection.c_str(), uid, gid) != 0) {
    s = sys::ErrnoError("chown " + connection);
  }
  // Root's (the daemon's), readable by the kernel: its code cannot change them.
  for (const auto& [name, content] : k->spec_.setup_files) {
    if (!s.ok()) break;
    s = sys::WriteFile(socket_dir + "/" + name, content, 0644);
  }
  if (!s.ok()) return KernelError(s.error().message);
  return k;
}

Status Kernel::Boot(const sandbox::SandboxRunner& runner, void* zmq_context,
                    std::unique_ptr<sandbox::RunCgroup> cgroup) {
  sandbox::SandboxSpec spec;
  spec.argv = {spec_.python,
               "-m",
               "ipykernel_launcher",
               "-f",
               std::string(kSocketDirInside) + "/connection.json",
               "--HistoryManager.enabled=False",
               "--IPKernelApp.quiet=True",
               "--IPKernelApp.exec_lines",
               KernelSetupLine()};
  for (const auto& var : spec_.env) {
    if (var.rfind("MPLBACKEND=", 0) != 0) spec.env.push_back(var);  // the inline backend
  }
  // A fresh profile per kernel: no startup files from the workspace run before we connect.
  spec.env.push_back("IPYTHONDIR=/tmp/.ipython");
  spec.workspace_dir = workspace_;
  spec.tmp_dir = tmp_;
  spec.host_uid = spec_.host_uid;
  spec.host_gid = spec_.host_gid;
  spec.run_id = id_;
  spec.limits = spec_.limits;
  spec.network = spec_.network;
  if (spec_.zygote) spec.zygote = sandbox::ZygoteKind::kKernel;
  // RLIMIT_CPU counts the kernel's whole life; each run's CPU time is bounded from the
  // cgroup instead (Execute).
  spec.limits.cpu_time_s = int64_t{1} << 30;
  spec.limits.output_bytes = 64 << 10;  // what DrainOutput keeps: the start-up error
  auto started = runner.Start(spec, std::move(cgroup));
  if (!started.ok()) return KernelError(started.error().message);
  sandbox_ = std::move(*started);

  // Wait for the four sockets to be bound.
  const auto deadline = Clock::now() + std::chrono::milliseconds(spec_.start_timeout_ms);
  std::string early;
  for (;;) {
    early += sandbox_->DrainOutput();
    if (sandbox_->Exited()) {
      std::string why = sandbox_->ExitDescription();
      Shutdown();
      return KernelError("the kernel ended before it was ready (" + why +
                         "): " + util::SanitizeUtf8(early.substr(0, 4096)));
    }
    bool bound = true;
    for (const char* name : kBoundSocketNames) {
      struct stat st;
      bound = bound && ::fstatat(socket_dir_.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISSOCK(st.st_mode);
    }
    if (bound) break;
    if (Clock::now() >= deadline) {
      Shutdown();
      return KernelError("the kernel did not start within " +
                         std::to_string(spec_.start_timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (Status s = Connect(zmq_context); !s.ok()) {
    Shutdown();
    return s;
  }
  if (Status s = WaitReady(); !s.ok()) {
    Shutdown();
    return s;
  }
  if (Status s = sandbox_->Freeze(true); !s.ok()) {
    Shutdown();
    return KernelError("the kernel cannot be paused between cells: " + s.error().message);
  }
  return OkStatus();
}

Status Kernel::Connect(void* zmq_context) {
  // From now on the directory is root's: the sandbox user can no longer add, remove or
  // replace an entry in it. Then every entry we connect to must be the user's socket.
  if (::fchown(socket_dir_.get(), 0, 0) != 0 || ::fchmod(socket_dir_.get(), 0755) != 0) {
    return sys::ErrnoError("chown the socket directory");
  }
  for (const char* name : kSocketNames) {
    struct stat st;
    if (::fstatat(socket_dir_.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISSOCK(st.st_mode) || st.st_uid != spec_.host_uid) {
      return KernelError(std::string("the kernel's socket ") + name + " is not its own socket");
    }
  }
  sockets_ = std::make_unique<Sockets>();
  const std::string base = "ipc:///proc/self/fd/" + std::to_string(socket_dir_.get()) + "/";
  struct Plan {
    void** socket;
    int type;
    const char* name;
  };
  const Plan plans[] = {{&sockets_->shell, ZMQ_DEALER, "k-1"},
                        {&sockets_->iopub, ZMQ_SUB, "k-2"},
                        {&sockets_->stdin_socket, ZMQ_DEALER, "k-3"},
                        {&sockets_->control, ZMQ_DEALER, "k-4"}};
  // ipykernel sends an input_request on its stdin ROUTER to the identity its execute_request
  // came from: shell and stdin share one, as Jupyter clients do.
  const std::string routing_id = "sandrun-" + session_id_.substr(0, 8);
  for (const Plan& p : plans) {
    void* s = zmq_socket(zmq_context, p.type);
    if (s == nullptr) return KernelError("zmq_socket failed");
    *p.socket = s;
    // Reconnection stays on: a connect in the instant between the kernel's bind and listen
    // is refused, and the retry finds the same socket (the directory is root's now).
    const int zero = 0;
    const int64_t max_bytes = kMaxFrameBytes;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_bytes, sizeof max_bytes);
    zmq_setsockopt(s, ZMQ_RCVHWM, &kMaxQueuedMessages, sizeof kMaxQueuedMessages);
    if (p.type == ZMQ_SUB) zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    if (p.socket == &sockets_->shell || p.socket == &sockets_->stdin_socket) {
      zmq_setsockopt(s, ZMQ_ROUTING_ID, routing_id.data(), routing_id.size());
    }
    if (zmq_connect(s, (base + p.name).c_str()) != 0) {
      return KernelError(std::string("zmq_connect to the kernel's ") + p.name + " failed");
    }
  }
  return OkStatus();
}

bool Kernel::Send(void* socket, const std::string& msg_type, const std::string& content,
                  std::string* msg_id) {
  OutgoingMessage m;
  m.msg_id = util::RandomHex(16);
  m.session = session_id_;
  m.msg_type = msg_type;
  m.content_json = content;
  m.date = IsoNow();
  if (msg_id != nullptr) *msg_id = m.msg_id;
  const auto frames = EncodeMessage(m, key_);
  for (size_t i = 0; i < frames.size(); ++i) {
    const int flags = (i + 1 < frames.size() ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT;
    if (zmq_send(socket, frames[i].data(), frames[i].size(), flags) < 0) return false;
  }
  return true;
}

// kernel_info_request on shell until both its reply and an iopub message for it arrive:
// then iopub is subscribed and no output of the first cell is lost.
Status Kernel::WaitReady() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(spec_.start_timeout_ms);
  std::string id;
  bool replied = false, published = false;
  auto sent = Clock::now();
  if (!Send(sockets_->shell, "kernel_info_request", "{}", &id)) {
    return KernelError("cannot send kernel_info_request");
  }
  std::vector<std::string> frames;
  while (!(replied && published)) {
    if (Clock::now() >= deadline) return KernelError("the kernel did not answer kernel_info");
    if (sandbox_->Exited()) {
      return KernelError("the kernel ended while starting (" + sandbox_->ExitDescription() +
                         "): " + util::SanitizeUtf8(sandbox_->DrainOutput().substr(0, 4096)));
    }
    if (MsSince(sent) > 500) {  // iopub joined too late for that one: ask again
      replied = published = false;
      sent = Clock::now();
      if (!Send(sockets_->shell, "kernel_info_request", "{}", &id)) {
        return KernelError("cannot send kernel_info_request");
      }
    }
    zmq_pollitem_t items[] = {{sockets_->shell, 0, ZMQ_POLLIN, 0},
                              {sockets_->iopub, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, 2, 50);
    while (Receive(sockets_->shell, &frames)) {
      auto m = DecodeMessage(frames, key_);
      if (m.ok() && m->parent_msg_id == id && m->msg_type == "kernel_info_reply") replied = true;
    }
    while (Receive(sockets_->iopub, &frames)) {
      auto m = DecodeMessage(frames, key_);
      if (m.ok() && m->parent_msg_id == id) published = true;
    }
    DrainOutput();
  }
  return OkStatus();
}

// One cell as Execute follows it: what came back, what it cost and which limit it met.
struct CellProgress {
  CellProgress(const ExecuteLimits& limits, ExecuteResult& result) : limits(limits), r(result) {}
  const ExecuteLimits& limits;
  ExecuteResult& r;
  uint64_t output = 0;  // bytes of text and displays kept, against limits.output_bytes
  bool replied = false, idle = false, died = false;
  bool timed_out = false, cpu_out = false, flooded = false;
  sandbox::OutputObserver* observer = nullptr;  // sees stdout and stderr as they come
  bool abandoned = false;                       // the observer's reader went away
  Clock::time_point kill_at{};       // when r.interrupted: the end of the interrupt's grace
  const CellRelay* relay = nullptr;  // ExecuteRelayed's: told each message
};

namespace {

// `text` appended to `to` as far as the cell's output budget goes (r.truncated past it);
// what is kept goes to the cell's observer as output on `fd` too (0: not).
void AddOutput(CellProgress& cell, std::string& to, const std::string& text, int fd = 0) {
  if (cell.output >= cell.limits.output_bytes) {
    cell.r.truncated = true;
    return;
  }
  const size_t room = static_cast<size_t>(cell.limits.output_bytes - cell.output);
  if (text.size() > room) cell.r.truncated = true;
  const std::string kept = text.substr(0, room);
  cell.output += kept.size();
  to += kept;
  if (fd != 0 && cell.observer != nullptr) cell.observer->OnOutput(fd, kept);
}

// An execute_result or display_data message's content `c`.
void TakeDisplay(CellProgress& cell, const std::string& msg_type, const rapidjson::Value& c) {
  auto data = c.FindMember("data");
  if (data == c.MemberEnd() || !data->value.IsObject()) return;
  std::optional<RichOutput> rich = RichForm(data->value);
  // A value is shown once: a table or an image as that display only; any other result also
  // as its plain form in stdout, as a program run shows it (sitecustomize.show_value).
  const bool shown_rich = rich && (rich->kind == "table" || rich->kind == "image");
  if ((msg_type == "execute_result" && !shown_rich) || !rich) {
    std::string plain = Member(data->value, "text/plain");
    if (!plain.empty()) plain.push_back('\n');
    AddOutput(cell, cell.r.stdout_text, plain, 1);
  }
  if (rich) {
    const uint64_t size = rich->bytes.size() + rich->text.size();
    if (cell.output + size > cell.limits.output_bytes) {
      cell.r.truncated = true;
    } else {
      cell.output += size;
      cell.r.displays.push_back(std::move(*rich));
    }
  }
}

// An error message's content `c`: the exception and its traceback (without colours).
void TakeError(CellProgress& cell, const rapidjson::Value& c) {
  std::string trace;
  auto tb = c.FindMember("traceback");
  if (tb != c.MemberEnd() && tb->value.IsArray()) {
    for (const auto& line : tb->value.GetArray()) {
      if (line.IsString()) trace += std::string(line.GetString(), line.GetStringLength()) + "\n";
    }
  }
  cell.r.ename = Member(c, "ename");
  cell.r.evalue = Member(c, "evalue");
  if (trace.empty()) trace = cell.r.ename + ": " + cell.r.evalue + "\n";
  AddOutput(cell, cell.r.traceback, StripAnsi(trace));
  if (cell.r.status == ExecuteStatus::kOk) cell.r.status = ExecuteStatus::kError;
}

// One iopub message of the cell.
void TakeIopub(CellProgress& cell, const IncomingMessage& m) {
  const rapidjson::Value& c = m.content;
  if (m.msg_type == "stream") {
    const bool err = Member(c, "name") == "stderr";
    AddOutput(cell, err ? cell.r.stderr_text : cell.r.stdout_text, Member(c, "text"), err ? 2 : 1);
  } else if (m.msg_type == "execute_result" || m.msg_type == "display_data") {
    TakeDisplay(cell, m.msg_type, c);
  } else if (m.msg_type == "error") {
    TakeError(cell, c);
  } else if (m.msg_type == "status" && Member(c, "execution_state") == "idle") {
    cell.idle = true;
  }
}

// The cell's execute_reply.
void TakeExecuteReply(CellProgress& cell, const IncomingMessage& m) {
  cell.replied = true;
  cell.r.execution_count = IntMember(m.content, "execution_count");
  if (Member(m.content, "status") != "ok" && cell.r.status == ExecuteStatus::kOk) {
    cell.r.status = ExecuteStatus::kError;
  }
}

// What the cell cost, from the sandbox's counters before and after it.
void TakeUsage(ExecuteResult& r, const sandbox::CgroupStats& before,
               const sandbox::CgroupStats& after, const sandbox::CounterBytes& net_before,
               const sandbox::CounterBytes& net_after) {
  if (after.cpu_usage_ms >= 0 && before.cpu_usage_ms >= 0) {
    r.cpu_ms = after.cpu_usage_ms - before.cpu_usage_ms;
  }
  r.max_rss_kb = after.peak_memory_kb;
  if (net_before.rx >= 0 && net_after.rx >= 0) {
    r.net_rx_bytes = net_after.rx - net_before.rx;
    r.net_tx_bytes = net_after.tx - net_before.tx;
  }
}

// The cell's status from the limit it met, the first of these that applies.
void SetLimitStatus(CellProgress& cell, bool oom_killed) {
  if (oom_killed) {
    cell.r.status = ExecuteStatus::kMemoryLimit;
  } else if (cell.flooded) {
    cell.r.status = ExecuteStatus::kOutputLimit;
  } else if (cell.timed_out) {
    cell.r.status = ExecuteStatus::kWallTimeout;
  } else if (cell.cpu_out) {
    cell.r.status = ExecuteStatus::kCpuTimeout;
  } else if (cell.died) {
    cell.r.status = ExecuteStatus::kKilled;
  }
}

}  // namespace

ExecuteResult Kernel::Execute(const std::string& code, const ExecuteLimits& limits,
                              sandbox::OutputObserver* observer) {
  return ExecuteCell(ExecuteRequestContent(code), limits, observer, nullptr);
}

ExecuteResult Kernel::ExecuteRelayed(const std::string& request_content,
                                     const ExecuteLimits& limits, const CellRelay& relay) {
  return ExecuteCell(request_content, limits, nullptr, &relay);
}

ExecuteResult Kernel::ExecuteCell(const std::string& request_content, const ExecuteLimits& limits,
                                  sandbox::OutputObserver* observer, const CellRelay* relay) {
  ExecuteResult r;
  const auto start = Clock::now();
  auto lost = [&](std::string why) {
    r.status = ExecuteStatus::kKilled;
    r.stderr_text = std::move(why);
    Shutdown();
    r.kernel_lost = true;
    return r;
  };
  if (!alive()) {
    r.status = ExecuteStatus::kKilled;
    r.kernel_lost = true;
    return r;
  }
  // Frozen between cells (Boot, and the end of the last cell): no code of it runs then.
  if (Status s = sandbox_->Freeze(false); !s.ok()) {
    return lost("sandrun: the kernel could not be resumed: " + s.error().message + "\n");
  }
  const sandbox::CgroupStats before = sandbox_->Stats();
  const sandbox::CounterBytes net_before = sandbox_->NetworkUsage();
  std::string id;
  if (!Send(sockets_->shell, "execute_request", request_content, &id)) {
    return lost("sandrun: the kernel does not take requests\n");
  }
  CellProgress cell(limits, r);
  cell.observer = observer;
  cell.relay = relay;
  FollowCell(cell, id, start, before.cpu_usage_ms);
  const sandbox::CgroupStats after = sandbox_->Stats();
  r.wall_ms = MsSince(start);
  TakeUsage(r, before, after, net_before, sandbox_->NetworkUsage());
  // A lost iopub connection is not made again: no later cell's output would come back.
  if (cell.died || r.output_lost) {
    Shutdown();
    r.kernel_lost = true;
  } else if (Status s = sandbox_->Freeze(true); !s.ok()) {
    // What the cell left running in the background must not run on until the next cell.
    r.stderr_text += "sandrun: the kernel could not be paused after the cell (" +
                     s.error().message + "): it was ended\n";
    Shutdown();
    r.kernel_lost = true;
  }
  SetLimitStatus(cell, after.oom_kills > before.oom_kills);
  return r;
}

void Kernel::TakeMessages(CellProgress& cell, const std::string& id) {
  std::vector<std::string> frames;
  while (Receive(sockets_->iopub, &frames)) {
    auto m = DecodeMessage(frames, key_);
    if (m.ok() && m->parent_msg_id == id) {
      TakeIopub(cell, *m);
      if (cell.relay != nullptr) cell.relay->on_message(*m);
    }
  }
  while (Receive(sockets_->shell, &frames)) {
    auto m = DecodeMessage(frames, key_);
    if (m.ok() && m->parent_msg_id == id && m->msg_type == "execute_reply") {
      TakeExecuteReply(cell, *m);
      if (cell.relay != nullptr) cell.relay->on_message(*m);
    }
  }
  while (Receive(sockets_->stdin_socket, &frames)) {
    auto m = DecodeMessage(frames, key_);
    if (m.ok() && m->parent_msg_id == id && m->msg_type == "input_request" &&
        cell.relay != nullptr) {
      cell.relay->on_message(*m);
    }
  }
  std::string reply;
  while (cell.relay != nullptr && cell.relay->stdin_reply && cell.relay->stdin_reply(&reply)) {
    (void)Send(sockets_->stdin_socket, "input_reply", reply, nullptr);
  }
}

void Kernel::FollowCell(CellProgress& cell, const std::string& id, Clock::time_point start,
                        int64_t cpu_before_ms) {
  const auto deadline = start + std::chrono::milliseconds(cell.limits.wall_ms);
  auto interrupt = [&] {
    if (cell.r.interrupted) return;
    cell.r.interrupted = true;
    (void)Send(sockets_->control, "interrupt_request", "{}", nullptr);
    cell.kill_at = Clock::now() + std::chrono::milliseconds(kInterruptGraceMs);
  };
  auto next_cpu_check = start;
  std::optional<Clock::time_point> replied_at;
  while (!(cell.replied && cell.idle)) {
    zmq_pollitem_t items[] = {{sockets_->shell, 0, ZMQ_POLLIN, 0},
                              {sockets_->iopub, 0, ZMQ_POLLIN, 0},
                              {sockets_->stdin_socket, 0, ZMQ_POLLIN, 0},
                              {nullptr, sandbox_->pidfd(), ZMQ_POLLIN, 0}};
    zmq_poll(items, 4, cell.observer ? sandbox::OutputObserver::kTickMs : 100);
    TakeMessages(cell, id);
    DrainOutput();
    if (sandbox_->Exited()) {
      cell.died = true;
      return;
    }
    const auto now = Clock::now();
    if (cell.replied && !replied_at) replied_at = now;
    // ipykernel publishes the idle status right after the reply: when it does not come, an
    // iopub message over kMaxFrameBytes took the connection with it (and what followed it).
    if (replied_at && !cell.idle && now - *replied_at >= std::chrono::milliseconds(kIdleGraceMs)) {
      cell.idle = true;
      cell.flooded = true;
      cell.r.output_lost = true;
      cell.r.truncated = true;
    }
    if (!cell.flooded && cell.output >= cell.limits.output_bytes && cell.r.truncated) {
      cell.flooded = true;
      interrupt();
    }
    if (!cell.timed_out && now >= deadline) {
      cell.timed_out = true;
      interrupt();
    }
    if (!cell.cpu_out && now >= next_cpu_check) {
      next_cpu_check = now + std::chrono::milliseconds(100);
      const int64_t used = sandbox_->Stats().cpu_usage_ms - cpu_before_ms;
      if (cpu_before_ms >= 0 && used > cell.limits.cpu_ms) {
        cell.cpu_out = true;
        interrupt();
      }
    }
    if (cell.observer && !cell.abandoned && !cell.observer->Tick()) {
      cell.abandoned = true;  // nobody waits for the cell: it ends now
      interrupt();
    }
    if (cell.relay != nullptr && cell.relay->interrupt_asked && cell.relay->interrupt_asked()) {
      interrupt();
    }
    if (cell.r.interrupted && now >= cell.kill_at) {  // the interrupt did not end the cell
      cell.died = true;
      return;
    }
  }
}

namespace {

// The kernel's cgroup as a host helper of a pooled kernel joins it (FillFrozen): the memory
// cgroup alone, so that what it writes is charged to the kernel while the freezer (v1: a
// hierarchy of its own) does not stop it. Everything else goes to the kernel's cgroup as is.
class HelperView : public sandbox::RunCgroup {
 public:
  explicit HelperView(sandbox::RunCgroup* kernel) : kernel_(kernel) {}
  Status AddProcess(pid_t pid) override { return kernel_->AddMemoryOnly(pid); }
  Status AddMemoryOnly(pid_t pid) override { return kernel_->AddMemoryOnly(pid); }
  Status EnterCallingThread() override { return Refused(); }
  Status LeaveCallingThread() override { return OkStatus(); }
  Status AddAfterClone(pid_t pid) override { return kernel_->AddAfterClone(pid); }
  Status SetLimits(const sandbox::CgroupLimits&) override { return Refused(); }
  Status Rename(const std::string&) override { return Refused(); }
  sandbox::CgroupStats Stats() const override { return kernel_->Stats(); }
  Status Freeze(bool) override { return Refused(); }
  Status Destroy() override { return OkStatus(); }  // the kernel's sandbox owns the cgroup

 private:
  static Status Refused() {
    return MakeError(ErrorKind::kSystem, "a helper of a frozen kernel only joins its cgroup");
  }
  sandbox::RunCgroup* kernel_;
};

}  // namespace

Status Kernel::FillFrozen(const Populate& populate, bool thaw) {
  if (!alive()) return KernelError("the pooled kernel ended while waiting");
  if (!populate) return OkStatus();
  sandbox::RunCgroup* cgroup = sandbox_->cgroup();
  HelperView view(cgroup);
  if (thaw) {
    if (Status s = sandbox_->Freeze(false); !s.ok()) {
      Shutdown();
      return KernelError("the pooled kernel could not be resumed: " + s.error().message);
    }
  }
  Status filled = populate(workspace_, cgroup != nullptr ? &view : nullptr);
  if (thaw) {
    if (Status s = sandbox_->Freeze(true); !s.ok()) {
      Shutdown();
      return KernelError("the kernel cannot be paused between cells: " + s.error().message);
    }
  }
  return filled;
}

Status Kernel::Rename(const std::string& dir, const std::string& id) {
  if (Status s = sys::Rename(dir_, dir); !s.ok()) return KernelError(s.error().message);
  dir_ = dir;
  workspace_ = dir_ + "/fs/ws";
  tmp_ = dir_ + "/fs/tmp";
  if (sandbox_ != nullptr && sandbox_->cgroup() != nullptr) {
    if (Status s = sandbox_->cgroup()->Rename(id); !s.ok()) return KernelError(s.error().message);
  }
  id_ = id;
  return OkStatus();
}

bool Kernel::alive() const {
  return sandbox_ != nullptr && sockets_ != nullptr && !sandbox_->Exited();
}

void Kernel::DrainOutput() {
  if (sandbox_) (void)sandbox_->DrainOutput();
}

void Kernel::DropMessages() {
  if (!sockets_) return;
  std::vector<std::string> frames;
  for (void* s : {sockets_->shell, sockets_->iopub, sockets_->control}) {
    for (int i = 0; i < 4 * kMaxQueuedMessages && Receive(s, &frames); ++i) {
    }
  }
}

void Kernel::Shutdown() {
  sockets_.reset();
  if (sandbox_) sandbox_->Kill();
  sandbox_.reset();
}

}  // namespace sandrun::kernel
