#include "run_helpers.hpp"

#include <fmt/format.h>

#include "zoo/error.hpp"
#include "zoo/request.hpp"

namespace zoo::cli {

TraceRecorder trace_request(OpenedModel& opened, const std::filesystem::path& request_file,
                            const PointSelection& selection) {
  const Request request = load_request(request_file);
  const Prompt prompt = prepare_prompt(*opened.model, request);
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

Prompt prepare_prompt(const Model& model, const Request& request) {
  Prompt prompt = model.prepare(request);
  const auto vocab = model.info().vocab_size;
  for (std::size_t i = 0; i < prompt.ids.size(); ++i)
    if (prompt.ids[i] < 0 || prompt.ids[i] >= vocab)
      throw InputError(fmt::format("{}: input_ids[{}] = {} is outside the vocabulary [0, {})", request.file.string(), i,
                                   prompt.ids[i], vocab));
  return prompt;
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

}  // namespace zoo::cli
