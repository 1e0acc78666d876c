#define BOOST_TEST_MODULE config
#include "config/config.h"

#include <stdlib.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "config/config_path.h"

namespace {

// A temporary state dir with a link secret, removed at the end.
struct StateDir {
  std::string path;
  StateDir() {
    char tmpl[] = "/tmp/sandrun-config-test-XXXXXX";
    path = mkdtemp(tmpl);
    std::ofstream(path + "/link_secret.conf")
        << "set $sandrun_link_secret \"abcdef0123456789abcdef\";\n";
  }
  ~StateDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string Write(const std::string& text) {
    std::string file = path + "/sandrun.jsonc";
    std::ofstream(file) << text;
    return file;
  }
};

}  // namespace

using sandrun::config::Load;

std::vector<std::string> Secrets(const std::vector<sandrun::config::Token>& tokens) {
  std::vector<std::string> secrets;
  for (const auto& t : tokens) secrets.push_back(t.secret);
  return secrets;
}

BOOST_AUTO_TEST_SUITE(Config)

BOOST_AUTO_TEST_CASE(reads_jsonc_with_comments_and_derives_paths) {
  StateDir dir;
  auto c = Load(dir.Write("{\n  // the quick-start\n  \"state_dir\": \"" + dir.path +
                          "\",\n  \"allow_anonymous\": true, /* trailing */\n"
                          "  \"limits\": {\"wall_time_s\": 5},\n}\n"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->fcgi_socket == dir.path + "/sandrun.sock");
  BOOST_TEST(c->artifacts_dir == dir.path + "/artifacts");
  BOOST_TEST(c->link_secret == "abcdef0123456789abcdef");
  BOOST_TEST(c->limits.wall_time_s == 5);
  BOOST_TEST(c->languages.size() == 2u);
}

BOOST_AUTO_TEST_CASE(effective_config_reads_back_as_the_same_config) {
  StateDir dir;
  auto a = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"limits\": {\"memory_mb\": 256}, "
                          "\"ceilings\": {\"disk_mb\": 4096}, \"network_allow_cidrs\": "
                          "[\"10.0.5.20/32\"], \"environments_prebuild\": [[\"numpy\"]]}"));
  BOOST_TEST_REQUIRE(a.ok(), (a.ok() ? "" : a.error().message));
  const std::string json = sandrun::config::EffectiveConfigJson(*a);
  BOOST_TEST(json.find("\"fcgi_socket\": \"" + dir.path + "/sandrun.sock\"") != std::string::npos);
  BOOST_TEST(json.find("\"wall_time_s\": 10") != std::string::npos);
  auto b = Load(dir.Write(json));
  BOOST_TEST_REQUIRE(b.ok(), (b.ok() ? "" : b.error().message));
  BOOST_TEST(sandrun::config::ChangedKeys(*a, *b).empty());
  BOOST_TEST(b->limits.memory_mb == 256);
  BOOST_TEST(b->ceilings.disk_mb == 4096);
}

BOOST_AUTO_TEST_CASE(print_config_reads_no_secret_files) {
  StateDir dir;
  const std::string file =
      dir.Write("{\"state_dir\": \"" + dir.path + "\", \"link_secret_file\": \"" + dir.path +
                "/missing\", \"tokens_file\": \"" + dir.path + "/none\"}");
  BOOST_TEST(!Load(file).ok());
  auto c = Load(file, /*read_secrets=*/false);
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->link_secret.empty());
  BOOST_TEST(c->tokens.empty());
  const std::string json = sandrun::config::EffectiveConfigJson(*c);
  BOOST_TEST(json.find("\"tokens_file\": \"" + dir.path + "/none\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_key_is_named) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymus\": true}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("allow_anonymus") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(wrong_type_is_named) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"link_ttl_s\": \"soon\"}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("link_ttl_s") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(default_limit_above_ceiling_is_refused) {
  StateDir dir;
  auto c =
      Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, "
                     "\"limits\": {\"memory_mb\": 4096}, \"ceilings\": {\"memory_mb\": 1024}}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("limits.memory_mb") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(requires_a_token_unless_anonymous) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\"}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("token") != std::string::npos);
  std::ofstream(dir.path + "/tokens") << "# comment\nsecret-token-1\n";
  c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                     "/tokens\"}"));
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->tokens.size() == 1u);
  BOOST_TEST(c->tokens[0].secret == "secret-token-1");
}

