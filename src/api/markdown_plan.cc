// `markdown` requests: the run plan of DESIGN.md §5 mapped onto steps and `plan` entries.
#include "api/service.h"

namespace sandrun::api {

std::optional<ApiError> Service::PlanMarkdown(const std::string& markdown, int block,
                                              std::vector<CodeStep>* steps,
                                              std::optional<std::vector<PlanEntry>>* plan) const {
  return ApiError{400, "not_supported",
                  "'markdown' is part of the API but not supported by this server version yet; "
                  "send 'snippets' or 'language' and 'code'",
                  "markdown"};
}

}  // namespace sandrun::api
