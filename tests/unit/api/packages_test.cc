// Packages in the run pipeline (api/packages.h): pip's environment from the config, install
// steps, the requested names, and the line said when the network is off. Pure.
#define BOOST_TEST_MODULE packages
#include "api/packages.h"

#include <boost/test/unit_test.hpp>

namespace api = sandrun::api;
using Names = std::vector<std::string>;

BOOST_AUTO_TEST_SUITE(Packages)

BOOST_AUTO_TEST_CASE(pip_env_names_only_the_configured_keys) {
  sandrun::config::Config c;
  BOOST_TEST(api::PipEnv(c).empty());
  c.pip_index_url = "http://10.0.5.20/simple";
  c.pip_extra_index_urls = {"https://a.example/simple", "https://b.example/simple"};
  c.pip_trusted_hosts = {"10.0.5.20", "a.example:8443"};
  BOOST_TEST(api::PipEnv(c) ==
                 (Names{"PIP_INDEX_URL=http://10.0.5.20/simple",
                        "PIP_EXTRA_INDEX_URL=https://a.example/simple https://b.example/simple",
                        "PIP_TRUSTED_HOST=10.0.5.20 a.example:8443"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(install_steps_are_the_pip_install_forms) {
  for (const char* code : {"pip install x", "pip3 install -q x", "python -m pip install x",
                           "python3 -m pip install --user x && echo done", "sudo pip install x"}) {
    BOOST_TEST(api::IsInstallCode(code), code);
  }
  for (const char* code : {"echo pip install x", "pip list", "python app.py", "ls"}) {
    BOOST_TEST(!api::IsInstallCode(code), code);
  }
}

BOOST_AUTO_TEST_CASE(a_cells_install_code_is_its_pip_magic_and_shell_lines) {
  BOOST_TEST(
      api::CellInstallCode("%pip install yfinance\nimport yfinance\n  ! pip3 install -q x\n") ==
      "pip install yfinance\npip3 install -q x\n");
  BOOST_TEST(api::CellInstallCode("!python3 -m pip install y") == "python3 -m pip install y\n");
  BOOST_TEST(api::CellInstallCode("pip install z") == "pip install z\n");
  for (const char* cell : {"import os", "pipe = 1", "!ls", "%matplotlib inline", "%pip list",
                           "# %pip install x", "%", ""}) {
    BOOST_TEST(api::CellInstallCode(cell).empty(), cell);
  }
}

BOOST_AUTO_TEST_CASE(requested_names_leave_out_options_versions_and_paths) {
  BOOST_TEST(api::RequestedPackages("pip install yfinance 'pandas>=2' matplotlib[all]") ==
                 (Names{"yfinance", "pandas", "matplotlib"}),
             boost::test_tools::per_element());
  BOOST_TEST(api::RequestedPackages("python3 -m pip install --user -q -i http://x/simple "
                                    "--trusted-host x -r req.txt ./local.whl "
                                    "https://e.com/a.tar.gz tabulate==0.9") == (Names{"tabulate"}),
             boost::test_tools::per_element());
  BOOST_TEST(api::RequestedPackages("pip install a\npip3 install b a\necho c") == (Names{"a", "b"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(names_normalise_as_pep_503_says) {
  BOOST_TEST(api::NormalizePackageName("Sandrun_Fixture") == "sandrun-fixture");
  BOOST_TEST(api::NormalizePackageName("a.-_b") == "a-b");
}

BOOST_AUTO_TEST_CASE(available_reads_pips_satisfied_lines) {
  const std::string out =
      "Requirement already satisfied: NumPy in /usr/lib/python3/dist-packages (1.24.2)\n";
  BOOST_TEST(api::AvailablePackages({"numpy", "yfinance"}, out, {}) == (Names{"numpy"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(only_a_pure_install_step_is_install_only) {
  BOOST_TEST(api::IsInstallOnlyCode("pip install yfinance matplotlib\n"));
  BOOST_TEST(
      api::IsInstallOnlyCode("# deps\ncd /tmp && python3 -m pip install -q x\n\npip3 install y\n"));
  // A program that also installs buys no install budget.
  BOOST_TEST(!api::IsInstallOnlyCode("pip install x\nwhile :; do :; done\n"));
  BOOST_TEST(!api::IsInstallOnlyCode("pip install x && python app.py\n"));
  BOOST_TEST(!api::IsInstallOnlyCode("pip install x 2>&1 | tail -n 3\n"));
  BOOST_TEST(!api::IsInstallOnlyCode("pip install x\necho hi > out.txt\n"));
  BOOST_TEST(!api::IsInstallOnlyCode("echo hi\n"));
  BOOST_TEST(!api::IsInstallOnlyCode(""));
  // ...but still counts as mentioning an install (the network-off note).
  BOOST_TEST(api::IsInstallCode("pip install x\nwhile :; do :; done\n"));
}

BOOST_AUTO_TEST_CASE(pip_found_nothing_is_its_two_messages) {
  BOOST_TEST(api::PipFoundNothing("ERROR: No matching distribution found for yfinance"));
  BOOST_TEST(api::PipFoundNothing(
      "ERROR: Could not find a version that satisfies the requirement x (from versions: none)"));
  BOOST_TEST(!api::PipFoundNothing("Successfully installed x-1.0"));
}

BOOST_AUTO_TEST_CASE(the_note_says_off_what_is_there_and_what_to_do) {
  const std::string note = api::NetworkOffNote({"numpy", "yfinance"}, {"numpy"}, "off");
  BOOST_TEST(note.find("the network is off for runs on this server") != std::string::npos);
  BOOST_TEST(note.find("Already available: numpy.") != std::string::npos);
  BOOST_TEST(note.find("Not available: yfinance.") != std::string::npos);
  for (const char* fix : {"\"network\"", "\"pip_index_url\"", "prepare an environment"}) {
    BOOST_TEST(note.find(fix) != std::string::npos, fix);
  }
  BOOST_TEST(note.find('\n') == std::string::npos);  // one line
  BOOST_TEST(api::NetworkOffNote({"x"}, {}, "off").find("Already available: none.") !=
             std::string::npos);
  BOOST_TEST(note.find("environments_prebuild") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(on_request_the_note_says_the_run_did_not_ask) {
  const std::string note = api::NetworkOffNote({"yfinance"}, {}, "on_request");
  BOOST_TEST(note.find("this run has no network") != std::string::npos, note);
  BOOST_TEST(note.find("\"network\": true") != std::string::npos, note);
  BOOST_TEST(note.find("\"packages\"") != std::string::npos, note);
  BOOST_TEST(note.find("Not available: yfinance.") != std::string::npos, note);
  BOOST_TEST(note.find("off for runs on this server") == std::string::npos, note);
  BOOST_TEST(note.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
