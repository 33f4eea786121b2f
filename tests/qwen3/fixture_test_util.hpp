#pragma once
// Helpers for the end-to-end tests of the model plugins (tests/qwen3, tests/higgs): plugins are
// loaded the way users get them (discovered in the build tree's plugin directory), fixtures come
// from tests/fixtures, goldens are transformers' traces.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "zoo/error.hpp"
#include "zoo/plugin_registry.hpp"
#include "zoo/runtime.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::ptest {

namespace fs = std::filesystem;

inline fs::path fixture_dir(const std::string& name) { return fs::path(ZOO_SOURCE_DIR) / "tests" / "fixtures" / name; }
inline fs::path plugin_dir() { return fs::path(ZOO_BINARY_DIR) / "lib" / "zoo" / "plugins"; }

// One registry for the whole test binary. It outlives every model a test makes, so the plugin
// libraries stay loaded while exceptions thrown inside them are inspected.
inline PluginRegistry& registry() {
  static PluginRegistry instance;
  static const bool discovered = [] {
    instance.discover({plugin_dir()});
    return true;
  }();
  (void)discovered;
  return instance;
}

// A checkpoint directory opened through the runtime (plugin picked by config.json's model_type,
// unless named), with its load plan checked and its weights loaded; split over `tensor_parallel`
// ranks when above 1.
inline OpenedModel open_fixture(const fs::path& checkpoint, bool load = true, int tensor_parallel = 1,
                                bool batch_invariant = false) {
  ModelSpec spec;
  spec.file = checkpoint / "config.json";  // only used in messages
  spec.checkpoint = checkpoint;
  spec.device = Device{};
  spec.dtype = DType::F32;
  spec.tensor_parallel = tensor_parallel;
  spec.batch_invariant = batch_invariant;
  OpenedModel opened = open_model(std::move(spec), registry());
  INFO(opened.plan.table());
  REQUIRE(opened.plan.ok());
  if (load) load_model(opened, false);
  return opened;
}

// A golden (or any) safetensors trace, read into owning host tensors on demand.
class TraceFile {
 public:
  explicit TraceFile(const fs::path& path) : file_(SafetensorsFile::open(path)) {}

  bool has(const std::string& name) const { return file_->find(name) != nullptr; }
  HostTensor get(const std::string& name) const {
    const SafetensorsEntry* entry = file_->find(name);
    if (!entry) throw std::runtime_error(fmt::format("{}: no tensor '{}'", file_->path().string(), name));
    return HostTensor::copy_of(file_->view(*entry));
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : file_->entries()) out.push_back(entry.name);
    return out;
  }
  std::vector<std::int64_t> ids(const std::string& name) const {
    const HostTensor t = get(name);
    REQUIRE(t.dtype() == DType::I64);
    const auto span = t.span<std::int64_t>();
    return {span.begin(), span.end()};
  }

 private:
  std::shared_ptr<const SafetensorsFile> file_;
};

// The message of the InputError `f` throws; fails the test when it throws nothing or another type.
// A source with no tensors: enough to create a model from a hand-built config and ask for its
// requirements.
class EmptySource : public WeightSource {
 public:
  std::vector<std::string> names() const override { return {}; }
  std::optional<TensorInfo> info(std::string_view) const override { return std::nullopt; }
  TensorView view(std::string_view name) const override {
    throw InputError(fmt::format("{} not found in an empty test source", name));
  }
  std::string describe() const override { return "empty test source"; }
};

inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected zoo::InputError, got another exception: " << e.what());
  }
  FAIL("expected zoo::InputError, nothing was thrown");
  return {};
}

// A fresh directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    auto pattern = (fs::temp_directory_path() / "zoo-ptest-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  fs::path write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + file.string());
    return file;
  }

 private:
  fs::path path_;
};

// A copy of fixture `name` in `dir` (its weights and request.json) with `config` as its
// config.json, and the float32 CPU spec that opens it: for tests that vary a config's fields.
inline ModelSpec fixture_with_config(const TempDir& dir, const std::string& name, const nlohmann::json& config) {
  for (const auto& entry : fs::directory_iterator(fixture_dir(name))) {
    const std::string file = entry.path().filename().string();
    if (file.starts_with("model") || file == "request.json") fs::copy_file(entry.path(), dir / file);
  }
  ModelSpec spec;
  spec.file = dir.write("config.json", config.dump(2));
  spec.checkpoint = dir.path();
  spec.device = Device{};
  spec.dtype = DType::F32;
  return spec;
}

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Largest |a - b| over two float tensors of one shape.
inline double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.span<float>();
  const auto y = b.span<float>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

inline double max_abs(const HostTensor& a) {
  double worst = 0;
  for (float v : a.span<float>()) worst = std::max(worst, std::abs(static_cast<double>(v)));
  return worst;
}

// Runs the `zoo` binary with arguments (already shell-quoted), stdout and stderr merged.
struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  std::string output;
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline CommandResult run_zoo(const std::string& args) {
  const std::string command = shell_quote(ZOO_ZOO_EXE) + " " + args + " 2>&1";
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  // The shell reports a child killed by signal N as exit status 128 + N.
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code > 128) {
      result.signal = result.exit_code - 128;
      result.exit_code = -1;
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace zoo::ptest
