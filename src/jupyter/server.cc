#include "jupyter/server.h"

#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "api/access.h"
#include "jupyter/kernels.h"
#include "util/text.h"

namespace sandrun::jupyter {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using Local = asio::local::stream_protocol;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

namespace {

constexpr char kSessionCookie[] = "sandrun-jupyter";
constexpr auto kSessionLife = std::chrono::hours(24);
constexpr size_t kMaxSessions = 10000;
constexpr size_t kMaxBodyBytes = 4 << 20;     // an execute_request's code and more
constexpr size_t kMaxPendingExecutes = 64;    // per WebSocket
constexpr uint64_t kMaxFrameBytes = 4 << 20;  // a client's message

// Who is calling, or why not.
struct Identity {
  std::string user;  // "" when refused
  int status = 401;
  std::string message;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Header(const Request& req, http::field f) { return std::string(req[f]); }
std::string Header(const Request& req, const char* name) { return std::string(req[name]); }

Response MakeResponse(const Request& req, http::status status, std::string body,
                      const char* type = "application/json") {
  Response r{status, req.version()};
  r.set(http::field::server, "sandrun");
  r.set(http::field::content_type, type);
  r.set(http::field::cache_control, "no-store");
  r.body() = std::move(body);
  return r;
}

Response Error(const Request& req, int status, const std::string& message) {
  const auto s = static_cast<http::status>(status);
  return MakeResponse(req, s, ErrorJson(message, std::string(http::obsolete_reason(s))));
}

// The path and query of a request target.
std::pair<std::string, std::map<std::string, std::string>> SplitTarget(beast::string_view t) {
  const std::string target(t);
  const size_t q = target.find('?');
  if (q == std::string::npos) return {target, {}};
  return {target.substr(0, q), ParseForm(target.substr(q + 1))};
}

// The segments of `path` after "/api/kernels/" (empty when it is not under it).
std::vector<std::string> KernelPath(const std::string& path) {
  const std::string prefix = "/api/kernels/";
  std::vector<std::string> parts;
  if (path.rfind(prefix, 0) != 0) return parts;
  size_t start = prefix.size();
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing slash
  return parts;
}

// The message of a kernel_info, complete, inspect, ... request that sandrun answers itself
// (the kernel stays frozen): reply content by request type; "" for others.
std::string LocalReplyContent(const ClientMessage& m) {
  const std::string& t = m.msg_type;
  if (t == "kernel_info_request") return KernelInfoReplyContent();
  if (t == "comm_info_request") return R"({"status":"ok","comms":{}})";
  if (t == "history_request") return R"({"status":"ok","history":[]})";
  if (t == "is_complete_request") return R"({"status":"unknown"})";
  if (t == "inspect_request") return R"({"status":"ok","found":false,"data":{},"metadata":{}})";
  if (t == "complete_request") {
    int pos = 0;
    auto c = m.content().FindMember("cursor_pos");
    if (c != m.content().MemberEnd() && c->value.IsInt()) pos = c->value.GetInt();
    return R"({"status":"ok","matches":[],"cursor_start":)" + std::to_string(pos) +
           R"(,"cursor_end":)" + std::to_string(pos) + R"(,"metadata":{}})";
  }
  return "";
}

std::string ReplyType(const std::string& request_type) {
  const std::string suffix = "_request";
  if (request_type.size() > suffix.size() &&
      request_type.compare(request_type.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return request_type.substr(0, request_type.size() - suffix.size()) + "_reply";
  }
  return request_type + "_reply";
}

}  // namespace

struct JupyterServer::Impl {
  Impl(api::Service* s, std::string path, int pool_threads)
      : service(s), socket_path(std::move(path)), kernels(s), pool(pool_threads) {}
  api::Service* service;
  std::string socket_path;
  // Before the io_context and the pool: the sessions their handlers hold are destroyed with
  // them, and a session's destructor tells `kernels` it closed.
  JupyterKernels kernels;
  asio::io_context ioc{1};
  Local::acceptor acceptor{ioc};
  asio::thread_pool pool;
  std::thread io_thread;
  std::atomic<bool> stopped{false};
  bool started = false;

