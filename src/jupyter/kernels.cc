#include "jupyter/kernels.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "kernel/jupyter_messaging.h"
#include "run/kernel_notes.h"
#include "util/text.h"

namespace sandrun::jupyter {

struct JupyterKernels::Entry {
  std::string id, user, key;
  std::mutex exec_mu;  // one execute at a time; Delete waits for it
  std::mutex mu;       // last_activity, input_replies
  std::string last_activity;
  std::deque<std::string> input_replies;  // for the running execute's input_request
  std::atomic<int64_t> last_used_s{0};    // steady clock, for the sweep
  std::atomic<bool> busy{false};
  std::atomic<bool> interrupt{false};
  std::atomic<bool> deleted{false};
  std::atomic<int> connections{0};
  // Of the kernel now in use (under exec_mu, or while it boots): why the session's files
  // were not restored into it ("" when they were: then its executes save the session), and
  // the stamps of its workspace after its last execute.
  std::string restore_note;
  bool restore_noted = false;
  storage::FileStamps stamps;
  bool stamped = false;
};

namespace {

// A kernel id as jupyter_server makes them (a UUID 4), so that clients that check the shape
// take it.
std::string NewKernelId() {
  std::string hex = util::RandomHex(16);
  hex[12] = '4';
  hex[16] = "89ab"[hex[16] % 4];
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

// What a cell that a limit stopped tells the client (stderr), or "".
std::string LimitNote(const kernel::ExecuteResult& r, const config::Limits& limits) {
  const std::string what = run::CellStoppedBy(r, limits);
  if (what.empty()) return "";
  const std::string fate = r.kernel_lost
                               ? "the kernel was ended: the next execute starts a new one, "
                                 "without the variables of earlier ones"
                               : "the cell was interrupted; the kernel keeps its variables";
  return "sandrun: stopped: " + what + "; " + fate;
}

// Tells the client that its execute_request could not run: an error, the execute_reply and
// the idle status, all children of `request`. Returns false (the cell did not succeed).
bool SendFailure(const ClientMessage& request, const std::string& session,
                 const std::function<void(std::string)>& send, const std::string& ename,
                 const std::string& evalue) {
  const std::string error = ErrorContent(ename, evalue, ename + ": " + evalue);
  send(MessageToClient("iopub", "status", request.header(), StatusContent("busy"), session));
  send(MessageToClient("iopub", "error", request.header(), error, session));
  send(MessageToClient("shell", "execute_reply", request.header(),
                       ErrorReplyContent(0, ename, evalue), session));
  send(MessageToClient("iopub", "status", request.header(), StatusContent("idle"), session));
  return false;
}

int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

KernelModel JupyterKernels::ModelOf(const Entry& e) const {
  KernelModel m;
  m.id = e.id;
  {
    std::lock_guard<std::mutex> lock(const_cast<Entry&>(e).mu);
    m.last_activity = e.last_activity;
  }
  m.execution_state = e.busy ? "busy" : "idle";
  m.connections = e.connections;
  return m;
}

void JupyterKernels::SweepUnderLock() {
  // A kernel that a limit or idle expiry ended stays listed (a client may still delete or
  // restart it) until it has been unused for kernel_idle_s more.
  const int64_t idle_s = service_->LiveConfig()->kernel_idle_s;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = *it->second;
    if (e.connections == 0 && !e.busy && NowS() - e.last_used_s > idle_s &&
        !service_->kernels().Has(e.key)) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<JupyterKernels::Entry> JupyterKernels::Find(const std::string& user,
                                                            const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  SweepUnderLock();
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second->user != user) return nullptr;
  return it->second;
}

Result<kernel::KernelManager::Acquired> JupyterKernels::Acquire(Entry& e) {
  const auto live = service_->LiveConfig();
  const std::string user = e.user;
  auto got = service_->kernels().Acquire(
      e.key, service_->JupyterKernelSpec(*live),
      [this, &e, user](const std::string& workspace, sandbox::RunCgroup* cgroup) {
        e.restore_note = service_->RestoreJupyterWorkspace(user, workspace, cgroup);
        e.restore_noted = false;
        e.stamped = false;
        return OkStatus();
      });
  return got;
}

bool JupyterKernels::Boot(Entry& e, Refusal* refusal) {
  auto got = Acquire(e);
  if (!got.ok()) {
    *refusal = {503, got.error().kind == ErrorKind::kUnavailable
                         ? got.error().message + "; retry shortly"
                         : "the kernel could not start: " + got.error().message};
    return false;
  }
  return true;  // the lease ends here: the kernel waits, frozen, for its first execute
}

bool JupyterKernels::Start(const std::string& user, KernelModel* model, Refusal* refusal) {
  std::string why = stopping_ ? "sandrun is stopping" : service_->KernelsUnavailable();
  if (!why.empty()) {
    *refusal = {503, why};
    return false;
  }
  const auto live = service_->LiveConfig();
  auto e = std::make_shared<Entry>();
  e->id = NewKernelId();
  e->user = user;
  e->key = "jupyter:" + user + "/" + e->id;
  e->last_activity = IsoNow();
  e->last_used_s = NowS();
  {
    std::lock_guard<std::mutex> lock(mu_);
    SweepUnderLock();
    const auto mine = std::count_if(entries_.begin(), entries_.end(), [&](const auto& kv) {
      const Entry& other = *kv.second;
      return other.user == user && (other.busy || service_->kernels().Has(other.key));
    });
    if (mine >= live->max_kernels) {
      *refusal = {429, "you have " + std::to_string(mine) + " kernels, the most max_kernels (" +
                           std::to_string(live->max_kernels) +
                           ") allows: delete one (DELETE /api/kernels/<id>)"};
      return false;
    }
    e->busy = true;  // not swept while it boots
    entries_[e->id] = e;
  }
  const bool booted = Boot(*e, refusal);
  e->busy = false;
  if (!booted) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(e->id);
    return false;
  }
  *model = ModelOf(*e);
  return true;
}

std::vector<KernelModel> JupyterKernels::List(const std::string& user) {
  std::vector<std::shared_ptr<Entry>> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SweepUnderLock();
    for (const auto& [id, e] : entries_) {
      if (e->user == user) mine.push_back(e);
    }
  }
  std::vector<KernelModel> out;
  for (const auto& e : mine) out.push_back(ModelOf(*e));
  return out;
}

bool JupyterKernels::Get(const std::string& user, const std::string& id, KernelModel* model) {
  auto e = Find(user, id);
  if (!e) return false;
  *model = ModelOf(*e);
  return true;
}

bool JupyterKernels::Delete(const std::string& user, const std::string& id) {
  auto e = Find(user, id);
  if (!e) return false;
  e->deleted = true;
  e->interrupt = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(id);
  }
  // Waits for a running execute (interrupted, killed after kInterruptGraceMs), so that the
  // kernel is not leased and End ends it now.
  std::lock_guard<std::mutex> exec(e->exec_mu);
  service_->kernels().End(e->key, "the kernel was deleted");
  return true;
}

