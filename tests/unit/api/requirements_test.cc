// The `packages` grammar (run/requirements.h): what is accepted, how it is normalised, and the
// hostile strings that are refused. Pure.
#define BOOST_TEST_MODULE requirements
#include "run/requirements.h"

#include <boost/test/unit_test.hpp>

namespace run = sandrun::run;
using Texts = std::vector<std::string>;

namespace {

std::string Canonical(const std::string& text) {
  run::Requirement r;
  const std::string why = run::ParseRequirement(text, &r);
  BOOST_TEST(why.empty(), text << ": " << why);
  return r.Text();
}

std::string Refusal(const std::string& text) {
  run::Requirement r;
  return run::ParseRequirement(text, &r);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Requirements)

BOOST_AUTO_TEST_CASE(names_extras_and_versions_are_accepted_and_normalised) {
  BOOST_TEST(Canonical("numpy") == "numpy");
  BOOST_TEST(Canonical("Pandas>=2") == "pandas>=2");
  BOOST_TEST(Canonical("  Scikit_Learn.Extra  ") == "scikit-learn-extra");
  BOOST_TEST(Canonical("requests[socks, Security]") == "requests[security,socks]");
  BOOST_TEST(Canonical("numpy >= 1.26, <2") == "numpy<2,>=1.26");
  BOOST_TEST(Canonical("torch==2.1.0+cpu") == "torch==2.1.0+cpu");
  BOOST_TEST(Canonical("django~=4.2") == "django~=4.2");
  BOOST_TEST(Canonical("x===1.0") == "x===1.0");
  BOOST_TEST(Canonical("a!=1.*") == "a!=1.*");
}

BOOST_AUTO_TEST_CASE(hostile_strings_are_refused) {
  for (const std::string text : {"--index-url=http://evil/simple",
                                 "--index-url",
                                 "-e .",
                                 "-r requirements.txt",
                                 "-e",
                                 "file:///etc/passwd",
                                 "git+https://github.com/x/y",
                                 "../x",
                                 "./pkg",
                                 "/abs/pkg.whl",
                                 "pkg @ https://evil.example/pkg.whl",
                                 "pkg@file:///x",
                                 "pkg; os_name == 'nt'",
                                 "pkg ; python_version < '3'",
                                 "pkg==1.0 --hash=sha256:00",
                                 "pkg>=",
                                 "pkg[",
                                 "pkg[extra",
                                 "pkg[]",
                                 "pkg==1,",
                                 "pkg 1.0",
                                 "pkg\n--index-url=x",
                                 "pkg\t",
                                 "",
                                 "   ",
                                 "-",
                                 "_pkg",
                                 "pkg-",
                                 "pkg.whl/../x",
                                 "http://x",
                                 "pkg==1.0;",
                                 "pkg==$(id)",
                                 "pkg`id`",
                                 "pkg|x",
                                 "pkg>1 <2",
                                 "ünïcode",
                                 "pkg==1.0 extra"}) {
    BOOST_TEST(!Refusal(text).empty(), "accepted: '" << text << "'");
  }
  BOOST_TEST(!Refusal(std::string("pkg\0x", 5)).empty());
  BOOST_TEST(!Refusal(std::string(300, 'a')).empty());
  BOOST_TEST(!Refusal(std::string(101, 'a')).empty());
  BOOST_TEST(Refusal(std::string(100, 'a')).empty());
  BOOST_TEST(Refusal("pkg @ https://x/y.whl").find("direct reference") != std::string::npos);
  BOOST_TEST(Refusal("-e .").find("pip option") != std::string::npos);
  BOOST_TEST(Refusal("pkg; os_name == 'nt'").find("marker") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_set_is_sorted_without_duplicates_and_names_are_its_packages) {
  std::vector<run::Requirement> set(3);
  BOOST_TEST(run::ParseRequirement("Pandas>=2", &set[0]).empty());
  BOOST_TEST(run::ParseRequirement("numpy", &set[1]).empty());
  BOOST_TEST(run::ParseRequirement("NumPy", &set[2]).empty());
  const Texts texts = run::NormalizeSet(set);
  BOOST_TEST(texts == (Texts{"numpy", "pandas>=2"}), boost::test_tools::per_element());
  BOOST_TEST(
      run::NamesOf({"requests[socks]", "numpy<2,>=1", "a~=1"}) == (Texts{"a", "numpy", "requests"}),
      boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
