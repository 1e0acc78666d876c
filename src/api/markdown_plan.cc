// `markdown` requests: the run plan of DESIGN.md §5 (markdown/run_plan.h) mapped onto the
// steps the run handler executes and the `plan` entries of the response.
#include "api/service.h"
#include "markdown/run_plan.h"

namespace sandrun::api {

std::optional<ApiError> Service::PlanMarkdown(const std::string& markdown, int block,
                                              std::vector<CodeStep>* steps,
                                              std::optional<std::vector<PlanEntry>>* plan) const {
  std::vector<markdown::LanguageAliases> languages;
  for (const auto& l : config_.languages) languages.push_back({l.name, l.aliases});
  auto built =
      markdown::BuildRunPlan(markdown, languages, block < 0 ? markdown::kAllBlocks : block);
  if (!built.ok()) {
    const std::string& code = built.error().code;
    // 413 is for the request body (DESIGN.md §2); a too-large message inside it is a 400.
    return ApiError{400, code, built.error().message, code == "bad_block" ? "block" : "markdown"};
  }
  for (const auto& s : built->steps) {
    CodeStep step;
    step.block_index = s.block_index;
    step.code = s.code;
    step.save_as = s.save_as;
    if (s.kind != markdown::Step::Kind::kSave) {
      step.language = config::FindLanguage(config_, s.language);
      if (step.language == nullptr) {
        return ApiError{400, "unknown_language",
                        "block " + std::to_string(s.block_index) + ": language '" + s.language +
                            "' is not configured",
                        "markdown"};
      }
      step.title = "block " + std::to_string(s.block_index) + " (" + step.language->name + ", " +
                   markdown::StepKindName(s.kind) + ")";
    }
    steps->push_back(std::move(step));
  }
  plan->emplace();
  for (const auto& entry : built->plan) {
    (*plan)->push_back(PlanEntry{entry.index, entry.language, entry.run, entry.reason});
  }
  return std::nullopt;
}

}  // namespace sandrun::api
