// `markdown` requests: the run plan of DESIGN.md §5 (markdown/run_plan.h) mapped onto the
// steps the run handler executes and the `plan` entries of the response.
#include <map>

#include "markdown/run_plan.h"
#include "run/engine.h"
#include "run/install_step.h"
#include "run/run_steps.h"

namespace sandrun::run {

void MarkBlocksNotRun(const std::vector<CodeStep>& steps, const std::vector<StepResult>& ran,
                      RunStatus run_status, std::vector<PlanEntry>* plan) {
  std::map<int, int> planned;  // block -> program steps planned, and that ran
  std::map<int, int> done;
  for (const CodeStep& s : steps) {
    if (s.save_as.empty() && s.block_index >= 0) ++planned[s.block_index];
  }
  const StepResult* failed = nullptr;
  for (const StepResult& r : ran) {
    ++done[r.index];
    if (failed == nullptr && r.status != RunStatus::kOk) failed = &r;
  }
  for (PlanEntry& e : *plan) {
    auto it = planned.find(e.index);
    if (!e.run || it == planned.end() || done[e.index] >= it->second) continue;
    std::string why;
    if (failed != nullptr && failed->index == e.index) {
      why = "an install line of this block failed first (" +
            std::string(RunStatusName(failed->status)) + ")";
    } else if (failed != nullptr) {
      why = markdown::BlockLabel(failed->index) + " failed (" + RunStatusName(failed->status) + ")";
    } else if (run_status == RunStatus::kTimeout) {
      why = "the run's wall-clock time was spent";
    } else if (run_status == RunStatus::kOutputLimit) {
      why = "the run's output budget was spent";
    } else {
      why = "the run stopped (" + std::string(RunStatusName(run_status)) + ")";
    }
    e.run = false;
    e.reason = "not run: " + why + "; planned: " + e.reason;
  }
}

void Engine::SplitCodePipLines(RunRequest* run) const {
  if (run->stateful || run->steps.size() != 1) return;
  CodeStep& program = run->steps[0];
  if (program.language == nullptr || program.language->name != "python") return;
  markdown::PipSplit split = markdown::SplitPipLines(program.code);
  if (split.pip_code.empty() && !split.matplotlib_magic) return;
  const config::Language* shell = config::FindLanguage(config_, "bash");
  if (shell == nullptr) return;
  program.code = std::move(split.code);
  if (split.pip_code.empty()) return;
  program.title = "code (python)";
  CodeStep install;
  install.language = shell;
  install.code = std::move(split.pip_code);
  install.install = true;
  install.title = std::string("pip lines of the code (bash, ") +
                  (IsInstallStep(install) ? "install" : "program") + ")";
  run->steps.insert(run->steps.begin(), std::move(install));
}

std::optional<Refusal> Engine::PlanMarkdown(const std::string& markdown, int block,
                                            std::vector<CodeStep>* steps,
                                            std::optional<std::vector<PlanEntry>>* plan) const {
  std::vector<markdown::LanguageAliases> languages;
  for (const auto& l : config_.languages) languages.push_back({l.name, l.aliases});
  auto built =
      markdown::BuildRunPlan(markdown, languages, block < 0 ? markdown::kAllBlocks : block);
  if (!built.ok()) {
    // 413 is for the request body (DESIGN.md §2); a too-large message inside it is a 400.
    const Error& error = built.error();
    return RefuseError(error, error.kind == ErrorKind::kBadBlock ? "block" : "markdown");
  }
  std::map<int, std::string> not_install;  // block -> why its install step is a program
  for (const auto& s : built->steps) {
    CodeStep step;
    step.block_index = s.block_index;
    step.code = s.code;
    step.save_as = s.save_as;
    step.install = s.kind == markdown::Step::Kind::kInstall;
    step.reads_stdin = s.reads_stdin;
    std::string kind = markdown::StepKindName(s.kind);
    if (step.install) {
      if (std::string why = ParsePureInstall(s.code, nullptr); !why.empty()) {
        not_install[s.block_index] = std::move(why);
        kind = "program";
      }
    }
    if (s.kind != markdown::Step::Kind::kSave) {
      step.language = config::FindLanguage(config_, s.language);
      if (step.language == nullptr) {
        return Refuse(RefusalCode::kUnknownLanguage,
                      markdown::BlockLabel(s.block_index) + ": language '" + s.language +
                          "' is not configured",
                      "markdown");
      }
      step.title =
          markdown::BlockLabel(s.block_index) + " (" + step.language->name + ", " + kind + ")";
    }
    steps->push_back(std::move(step));
  }
  plan->emplace();
  for (const auto& entry : built->plan) {
    std::string reason = entry.reason;
    if (auto it = not_install.find(entry.index); it != not_install.end()) {
      reason +=
          "; its pip installs run as a program, on the run's limits, not the install "
          "budget: " +
          it->second;
    }
    (*plan)->push_back(PlanEntry{entry.index, entry.language, entry.run, std::move(reason)});
  }
  return std::nullopt;
}

}  // namespace sandrun::run
