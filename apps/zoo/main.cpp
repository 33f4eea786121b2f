// The `zoo` command line: subcommands in cmd_*.cpp, exit codes per docs (0 ok, 1 validation failed,
// 2 bad input or usage), and never a crash whatever the input.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "build_info.hpp"
#include "commands.hpp"
#include "file_options.hpp"
#include "numeric_option.hpp"
#include "suggest.hpp"
#include "zoo/error.hpp"
#include "zoo/jinja.hpp"
#include "zoo/format.hpp"
#include "zoo/kernels/env.hpp"

namespace zoo::cli {

namespace {

// Errors go out as one line on stderr, or under --json as one JSON object on stdout, where a
// program reading the command's JSON looks.
struct ErrorPrinter {
  bool json = false;

  int operator()(int code, std::string_view kind, const std::string& message, bool usage_hint = false) const {
    if (json) {
      nlohmann::json out = {{"error", {{"kind", kind}, {"message", message}, {"exit_code", code}}}};
      fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      std::fflush(stdout);
    } else {
      // Messages quote names and paths from files; escaping here, in the one place every error is
      // printed, keeps each error one line and lets no crafted name print a line of its own.
      fmt::print(stderr, "zoo: {}{}\n", kind == "validation" ? "validation failed: " : "error: ",
                 zoo::escape_text(message));
      if (usage_hint) fmt::print(stderr, "Run with --help for usage.\n");
    }
    return code;
  }
};

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* opt : app.get_options())
    for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
  return names;
}

// A parse error rephrased for a person: the unknown command or flag named, with the nearest real one.
std::string describe_parse_error(CLI::App& app, const CLI::ParseError& e) {
  std::vector<std::string> commands;
  const std::function<bool(const CLI::App*)> every = [](const CLI::App*) { return true; };
  for (const auto* sub : std::as_const(app).get_subcommands(every)) commands.push_back(sub->get_name());
  const auto chosen = app.get_subcommands();
  CLI::App* where = chosen.empty() ? &app : chosen.front();
  const auto extra = where->remaining();
  if (chosen.empty() && !extra.empty() && !extra.front().starts_with('-')) {
    const auto hint = nearest(extra.front(), commands);
    return fmt::format("unknown command '{}'{}", extra.front(), hint ? fmt::format("; did you mean '{}'?", *hint) : "");
  }
  // Checked for every parse error: CLI11 reports a missing required option before an unknown one,
  // but a misspelt flag is the likelier cause of both.
  {
    for (const auto& arg : extra) {
      if (!arg.starts_with('-')) continue;
      const std::string flag = arg.substr(0, arg.find('='));
      auto names = option_names(*where);
      if (where == &app) names.push_back("--version");
      const auto hint = nearest(flag, names);
      return fmt::format("{}unknown option '{}'{}", where == &app ? "" : where->get_name() + ": ", flag,
                         hint ? fmt::format("; did you mean '{}'?", *hint) : "");
    }
  }
  return e.what();
}

}  // namespace

}  // namespace zoo::cli

int main(int argc, char** argv) {
  using namespace zoo::cli;
  ErrorPrinter error;
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i)
    if (std::string_view(argv[i]) == "--json") error.json = true;

  CLI::App app{"Zoo: run and validate transformer models shipped as plugins"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");
  app.set_version_flag("--version", fmt::format("zoo {} ({})", zoo_version(), zoo_commit()));
  // Every option's default shows in --help (subcommands copy this when they are added).
  app.option_defaults()->always_capture_default();
  Action run;
  add_plugins_command(app, run);
  add_inspect_command(app, run);
  add_plan_command(app, run);
  add_trace_command(app, run);
  add_generate_command(app, run);
  add_serve_command(app, run);
  add_compare_command(app, run);
  add_validate_command(app, run);
  add_bench_command(app, run);
  add_synth_command(app, run);
  add_tokenize_command(app, run);
  add_tts_command(app, run);
  add_template_command(app, run);
  // Hidden: what tests/scripts/cli_file_options.sh enumerates (every option's file class).
  if (argc == 2 && std::string_view(argv[1]) == "--list-file-options") {
    fmt::print("{}", list_file_options(app));
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --help-all, --version
  } catch (const CLI::ParseError& e) {
    return error(2, "usage", describe_parse_error(app, e), true);
  }
  // Every ZOO_* switch is checked here, once, whatever the command and device: the kernels read
  // them lazily (a CUDA switch never on a CPU run), so a typo would otherwise go unseen. A bad
  // value is the user's input, not an internal error.
  try {
    zoo::kernels::check_env_switches();
  } catch (const std::invalid_argument& e) {
    return error(2, "input", e.what());
  }
  try {
    // Every input of the chosen command opened and checked, every output compared with them,
    // before the command does anything.
    for (const auto* command : app.get_subcommands()) check_file_options(*command);
    return run ? run() : 2;
  } catch (const zoo::jinja::TemplateRaised& e) {
    // The template refused the conversation (raise_exception): its words, naming the file.
    return error(1, "template", e.what());
  } catch (const zoo::ValidationError& e) {
    return error(1, "validation", e.what());
  } catch (const zoo::InputError& e) {
    return error(2, "input", e.what());
  } catch (const std::bad_alloc&) {
    return error(2, "input", "out of memory");
  } catch (const std::exception& e) {
    return error(2, "internal", e.what());
  }
}
