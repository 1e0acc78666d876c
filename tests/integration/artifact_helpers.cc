#include "artifact_helpers.h"

#include <fcntl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "stack.h"

extern char** environ;

namespace sandrun::integration {
namespace {

httplib::Client MakeClient(const std::string& source_ip, int port) {
  httplib::Client client("127.0.0.1", port != 0 ? port : Stack::Get().port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(120, 0);
  client.set_write_timeout(30, 0);
  // Links are already percent-encoded by the daemon; send them byte for byte.
  client.set_url_encode(false);
  // cpp-httplib binds the socket to this address before connecting.
  if (!source_ip.empty()) client.set_interface(source_ip.c_str());
  return client;
}

httplib::Headers ToHttplib(const Headers& headers) {
  return httplib::Headers(headers.begin(), headers.end());
}

}  // namespace

HttpResponse GetWith(const std::string& path_and_query, const Headers& headers,
                     const std::string& source_ip, int port) {
  auto client = MakeClient(source_ip, port);
  return FromResult(client.Get(path_and_query.c_str(), ToHttplib(headers)),
                    "GET " + path_and_query);
}

HttpResponse PostWith(const std::string& path, const std::string& body, const Headers& headers,
                      const std::string& source_ip, int port) {
  auto client = MakeClient(source_ip, port);
  return FromResult(client.Post(path.c_str(), ToHttplib(headers), body, "application/json"),
                    "POST " + path);
}

std::string PythonRequest(const std::string& code, const std::string& user) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("language");
  w.String("python");
  w.Key("code");
  w.String(code.c_str(), static_cast<rapidjson::SizeType>(code.size()));
  if (!user.empty()) {
    w.Key("user");
    w.String(user.c_str(), static_cast<rapidjson::SizeType>(user.size()));
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

rapidjson::Document PostRunWith(const std::string& body, const Headers& headers) {
  HttpResponse response = PostWith("/run", body, headers);
  BOOST_REQUIRE_MESSAGE(response.status == 200, "POST /run answered " << response.status << ": "
                                                                      << response.body
                                                                      << "\nrequest: " << body);
  rapidjson::Document doc = ParseJson(response.body);
  BOOST_REQUIRE_MESSAGE(doc.IsObject(), "answer is not an object: " << response.body);
  BOOST_TEST_MESSAGE("POST /run -> " << response.body.substr(0, 2000));
  return doc;
}

const rapidjson::Value* FindEntry(const rapidjson::Value& doc, const char* list, const char* key,
                                  const std::string& value) {
  if (!doc.IsObject() || !doc.HasMember(list) || !doc[list].IsArray()) return nullptr;
  for (const auto& entry : doc[list].GetArray()) {
    if (entry.IsObject() && entry.HasMember(key) && entry[key].IsString() &&
        value == std::string(entry[key].GetString(), entry[key].GetStringLength())) {
      return &entry;
    }
  }
  return nullptr;
}

int ListSize(const rapidjson::Value& doc, const char* list) {
  if (!doc.IsObject() || !doc.HasMember(list) || !doc[list].IsArray()) return -1;
  return static_cast<int>(doc[list].Size());
}

int RunWithTimeout(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const std::string& log_path, int timeout_s) {
  // Everything the child needs is prepared before fork().
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) throw std::runtime_error("cannot open " + log_path);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execvpe(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  close(null_fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Whatever it started (a browser) goes with it.
  kill(-pid, SIGKILL);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -2;
}

std::map<std::string, std::string> RawHeaders(const std::string& path_and_query, int port) {
  Stack& stack = Stack::Get();
  const std::string url =
      "http://127.0.0.1:" + std::to_string(port != 0 ? port : stack.port()) + path_and_query;
  const std::string out = stack.state_dir() + "/raw-headers.txt";
  const std::string log = stack.state_dir() + "/raw-headers.log";
  // --path-as-is: send the path byte for byte, like the links the daemon makes.
  const int status = RunWithTimeout(
      {"curl", "-sS", "--path-as-is", "--max-time", "30", "-o", "/dev/null", "-D", out, url}, {},
      log, 40);
  BOOST_REQUIRE_MESSAGE(status == 0, "curl " << url << " failed: " << ReadFile(log));
  std::map<std::string, std::string> headers;
  std::istringstream lines(ReadFile(out));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.rfind("HTTP/", 0) == 0) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    headers[name] = value;
  }
  return headers;
}

std::string PercentDecode(const std::string& encoded) {
  std::string out;
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size()) {
      out += static_cast<char>(std::stoi(encoded.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += encoded[i];
    }
  }
  return out;
}

}  // namespace sandrun::integration