bool JupyterKernels::Restart(const std::string& user, const std::string& id, KernelModel* model,
                             Refusal* refusal) {
  auto e = Find(user, id);
  if (!e) return false;
  e->interrupt = true;
  std::lock_guard<std::mutex> exec(e->exec_mu);
  service_->kernels().End(e->key, "the kernel was restarted");
  e->busy = true;
  const bool booted = Boot(*e, refusal);
  e->busy = false;
  if (!booted) return true;  // refusal says why; the entry stays, without a kernel
  *model = ModelOf(*e);
  return true;
}

bool JupyterKernels::Interrupt(const std::string& user, const std::string& id) {
  auto e = Find(user, id);
  if (!e) return false;
  if (e->busy) e->interrupt = true;
  return true;
}

void JupyterKernels::Connections(const std::string& id, int delta) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second->connections += delta;
}

void JupyterKernels::InputReply(const std::string& user, const std::string& id,
                                std::string content) {
  constexpr size_t kMaxInputReplies = 16;
  auto e = Find(user, id);
  if (!e || !e->busy) return;
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->input_replies.size() < kMaxInputReplies) e->input_replies.push_back(std::move(content));
}

void JupyterKernels::InterruptAll() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  for (auto& [id, e] : entries_) e->interrupt = true;
}