  struct LoginSession {
    std::string user;
    std::chrono::steady_clock::time_point expires;
  };
  std::mutex sessions_mu;
  std::map<std::string, LoginSession> sessions;

  void Accept();
  Identity Identify(const Request& req, const std::map<std::string, std::string>& query,
                    bool unsafe);
  Identity UserOf(const api::Caller& caller, const config::Config& live) const;
  std::string NewLoginSession(const std::string& user);
  std::string LoginSessionUser(const std::string& sid);
};

Identity JupyterServer::Impl::UserOf(const api::Caller& caller, const config::Config& live) const {
  (void)live;
  if (!caller.authenticated)
    return {"", 401, "missing or wrong token (?token=, Authorization: token T or Bearer T)"};
  if (caller.token == nullptr) return {"anonymous", 200, ""};
  if (caller.token->kind == config::Token::Kind::kFrontEnd) {
    return {"", 403,
            "a front_end token names its users in X-Sandrun-User, which Jupyter clients do "
            "not send: give the Jupyter client a token bound to a user (TOKEN user=NAME) or a "
            "plain token"};
  }
  return {caller.token->user, 200, ""};
}

Identity JupyterServer::Impl::Identify(const Request& req,
                                       const std::map<std::string, std::string>& query,
                                       bool unsafe) {
  const auto live = service->LiveConfig();
  if (const std::string origin = Header(req, http::field::origin); !origin.empty()) {
    if (auto refused = api::CheckOrigin(origin, live->origins)) {
      return {"", 403, refused->message};
    }
  }
  std::string token;
  if (auto it = query.find("token"); it != query.end()) token = it->second;
  const std::string auth = Header(req, http::field::authorization);
  if (token.empty() && !auth.empty()) {
    const size_t space = auth.find(' ');
    const std::string scheme = Lower(auth.substr(0, space));
    if (space != std::string::npos && (scheme == "token" || scheme == "bearer")) {
      token = auth.substr(space + 1);
    }
  }
  if (!token.empty()) return UserOf(api::Authenticate("Bearer " + token, *live), *live);
  const auto cookies = ParseCookies(Header(req, http::field::cookie));
  if (auto sid = cookies.find(kSessionCookie); sid != cookies.end()) {
    const std::string user = LoginSessionUser(sid->second);
    if (user.empty()) return {"", 401, "the login session has expired: log in again (/login)"};
    // A cookie goes with every request a browser sends: a request that changes something
    // must also carry the _xsrf cookie's value in X-XSRFToken, which another site's page
    // cannot read.
    auto xsrf = cookies.find("_xsrf");
    if (unsafe && (xsrf == cookies.end() || xsrf->second.empty() ||
                   Header(req, "X-XSRFToken") != xsrf->second)) {
      return {"", 403,
              "'_xsrf' argument missing from POST: send the _xsrf cookie's value in "
              "the X-XSRFToken header"};
    }
    return {user, 200, ""};
  }
  return UserOf(api::Authenticate("", *live), *live);
}

std::string JupyterServer::Impl::NewLoginSession(const std::string& user) {
  const auto now = std::chrono::steady_clock::now();
  const std::string sid = util::RandomHex(32);
  std::lock_guard<std::mutex> lock(sessions_mu);
  for (auto it = sessions.begin(); it != sessions.end();) {
    it = it->second.expires < now ? sessions.erase(it) : std::next(it);
  }
  if (sessions.size() >= kMaxSessions) sessions.erase(sessions.begin());
  sessions[sid] = {user, now + kSessionLife};
  return sid;
}

std::string JupyterServer::Impl::LoginSessionUser(const std::string& sid) {
  std::lock_guard<std::mutex> lock(sessions_mu);
  auto it = sessions.find(sid);
  if (it == sessions.end() || it->second.expires < std::chrono::steady_clock::now()) return "";
  return it->second.user;
}

namespace {

using Impl = JupyterServer::Impl;

// One channels WebSocket: reads the client's messages, answers the ones sandrun answers
// itself, queues execute_requests (one runs at a time, on the pool) and writes the replies
// in order. Every member is used on the io thread only.
class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(Impl& impl, Local::socket socket, std::string user, std::string kernel_id)
      : impl_(impl),
        ws_(std::move(socket)),
        user_(std::move(user)),
        kernel_id_(std::move(kernel_id)),
        session_(util::RandomHex(16)) {}

