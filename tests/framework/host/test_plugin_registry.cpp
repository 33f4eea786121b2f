// The plugin host: discovery, load errors, resolution, model creation and library lifetimes.
// Uses the test-only plugins of tests/plugins (built into lib/zoo/test-plugins).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "framework/weights_test_util.hpp"
#include "scoped_env.hpp"
#include "stderr_capture.hpp"
#include "zoo/error.hpp"
#include "zoo/plugin_abi.hpp"
#include "zoo/plugin_registry.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

const fs::path kPluginDir = ZOO_TEST_PLUGIN_DIR;
const fs::path kEcho = ZOO_TEST_ECHO_PLUGIN;
const fs::path kBroken = ZOO_TEST_BROKEN_PLUGIN;
const fs::path kWrongAbi = ZOO_TEST_WRONG_ABI_PLUGIN;
const fs::path kWrongToolchain = ZOO_TEST_WRONG_TOOLCHAIN_PLUGIN;
const fs::path kFunctionDescriptor = ZOO_TEST_FUNCTION_DESCRIPTOR_PLUGIN;
const fs::path kFunctionCreate = ZOO_TEST_FUNCTION_CREATE_PLUGIN;
const fs::path kOldLayers = ZOO_TEST_OLD_LAYERS_PLUGIN;

class PluginDir {
 public:
  PluginDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / fmt::format("zoo-plugin-test-{}-{}", ::getpid(), counter++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~PluginDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  PluginDir(const PluginDir&) = delete;
  PluginDir& operator=(const PluginDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

using zoo::test::ScopedEnv;
using zoo::test::write_file;

// Whether the dynamic loader currently has this library mapped (RTLD_NOLOAD never loads it).
bool library_is_loaded(const fs::path& path) {
  void* handle = ::dlopen(fs::canonical(path).c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

using zoo::test::StderrCapture;

// An in-memory weight source holding float32 tensors.
class MemoryWeights : public zoo::WeightSource {
 public:
  void add(const std::string& name, zoo::HostTensor tensor) { tensors_.emplace(name, std::move(tensor)); }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, tensor] : tensors_) out.push_back(name);
    return out;
  }
  std::optional<zoo::TensorInfo> info(std::string_view name) const override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return std::nullopt;
    return zoo::TensorInfo{it->first, "memory", it->second.dtype(), it->second.shape(), it->second.nbytes()};
  }
  zoo::TensorView view(std::string_view name) const override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) throw zoo::InputError(fmt::format("{} not found in memory", name));
    return it->second.view();
  }
  std::string describe() const override { return "memory"; }

 private:
  std::map<std::string, zoo::HostTensor> tensors_;
};

zoo::ModelArgs echo_args(std::int64_t vocab, std::int64_t hidden) {
  auto weights = std::make_shared<MemoryWeights>();
  std::vector<float> values(static_cast<std::size_t>(vocab * hidden));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  weights->add("echo.weight", zoo::HostTensor::from_f32({vocab, hidden}, values));
  zoo::ModelArgs args;
  args.config = {{"model_type", "echo_lm"}, {"vocab_size", vocab}, {"hidden_size", hidden}};
  args.weights = weights;
  return args;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const zoo::InputError& e) {
    return e.what();
  }
  FAIL("expected zoo::InputError");
  return {};
}

bool has_problem_for(const zoo::PluginRegistry& registry, const fs::path& file) {
  const auto& problems = registry.problems();
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.rfind(file.string() + ": ", 0) == 0; });
}

}  // namespace

TEST_CASE("plugins: load reads a valid plugin's descriptor", "[plugins]") {
  zoo::PluginRegistry registry;
  const zoo::PluginInfo& info = registry.load(kEcho);
  CHECK(info.name == "echo");
  CHECK(info.version == "1.2.3");
  CHECK(info.model_types == std::vector<std::string>{"echo_lm"});
  CHECK(info.architectures == std::vector<std::string>{"EchoForCausalLM"});
  CHECK(info.path == kEcho);
  REQUIRE(registry.plugins().size() == 1);
  CHECK(registry.problems().empty());
  // Loading the same file again (even through another spelling) is not a conflict.
  const zoo::PluginInfo& again = registry.load(kEcho.parent_path() / "." / kEcho.filename());
  CHECK(&again == &info);
  CHECK(registry.plugins().size() == 1);
}