BOOST_AUTO_TEST_CASE(network_keys_take_lists_and_are_checked) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"network\": \"on_request\", "
                          "\"network_allow_cidrs\": [\"10.0.5.20/32\", \"fd12::/64\"], "
                          "\"pip_index_url\": \"http://10.0.5.20/simple\", "
                          "\"pip_trusted_hosts\": \"10.0.5.20, mirror:8080\"}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->network == "on_request");
  BOOST_TEST(c->network_allow_cidrs == (std::vector<std::string>{"10.0.5.20/32", "fd12::/64"}),
             boost::test_tools::per_element());
  BOOST_TEST(c->pip_trusted_hosts == (std::vector<std::string>{"10.0.5.20", "mirror:8080"}),
             boost::test_tools::per_element());
  BOOST_TEST(c->install_wall_time_s == 300);
  BOOST_TEST(c->install_disk_mb == 2048);
  setenv("SANDRUN_NETWORK_ALLOW_CIDRS", "192.0.2.7/32 198.51.100.0/24", 1);
  c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}"));
  unsetenv("SANDRUN_NETWORK_ALLOW_CIDRS");
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->network == "off");  // the default
  BOOST_TEST(c->network_allow_cidrs.size() == 2u);
  c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, \"network\": \"yes\", "
                     "\"network_allow_cidrs\": [\"10.0.0.0/33\"], "
                     "\"pip_index_url\": \"ftp://x\", \"pip_trusted_hosts\": [\"a b\"]}"));
  BOOST_TEST_REQUIRE(!c.ok());
  for (const char* key : {"key 'network'", "key 'network_allow_cidrs'", "key 'pip_index_url'",
                          "key 'pip_trusted_hosts'"}) {
    BOOST_TEST(c.error().message.find(key) != std::string::npos, key << ": " << c.error().message);
  }
  c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, \"network_allow_cidrs\": [1]}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("expected an array of strings") != std::string::npos);
  // The network helper's uid owns no sandbox: not the sandbox's uid, nor its root's.
  for (const char* uid : {"64000", "64001"}) {
    c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                       "\", \"allow_anonymous\": true, \"network_uid\": " + uid + "}"));
    BOOST_TEST_REQUIRE(!c.ok(), uid);
    BOOST_TEST(c.error().message.find("key 'network_uid'") != std::string::npos, c.error().message);
  }
}

// zygote_preload: module names as `import` takes them; anything else (a path, a statement,
// an option) is refused naming the key before the zygote ever sees it.
BOOST_AUTO_TEST_CASE(zygote_preload_is_module_names) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"zygote\": true, "
                          "\"zygote_preload\": [\"numpy\", \"matplotlib.pyplot\", \"_x1\"]}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->zygote_preload == (std::vector<std::string>{"numpy", "matplotlib.pyplot", "_x1"}),
             boost::test_tools::per_element());
  for (const char* bad : {"os; import pty", "../evil", "a..b", ".a", "a.", "1abc", "-c", "a b"}) {
    c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                       "\", \"allow_anonymous\": true, \"zygote_preload\": [\"" + bad + "\"]}"));
    BOOST_TEST_REQUIRE(!c.ok(), bad);
    BOOST_TEST(c.error().message.find("key 'zygote_preload'") != std::string::npos,
               bad << ": " << c.error().message);
  }
}

