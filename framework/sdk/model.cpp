#include "zoo/model.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zoo/error.hpp"

namespace zoo {

// Defined out of line so Model's vtable and type info live in libzoo_framework, shared by every
// plugin, rather than being emitted (hidden) in each one.
Prompt Model::prepare(const Request& request) const {
  if (!request.fields.empty()) {
    std::vector<std::string> names;
    if (request.fields.is_object()) {
      for (const auto& item : request.fields.items()) names.push_back(item.key());
    }
    if (names.empty()) names.push_back(request.fields.dump());
    throw InputError(fmt::format("{}: unknown field{} '{}' (this model takes input_ids only)",
                                 request.file.string(), names.size() == 1 ? "" : "s",
                                 fmt::join(names, "', '")));
  }
  Prompt prompt;
  prompt.ids = request.input_ids;
  return prompt;
}

std::unique_ptr<Runner> Model::new_runner(const RunnerOptions&) {
  const ModelInfo about = info();
  throw InputError(fmt::format("model '{}' (plugin {}) runs one sequence at a time (no batch runner)",
                               about.model_type, about.plugin));
}

Extension* Model::find_extension(std::string_view) { return nullptr; }

void Model::throw_lacking(std::string_view lacking) const {
  const ModelInfo about = info();
  throw InputError(fmt::format("model '{}' (plugin {}) {}", about.model_type, about.plugin, lacking));
}

}  // namespace zoo