  void Accept(Request req) {
    // What the links of the files a cell writes are made from (Service::PublicBaseUrl).
    for (const char* name :
         {"host", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-prefix"}) {
      if (const std::string value = Header(req, name); !value.empty())
        origin_.headers[name] = value;
    }
    ws_.read_message_max(kMaxFrameBytes);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "sandrun"); }));
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->impl_.kernels.Connections(self->kernel_id_, +1);
      self->counted_ = true;
      self->Read();
    });
  }

  ~WsSession() {
    if (counted_) impl_.kernels.Connections(kernel_id_, -1);
  }

  // Queues a text frame (a message to the client).
  void Send(std::string text) {
    if (closed_) return;
    out_.push_back(std::move(text));
    if (!writing_) WriteNext();
  }

 private:
  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->closed_ = true;
        return;
      }
      std::string text = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      self->Dispatch(text);
      if (!self->closed_) self->Read();
    });
  }

  void WriteNext() {
    if (out_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) {
                        self->closed_ = true;
                        self->writing_ = false;
                        return;
                      }
                      self->out_.pop_front();
                      self->WriteNext();
                    });
  }

  void Dispatch(const std::string& text);
  void Pump();
  void AbortPending();
  void ReplyLocally(const ClientMessage& m, const std::string& content);

  Impl& impl_;
  websocket::stream<Local::socket> ws_;
  std::string user_, kernel_id_, session_;
  api::HttpRequest origin_;
  beast::flat_buffer buffer_;
  std::deque<std::string> out_;
  std::deque<std::shared_ptr<ClientMessage>> pending_;
  bool writing_ = false, closed_ = false, executing_ = false, counted_ = false;
};

void WsSession::ReplyLocally(const ClientMessage& m, const std::string& content) {
  const std::string channel = m.channel == "control" ? "control" : "shell";
  Send(MessageToClient("iopub", "status", m.header(), StatusContent("busy"), session_));
  Send(MessageToClient(channel, ReplyType(m.msg_type), m.header(), content, session_));
  Send(MessageToClient("iopub", "status", m.header(), StatusContent("idle"), session_));
}

void WsSession::Dispatch(const std::string& text) {
  auto parsed = ParseClientMessage(text);
  if (!parsed.ok()) return;  // as jupyter_server does: a message it cannot read is dropped
  auto m = std::make_shared<ClientMessage>(std::move(*parsed));
  if (m->channel == "shell" && m->msg_type == "execute_request") {
    if (pending_.size() >= kMaxPendingExecutes) {
      closed_ = true;  // a client that floods the queue is cut off
      return;
    }
    pending_.push_back(std::move(m));
    Pump();
  } else if (m->channel == "control" && m->msg_type == "interrupt_request") {
    impl_.kernels.Interrupt(user_, kernel_id_);
    ReplyLocally(*m, R"({"status":"ok"})");
  } else if (m->channel == "control" && m->msg_type == "shutdown_request") {
    ReplyLocally(*m, R"({"status":"ok","restart":false})");
  } else if (m->channel == "shell" || m->channel == "control") {
    if (const std::string content = LocalReplyContent(*m); !content.empty()) {
      ReplyLocally(*m, content);
    }
  } else if (m->channel == "stdin" && m->msg_type == "input_reply") {
    impl_.kernels.InputReply(user_, kernel_id_, InputReplyContent(m->content()));
  }
}