// Swept at each start and thawed when the daemon ends: a name that reaches the daemon's own
// cgroup or above would touch other services' cgroups.
BOOST_AUTO_TEST_CASE(cgroup_name_stays_below_the_daemons_cgroup) {
  StateDir dir;
  auto with = [&](const std::string& name) {
    return Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"cgroup_name\": \"" + name + "\"}"));
  };
  for (const char* good : {"sandrun", "sandrun-a1b2", "team/sandrun"}) {
    auto c = with(good);
    BOOST_TEST(c.ok(), good << ": " << (c.ok() ? "" : c.error().message));
  }
  for (const char* bad : {"", ".", "..", "../x", "a/../..", "a//b", "/a", "a/"}) {
    auto c = with(bad);
    BOOST_TEST_REQUIRE(!c.ok(), bad);
    BOOST_TEST(c.error().message.find("key 'cgroup_name'") != std::string::npos,
               bad << ": " << c.error().message);
  }
}

// A key given twice would have the later one win unseen: the package test turned the zygote
// on by a line above the example's own "zygote": false, which then won (2026-12-08).
BOOST_AUTO_TEST_CASE(a_key_given_twice_is_refused_by_name) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"zygote\": true, \"zygote\": false}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("key 'zygote'") != std::string::npos, c.error().message);
  BOOST_TEST(c.error().message.find("twice") != std::string::npos, c.error().message);
  c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, \"limits\": {\"memory_mb\": 256, "
                     "\"memory_mb\": 128}}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("key 'limits.memory_mb'") != std::string::npos,
             c.error().message);
}

BOOST_AUTO_TEST_CASE(env_overrides_file) {
  StateDir dir;
  setenv("SANDRUN_LINK_TTL_S", "77", 1);
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, "
                          "\"link_ttl_s\": 5}"));
  unsetenv("SANDRUN_LINK_TTL_S");
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->link_ttl_s == 77);
}

BOOST_AUTO_TEST_CASE(finds_languages_by_alias) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}"));
  BOOST_TEST_REQUIRE(c.ok());
  for (const char* alias : {"python", "py", "python3", "py3"}) {
    BOOST_TEST(sandrun::config::FindLanguage(*c, alias)->name == "python");
  }
  for (const char* alias : {"bash", "sh", "shell"}) {
    BOOST_TEST(sandrun::config::FindLanguage(*c, alias)->name == "bash");
  }
  BOOST_TEST(sandrun::config::FindLanguage(*c, "cobol") == nullptr);
}

BOOST_AUTO_TEST_CASE(bad_secret_file_is_refused) {
  StateDir dir;
  std::ofstream(dir.path + "/link_secret.conf") << "nothing here\n";
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}"));
  BOOST_TEST_REQUIRE(!c.ok());
  BOOST_TEST(c.error().message.find("link_secret_file") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(artifact_store_keys_have_their_defaults) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}"));
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->artifact_max_age_s == 86400);
  BOOST_TEST(c->user_quota_files == 4096);
  BOOST_TEST(c->user_quota_mb == 256);
  BOOST_TEST(c->janitor_interval_s == 60);
  BOOST_TEST(c->trusted_proxies.empty());
}

BOOST_AUTO_TEST_CASE(bearer_tokens_in_the_config_are_tokens) {
  StateDir dir;
  std::ofstream(dir.path + "/tokens") << "from-file\n";
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                          "/tokens\", \"bearer_tokens\": \" one, two\\tthree \"}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(Secrets(c->tokens) == (std::vector<std::string>{"one", "two", "three", "from-file"}));
}

// `   # retired: tokOLD` was a valid token (the comment test looked at
// the first byte only). Leading blanks are skipped before it, and `#` after a token starts a
// comment too.
BOOST_AUTO_TEST_CASE(indented_comment_lines_are_not_tokens) {
  StateDir dir;
  std::ofstream(dir.path + "/tokens")
      << "   # retired: tokOLD\n\t# also retired: tokOLDER\n  live-token  # Alice's laptop\n\n";
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                          "/tokens\"}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(Secrets(c->tokens) == (std::vector<std::string>{"live-token"}));
}

