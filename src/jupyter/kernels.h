// The kernels of Jupyter's server API: each one a sandboxed IPython kernel of the daemon's
// KernelManager (the one stateful runs use), so it counts against max_kernels, ends after
// kernel_idle_s without an execute, and ends with the daemon; at most max_kernels of them per
// user as well. A user sees and reaches only their own kernels. Thread-safe; every call but
// the listing may block (a kernel boots in about a second; an execute runs up to its limits).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/service.h"
#include "jupyter/messages.h"
#include "util/result.h"

namespace sandrun::jupyter {

// A failure as the HTTP edge answers it.
struct Refusal {
  int status = 400;
  std::string message;
};

class JupyterKernels {
 public:
  explicit JupyterKernels(api::Service* service) : service_(service) {}

  // Starts a kernel for `user` (boots it and freezes it). Refusal: 503 when kernels cannot
  // run here or all are busy, 429 when the user has max_kernels kernels.
  bool Start(const std::string& user, KernelModel* model, Refusal* refusal);
  std::vector<KernelModel> List(const std::string& user);
  // false: no kernel `id` of `user` (another user's is not found either).
  bool Get(const std::string& user, const std::string& id, KernelModel* model);
  // Interrupts a running execute, waits for it to end, and ends the kernel: nothing of it is
  // left (process, cgroup, mount) when this returns true.
  bool Delete(const std::string& user, const std::string& id);
  // Ends the kernel and starts a new one under the same id.
  bool Restart(const std::string& user, const std::string& id, KernelModel* model,
               Refusal* refusal);
  // Interrupts the running execute (if any).
  bool Interrupt(const std::string& user, const std::string& id);
  // A channels WebSocket opened (+1) or closed (-1).
  void Connections(const std::string& id, int delta);

  // Runs the client's execute_request `request` on kernel `id` of `user`: thaws the kernel,
  // relays the cell's messages to `send` (JSON text frames) as they come, freezes it on its
  // idle status; at a limit (the live config's wall and CPU time, output) the cell is
  // interrupted, then killed, and the client gets the error, a note on stderr, the
  // execute_reply and the idle status all the same. One execute at a time per kernel.
  // After the cell, the files it wrote or changed in the kernel's workspace are published
  // (links on `origin`'s host) and listed in one display_data (FilesDisplayContent), and the
  // workspace is saved as the user's session "jupyter" (Service::ExportJupyterWorkspace).
  // Returns whether the cell succeeded (its reply's status ok, no limit met).
  bool Execute(const std::string& user, const std::string& id, const ClientMessage& request,
               const std::string& session, const api::HttpRequest& origin,
               const std::function<void(std::string)>& send);

  // A client's input_reply (its content for the kernel, InputReplyContent) for the running
  // execute of kernel `id` of `user`, which sent an input_request; dropped when no execute
  // runs or 16 wait already.
  void InputReply(const std::string& user, const std::string& id, std::string content);

  // The daemon stops: interrupts every running execute; no kernel starts or executes after.
  void InterruptAll();

 private:
  struct Entry;
  std::shared_ptr<Entry> Find(const std::string& user, const std::string& id);
  KernelModel ModelOf(const Entry& e) const;
  // Drops entries whose kernel has ended (idle expiry, room for another) and that no
  // WebSocket holds. Under mu_.
  void SweepUnderLock();
  // Starts (or keeps) the kernel of `e`; a new one gets the user's session "jupyter" in its
  // workspace (Entry::restore_note says why not).
  Result<kernel::KernelManager::Acquired> Acquire(Entry& e);
  bool Boot(Entry& e, Refusal* refusal);
  // Execute's end, with the kernel leased: the files the cell wrote, published and shown.
  void ShowFiles(Entry& e, kernel::Kernel& k, const ClientMessage& request,
                 const std::string& session, const api::HttpRequest& origin,
                 const std::function<void(std::string)>& send);
  // Execute's cell, with the kernel leased.
  void RelayCell(Entry& e, kernel::Kernel& k, const ClientMessage& request,
                 const std::string& content, const std::string& session,
                 const std::function<void(std::string)>& send, kernel::ExecuteResult* result);

  api::Service* service_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;  // by id
};

}  // namespace sandrun::jupyter