TEST_CASE("plugins: load reports what is wrong with a file, naming it", "[plugins]") {
  PluginDir tmp;
  zoo::PluginRegistry registry;

  SECTION("a directory named *.so") {
    const fs::path dir = tmp.path() / "libdir.so";
    fs::create_directory(dir);
    const std::string msg = message_of([&] { registry.load(dir); });
    CHECK_THAT(msg, StartsWith(dir.string() + ": ") && Contains("is a directory"));
  }
  SECTION("a text file named *.so carries the loader's own words") {
    const fs::path text = tmp.path() / "libtext.so";
    write_file(text, std::string(200, 'x') + "\nnot an ELF file at all\n");
    const std::string msg = message_of([&] { registry.load(text); });
    CHECK_THAT(msg, StartsWith(text.string() + ": not a loadable shared object: "));
    CHECK_THAT(msg, Contains("ELF"));
  }
  SECTION("a truncated shared object is refused before the loader maps it") {
    // dlopen would map segments past the end of the file and die of SIGBUS.
    const fs::path cut = tmp.path() / "libcut.so";
    const auto size = fs::file_size(kEcho);
    fs::copy_file(kEcho, cut);
    fs::resize_file(cut, size / 2);
    CHECK_THAT(message_of([&] { registry.load(cut); }),
               StartsWith(cut.string() + ": truncated or corrupt shared object"));
  }
  SECTION("a missing file") {
    const fs::path missing = tmp.path() / "libmissing.so";
    CHECK_THAT(message_of([&] { registry.load(missing); }), StartsWith(missing.string() + ": "));
  }
  SECTION("a shared object without the descriptor symbol") {
    const std::string msg = message_of([&] { registry.load(kBroken); });
    CHECK_THAT(msg, StartsWith(kBroken.string() + ": ") && Contains("zoo_plugin_descriptor"));
  }
  SECTION("an ABI mismatch is found before the create symbol is looked at") {
    // The wrong-ABI plugin has no zoo_plugin_create: a host that looked for it first would
    // complain about that instead.
    const std::string msg = message_of([&] { registry.load(kWrongAbi); });
    CHECK_THAT(msg, StartsWith(fmt::format("{}: plugin ABI version 999, host expects {}", kWrongAbi.string(),
                                           ZOO_PLUGIN_ABI_VERSION)));
  }
  SECTION("a toolchain mismatch names both fingerprints and what to do, before create is called") {
    // The plugin's create aborts the process: reaching it would fail the test loudly.
    const std::string msg = message_of([&] { registry.load(kWrongToolchain); });
    CHECK(msg == fmt::format("{}: plugin built with toolchain 'gcc 1, libstdc++ 1 cxx11-abi=0, nlohmann_json "
                             "0.0.1', host built with '{}' (rebuild the plugin against this Zoo with the same "
                             "compiler and libraries)",
                             kWrongToolchain.string(), zoo::kPluginToolchain));
    CHECK(registry.plugins().empty());
  }
  SECTION("a plugin built against another libzoo_layers ABI is refused at load, naming the version it wants") {
    const std::string msg = message_of([&] { registry.load(kOldLayers); });
    CHECK_THAT(msg, StartsWith(kOldLayers.string() + ": built against libzoo_layers ABI version 0, which the "
                                                     "libzoo_layers here is not (rebuild the plugin against this Zoo)") &&
                        Contains("undefined symbol") && Contains("abi_v0"));
    CHECK(registry.plugins().empty());
  }
  SECTION("a descriptor exported as a function is refused by its symbol type, not called as a pointer") {
    // Read as data, the symbol's first code bytes became a function pointer: SIGSEGV.
    const std::string msg = message_of([&] { registry.load(kFunctionDescriptor); });
    CHECK_THAT(msg, StartsWith(kFunctionDescriptor.string() + ": 'zoo_plugin_descriptor' is a function of ") &&
                        EndsWith(" bytes, not a constant pointer to a function (define it with ZOO_DEFINE_PLUGIN)"));
    CHECK(registry.plugins().empty());
  }
  SECTION("a create function exported as a function is refused when loaded, before any model is made") {
    const std::string msg = message_of([&] { registry.load(kFunctionCreate); });
    CHECK_THAT(msg, StartsWith(kFunctionCreate.string() + ": 'zoo_plugin_create' is a function of "));
    CHECK(registry.plugins().empty());
  }
  SECTION("a plugin built here carries this toolchain's fingerprint") {
    registry.load(kEcho);
    // The fingerprint names compiler, standard library and json release, e.g.
    // "gcc 12, libstdc++ 12 cxx11-abi=1, nlohmann_json 3.11.2".
    CHECK_THAT(std::string(zoo::kPluginToolchain), Contains(", nlohmann_json 3.") && Contains("lib"));
  }
  SECTION("a second plugin claiming a served model type") {
    const fs::path copy = tmp.path() / "libecho_copy.so";
    fs::copy_file(kEcho, copy);
    registry.load(kEcho);
    const std::string msg = message_of([&] { registry.load(copy); });
    CHECK(msg == fmt::format("{}: model type 'echo_lm' is already served by plugin 'echo' ({})", copy.string(),
                             kEcho.string()));
    CHECK(registry.plugins().size() == 1);
  }
  CHECK(registry.problems().empty());  // load() throws; only discover() records problems
}