// A line binds its token to a user or marks a front end; a plain token
// acts as a user of its own, named after its digest.
BOOST_AUTO_TEST_CASE(token_lines_bind_users_and_mark_front_ends) {
  using Kind = sandrun::config::Token::Kind;
  StateDir dir;
  std::ofstream(dir.path + "/tokens") << "tok-alice user=alice\ntok-webui front_end\ntok-plain\n";
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                          "/tokens\", \"bearer_tokens\": \"tok-b user=bob, tok-c\"}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST_REQUIRE(c->tokens.size() == 5u);
  BOOST_TEST((c->tokens[0].kind == Kind::kBoundUser && c->tokens[0].user == "bob"));
  BOOST_TEST((c->tokens[1].kind == Kind::kOwnUser && c->tokens[1].secret == "tok-c"));
  BOOST_TEST((c->tokens[2].kind == Kind::kBoundUser && c->tokens[2].user == "alice"));
  BOOST_TEST((c->tokens[3].kind == Kind::kFrontEnd && c->tokens[3].user.empty()));
  BOOST_TEST((c->tokens[4].kind == Kind::kOwnUser));
  BOOST_TEST(c->tokens[4].user == sandrun::config::OwnUserName("tok-plain"));
  BOOST_TEST(c->tokens[4].user.rfind("token-", 0) == 0u);
  BOOST_TEST(c->tokens[4].user.find("tok-plain") == std::string::npos);
  BOOST_TEST(c->tokens[4].user != c->tokens[1].user);
}

BOOST_AUTO_TEST_CASE(misplaced_token_attributes_are_refused) {
  StateDir dir;
  for (const char* line : {"front_end tok", "tok user=", "tok user=a front_end", "user=a"}) {
    std::ofstream(dir.path + "/tokens") << "ok-token\n" << line << "\n";
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                            "/tokens\"}"));
    BOOST_TEST_REQUIRE(!c.ok(), line);
    BOOST_TEST(c.error().message.find("tokens_file line 2") != std::string::npos,
               c.error().message);
  }
}

BOOST_AUTO_TEST_CASE(session_waiters_default_to_a_quarter_of_the_workers) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                          "\", \"allow_anonymous\": true, \"max_concurrent_runs\": 2, "
                          "\"max_queue\": 16}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->session_max_waiters == 2);
  BOOST_TEST(c->session_max_waiters_total == 5);  // (2 + 16 + 4) / 4
  BOOST_TEST(sandrun::config::WorkerThreads(*c) == 2 + 16 + 2 * 5 + 4);
}

BOOST_AUTO_TEST_CASE(allowed_origins_are_origins) {
  StateDir dir;
  auto c =
      Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, "
                     "\"allowed_origins\": \"https://chat.example.org/, http://localhost:3000\"}"));
  BOOST_TEST_REQUIRE(c.ok(), (c.ok() ? "" : c.error().message));
  BOOST_TEST(c->origins ==
             (std::vector<std::string>{"https://chat.example.org", "http://localhost:3000"}));
  auto bad =
      Load(dir.Write("{\"state_dir\": \"" + dir.path +
                     "\", \"allow_anonymous\": true, \"allowed_origins\": \"example.org\"}"));
  BOOST_TEST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.error().message.find("allowed_origins") != std::string::npos);
}