bool JupyterKernels::Execute(const std::string& user, const std::string& id,
                             const ClientMessage& request, const std::string& session,
                             const api::HttpRequest& origin,
                             const std::function<void(std::string)>& send) {
  auto e = Find(user, id);
  auto content = KernelExecuteContent(request.content());
  if (!content.ok())
    return SendFailure(request, session, send, "ValueError", content.error().message);
  if (!e) return SendFailure(request, session, send, "KernelGone", "the kernel was deleted");
  std::lock_guard<std::mutex> exec(e->exec_mu);
  if (e->deleted)
    return SendFailure(request, session, send, "KernelGone", "the kernel was deleted");
  if (stopping_) return SendFailure(request, session, send, "KernelGone", "sandrun is stopping");
  e->busy = true;
  e->interrupt = false;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    e->input_replies.clear();
  }
  const bool was_live = service_->kernels().Has(e->key);
  auto got = Acquire(*e);
  if (!got.ok()) {
    e->busy = false;
    return SendFailure(request, session, send, "KernelUnavailable", got.error().message);
  }
  if (got->status != "kept" || !was_live) {
    const std::string why = got->note.empty() ? "it had ended" : got->note;
    const std::string note =
        "sandrun: a new kernel: " + why + "; the variables of earlier executes are gone\n";
    send(MessageToClient("iopub", "stream", request.header(), StreamContent("stderr", note),
                         session));
  }
  if (!e->restore_note.empty() && !e->restore_noted) {
    e->restore_noted = true;
    const std::string note = std::string("sandrun: the files of session '") +
                             api::Service::kJupyterSession +
                             "' are not in this kernel: " + e->restore_note +
                             "; its files get links but do not replace the session's\n";
    send(MessageToClient("iopub", "stream", request.header(), StreamContent("stderr", note),
                         session));
  }
  kernel::Kernel& k = got->lease.kernel();
  if (!e->stamped) {
    e->stamps = service_->StampJupyterWorkspace(k.workspace());
    e->stamped = true;
  }
  kernel::ExecuteResult result;
  RelayCell(*e, k, request, *content, session, send, &result);
  ShowFiles(*e, k, request, session, origin, send);
  if (result.kernel_lost) got->lease.SetLostReason("a limit stopped its last execute");
  got->lease = {};  // released: the kernel is frozen and may expire from now
  {
    std::lock_guard<std::mutex> lock(e->mu);
    e->last_activity = IsoNow();
  }
  e->last_used_s = NowS();
  e->busy = false;
  send(MessageToClient("iopub", "status", request.header(), StatusContent("idle"), session));
  return result.status == kernel::ExecuteStatus::kOk;
}