TEST_CASE("plugins: discover collects plugins and problems from every search directory", "[plugins]") {
  PluginDir tmp;
  const fs::path text = tmp.path() / "libtext.so";
  write_file(text, "hello\n");
  const fs::path dir = tmp.path() / "libdir.so";
  fs::create_directory(dir);
  write_file(tmp.path() / "README.txt", "not a candidate\n");
  fs::create_symlink(kEcho, tmp.path() / "libecho_link.so");
  const fs::path missing = tmp.path() / "does-not-exist";

  zoo::PluginRegistry registry;
  registry.discover({kPluginDir, tmp.path(), missing, kPluginDir});

  const auto& plugins = registry.plugins();
  CHECK(std::count_if(plugins.begin(), plugins.end(), [](const zoo::PluginInfo& p) { return p.name == "echo"; }) == 1);
  CHECK(registry.resolve("echo").path == kEcho);  // the real file came first, the symlink was a duplicate

  CHECK(has_problem_for(registry, kBroken));
  CHECK(has_problem_for(registry, kWrongAbi));
  CHECK(has_problem_for(registry, kWrongToolchain));
  CHECK(has_problem_for(registry, kFunctionDescriptor));
  CHECK(has_problem_for(registry, kFunctionCreate));
  CHECK(has_problem_for(registry, text));
  CHECK(has_problem_for(registry, dir));
  CHECK_FALSE(has_problem_for(registry, tmp.path() / "README.txt"));
  for (const std::string& problem : registry.problems()) {
    CHECK_THAT(problem, !Contains(missing.string()));
    CHECK_THAT(problem, !Contains("echo"));
  }
  // The two test-plugin failures are recorded once although their directory was searched twice.
  const auto& problems = registry.problems();
  CHECK(std::count_if(problems.begin(), problems.end(),
                      [](const std::string& p) { return p.rfind(kBroken.string(), 0) == 0; }) == 1);

  const auto& dirs = registry.search_dirs();
  REQUIRE(dirs.size() >= 4);
  CHECK(dirs[0] == kPluginDir);
  CHECK(dirs[1] == tmp.path());
  CHECK(dirs[2] == missing);
  CHECK(dirs.back() == zoo::PluginRegistry::default_plugin_dir());
}

TEST_CASE("plugins: discover reads ZOO_PLUGIN_PATH after the explicit directories", "[plugins]") {
  PluginDir tmp;
  ScopedEnv env("ZOO_PLUGIN_PATH", fmt::format("{}::{}", (tmp.path() / "nothing").string(), kPluginDir.string()));
  zoo::PluginRegistry registry;
  registry.discover({tmp.path()});
  CHECK(registry.resolve("echo_lm").path == kEcho);
  const auto& dirs = registry.search_dirs();
  REQUIRE(dirs.size() >= 3);
  CHECK(dirs[0] == tmp.path());
  CHECK(dirs[1] == tmp.path() / "nothing");
  CHECK(dirs[2] == kPluginDir);
}

TEST_CASE("plugins: the default plugin directory sits beside the running executable", "[plugins]") {
  const fs::path dir = zoo::PluginRegistry::default_plugin_dir();
  // Test binaries live in <build>/bin like zoo itself, so the default is <build>/lib/zoo/plugins.
  CHECK(dir == (fs::path(ZOO_BINARY_DIR) / "lib" / "zoo" / "plugins").lexically_normal());
  // ... which is not where the test plugins are, so `zoo plugins` never lists them.
  CHECK(dir != kPluginDir.lexically_normal());
}

TEST_CASE("plugins: resolve picks by plugin name, then model type, then architecture", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  CHECK(registry.resolve("echo").name == "echo");
  CHECK(registry.resolve("echo_lm").name == "echo");
  CHECK(registry.resolve("EchoForCausalLM").name == "echo");

  CHECK(message_of([&] { registry.resolve("gpt_neox"); }) ==
        "no plugin serves 'gpt_neox' (available: echo (types echo_lm))");

  registry.discover({kPluginDir});  // adds the broken and wrong-ABI problems
  const std::size_t failed = registry.problems().size();
  REQUIRE(failed >= 2);
  CHECK_THAT(message_of([&] { registry.resolve("gpt_neox"); }),
             StartsWith("no plugin serves 'gpt_neox' (available: ") &&
                 Contains(fmt::format("; {} plugins failed to load, see `zoo plugins`", failed)));
}