// node_id becomes a URL path segment and an nginx location: only a-z 0-9 -, 1 to 32.
BOOST_AUTO_TEST_CASE(node_id_is_a_plain_name) {
  StateDir dir;
  for (const char* good : {"", "n1", "sandbox-2", "0", "abcdefghijklmnopqrstuvwxyz012345"}) {
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                            "\", \"allow_anonymous\": true, \"node_id\": \"" + good + "\"}"));
    BOOST_TEST_REQUIRE(c.ok(), good << ": " << (c.ok() ? "" : c.error().message));
    BOOST_TEST(c->node_id == good);
  }
  for (const char* bad :
       {"N1", "-n1", "n/1", "n 1", "..", "n_1", "abcdefghijklmnopqrstuvwxyz0123456"}) {
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                            "\", \"allow_anonymous\": true, \"node_id\": \"" + bad + "\"}"));
    BOOST_TEST_REQUIRE(!c.ok(), bad);
    BOOST_TEST(c.error().message.find("key 'node_id'") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(trusted_proxies_are_addresses_or_cidr_ranges) {
  StateDir dir;
  auto ok = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                           "\", \"allow_anonymous\": true, "
                           "\"trusted_proxies\": \"127.0.0.1, 10.0.0.0/8 ::1 fd00::/8\"}"));
  BOOST_TEST(ok.ok(), (ok.ok() ? "" : ok.error().message));
  for (const char* bad :
       {"example.org", "10.0.0.0/33", "::1/129", "10.0.0.1/", "1.2.3.4/x", "1.2.3.4;", "1.2.3"}) {
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                            "\", \"allow_anonymous\": true, "
                            "\"trusted_proxies\": \"" +
                            std::string(bad) + "\"}"));
    BOOST_TEST_REQUIRE(!c.ok(), bad);
    BOOST_TEST(c.error().message.find("trusted_proxies") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(health_allow_is_addresses_or_cidr_ranges) {
  StateDir dir;
  auto ok = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                           "\", \"allow_anonymous\": true, "
                           "\"health_allow\": \"192.0.2.10, 10.0.0.0/8 2001:db8::/32\"}"));
  BOOST_TEST_REQUIRE(ok.ok(), (ok.ok() ? "" : ok.error().message));
  BOOST_TEST(ok->health_allow_ranges.size() == 3u);
  for (const char* bad : {"monitor.example.org", "10.0.0.0/33", "1.2.3.4;"}) {
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path +
                            "\", \"allow_anonymous\": true, \"health_allow\": \"" +
                            std::string(bad) + "\"}"));
    BOOST_TEST_REQUIRE(!c.ok(), bad);
    BOOST_TEST(c.error().message.find("health_allow") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(quota_and_age_must_be_positive) {
  StateDir dir;
  for (const char* key :
       {"artifact_max_age_s", "user_quota_files", "user_quota_mb", "janitor_interval_s"}) {
    auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true, \"" +
                            key + "\": 0}"));
    BOOST_TEST_REQUIRE(!c.ok(), key);
    BOOST_TEST(c.error().message.find(key) != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Load's errors for a first install: one line per problem, each with a fix that works.
BOOST_AUTO_TEST_SUITE(ConfigProblems)

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The shell command of a fix, from `marker` to the first "; or" (or the end of the line).
std::string CommandOf(const std::string& line, const std::string& marker) {
  size_t start = line.find(marker);
  if (start == std::string::npos) return "";
  start += marker.size();
  size_t end = line.find("; or", start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

BOOST_AUTO_TEST_CASE(missing_link_secret_file_gives_the_command_that_makes_one) {
  StateDir dir;
  std::remove((dir.path + "/link_secret.conf").c_str());
  const std::string config =
      dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}");
  auto c = Load(config);
  BOOST_TEST_REQUIRE(!c.ok());
  std::vector<std::string> lines = Lines(c.error().message);
  BOOST_TEST_REQUIRE(lines.size() == 1u, c.error().message);
  BOOST_TEST(lines[0].find("key 'link_secret_file'") == 0u, lines[0]);
  BOOST_TEST(lines[0].find(" -- fix: make one: ") != std::string::npos, lines[0]);
  // The command as printed makes a file that Load accepts.
  std::string command = CommandOf(lines[0], "make one: ");
  BOOST_TEST(command.find(dir.path + "/link_secret.conf") != std::string::npos, command);
  BOOST_TEST_REQUIRE(std::system(command.c_str()) == 0, command);
  auto fixed = Load(config);
  BOOST_TEST(fixed.ok(), (fixed.ok() ? "" : fixed.error().message));
  BOOST_TEST((fixed.ok() && fixed->link_secret.size() == 64u));
}

BOOST_AUTO_TEST_CASE(missing_tokens_file_says_how_to_make_it_or_allow_anonymous) {
  StateDir dir;
  const std::string tokens = dir.path + "/tokens";
  const std::string config =
      dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + tokens + "\"}");
  auto c = Load(config);
  BOOST_TEST_REQUIRE(!c.ok());
  std::vector<std::string> lines = Lines(c.error().message);
  BOOST_TEST_REQUIRE(lines.size() == 1u, c.error().message);  // not also "no bearer token"
  BOOST_TEST(lines[0].find("key 'tokens_file'") == 0u, lines[0]);
  BOOST_TEST(lines[0].find("\"allow_anonymous\": true") != std::string::npos, lines[0]);
  std::string command = CommandOf(lines[0], "`Authorization: Bearer <token>`): ");
  BOOST_TEST(command.find("openssl rand -hex 32 > " + tokens) != std::string::npos, command);
  BOOST_TEST_REQUIRE(std::system(command.c_str()) == 0, command);
  auto fixed = Load(config);
  BOOST_TEST_REQUIRE(fixed.ok(), (fixed.ok() ? "" : fixed.error().message));
  BOOST_TEST(fixed->tokens.size() == 1u);
}

BOOST_AUTO_TEST_CASE(no_token_at_all_says_to_name_a_tokens_file_or_allow_anonymous) {
  StateDir dir;
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\"}"));
  BOOST_TEST_REQUIRE(!c.ok());
  const std::string& m = c.error().message;
  BOOST_TEST(m.find("no bearer token configured") != std::string::npos, m);
  BOOST_TEST(m.find("fix: set \"tokens_file\"") != std::string::npos, m);
  BOOST_TEST(m.find("\"allow_anonymous\": true") != std::string::npos, m);
  // An empty tokens file: add a token to it.
  std::ofstream(dir.path + "/tokens") << "# no token yet\n";
  auto empty = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" +
                              dir.path + "/tokens\"}"));
  BOOST_TEST_REQUIRE(!empty.ok());
  BOOST_TEST(empty.error().message.find("add a token: openssl rand -hex 32 >> " + dir.path +
                                        "/tokens") != std::string::npos,
             empty.error().message);
}