void JupyterKernels::RelayCell(Entry& e, kernel::Kernel& k, const ClientMessage& request,
                               const std::string& content, const std::string& session,
                               const std::function<void(std::string)>& send,
                               kernel::ExecuteResult* result) {
  const config::Limits limits = service_->LiveConfig()->limits;
  const kernel::ExecuteLimits bounds{limits.wall_time_s * 1000, limits.cpu_time_s * 1000,
                                     static_cast<uint64_t>(limits.output_bytes)};
  uint64_t output = 0;
  bool dropped = false, replied = false, errored = false;
  kernel::CellRelay relay;
  relay.on_message = [&](const kernel::IncomingMessage& m) {
    // The idle status goes last, after sandrun's own notes (Execute sends it): clients stop
    // reading at it.
    if (m.msg_type == "status") {
      auto state = m.content.FindMember("execution_state");
      if (state != m.content.MemberEnd() && state->value.IsString() &&
          std::string(state->value.GetString()) == "idle") {
        return;
      }
    }
    replied |= m.msg_type == "execute_reply";
    errored |= m.msg_type == "error";
    const bool is_output = m.msg_type == "stream" || m.msg_type == "display_data" ||
                           m.msg_type == "execute_result" || m.msg_type == "error" ||
                           m.msg_type == "update_display_data";
    const std::string channel = m.msg_type == "execute_reply"   ? "shell"
                                : m.msg_type == "input_request" ? "stdin"
                                                                : "iopub";
    std::string frame = MessageToClient(channel, m.msg_type, request.header(), m.content, session);
    if (is_output && m.msg_type != "error") {
      if (dropped || output + frame.size() > bounds.output_bytes) {
        dropped = true;
        e.interrupt = true;  // as the kernel does past output_bytes of its own count
        return;
      }
      output += frame.size();
    }
    send(std::move(frame));
  };
  relay.interrupt_asked = [&] { return e.interrupt.load(); };
  relay.stdin_reply = [&e](std::string* reply) {
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.input_replies.empty()) return false;
    *reply = std::move(e.input_replies.front());
    e.input_replies.pop_front();
    return true;
  };
  *result = k.ExecuteRelayed(content, bounds, relay);
  if (dropped && result->status == kernel::ExecuteStatus::kOk) {
    result->status = kernel::ExecuteStatus::kOutputLimit;
  }
  std::string note = LimitNote(*result, limits);
  if (dropped && result->status != kernel::ExecuteStatus::kOutputLimit) {
    note += (note.empty() ? "" : "\n") + std::string("sandrun: output limit exceeded (") +
            std::to_string(limits.output_bytes) + " bytes): the rest was dropped";
  }
  // A cell that the kernel's end cut short gets the note as its error (no traceback came);
  // otherwise the note follows the cell's own output on stderr.
  if (!note.empty() && !(result->kernel_lost && !errored)) {
    send(MessageToClient("iopub", "stream", request.header(), StreamContent("stderr", note + "\n"),
                         session));
  }
  if (result->kernel_lost && !errored) {
    const std::string why = note.empty() ? "sandrun: the kernel died" : note;
    send(MessageToClient("iopub", "error", request.header(),
                         ErrorContent("SandrunStopped", why, why), session));
  }
  if (!replied) {
    send(MessageToClient("shell", "execute_reply", request.header(),
                         ErrorReplyContent(result->execution_count, "SandrunStopped", ""),
                         session));
  }
}

void JupyterKernels::ShowFiles(Entry& e, kernel::Kernel& k, const ClientMessage& request,
                               const std::string& session, const api::HttpRequest& origin,
                               const std::function<void(std::string)>& send) {
  // The kernel is frozen again: nothing of it changes the workspace while it is read.
  api::Service::JupyterFiles files = service_->ExportJupyterWorkspace(
      origin, e.user, k.workspace(), e.restore_note.empty(), &e.stamps);
  std::vector<FileLink> links;
  for (const auto& f : files.files) links.push_back({f.path, f.url, f.size});
  // A skip the user can act on (too large, too many, a symlink); not the directories export
  // ignores by design (caches such as fontconfig's .cache, __pycache__), which /run lists.
  std::vector<SkippedLink> skipped;
  for (const auto& f : files.skipped) {
    if (f.reason != "ignored") skipped.push_back({f.path, f.reason});
  }
  if (!links.empty() || !skipped.empty()) {
    send(MessageToClient("iopub", "display_data", request.header(),
                         FilesDisplayContent(links, skipped), session));
  }
  if (!files.notes.empty()) {
    send(MessageToClient("iopub", "stream", request.header(),
                         StreamContent("stderr", files.notes + "\n"), session));
  }
}

}  // namespace sandrun::jupyter
