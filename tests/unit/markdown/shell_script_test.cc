#define BOOST_TEST_MODULE markdown_shell_script
#include "markdown/shell_script.h"

#include <boost/test/unit_test.hpp>

#include "markdown/text_util.h"

using namespace sandrun::markdown;

namespace {

LineKind KindOf(std::string_view line) { return AnalyzeShell(line).lines.at(0).kind; }

std::vector<std::string> Refs(std::string_view line) {
  std::vector<std::string> out;
  ShellScript script = AnalyzeShell(line);
  for (const ShellCommand& c : script.lines.at(0).commands) {
    for (const FileRef& r : c.refs) out.push_back(r.file + ":" + std::string(r.family));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ShellLines)

BOOST_AUTO_TEST_CASE(pip_installs_in_their_usual_spellings) {
  for (const char* line : {"pip install numpy", "pip3 install -q pandas", "python -m pip install x",
                           "python3 -m pip install --user x", "sudo pip install y",
                           "PIP_NO_INPUT=1 pip install z  # quietly"}) {
    BOOST_TEST((KindOf(line) == LineKind::kInstall), line);
  }
  BOOST_TEST((KindOf("pip list") == LineKind::kOther));
}

BOOST_AUTO_TEST_CASE(requirements_files_are_named) {
  BOOST_TEST(Refs("pip install -r requirements.txt") ==
             std::vector<std::string>{"requirements.txt:"});
  BOOST_TEST(Refs("pip install -rreqs.txt") == std::vector<std::string>{"reqs.txt:"});
}

BOOST_AUTO_TEST_CASE(commands_that_only_run_a_file) {
  BOOST_TEST((KindOf("python app.py") == LineKind::kRun));
  BOOST_TEST((KindOf("python3 -u app.py --n 3 > out.txt") == LineKind::kRun));
  BOOST_TEST((KindOf("bash x.sh") == LineKind::kRun));
  BOOST_TEST((KindOf("sh ./x.sh") == LineKind::kRun));
  BOOST_TEST((KindOf("chmod +x x.sh && ./x.sh") == LineKind::kRun));
  BOOST_TEST((KindOf("cd project; python main.py") == LineKind::kRun));
  BOOST_TEST(Refs("python3 app.py") == std::vector<std::string>{"app.py:python"});
  BOOST_TEST(Refs("./run.sh") == std::vector<std::string>{"run.sh:shell"});
  BOOST_TEST(Refs("python -m app") == std::vector<std::string>{"app.py:python"});
  BOOST_TEST(Refs("chmod +x tool.py") == std::vector<std::string>{"tool.py:python"});
}

BOOST_AUTO_TEST_CASE(commands_that_do_more_are_other) {
  for (const char* line :
       {"python -c 'print(1)'", "python", "echo hi", "ls -la", "cat data.txt | python app.py",
        "python -m http.server", "python ../escape.py", "python /tmp/abs.py"}) {
    BOOST_TEST((KindOf(line) == LineKind::kOther), line);
  }
}

BOOST_AUTO_TEST_CASE(system_package_managers) {
  BOOST_TEST((KindOf("sudo apt-get install -y python3-pandas") == LineKind::kSystemInstall));
  BOOST_TEST((KindOf("apt update && apt install -y jq") == LineKind::kSystemInstall));
  BOOST_TEST((KindOf("brew install jq") == LineKind::kSystemInstall));
  BOOST_TEST((KindOf("apt-get update && pip install x") == LineKind::kOther));
}

BOOST_AUTO_TEST_CASE(writes_by_redirection_tee_and_heredoc) {
  ShellScript s = AnalyzeShell(
      "echo 'ANSWER = 41' > helper.py\n"
      "echo \"a > b\" >> ./log.txt 2>/dev/null\n"
      "printf x | tee -a copy.txt\n"
      "cat > app.py <<'EOF'\n"
      "print('> not.a.file')\n"
      "EOF\n"
      "python app.py 2>&1 > out.txt\n");
  BOOST_TEST(s.writes == (std::vector<std::string>{"helper.py", "log.txt", "copy.txt", "app.py"}));
  BOOST_TEST((s.lines[4].kind == LineKind::kHeredocBody));
  BOOST_TEST((s.lines[5].kind == LineKind::kHeredocBody));
  BOOST_TEST((s.lines[6].kind == LineKind::kRun));
}

BOOST_AUTO_TEST_CASE(heredoc_forms) {
  for (const char* start : {"cat <<EOF > a.py", "cat << \"EOF\" > a.py", "cat <<-EOF >a.py"}) {
    ShellScript s = AnalyzeShell(std::string(start) + "\npip install x\n\tEOF\necho done\n");
    BOOST_TEST((s.lines[1].kind == LineKind::kHeredocBody), start);
    BOOST_TEST((s.lines[2].kind == LineKind::kHeredocBody), start);
    BOOST_TEST((s.lines[3].kind == LineKind::kOther), start);
    BOOST_TEST(s.writes == std::vector<std::string>{"a.py"}, start);
  }
  // A here-string is not a heredoc.
  BOOST_TEST((AnalyzeShell("cat <<< 'x'\npython app.py\n").lines[1].kind == LineKind::kRun));
}

BOOST_AUTO_TEST_CASE(comments_and_blank_lines_are_empty) {
  ShellScript s = AnalyzeShell("# install\n\n   \npip install x # why\n");
  BOOST_TEST((s.lines[0].kind == LineKind::kEmpty));
  BOOST_TEST((s.lines[1].kind == LineKind::kEmpty));
  BOOST_TEST((s.lines[2].kind == LineKind::kEmpty));
  BOOST_TEST((s.lines[3].kind == LineKind::kInstall));
}

BOOST_AUTO_TEST_CASE(command_spans_cover_each_command) {
  ShellLine line = AnalyzeShell("cd app && python main.py --x 1").lines[0];
  BOOST_TEST_REQUIRE(line.commands.size() == 2u);
  BOOST_TEST(
      line.text.substr(line.commands[1].begin, line.commands[1].end - line.commands[1].begin) ==
      "python main.py --x 1");
}

BOOST_AUTO_TEST_CASE(unterminated_quotes_do_not_crash) {
  BOOST_TEST((KindOf("echo 'unterminated > x") == LineKind::kOther));
  BOOST_TEST((KindOf("echo \\") == LineKind::kOther));
  BOOST_TEST((KindOf(">") == LineKind::kOther));
  BOOST_TEST((KindOf("<<") == LineKind::kOther));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Prompts)

BOOST_AUTO_TEST_CASE(all_prompts_are_commands) {
  PromptLines p = StripPrompts("$ pip install x\n\n$ python -V\n$\n", "$ ", "");
  BOOST_TEST(p.all_prompts);
  BOOST_TEST(p.code == "pip install x\npython -V\n\n");
}

BOOST_AUTO_TEST_CASE(output_lines_make_a_transcript) {
  PromptLines p = StripPrompts("$ python app.py\nHello\n", "$ ", "");
  BOOST_TEST(!p.all_prompts);
  BOOST_TEST(p.any_prompt);
}

BOOST_AUTO_TEST_CASE(python_continuation_lines) {
  PromptLines p = StripPrompts(">>> def f():\n...     return 1\n>>> print(f())\n", ">>> ", "... ");
  BOOST_TEST(p.all_prompts);
  BOOST_TEST(p.code == "def f():\n    return 1\nprint(f())\n");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(SavePaths)

BOOST_AUTO_TEST_CASE(only_plain_relative_paths_may_be_saved_to) {
  for (const char* ok : {"app.py", "src/app.py", "a-b_c+d.v2.py"}) {
    BOOST_TEST(IsSafeRelativePath(ok), ok);
  }
  for (const char* bad :
       {"", "/etc/passwd", "../x.py", "a/../x.py", "./x.py", ".sandrun/main.py", ".local/x.py",
        "a//b.py", "-rf.py", "a b.py", "a\nb.py", "x.py/", "caf\xC3\xA9.py"}) {
    BOOST_TEST(!IsSafeRelativePath(bad), bad);
  }
  BOOST_TEST(!IsSafeRelativePath(std::string(201, 'a')));
}

BOOST_AUTO_TEST_CASE(hints_never_name_hidden_or_escaping_paths) {
  BOOST_TEST(CleanFileToken("`../../etc/cron.py`").empty());
  BOOST_TEST(CleanFileToken("`.sandrun/main.py`:").empty());
  BOOST_TEST(CleanFileToken("`./app.py`:") == "app.py");
  BOOST_TEST(CleanFileToken("**app.py**") == "app.py");
  BOOST_TEST(CleanFileToken("np.array").empty());
}

BOOST_AUTO_TEST_SUITE_END()