BOOST_AUTO_TEST_CASE(every_file_problem_is_a_line_of_its_own) {
  StateDir dir;
  std::remove((dir.path + "/link_secret.conf").c_str());
  auto c = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"tokens_file\": \"" + dir.path +
                          "/none\", \"trusted_proxies\": \"example.org\"}"));
  BOOST_TEST_REQUIRE(!c.ok());
  std::vector<std::string> lines = Lines(c.error().message);
  BOOST_TEST_REQUIRE(lines.size() == 3u, c.error().message);
  BOOST_TEST(lines[0].find("key 'link_secret_file'") == 0u, lines[0]);
  BOOST_TEST(lines[1].find("key 'trusted_proxies'") == 0u, lines[1]);
  BOOST_TEST(lines[2].find("key 'tokens_file'") == 0u, lines[2]);
  for (const std::string& line : lines) {
    BOOST_TEST(line.find(" -- fix: ") != std::string::npos, line);
  }
}

BOOST_AUTO_TEST_CASE(missing_config_file_and_bad_json_and_unknown_key_say_what_to_do) {
  StateDir dir;
  auto missing = Load(dir.path + "/nothing.jsonc");
  BOOST_TEST_REQUIRE(!missing.ok());
  BOOST_TEST(
      missing.error().message.find("fix: copy docs/sandrun.example.jsonc") != std::string::npos,
      missing.error().message);
  auto bad = Load(dir.Write("{\"state_dir\": "));
  BOOST_TEST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.error().message.find("fix: correct the JSON") != std::string::npos);
  auto unknown = Load(dir.Write("{\"allow_anonymus\": true}"));
  BOOST_TEST_REQUIRE(!unknown.ok());
  BOOST_TEST(unknown.error().message.find("sandrund --help lists every key") != std::string::npos);
}

