// `zoo tokenize MODEL --input FILE.jsonl [--decode]`: text to ids (or back) with the model's
// tokenizer.json, one JSON value per line, so scripts can compare with other tokenizers.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "file_options.hpp"
#include "numeric_option.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/tokenizer.hpp"

namespace zoo::cli {

namespace fs = std::filesystem;

// MODEL -> its tokenizer.json: a directory holding one, a tokenizer.json itself, or a model YAML
// (the tokenizer.json beside the checkpoint: in it when a directory, else next to the file).
fs::path tokenizer_json_for(const std::string& model) {
  const fs::path p(model);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    const fs::path t = p / "tokenizer.json";
    if (!fs::exists(t, ec)) throw InputError(fmt::format("{}: no tokenizer.json in the model directory", p.string()));
    return t;
  }
  // A symlink loop (or no permission) is not "no such file": say what stat said.
  if (!fs::exists(fs::status(p, ec))) {
    throw InputError(fmt::format("{}: {}", p.string(),
                                 ec && ec.value() != ENOENT ? describe_open_error(ec.value()) : "no such file or directory"));
  }
  if (p.extension() == ".json") return p;
  const ModelSpec spec = load_model_spec(p);
  const fs::path dir = fs::is_directory(spec.checkpoint, ec) ? spec.checkpoint : spec.checkpoint.parent_path();
  const fs::path t = dir / "tokenizer.json";
  if (!fs::exists(t, ec))
    throw InputError(fmt::format("{}: no tokenizer.json beside the checkpoint ({})", p.string(), t.string()));
  return t;
}

void add_tokenize_command(CLI::App& app, Action& run) {
  struct Options {
    std::string model, input;
    bool decode = false, skip_special = false, stats = false;
    int repeat = 1;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids (or ids to text) with the model's tokenizer.json");
  input_file(cmd->add_option("model", options->model, "Model YAML, model directory, or tokenizer.json"),
             "a model YAML, model directory or tokenizer.json", {.directory_ok = true})
      ->required();
  input_file(cmd->add_option("--input", options->input,
                             "JSONL: one JSON string per line (--decode: one array of ids per line); - for stdin"),
             "a JSONL file", {.stdin_ok = true})
      ->required();
  cmd->add_flag("--decode", options->decode, "Ids to text");
  cmd->add_flag("--skip-special", options->skip_special, "With --decode: leave special tokens out");
  cmd->add_flag("--stats", options->stats, "Print load time and encode/decode throughput to stderr");
  cmd->add_option("--repeat", options->repeat, "Encode/decode every line N times (a benchmark; --stats reports the first and the fastest pass)")
      // One timing slot per pass is kept (first and fastest are reported): bounded so that a typo
      // of 2000000000 is an error, not 16 GB of timings.
      ->check(integer_in(1, 1000000));
  cmd->callback([&run, options] {
    run = [options] {
      using Clock = std::chrono::steady_clock;
      const auto t0 = Clock::now();
      const Tokenizer tok = Tokenizer::from_file(tokenizer_json_for(options->model));
      const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
      // Time only the tokenizer calls (not JSON reading or printing), per pass over the lines.
      std::vector<double> pass_s(static_cast<size_t>(options->repeat), 0.0);
      size_t lines = 0, bytes = 0, tokens = 0;
      // Read whole through the input layer (a FIFO, device or directory is refused, and the size
      // is capped), stdin included: its lines are then handled as a file's.
      const std::string text = options->input == "-"
                                   ? read_stdin_text("a JSONL input", kMaxTextFileBytes)
                                   : read_text_file(options->input, "a JSONL file", kMaxTextFileBytes);
      const std::string name = options->input == "-" ? "<stdin>" : options->input;
      // "[1,2,3]\n", as nlohmann prints it, in pieces of 64 KiB: a line of 20 M ids as a JSON value
      // and then one string took 16 bytes an id and more.
      const auto write_ids = [](const std::vector<int64_t>& ids) {
        fmt::memory_buffer buf;
        buf.push_back('[');
        for (std::size_t i = 0; i < ids.size(); ++i) {
          if (i > 0) buf.push_back(',');
          fmt::format_to(std::back_inserter(buf), "{}", ids[i]);
          if (buf.size() >= (std::size_t{64} << 10)) {
            std::fwrite(buf.data(), 1, buf.size(), stdout);
            buf.clear();
          }
        }
        buf.append(std::string_view("]\n"));
        std::fwrite(buf.data(), 1, buf.size(), stdout);
      };
      std::string out;
      std::size_t at = 0;
      for (size_t n = 1; at < text.size(); ++n) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = std::string_view(text).substr(at, end - at);
        at = end + 1;
        if (line.empty() || line == "\r") continue;
        nlohmann::json value;
        try {
          value = nlohmann::json::parse(line.begin(), line.end());
        } catch (const nlohmann::json::parse_error& e) {
          // Where, never what: the parser's text quotes the bytes it read, and a line pasted by
          // mistake may hold a secret.
          throw InputError(fmt::format("{}:{}: not JSON (syntax error at byte {} of the line)", name, n, e.byte));
        } catch (const nlohmann::json::exception&) {
          throw InputError(fmt::format("{}:{}: not JSON", name, n));
        }
        if (options->decode) {
          if (!value.is_array())
            throw InputError(fmt::format("{}:{}: expected a JSON array of token ids", name, n));
          std::vector<int64_t> ids;
          for (const auto& v : value) {
            if (!v.is_number_integer()) throw InputError(fmt::format("{}:{}: token ids must be integers", name, n));
            ids.push_back(v.get<int64_t>());
          }
          std::string text;
          for (auto& t : pass_s) {
            const auto a = Clock::now();
            text = tok.decode(ids, options->skip_special);
            t += std::chrono::duration<double>(Clock::now() - a).count();
          }
          bytes += text.size();
          tokens += ids.size();
          out = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        } else {
          if (!value.is_string()) throw InputError(fmt::format("{}:{}: expected a JSON string", name, n));
          try {
            std::vector<int64_t> ids;
            for (auto& t : pass_s) {
              const auto a = Clock::now();
              ids = tok.encode(value.get_ref<const std::string&>());
              t += std::chrono::duration<double>(Clock::now() - a).count();
            }
            bytes += value.get_ref<const std::string&>().size();
            tokens += ids.size();
            value = nullptr;
            write_ids(ids);
          } catch (const InputError& e) {
            throw InputError(fmt::format("{}:{}: {}", name, n, e.what()));
          }
          ++lines;
          continue;
        }
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
        ++lines;
      }
      if (options->stats) {
        const double first = pass_s.front(), best = *std::min_element(pass_s.begin(), pass_s.end());
        const auto mbps = [&](double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e6 : 0.0; };
        fmt::print(stderr,
                   "tokenize: {} lines, {} bytes, {} tokens; load {:.3f} s; {} first pass {:.4f} s ({:.2f} MB/s), "
                   "fastest of {} {:.4f} s ({:.2f} MB/s)\n",
                   lines, bytes, tokens, load_s, options->decode ? "decode" : "encode", first, mbps(first),
                   pass_s.size(), best, mbps(best));
      }
      return 0;
    };
  });
}

}  // namespace zoo::cli
