// Packages in the run pipeline (run/packages.h): pip's environment from the config, install
// steps, the requested names, and the lines said when the network is off or no index could be
// reached. Pure.
#define BOOST_TEST_MODULE packages
#include "run/packages.h"

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <sstream>

namespace run = sandrun::run;
using Names = std::vector<std::string>;

namespace {

// A real pip output of tests/data/pip_outputs/ (its README says how each was made).
std::string PipOutput(const std::string& name) {
  std::ifstream in(std::string(SANDRUN_PIP_OUTPUTS_DIR) + "/" + name);
  BOOST_TEST_REQUIRE(in.good(), name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Packages)

BOOST_AUTO_TEST_CASE(pip_env_names_only_the_configured_keys) {
  sandrun::config::Config c;
  BOOST_TEST(run::PipEnv(c).empty());
  c.pip_index_url = "http://10.0.5.20/simple";
  c.pip_extra_index_urls = {"https://a.example/simple", "https://b.example/simple"};
  c.pip_trusted_hosts = {"10.0.5.20", "a.example:8443"};
  BOOST_TEST(run::PipEnv(c) ==
                 (Names{"PIP_INDEX_URL=http://10.0.5.20/simple",
                        "PIP_EXTRA_INDEX_URL=https://a.example/simple https://b.example/simple",
                        "PIP_TRUSTED_HOST=10.0.5.20 a.example:8443"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(install_steps_are_the_pip_install_forms) {
  for (const char* code : {"pip install x", "pip3 install -q x", "python -m pip install x",
                           "python3 -m pip install --user x && echo done", "sudo pip install x"}) {
    BOOST_TEST(run::IsInstallCode(code), code);
  }
  for (const char* code : {"echo pip install x", "pip list", "python app.py", "ls"}) {
    BOOST_TEST(!run::IsInstallCode(code), code);
  }
}

BOOST_AUTO_TEST_CASE(a_cells_install_code_is_its_pip_magic_and_shell_lines) {
  BOOST_TEST(
      run::CellInstallCode("%pip install yfinance\nimport yfinance\n  ! pip3 install -q x\n") ==
      "pip install yfinance\npip3 install -q x\n");
  BOOST_TEST(run::CellInstallCode("!python3 -m pip install y") == "python3 -m pip install y\n");
  BOOST_TEST(run::CellInstallCode("pip install z") == "pip install z\n");
  for (const char* cell : {"import os", "pipe = 1", "!ls", "%matplotlib inline", "%pip list",
                           "# %pip install x", "%", ""}) {
    BOOST_TEST(run::CellInstallCode(cell).empty(), cell);
  }
}

BOOST_AUTO_TEST_CASE(requested_names_leave_out_options_versions_and_paths) {
  BOOST_TEST(run::RequestedPackages("pip install yfinance 'pandas>=2' matplotlib[all]") ==
                 (Names{"yfinance", "pandas", "matplotlib"}),
             boost::test_tools::per_element());
  BOOST_TEST(run::RequestedPackages("python3 -m pip install --user -q -i http://x/simple "
                                    "--trusted-host x -r req.txt ./local.whl "
                                    "https://e.com/a.tar.gz tabulate==0.9") == (Names{"tabulate"}),
             boost::test_tools::per_element());
  BOOST_TEST(run::RequestedPackages("pip install a\npip3 install b a\necho c") == (Names{"a", "b"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(names_normalise_as_pep_503_says) {
  BOOST_TEST(run::NormalizePackageName("Sandrun_Fixture") == "sandrun-fixture");
  BOOST_TEST(run::NormalizePackageName("a.-_b") == "a-b");
}

BOOST_AUTO_TEST_CASE(available_reads_pips_satisfied_lines) {
  const std::string out =
      "Requirement already satisfied: NumPy in /usr/lib/python3/dist-packages (1.24.2)\n";
  BOOST_TEST(run::AvailablePackages({"numpy", "yfinance"}, out, {}) == (Names{"numpy"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(only_a_pure_install_step_is_install_only) {
  BOOST_TEST(run::IsInstallOnlyCode("pip install yfinance matplotlib\n"));
  BOOST_TEST(
      run::IsInstallOnlyCode("# deps\ncd /tmp && python3 -m pip install -q x\n\npip3 install y\n"));
  // A program that also installs buys no install budget.
  BOOST_TEST(!run::IsInstallOnlyCode("pip install x\nwhile :; do :; done\n"));
  BOOST_TEST(!run::IsInstallOnlyCode("pip install x && python app.py\n"));
  BOOST_TEST(!run::IsInstallOnlyCode("pip install x 2>&1 | tail -n 3\n"));
  BOOST_TEST(!run::IsInstallOnlyCode("pip install x\necho hi > out.txt\n"));
  BOOST_TEST(!run::IsInstallOnlyCode("echo hi\n"));
  BOOST_TEST(!run::IsInstallOnlyCode(""));
  // ...but still counts as mentioning an install (the network-off note).
  BOOST_TEST(run::IsInstallCode("pip install x\nwhile :; do :; done\n"));
}

BOOST_AUTO_TEST_CASE(pip_found_nothing_is_its_two_messages) {
  BOOST_TEST(run::PipFoundNothing("ERROR: No matching distribution found for yfinance"));
  BOOST_TEST(run::PipFoundNothing(
      "ERROR: Could not find a version that satisfies the requirement x (from versions: none)"));
  BOOST_TEST(!run::PipFoundNothing("Successfully installed x-1.0"));
}

BOOST_AUTO_TEST_CASE(the_note_says_off_what_is_there_and_what_to_do) {
  const std::string note = run::NetworkOffNote({"numpy", "yfinance"}, {"numpy"}, "off");
  BOOST_TEST(note.find("the network is off for runs on this server") != std::string::npos);
  BOOST_TEST(note.find("Already available: numpy.") != std::string::npos);
  BOOST_TEST(note.find("Not available: yfinance.") != std::string::npos);
  for (const char* fix : {"\"network\"", "\"pip_index_url\"", "prepare an environment"}) {
    BOOST_TEST(note.find(fix) != std::string::npos, fix);
  }
  BOOST_TEST(note.find('\n') == std::string::npos);  // one line
  BOOST_TEST(run::NetworkOffNote({"x"}, {}, "off").find("Already available: none.") !=
             std::string::npos);
  BOOST_TEST(note.find("environments_prebuild") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(on_request_the_note_says_the_run_did_not_ask) {
  const std::string note = run::NetworkOffNote({"yfinance"}, {}, "on_request");
  BOOST_TEST(note.find("this run has no network") != std::string::npos, note);
  BOOST_TEST(note.find("\"network\": true") != std::string::npos, note);
  BOOST_TEST(note.find("\"packages\"") != std::string::npos, note);
  BOOST_TEST(note.find("Not available: yfinance.") != std::string::npos, note);
  BOOST_TEST(note.find("off for runs on this server") == std::string::npos, note);
  BOOST_TEST(note.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unreachable_index_is_named_with_what_failed_and_the_admins_keys) {
  sandrun::config::Config config;
  config.pip_index_url = "http://127.0.0.1:9/simple";
  const std::string refused = PipOutput("connection_refused.txt");
  BOOST_TEST_REQUIRE(run::PipFoundNothing(refused));
  const std::string note = run::IndexUnreachableNote(refused, config);
  BOOST_TEST(note ==
             "sandrun: pip could not reach the package index (http://127.0.0.1:9/simple): the "
             "connection was refused, so \"from versions: none\" says nothing about whether the "
             "package exists. What the server's admin can do: check that this server reaches "
             "the index (runs connect from it), or set \"pip_index_url\" (and "
             "\"pip_extra_index_urls\") to an index the runs can reach, with "
             "\"pip_trusted_hosts\" for a plain http one and \"network_allow_cidrs\" for one "
             "at a private address; or prepare the packages: \"environments_prebuild\", or "
             "install them on the host (scripts/packages/batteries.txt).");
  BOOST_TEST(note.find('\n') == std::string::npos);
  config.pip_index_url = "https://nonexistent-host.invalid/simple";
  BOOST_TEST(run::IndexUnreachableNote(PipOutput("name_not_known.txt"), config)
                 .find("(https://nonexistent-host.invalid/simple): its host name did not "
                       "resolve,") != std::string::npos);
  config.pip_index_url = "";
  BOOST_TEST(run::IndexUnreachableNote(PipOutput("pypi_no_dns.txt"), config)
                 .find("(PyPI, https://pypi.org/simple): its host name did not resolve") !=
             std::string::npos);
  BOOST_TEST(run::IndexUnreachableNote(PipOutput("untrusted_http_index.txt"), config)
                 .find("pip ignored it: it is plain http and its host is not trusted") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_reached_index_without_the_package_gets_no_note) {
  const std::string output = PipOutput("index_reached_no_package.txt");
  BOOST_TEST(run::PipFoundNothing(output));
  BOOST_TEST(run::IndexUnreachableNote(output, sandrun::config::Config()) == "");
}

BOOST_AUTO_TEST_CASE(each_network_failure_of_pip_has_its_phrase) {
  const sandrun::config::Config config;
  auto why = [&config](const std::string& line) {
    const std::string note = run::IndexUnreachableNote(line, config);
    const size_t start = note.find("): ");
    return start == std::string::npos ? note
                                      : note.substr(start + 3, note.find(", so") - start - 3);
  };
  BOOST_TEST(why("Failed to establish a new connection: [Errno -3] Temporary failure in name "
                 "resolution") == "its host name did not resolve");
  BOOST_TEST(why("Failed to establish a new connection: [Errno 101] Network is unreachable") ==
             "the network is unreachable from the runs");
  BOOST_TEST(why("connection broken by 'ConnectTimeoutError(...)'") == "the connection timed out");
  BOOST_TEST(why("connection broken by 'ReadTimeoutError(...)'") == "the connection timed out");
  BOOST_TEST(why("connection broken by 'ProxyError('Cannot connect to proxy.')'") ==
             "the proxy failed");
  BOOST_TEST(why("Could not fetch URL https://pypi.org/simple/x/: There was a problem confirming "
                 "the ssl certificate: ... (Caused by SSLError(...))") ==
             "its TLS certificate failed");
  BOOST_TEST(why("WARNING: Retrying ... 'NewConnectionError(...)'") == "the connection failed");
  BOOST_TEST(why("ERROR: No matching distribution found for x") == "");
}

BOOST_AUTO_TEST_SUITE_END()