TEST_CASE("plugins: resolve_config picks by model_type, then architectures", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  CHECK(registry.resolve_config({{"model_type", "echo_lm"}}, "cfg.json").name == "echo");
  CHECK(registry.resolve_config({{"model_type", "other"}, {"architectures", {"X", "EchoForCausalLM"}}}, "cfg.json")
            .name == "echo");
  CHECK(message_of([&] { registry.resolve_config({{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}},
                                                 "ckpt/config.json"); }) ==
        "ckpt/config.json: no plugin serves model_type 'llama' or architectures 'LlamaForCausalLM' "
        "(available: echo (types echo_lm))");
  CHECK_THAT(message_of([&] { registry.resolve_config(nlohmann::json::object(), "ckpt/config.json"); }),
             StartsWith("ckpt/config.json: ") && Contains("model_type"));
  CHECK_THAT(message_of([&] { registry.resolve_config(nlohmann::json::array(), "x.json"); }), StartsWith("x.json: "));
}

TEST_CASE("plugins: create_model builds a working model through the plugin", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  const zoo::ModelArgs args = echo_args(5, 3);
  std::shared_ptr<zoo::Model> model = registry.create_model("echo_lm", args);
  REQUIRE(model);
  CHECK(model->info().vocab_size == 5);
  const auto requirements = model->requirements();
  REQUIRE(requirements.size() == 1);
  CHECK(requirements[0].name == "echo.weight");
  CHECK(requirements[0].shape == zoo::Shape{5, 3});
  CHECK(&model->weight_source() == args.weights.get());

  model->load();
  auto session = model->new_session();
  const std::vector<std::int64_t> ids{1, 4, 2};
  zoo::ForwardStep step{ids, {}, {}, {}};
  step.outputs.all_positions = true;
  step.outputs.hidden = true;
  const zoo::ForwardResult result = session->forward(step);
  CHECK(session->position() == 3);
  REQUIRE(result.logits.shape() == zoo::Shape{3, 5});
  for (std::int64_t row = 0; row < 3; ++row) {
    for (std::int64_t v = 0; v < 5; ++v) {
      CHECK(result.logits.as<float>()[row * 5 + v] == (v == ids[static_cast<std::size_t>(row)] ? 1.0f : 0.0f));
    }
  }
  // hidden = the weight row of the id, so the model really read its weights
  REQUIRE(result.hidden.shape() == zoo::Shape{3, 3});
  CHECK(result.hidden.as<float>()[3 * 1 + 0] == 4 * 3 * 0.5f);
}

TEST_CASE("plugins: exceptions thrown inside a plugin keep their type", "[plugins]") {
  // Plugins are built with hidden visibility; the error types must still match across the boundary.
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  zoo::ModelArgs args = echo_args(5, 3);
  args.config["vocab_size"] = 0;
  CHECK_THAT(message_of([&] { registry.create_model("echo", args); }), Contains("positive vocab_size"));
  auto model = registry.create_model("echo", echo_args(2, 1));
  CHECK_THROWS_AS(model->new_session(), zoo::ValidationError);  // before load()
}

TEST_CASE("plugins: plugins get the registry as Host and can build models of other plugins", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  zoo::ModelArgs args = echo_args(4, 2);
  args.config["delegate"] = "echo_lm";
  auto model = registry.create_model("echo", args);
  CHECK(model->info().summary == "echo wrapping echo");
  model->load();
  const std::vector<std::int64_t> ids{3};
  const auto result = model->new_session()->forward({ids, {}, {}, {}});
  REQUIRE(result.logits.shape() == zoo::Shape{1, 4});
  CHECK(result.logits.as<float>()[3] == 1.0f);

  args.config["delegate"] = "gpt_neox";
  CHECK_THAT(message_of([&] { registry.create_model("echo", args); }), StartsWith("no plugin serves 'gpt_neox'"));
}