void WsSession::Pump() {
  if (executing_ || pending_.empty() || closed_) return;
  executing_ = true;
  std::shared_ptr<ClientMessage> request = pending_.front();
  pending_.pop_front();
  auto self = shared_from_this();
  asio::post(impl_.pool, [self, request] {
    auto executor = self->ws_.get_executor();
    const bool ok = self->impl_.kernels.Execute(
        self->user_, self->kernel_id_, *request, self->session_, self->origin_,
        [self, executor](std::string frame) {
          asio::post(executor,
                     [self, f = std::move(frame)]() mutable { self->Send(std::move(f)); });
        });
    const bool abort = !ok && StopOnError(request->content());
    asio::post(executor, [self, abort] {
      if (abort) self->AbortPending();
      self->executing_ = false;
      self->Pump();
    });
  });
}

void WsSession::AbortPending() {
  // As ipykernel does with stop_on_error: the executes queued when a cell failed are
  // answered as aborted, without running.
  for (const auto& m : pending_) {
    Send(MessageToClient("iopub", "status", m->header(), StatusContent("busy"), session_));
    Send(MessageToClient("shell", "execute_reply", m->header(), AbortedReplyContent(), session_));
    Send(MessageToClient("iopub", "status", m->header(), StatusContent("idle"), session_));
  }
  pending_.clear();
}

// One HTTP connection from nginx: reads requests, answers the REST API and /login, and hands
// a channels upgrade to a WsSession.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(Impl& impl, Local::socket socket) : impl_(impl), socket_(std::move(socket)) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxBodyBytes);
    parser_->header_limit(32 << 10);
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      Request req;
      req.version(11);
      keep_alive_ = false;
      return Respond(
          Error(req, 413, "the request body is over " + std::to_string(kMaxBodyBytes) + " bytes"));
    }
    if (ec) return;
    Request req = parser_->release();
    keep_alive_ = req.keep_alive();
    if (websocket::is_upgrade(req)) return Upgrade(std::move(req));
    Route(std::move(req));
  }

  void Respond(Response r) {
    response_ = std::move(r);
    response_.keep_alive(keep_alive_);
    response_.prepare_payload();
    http::async_write(socket_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->keep_alive_) {
                          beast::error_code ignored;
                          self->socket_.shutdown(Local::socket::shutdown_send, ignored);
                          return;
                        }
                        self->Read();
                      });
  }

  // Runs `work` (which blocks) on the pool and answers with what it returns.
  void Blocking(std::function<Response()> work) {
    auto self = shared_from_this();
    asio::post(impl_.pool, [self, work = std::move(work)] {
      Response r = work();
      asio::post(self->socket_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->Respond(std::move(r)); });
    });
  }

  void Upgrade(Request req);
  void Route(Request req);
  void RouteKernels(const Request& req, const std::string& user,
                    const std::vector<std::string>& parts);
  void Login(const Request& req);

  Impl& impl_;
  Local::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  bool keep_alive_ = true;
};

void HttpSession::Upgrade(Request req) {
  auto [path, query] = SplitTarget(req.target());
  const auto parts = KernelPath(path);
  if (parts.size() != 2 || parts[1] != "channels") {
    keep_alive_ = false;
    return Respond(Error(req, 404, "no WebSocket at " + path));
  }
  const Identity who = impl_.Identify(req, query, false);
  if (who.user.empty()) {
    keep_alive_ = false;
    return Respond(Error(req, who.status, who.message));
  }
  KernelModel model;
  if (!impl_.kernels.Get(who.user, parts[0], &model)) {
    keep_alive_ = false;
    return Respond(Error(req, 404, "Kernel does not exist: " + parts[0]));
  }
  std::make_shared<WsSession>(impl_, std::move(socket_), who.user, parts[0])
      ->Accept(std::move(req));
}

