#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "zoo/output_file.hpp"
#include "zoo/runtime.hpp"
#include "zoo/trace.hpp"

namespace zoo::cli {

// Runs one forward pass over the request's prompt with a recorder attached, the way `zoo trace`
// and `zoo validate` both do.
TraceRecorder trace_request(OpenedModel& opened, const std::filesystem::path& request_file,
                            const PointSelection& selection);

// The model's prompt for a request, its ids checked against the vocabulary with the request file
// named (models check too, but cannot know which file the ids came from). With `max_context` > 0,
// a prompt longer than it (plus `extra_tokens` still to come) is refused here, naming the request,
// before any forward pass.
Prompt prepare_prompt(const Model& model, const Request& request, std::int64_t max_context = 0,
                      std::int64_t extra_tokens = 0);

// Refuses an output (`flag` names the option) that is the same file as anything the run reads: the
// model YAML, every file of the checkpoint, the validation request and golden, and `extra`.
// Called before any work, so a refused run costs nothing.
void check_output(std::string_view flag, const std::filesystem::path& output, const OpenedModel& opened,
                  const std::vector<NamedPath>& extra = {});

// Throws InputError "WHERE: 'GLOB' matches no tap point ..." for the first glob of `selection`
// that matched none of `names` (what was recorded, or what a golden holds): a typo in a point
// list must not make a check vanish.
void require_every_glob_matches(const PointSelection& selection, const std::vector<std::string>& names,
                                std::string_view where, std::string_view among);

// Checks the load plan of one part of the model (a codec's decoder or encoder: its own tensors,
// not the rest of the model's) before that part reads them: a ValidationError naming the model
// file, the part and every problem.
void check_part_load_plan(const OpenedModel& opened, const std::vector<TensorRequirement>& requirements,
                          std::string_view part);

// Metadata written into every trace: which model, plugin, device and dtype made it.
std::map<std::string, std::string> trace_metadata(const OpenedModel& opened);

}  // namespace zoo::cli
