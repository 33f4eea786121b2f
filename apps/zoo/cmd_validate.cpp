#include <fmt/format.h>

#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "file_options.hpp"
#include "run_helpers.hpp"
#include "zoo/compare.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::cli {

namespace {

struct ValidateOptions {
  ModelOptions model;
  std::string request, golden, gates;  // override the YAML's validation fields; a model directory needs all three
  std::string out;
  bool json = false, quiet = false;
};

// What to validate: the YAML's validation section with the flags laid over it. InputError naming
// every piece still missing, before anything is loaded.
struct ValidationRun {
  std::filesystem::path request, golden;
  std::optional<std::vector<std::string>> points;
  std::vector<Gate> gates;
};

ValidationRun resolve_validation(const ValidateOptions& o, const ModelSpec& spec) {
  const auto& section = spec.validation;
  ValidationRun v;
  if (section) {
    v.request = section->request;
    v.golden = section->golden;
    v.points = section->points;
  }
  if (!o.request.empty()) v.request = o.request;
  if (!o.golden.empty()) v.golden = o.golden;
  std::vector<std::string> missing;
  if (v.request.empty()) missing.push_back("--request FILE");
  if (v.golden.empty()) missing.push_back("--golden FILE");
  // A section without gates still runs (and fails: nothing checked is not a pass); without a
  // section there is nothing to fall back on.
  if (o.gates.empty() && !section) missing.push_back("--gates FILE");
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i)
      list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
    throw InputError(fmt::format("{}: no `validation:` section; give {}", spec.file.string(), list));
  }
  for (const auto& [flag, file] : {std::pair{"--request", &o.request}, {"--golden", &o.golden}}) {
    std::error_code ec;
    const auto status = std::filesystem::status(*file, ec);
    if (!file->empty() && !std::filesystem::is_regular_file(status))
      throw InputError(fmt::format("{} {}: {}", flag, *file,
                                   std::filesystem::exists(status)  ? "is not a file"
                                   : ec && ec.value() != ENOENT     ? describe_open_error(ec.value())  // a symlink loop
                                                                    : "no such file"));
  }
  v.gates = o.gates.empty() ? parse_gates(section->gates, spec.file.string()) : load_gates(o.gates);
  return v;
}

int run_validate(const ValidateOptions& o) {
  PluginRegistry registry;
  auto opened = open_from_options(o.model, registry);
  const ValidationRun validation = resolve_validation(o, opened.spec);
  if (!o.out.empty())
    check_output("--out", o.out, opened,
                 {{"validation request", validation.request}, {"golden", validation.golden}, {"gates", o.gates}});
  // Trace exactly what the golden holds (or the YAML's points), so nothing is left unchecked.
  const auto golden = SafetensorsFile::open(validation.golden);
  std::vector<std::string> golden_names;
  for (const auto& entry : golden->entries()) golden_names.push_back(entry.name);
  std::vector<std::string> points = golden_names;
  if (validation.points) {
    points = *validation.points;
    // A point that selects nothing is a typo, not a smaller check.
    require_every_glob_matches(PointSelection(points), golden_names,
                               fmt::format("{}: validation.points", opened.spec.file.string()),
                               fmt::format("tensor of the golden {}", validation.golden.string()));
  }
  load_model(opened, !o.quiet && !o.json);
  auto recorder = trace_request(opened, validation.request, PointSelection(points));
  if (!o.out.empty()) recorder.write(o.out, trace_metadata(opened));
  NamedTensors golden_tensors, actual_tensors;
  for (const auto& entry : golden->entries()) golden_tensors.emplace_back(entry.name, golden->view(entry));
  for (const auto& [name, tensor] : recorder.tensors()) actual_tensors.emplace_back(name, tensor.view());
  const auto report = compare_trace_tensors(golden_tensors, actual_tensors, validation.gates,
                                            validation.points ? *validation.points : std::vector<std::string>{});
  if (o.json)
    fmt::print("{}\n", report.to_json().dump(2));
  else
    fmt::print("{}{}\n", report.table(),
               report.passed()      ? "VALIDATION PASSED"
               : report.evaluated() ? "VALIDATION FAILED"
                                    : "VALIDATION FAILED: no gate was evaluated (add validation.gates or --gates)");
  return report.passed() ? 0 : 1;
}

}  // namespace

void add_validate_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Trace a request and gate it against its golden: the YAML's validation section, or --request, --golden and "
      "--gates (which also override the section's fields)");
  add_model_options(*cmd, options->model);
  input_file(cmd->add_option("--request", options->request, "Request JSON to trace (default: validation.request)"),
             "a request JSON file");
  input_file(cmd->add_option("--golden", options->golden, "Golden trace .safetensors (default: validation.golden)"),
             "a golden trace");
  input_file(cmd->add_option("--gates", options->gates,
                  "Gates YAML: the gates alone, under `gates:`, or a model YAML's validation.gates "
                  "(default: validation.gates)"),
             "a gates YAML");
  output_file(cmd->add_option("--out", options->out, "Also keep the trace here"), "a trace");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] { run = [options] { return run_validate(*options); }; });
}

}  // namespace zoo::cli
