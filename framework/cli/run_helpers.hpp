#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "zoo/runtime.hpp"
#include "zoo/trace.hpp"

namespace zoo::cli {

// Runs one forward pass over the request's prompt with a recorder attached, the way `zoo trace`
// and `zoo validate` both do.
TraceRecorder trace_request(OpenedModel& opened, const std::filesystem::path& request_file,
                            const PointSelection& selection);

// Checks a prompt's ids against the model's vocabulary, naming the request file (models check too,
// but cannot know which file the ids came from).
void check_prompt_ids(const Prompt& prompt, const Model& model, const std::filesystem::path& request_file);

// Metadata written into every trace: which model, plugin, device and dtype made it.
std::map<std::string, std::string> trace_metadata(const OpenedModel& opened);

}  // namespace zoo::cli
