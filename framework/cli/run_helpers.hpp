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

// The model's prompt for a request, its ids checked against the vocabulary with the request file
// named (models check too, but cannot know which file the ids came from).
Prompt prepare_prompt(const Model& model, const Request& request);

// Metadata written into every trace: which model, plugin, device and dtype made it.
std::map<std::string, std::string> trace_metadata(const OpenedModel& opened);

}  // namespace zoo::cli