void HttpSession::Login(const Request& req) {
  const auto cookies = ParseCookies(Header(req, http::field::cookie));
  auto xsrf_cookie = cookies.find("_xsrf");
  if (req.method() == http::verb::get) {
    const std::string xsrf = xsrf_cookie != cookies.end() && !xsrf_cookie->second.empty()
                                 ? xsrf_cookie->second
                                 : util::RandomHex(16);
    Response r = MakeResponse(
        req, http::status::ok,
        "<!doctype html><title>sandrun</title><form method=post action=login>"
        "<input type=hidden name=_xsrf value=" +
            xsrf + "><input type=password name=password><button>Log in</button></form>\n",
        "text/html; charset=utf-8");
    r.set(http::field::set_cookie, "_xsrf=" + xsrf + "; Path=/; SameSite=Lax");
    return Respond(std::move(r));
  }
  if (req.method() != http::verb::post) return Respond(Error(req, 405, "GET or POST /login"));
  auto form = ParseForm(req.body());
  const std::string sent = !form["_xsrf"].empty() ? form["_xsrf"] : Header(req, "X-XSRFToken");
  if (xsrf_cookie == cookies.end() || xsrf_cookie->second.empty() || sent != xsrf_cookie->second) {
    return Respond(Error(req, 403, "'_xsrf' argument missing or wrong: GET /login first"));
  }
  const auto live = impl_.service->LiveConfig();
  const std::string password = form["password"];
  const api::Caller caller = api::Authenticate("Bearer " + password, *live);
  Identity who = impl_.UserOf(caller, *live);
  if (password.empty() || caller.token == nullptr) {
    who = {"", 401, "wrong password: the password is a sandrun token"};
  }
  if (who.user.empty()) return Respond(Error(req, who.status, who.message));
  Response r = MakeResponse(req, http::status::ok, R"({"message":"logged in"})");
  r.set(http::field::set_cookie, std::string(kSessionCookie) + "=" +
                                     impl_.NewLoginSession(who.user) +
                                     "; Path=/; HttpOnly; SameSite=Lax");
  Respond(std::move(r));
}

void HttpSession::Route(Request req) {
  auto [path, query] = SplitTarget(req.target());
  if (path == "/login") return Login(req);
  if (path == "/api" || path == "/api/") {
    if (req.method() != http::verb::get) return Respond(Error(req, 405, "GET /api"));
    return Respond(MakeResponse(req, http::status::ok, R"({"version":"2.0.0"})"));
  }
  const bool unsafe = req.method() != http::verb::get && req.method() != http::verb::head;
  const Identity who = impl_.Identify(req, query, unsafe);
  if (who.user.empty()) return Respond(Error(req, who.status, who.message));
  if (path == "/api/kernelspecs" || path == "/api/kernelspecs/") {
    if (req.method() != http::verb::get) return Respond(Error(req, 405, "GET /api/kernelspecs"));
    return Respond(MakeResponse(req, http::status::ok, KernelSpecsJson()));
  }
  if (path == std::string("/api/kernelspecs/") + kKernelName) {
    return Respond(MakeResponse(req, http::status::ok, KernelSpecJson()));
  }
  if (path.rfind("/api/kernelspecs/", 0) == 0) {
    return Respond(Error(req, 404, "Kernel spec not found: " + path.substr(17)));
  }
  if (path == "/api/kernels" || path == "/api/kernels/") return RouteKernels(req, who.user, {});
  const auto parts = KernelPath(path);
  if (!parts.empty()) return RouteKernels(req, who.user, parts);
  Respond(Error(req, 404, "not found: " + path));
}

