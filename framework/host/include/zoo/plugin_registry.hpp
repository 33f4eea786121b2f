#pragma once
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/host.hpp"

namespace zoo {

struct PluginInfo {
  std::string name;
  std::string version;
  std::vector<std::string> model_types;
  std::vector<std::string> architectures;
  std::filesystem::path path;
  // Which search entry found it: the origin given with its directory to discover() (e.g.
  // "--plugin-dir", "plugins.paths"), "ZOO_PLUGIN_PATH", "built-in" (the default directory), or
  // "load" for a file passed to load() directly.
  std::string origin = "load";
};

// A directory (or file) to search, and the origin its plugins are reported with.
struct PluginSearchEntry {
  std::filesystem::path path;
  std::string origin;
};

// Discovers plugin shared objects and builds models through them. It is the Host plugins see.
// Libraries stay loaded while the registry or any model made through it lives (models hold a
// reference to their library), and are never unloaded before that.
class PluginRegistry : public Host {
 public:
  PluginRegistry();
  ~PluginRegistry() override;
  // Plugins get this object as their Host&; a copy would be a different host.
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Search order: explicit dirs (--plugin-dir, YAML plugins.paths), then ZOO_PLUGIN_PATH
  // (colon-separated), then the default directory beside the executable (build and install trees).
  // Scans `*.so` files; a directory that does not exist is skipped (an entry naming a file loads
  // that file). Files that fail to load are recorded in problems() rather than thrown, so one bad
  // plugin does not hide the others. A file reached twice (same canonical path) is loaded once.
  void discover(const std::vector<std::filesystem::path>& extra_dirs);  // origin "--plugin-dir"
  void discover(std::span<const PluginSearchEntry> extra_dirs);
  // Loads exactly this file as a plugin; throws InputError naming the file: not a shared object,
  // a directory, a missing symbol, an ABI mismatch, or a plugin whose model type is claimed already.
  // Loading a file that is already loaded returns its info. The reference stays valid for the
  // registry's lifetime.
  const PluginInfo& load(const std::filesystem::path& file);

  const std::vector<PluginInfo>& plugins() const;
  const std::vector<std::string>& problems() const;  // one line each: "path: what is wrong"
  // The directories discover() looked in, in order, including ones that did not exist.
  const std::vector<std::filesystem::path>& search_dirs() const { return search_dirs_; }

  // Plugin name first, then model_type, then architecture. Throws InputError
  // "no plugin serves 'X' (available: a (types t1, t2), b)", plus how many plugins failed to load.
  const PluginInfo& resolve(std::string_view plugin_or_type) const;
  // Picks the plugin for a HF config.json object by model_type, then architectures.
  const PluginInfo& resolve_config(const nlohmann::json& config, std::string_view label) const;

  std::shared_ptr<Model> create_model(std::string_view plugin_or_type, const ModelArgs& args) override;
  void log(LogLevel level, std::string_view message) override;
  void set_verbose(bool verbose) { verbose_ = verbose; }

  // The default plugin directory beside the running executable.
  static std::filesystem::path default_plugin_dir();

 private:
  struct Loaded;
  std::vector<std::shared_ptr<Loaded>> loaded_;
  std::vector<PluginInfo> infos_;
  std::vector<std::string> problems_;
  std::vector<std::filesystem::path> search_dirs_;
  std::set<std::filesystem::path> attempted_;  // canonical paths discover() tried, loaded or not
  bool verbose_ = false;
};

// What `zoo plugins` prints: a table (name, version, model types, path, origin), then any problems.
std::string plugins_table(const PluginRegistry& registry);
// The same as JSON: {"plugins": [{name, version, model_types, architectures, path, origin}],
// "problems": [...], "search_dirs": [...]}.
nlohmann::json plugins_json(const PluginRegistry& registry);

}  // namespace zoo