// scripts/lib/common.sh: the scripts' own knobs are SANDRUN_SCRIPT_<NAME>, so that sandrund
// never takes one for a config override SANDRUN_<KEY>. That holds while no key starts with
// "script_" (limits and ceilings are objects of their own, not env names).
BOOST_AUTO_TEST_CASE(no_key_starts_with_the_scripts_knob_prefix) {
  StateDir dir;
  auto config = Load(dir.Write("{\"state_dir\": \"" + dir.path + "\", \"allow_anonymous\": true}"));
  BOOST_TEST_REQUIRE(config.ok(), (config.ok() ? "" : config.error().message));
  const std::string json = sandrun::config::EffectiveConfigJson(*config);
  BOOST_TEST(json.find("\"state_dir\"") != std::string::npos);  // it names the keys
  BOOST_TEST(json.find("\"script_") == std::string::npos, json);
  BOOST_TEST(sandrun::config::HelpText().find("script_") == std::string::npos);
}

// Without --config, `check` and `print-config` read the installed config, or else the one
// scripts/serve wrote, and say which; with neither, what to run.
BOOST_AUTO_TEST_CASE(check_finds_the_installed_or_the_serve_config_and_says_which) {
  using sandrun::config::ChooseConfigPath;
  using sandrun::config::ServeConfigCandidates;
  const auto serve = ServeConfigCandidates("/home/me/sandrun/build/src/sandrund");
  BOOST_TEST(serve == (std::vector<std::string>{".state/sandrun.jsonc",
                                                "/home/me/sandrun/.state/sandrun.jsonc"}));
  BOOST_TEST(ServeConfigCandidates("/usr/sbin/sandrund").size() == 1u);
  std::set<std::string> files = {"/etc/sandrun/sandrun.jsonc",
                                 "/home/me/sandrun/.state/sandrun.jsonc"};
  auto exists = [&files](const std::string& path) { return files.count(path) > 0; };
  auto choice = ChooseConfigPath(exists, serve, "check");
  BOOST_TEST(choice.path == "/etc/sandrun/sandrun.jsonc");
  BOOST_TEST(choice.note == "the default; --config FILE names another");
  files.erase("/etc/sandrun/sandrun.jsonc");
  choice = ChooseConfigPath(exists, serve, "check");
  BOOST_TEST(choice.path == "/home/me/sandrun/.state/sandrun.jsonc");
  BOOST_TEST(choice.note ==
             "scripts/serve's: /etc/sandrun/sandrun.jsonc is missing; --config FILE names another");
  files.clear();
  choice = ChooseConfigPath(exists, serve, "check");
  BOOST_TEST(choice.path == "");
  BOOST_TEST(choice.help ==
             "no config: /etc/sandrun/sandrun.jsonc is missing (scripts/install and the Debian "
             "package write it), and there is no scripts/serve config .state/sandrun.jsonc\n"
             "  fix: after scripts/serve, from the repository: build/src/sandrund check --config "
             ".state/sandrun.jsonc (scripts/serve writes it in its state directory, "
             "SANDRUN_SCRIPT_STATE_DIR, .state/ by default); after an install: sandrund check; "
             "or name a config: sandrund check --config FILE");
  BOOST_TEST(ChooseConfigPath(exists, serve, "print-config")
                 .help.find("sandrund print-config --config FILE") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