void HttpSession::RouteKernels(const Request& req, const std::string& user,
                               const std::vector<std::string>& parts) {
  JupyterKernels& kernels = impl_.kernels;
  const http::verb method = req.method();
  const std::string id = parts.empty() ? "" : parts[0];
  auto not_found = [&req, id] { return Error(req, 404, "Kernel does not exist: " + id); };
  if (parts.empty() && method == http::verb::get) {
    return Respond(MakeResponse(req, http::status::ok, KernelListJson(kernels.List(user))));
  }
  if (parts.empty() && method == http::verb::post) {
    rapidjson::Document body;
    if (!req.body().empty()) body.Parse(req.body().data(), req.body().size());
    if (!req.body().empty() && (body.HasParseError() || !body.IsObject())) {
      return Respond(Error(req, 400, "the body is a JSON object, e.g. {\"name\": \"python3\"}"));
    }
    if (!req.body().empty() && body.HasMember("name") &&
        (!body["name"].IsString() || std::string(body["name"].GetString()) != kKernelName)) {
      return Respond(Error(req, 400, "'name': the only kernel spec is python3"));
    }
    return Blocking([&kernels, req, user] {
      KernelModel model;
      Refusal refusal;
      if (!kernels.Start(user, &model, &refusal))
        return Error(req, refusal.status, refusal.message);
      Response r = MakeResponse(req, http::status::created, KernelModelJson(model));
      r.set(http::field::location, "/api/kernels/" + model.id);
      return r;
    });
  }
  KernelModel model;
  if (parts.size() == 1 && method == http::verb::get) {
    if (!kernels.Get(user, id, &model)) return Respond(not_found());
    return Respond(MakeResponse(req, http::status::ok, KernelModelJson(model)));
  }
  if (parts.size() == 1 && method == http::verb::delete_) {
    return Blocking([&kernels, req, user, id, not_found] {
      if (!kernels.Delete(user, id)) return not_found();
      return MakeResponse(req, http::status::no_content, "");
    });
  }
  if (parts.size() == 2 && parts[1] == "interrupt" && method == http::verb::post) {
    if (!kernels.Interrupt(user, id)) return Respond(not_found());
    return Respond(MakeResponse(req, http::status::no_content, ""));
  }
  if (parts.size() == 2 && parts[1] == "restart" && method == http::verb::post) {
    return Blocking([&kernels, req, user, id, not_found] {
      KernelModel restarted;
      Refusal refusal;
      if (!kernels.Restart(user, id, &restarted, &refusal)) return not_found();
      if (restarted.id.empty()) return Error(req, refusal.status, refusal.message);
      return MakeResponse(req, http::status::ok, KernelModelJson(restarted));
    });
  }
  if (parts.size() == 2 && parts[1] == "channels") {
    return Respond(Error(req, 400, "channels is a WebSocket: send the Upgrade headers"));
  }
  if (parts.size() <= 2) return Respond(Error(req, 405, "method not allowed here"));
  Respond(Error(req, 404, "not found"));
}

}  // namespace

void JupyterServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, Local::socket socket) {
    if (!ec) std::make_shared<HttpSession>(*this, std::move(socket))->Read();
    if (acceptor.is_open()) Accept();
  });
}

JupyterServer::JupyterServer(api::Service* service, std::string socket_path) {
  const auto live = service->LiveConfig();
  // Executes (one per kernel at a time), boots and deletes; a few more than the kernels.
  const int threads = static_cast<int>(std::clamp<int64_t>(live->max_kernels * 2 + 2, 4, 64));
  impl_ = std::make_unique<Impl>(service, std::move(socket_path), threads);
}

JupyterServer::~JupyterServer() { Stop(); }

Status JupyterServer::Open() {
  ::unlink(impl_->socket_path.c_str());
  beast::error_code ec;
  impl_->acceptor.open(Local(), ec);
  if (!ec) impl_->acceptor.bind(Local::endpoint(impl_->socket_path), ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return MakeError(ErrorKind::kSystem,
                     "the Jupyter socket " + impl_->socket_path + ": " + ec.message());
  }
  ::chmod(impl_->socket_path.c_str(), 0666);
  return OkStatus();
}

void JupyterServer::Start() {
  impl_->started = true;
  impl_->Accept();
  impl_->io_thread = std::thread([impl = impl_.get()] {
    for (;;) {
      try {
        impl->ioc.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sandrund: jupyter: %s\n", e.what());
      }
    }
  });
}

void JupyterServer::Stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  asio::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
  impl_->kernels.InterruptAll();
  impl_->pool.join();
  impl_->ioc.stop();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
  if (impl_->started) ::unlink(impl_->socket_path.c_str());
}

}  // namespace sandrun::jupyter
