#include "run_helpers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <set>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/request.hpp"

namespace zoo::cli {

TraceRecorder trace_request(OpenedModel& opened, const std::filesystem::path& request_file,
                            const PointSelection& selection) {
  const Request request = load_request(request_file);
  const Prompt prompt = prepare_prompt(*opened.model, request, opened.spec.max_context);
  TraceRecorder recorder(selection);
  if (recorder.wants("input_ids")) {
    // The request's ids, as the golden holds them (a model may rewrite placeholder ids in its prompt).
    const auto ids = HostTensor::from_i64({static_cast<std::int64_t>(request.input_ids.size())}, request.input_ids);
    recorder.record("input_ids", ids.view());
  }
  auto session = opened.model->new_session();
  session->forward(prompt.step(), &recorder);
  return recorder;
}

Prompt prepare_prompt(const Model& model, const Request& request, std::int64_t max_context, std::int64_t extra_tokens) {
  Prompt prompt = model.prepare(request);
  const auto length = static_cast<std::int64_t>(prompt.ids.size());
  if (max_context > 0 && length > max_context)
    throw InputError(fmt::format("{}: the prompt has {} tokens, more than max_context {} (raise model.max_context or "
                                 "--max-context)",
                                 escape_text(request.file.string()), length, max_context));
  if (max_context > 0 && length + extra_tokens > max_context)
    throw InputError(fmt::format("{}: the prompt has {} tokens; with {} more to generate that exceeds max_context {} "
                                 "(lower --max-new-tokens or raise model.max_context / --max-context)",
                                 escape_text(request.file.string()), length, extra_tokens, max_context));
  const auto vocab = model.info().vocab_size;
  for (std::size_t i = 0; i < prompt.ids.size(); ++i)
    if (prompt.ids[i] < 0 || prompt.ids[i] >= vocab)
      throw InputError(fmt::format("{}: input_ids[{}] = {} is outside the vocabulary [0, {})", request.file.string(), i,
                                   prompt.ids[i], vocab));
  return prompt;
}

void check_output(std::string_view flag, const std::filesystem::path& output, const OpenedModel& opened,
                  const std::vector<NamedPath>& extra) {
  namespace fs = std::filesystem;
  std::vector<NamedPath> inputs = extra;
  inputs.push_back({"model YAML", opened.spec.file});
  // Every file directly in a checkpoint directory (config.json, index, shards, tokenizer), the
  // checkpoint file itself, and every file the weight source maps (shards may live elsewhere).
  std::error_code ec;
  const fs::path& checkpoint = opened.spec.checkpoint;
  if (fs::is_directory(checkpoint, ec)) {
    for (const auto& entry : fs::directory_iterator(checkpoint, ec))
      if (entry.is_regular_file(ec)) inputs.push_back({"checkpoint file", entry.path()});
  } else {
    inputs.push_back({"checkpoint", checkpoint});
    inputs.push_back({"checkpoint config", checkpoint.parent_path() / "config.json"});
  }
  if (opened.weights) {
    std::set<std::string> files;
    for (const auto& name : opened.weights->names())
      if (auto info = opened.weights->info(name)) files.insert(info->file);
    for (const auto& file : files) inputs.push_back({"weights file", file});
  }
  if (opened.spec.validation) {
    inputs.push_back({"validation request", opened.spec.validation->request});
    inputs.push_back({"golden", opened.spec.validation->golden});
  }
  check_output_is_not_an_input(flag, output, inputs);
}

void require_every_glob_matches(const PointSelection& selection, const std::vector<std::string>& names,
                                std::string_view where, std::string_view among) {
  if (selection.globs().empty()) throw InputError(fmt::format("{}: selects no tap point", where));
  for (const auto& glob : selection.globs()) {
    const bool found = std::any_of(names.begin(), names.end(), [&](const auto& name) { return glob_match(glob, name); });
    if (!found) throw InputError(fmt::format("{}: '{}' matches no {}", where, escape_text(glob), among));
  }
}

std::map<std::string, std::string> trace_metadata(const OpenedModel& opened) {
  const auto info = opened.model->info();
  return {{"producer", "zoo"},
          {"plugin", info.plugin},
          {"model_type", info.model_type},
          {"config", opened.spec.file.string()},
          {"device", opened.spec.device.str()},
          {"dtype", std::string(dtype_name(opened.spec.dtype))}};
}

void check_part_load_plan(const OpenedModel& opened, const std::vector<TensorRequirement>& requirements,
                          std::string_view part) {
  const LoadPlan plan = make_load_plan(requirements, opened.model->weight_source());
  if (!plan.ok())
    throw ValidationError(fmt::format("{}: the {}'s load plan has {} problem(s):\n{}", opened.spec.file.string(), part,
                                      plan.problem_count(), plan.table()));
}

}  // namespace zoo::cli