TEST_CASE("plugins: a model keeps its plugin library loaded, and only it", "[plugins]") {
  const zoo::ModelArgs args = echo_args(3, 2);
  REQUIRE_FALSE(library_is_loaded(kEcho));
  std::shared_ptr<zoo::Model> model;
  std::shared_ptr<zoo::Model> wrapper;
  {
    zoo::PluginRegistry registry;
    registry.load(kEcho);
    CHECK(library_is_loaded(kEcho));
    model = registry.create_model("echo", args);
    zoo::ModelArgs delegating = args;
    delegating.config["delegate"] = "echo_lm";
    wrapper = registry.create_model("echo", delegating);
  }
  // The registry is gone; the models still work because they hold the library.
  CHECK(library_is_loaded(kEcho));
  model->load();
  CHECK(model->new_session()->forward({std::vector<std::int64_t>{2}, {}, {}, {}}).logits.as<float>()[2] == 1.0f);
  // args, the model, and the echo model inside the wrapper hold the weights.
  CHECK(args.weights.use_count() == 3);

  wrapper.reset();  // destroys the wrapper, then the inner model it held
  CHECK(args.weights.use_count() == 2);
  CHECK(library_is_loaded(kEcho));  // `model` still needs it

  model.reset();  // the model is destroyed first, then the library is released
  CHECK(args.weights.use_count() == 1);
  CHECK_FALSE(library_is_loaded(kEcho));
}

TEST_CASE("plugins: log writes Info and Warning to stderr, Debug only when verbose", "[plugins]") {
  zoo::PluginRegistry registry;
  StderrCapture capture;
  registry.log(zoo::LogLevel::Info, "hello");
  registry.log(zoo::LogLevel::Debug, "hidden detail");
  registry.log(zoo::LogLevel::Warning, "careful");
  registry.set_verbose(true);
  registry.log(zoo::LogLevel::Debug, "shown detail");
  CHECK(capture.text() == "zoo: hello\nzoo: warning: careful\nzoo: shown detail\n");
}

TEST_CASE("plugins: plugins_table and plugins_json describe what was found", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.discover({kPluginDir});
  const std::string table = plugins_table(registry);
  CHECK_THAT(table, StartsWith("NAME"));
  CHECK_THAT(table, Contains("MODEL TYPES") && Contains("PATH"));
  std::istringstream lines(table);
  std::string line;
  bool echo_row = false;
  while (std::getline(lines, line)) {
    if (line.rfind("echo ", 0) == 0) {
      echo_row = true;
      CHECK_THAT(line, Contains("1.2.3") && Contains("echo_lm") && Contains(kEcho.string()));
    }
  }
  CHECK(echo_row);
  CHECK_THAT(table, Contains("problem") && Contains(kBroken.string() + ": ") && Contains(kWrongAbi.string() + ": "));

  const nlohmann::json json = plugins_json(registry);
  const auto& list = json.at("plugins");
  auto echo = std::find_if(list.begin(), list.end(), [](const nlohmann::json& p) { return p.at("name") == "echo"; });
  REQUIRE(echo != list.end());
  CHECK(echo->at("version") == "1.2.3");
  CHECK(echo->at("model_types") == nlohmann::json::array({"echo_lm"}));
  CHECK(echo->at("architectures") == nlohmann::json::array({"EchoForCausalLM"}));
  CHECK(echo->at("path") == kEcho.string());
  CHECK(json.at("problems").size() == registry.problems().size());
  CHECK(json.at("search_dirs").at(0) == kPluginDir.string());
}

TEST_CASE("plugins: plugins_table says where it looked when nothing was found", "[plugins]") {
  CHECK(plugins_table(zoo::PluginRegistry{}) == "no plugins found (searched: nothing)\n");

  PluginDir tmp;
  ScopedEnv env("ZOO_PLUGIN_PATH", "");
  zoo::PluginRegistry registry;
  registry.discover({tmp.path()});
  const std::string table = plugins_table(registry);
  if (registry.plugins().empty()) {
    CHECK(table == fmt::format("no plugins found (searched: {}, {})\n", tmp.path().string(),
                               zoo::PluginRegistry::default_plugin_dir().string()));
  } else {  // this build's default plugin directory has plugins already
    CHECK_THAT(table, StartsWith("NAME"));
  }
}

TEST_CASE("plugins: the default Model::prepare takes input_ids and rejects other fields", "[plugins]") {
  zoo::PluginRegistry registry;
  registry.load(kEcho);
  auto model = registry.create_model("echo", echo_args(3, 2));  // echo does not override prepare
  zoo::Request request;
  request.file = "req.json";
  request.input_ids = {2, 0, 1};
  CHECK(model->prepare(request).ids == request.input_ids);
  CHECK(model->prepare(request).override_positions.empty());
  request.fields["audio_codes"] = nlohmann::json::array();
  CHECK(message_of([&] { model->prepare(request); }) ==
        "req.json: unknown field 'audio_codes' (this model takes input_ids only)");
}
