#include "zoo/plugin_registry.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zoo/batch_invariant.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/plugin_abi.hpp"
#include "zoo/tensor_parallel.hpp"

// Where plugins live relative to the directory of the zoo binary in an install tree; the build
// tree always uses ../lib/zoo/plugins. Both coincide unless CMAKE_INSTALL_LIBDIR is not "lib".
#ifndef ZOO_PLUGINDIR_FROM_BINDIR
#define ZOO_PLUGINDIR_FROM_BINDIR "../lib/zoo/plugins"
#endif

namespace zoo {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDescriptorSymbol = "zoo_plugin_descriptor";
constexpr const char* kCreateSymbol = "zoo_plugin_create";

}  // namespace

// Member order matters: the info and function pointer die before the library is closed.
struct PluginRegistry::Loaded {
  boost::dll::shared_library library;
  PluginCreateFn* create = nullptr;
  PluginInfo info;
  fs::path canonical;
};

namespace {

// Keeps the library loaded for as long as the model lives. Members are destroyed in reverse order:
// the model (whose destructor is code inside the library) first, then the library reference.
struct ModelHolder {
  std::shared_ptr<const void> library;
  std::unique_ptr<Model> model;
};

std::vector<std::string> c_string_list(const char* const* list) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  for (; *list != nullptr; ++list) {
    if (**list != '\0') out.emplace_back(*list);
  }
  return out;
}

bool contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Boost.DLL reports a failed dlopen as system_error "... (dlerror system message: TEXT): ERRNO TEXT";
// only TEXT says what is wrong. It usually starts with the path, which the caller already puts first.
std::string dlerror_text(const std::system_error& error, const std::string& path) {
  constexpr std::string_view marker = "(dlerror system message: ";
  std::string_view what = error.what();
  const std::string errno_suffix = "): " + error.code().message();
  const auto at = what.find(marker);
  if (at == std::string_view::npos) return std::string(what);
  what.remove_prefix(at + marker.size());
  if (what.size() >= errno_suffix.size() && what.substr(what.size() - errno_suffix.size()) == errno_suffix) {
    what.remove_suffix(errno_suffix.size());
  } else if (!what.empty() && what.back() == ')') {
    what.remove_suffix(1);
  }
  if (what.substr(0, path.size() + 2) == path + ": ") what.remove_prefix(path.size() + 2);
  return std::string(what);
}

// A plugin built against another libzoo_layers ABI fails to load on a symbol of that version's
// inline namespace (zoo/layers/abi.hpp): "undefined symbol: _ZN3zoo6layers6abi_v0...". Returns the
// version it wants, if that is why.
std::optional<std::string> wanted_layers_abi(std::string_view text) {
  constexpr std::string_view prefix = "3zoo6layers";
  const auto at = text.find(prefix);
  if (at == std::string_view::npos || text.find("undefined symbol") == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + prefix.size());
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0 || digits > 2) return std::nullopt;
  const std::size_t length = std::stoul(std::string(rest.substr(0, digits)));
  const std::string_view name = rest.substr(digits, length);
  if (name.size() != length || !name.starts_with("abi_v")) return std::nullopt;
  return std::string(name.substr(5));
}

// dlopen maps a file's segments without checking they lie inside it, and a truncated shared object
// then dies of SIGBUS inside the loader. Catch that case first; everything else is left to dlopen,
// whose own words (dlerror) are clearer than ours. The file is opened as every input is (InputFile:
// regular files only, never blocking), so a FIFO named as a plugin is an error, not a hang in open()
// here or in dlopen.
void check_segments_inside_file(const std::string& label) {
  const InputFile in(fs::path(label), "a plugin shared object");  // errors name the path as given
  const auto read_at = [&](void* out, std::size_t bytes, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::pread(in.fd(), static_cast<char*>(out) + done, bytes - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  };
  Elf64_Ehdr header{};
  if (!read_at(&header, sizeof header, 0)) return;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) return;
  const std::uintmax_t size = in.size();
  const std::uintmax_t table_end =
      static_cast<std::uintmax_t>(header.e_phoff) + std::uintmax_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (header.e_phentsize != sizeof(Elf64_Phdr) || table_end > size) {
    throw InputError(fmt::format("{}: truncated or corrupt shared object (bad program header table)", label));
  }
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!read_at(&segment, sizeof segment, header.e_phoff + std::uint64_t{i} * sizeof segment)) return;
    if (segment.p_type == PT_LOAD && (segment.p_offset > size || segment.p_filesz > size - segment.p_offset)) {
      throw InputError(fmt::format(
          "{}: truncated or corrupt shared object (segment {} ends at byte {}, the file has {})", label, i,
          static_cast<std::uintmax_t>(segment.p_offset) + segment.p_filesz, size));
    }
  }
}

const char* symbol_type_name(unsigned type) {
  switch (type) {
    case STT_FUNC: return "a function";
    case STT_GNU_IFUNC: return "an indirect function";
    case STT_OBJECT: return "a data object";
    case STT_TLS: return "a thread-local object";
    case STT_NOTYPE: return "an untyped symbol";
    default: return "a symbol of unknown type";
  }
}

// Whether `target` lies in an executable segment of the loaded object that holds `anchor`.
bool in_executable_segment_of_same_object(const void* anchor, const void* target) {
  struct Query {
    std::uintptr_t anchor, target;
    bool found_object = false, executable = false;
  } query{reinterpret_cast<std::uintptr_t>(anchor), reinterpret_cast<std::uintptr_t>(target)};
  ::dl_iterate_phdr(
      [](dl_phdr_info* object, std::size_t, void* data) {
        auto& q = *static_cast<Query*>(data);
        const auto inside = [&](const ElfW(Phdr) & segment, std::uintptr_t address) {
          const std::uintptr_t start = object->dlpi_addr + segment.p_vaddr;
          return segment.p_type == PT_LOAD && address >= start && address - start < segment.p_memsz;
        };
        for (ElfW(Half) i = 0; i < object->dlpi_phnum; ++i) q.found_object |= inside(object->dlpi_phdr[i], q.anchor);
        if (!q.found_object) return 0;
        for (ElfW(Half) i = 0; i < object->dlpi_phnum; ++i) {
          if (inside(object->dlpi_phdr[i], q.target) && (object->dlpi_phdr[i].p_flags & PF_X) != 0) q.executable = true;
        }
        return 1;
      },
      &query);
  return query.executable;
}

// The exports are constant pointers to functions (ZOO_DEFINE_PLUGIN). Boost.DLL hands back the
// symbol's address whatever it names, so a function exported under the same name would be read as
// a pointer made of its first code bytes and called: a SIGSEGV in every command that discovers
// plugins. The dynamic symbol's ELF type and size say what it is; the pointer it holds must lead
// into this library's code. Returns the pointer.
void* exported_function_pointer(const boost::dll::shared_library& library, const char* name,
                                const std::string& label) {
  void* address = ::dlsym(library.native(), name);
  Dl_info where{};
  void* entry = nullptr;
  if (address == nullptr || ::dladdr1(address, &where, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr) {
    throw InputError(fmt::format("{}: cannot read the ELF symbol entry of '{}'", label, name));
  }
  const auto* symbol = static_cast<const ElfW(Sym)*>(entry);
  const unsigned type = ELF64_ST_TYPE(symbol->st_info);
  if (type != STT_OBJECT || symbol->st_size != sizeof(void*)) {
    throw InputError(fmt::format("{}: '{}' is {} of {} bytes, not a constant pointer to a function (define it with "
                                 "ZOO_DEFINE_PLUGIN)",
                                 label, name, symbol_type_name(type), static_cast<std::uint64_t>(symbol->st_size)));
  }
  void* target = *static_cast<void* const*>(address);
  if (target == nullptr || !in_executable_segment_of_same_object(address, target)) {
    throw InputError(fmt::format("{}: '{}' does not point to code in the plugin (define it with ZOO_DEFINE_PLUGIN)",
                                 label, name));
  }
  return target;
}

std::string plugin_count(std::size_t n) { return fmt::format("{} plugin{}", n, n == 1 ? "" : "s"); }

}  // namespace

PluginRegistry::PluginRegistry() = default;
// Models made here hold their own references to the libraries, so only libraries nobody uses any
// more are closed when the registry goes.
PluginRegistry::~PluginRegistry() = default;

fs::path PluginRegistry::default_plugin_dir() {
  std::error_code ec;
  const fs::path exe = boost::dll::program_location(ec);
  if (ec || exe.empty()) return {};
  const fs::path bin = exe.parent_path();
  const fs::path installed = (bin / ZOO_PLUGINDIR_FROM_BINDIR).lexically_normal();
  const fs::path build_tree = (bin / "../lib/zoo/plugins").lexically_normal();
  if (installed != build_tree && !fs::is_directory(installed, ec) && fs::is_directory(build_tree, ec)) {
    return build_tree;
  }
  return installed;
}

void PluginRegistry::discover(const std::vector<fs::path>& extra_dirs) {
  std::vector<PluginSearchEntry> entries;
  for (const fs::path& dir : extra_dirs) entries.push_back({dir, "--plugin-dir"});
  discover(entries);
}

void PluginRegistry::discover(std::span<const PluginSearchEntry> extra_dirs) {
  std::vector<PluginSearchEntry> dirs(extra_dirs.begin(), extra_dirs.end());
  if (const char* env = std::getenv("ZOO_PLUGIN_PATH"); env != nullptr) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const std::string_view entry = rest.substr(0, colon);
      if (!entry.empty()) dirs.push_back({fs::path(entry), "ZOO_PLUGIN_PATH"});
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    }
  }
  if (fs::path dir = default_plugin_dir(); !dir.empty()) dirs.push_back({std::move(dir), "built-in"});

  for (const auto& [dir, origin] : dirs) {
    search_dirs_.push_back(dir);
    std::error_code ec;
    const auto status = fs::status(dir, ec);
    if (!fs::exists(status)) {
      // Absent is fine (a search path may name what is not installed); a symlink loop or a
      // directory that cannot be searched is a problem to show, not an absence.
      if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR) {
        problems_.push_back(fmt::format("{}: {}", dir.string(), describe_open_error(ec.value())));
      } else {
        log(LogLevel::Debug, fmt::format("plugin dir {} does not exist, skipped", dir.string()));
      }
      continue;
    }
    std::vector<fs::path> files;
    if (fs::is_directory(status)) {
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().extension() == ".so") files.push_back(it->path());
      }
      if (ec) {
        problems_.push_back(fmt::format("{}: cannot list plugin directory: {}", dir.string(), ec.message()));
        continue;
      }
      // Directory order is arbitrary; a fixed order makes "already served by" deterministic.
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(dir);
    }
    log(LogLevel::Debug, fmt::format("scanning {} ({} candidate{})", dir.string(), files.size(),
                                     files.size() == 1 ? "" : "s"));
    for (const fs::path& file : files) {
      const fs::path canonical = fs::weakly_canonical(file, ec);
      if (!attempted_.insert(ec ? file : canonical).second) continue;
      try {
        const std::size_t before = loaded_.size();
        load(file);
        // A file loaded before (through load()) keeps its origin.
        if (loaded_.size() > before) loaded_.back()->info.origin = infos_.back().origin = origin;
      } catch (const InputError& e) {
        problems_.emplace_back(e.what());
        log(LogLevel::Debug, e.what());
      } catch (const std::system_error& e) {
        problems_.push_back(fmt::format("{}: {}", file.string(), e.what()));
      }
    }
  }
}

const PluginInfo& PluginRegistry::load(const fs::path& file) {
  const std::string label = file.string();
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (!fs::exists(status)) {
    throw InputError(fmt::format("{}: {}", label,
                                 ec && ec.value() != ENOENT ? describe_open_error(ec.value()) : "no such plugin file"));
  }
  if (fs::is_directory(status)) {
    throw InputError(fmt::format("{}: is a directory, not a plugin shared object", label));
  }
  const fs::path canonical = fs::canonical(file, ec);
  if (ec) throw InputError(fmt::format("{}: {}", label, ec.message()));
  for (const auto& loaded : loaded_) {
    if (loaded->canonical == canonical) return loaded->info;
  }

  check_segments_inside_file(label);
  auto loaded = std::make_shared<Loaded>();
  loaded->canonical = canonical;
  try {
    // rtld_now: an unresolved symbol is reported here as dlerror text instead of killing the
    // process on first call. rtld_local: plugins cannot interpose on each other's symbols.
    loaded->library.load(canonical, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::system_error& e) {
    const std::string text = dlerror_text(e, canonical.string());
    if (const auto wanted = wanted_layers_abi(text))
      throw InputError(fmt::format("{}: built against libzoo_layers ABI version {}, which the libzoo_layers here is "
                                   "not (rebuild the plugin against this Zoo): {}",
                                   label, *wanted, text));
    throw InputError(fmt::format("{}: not a loadable shared object: {}", label, text));
  }
  if (!loaded->library.has(kDescriptorSymbol)) {
    throw InputError(fmt::format("{}: not a Zoo plugin: no '{}' symbol (define it with ZOO_DEFINE_PLUGIN)",
                                 label, kDescriptorSymbol));
  }

  auto* const describe =
      reinterpret_cast<PluginDescriptorFn*>(exported_function_pointer(loaded->library, kDescriptorSymbol, label));
  const ZooPluginDescriptor* descriptor = nullptr;
  try {
    descriptor = describe();
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: {} failed: {}", label, kDescriptorSymbol, e.what()));
  }
  if (descriptor == nullptr) throw InputError(fmt::format("{}: {} returned null", label, kDescriptorSymbol));
  // Nothing else in the descriptor, and nothing C++, is touched before the version matches: a
  // plugin built against another ABI may lay out everything after this field differently.
  if (descriptor->abi_version != ZOO_PLUGIN_ABI_VERSION) {
    throw InputError(fmt::format("{}: plugin ABI version {}, host expects {} (rebuild the plugin against this Zoo)",
                                 label, descriptor->abi_version, ZOO_PLUGIN_ABI_VERSION));
  }
  // Same ABI, but C++ objects cross the boundary too: a plugin built by another compiler, standard
  // library or nlohmann json release may lay them out differently, so its fingerprint must match.
  const std::string_view toolchain = descriptor->toolchain != nullptr ? descriptor->toolchain : "none";
  if (toolchain != kPluginToolchain) {
    throw InputError(fmt::format("{}: plugin built with toolchain '{}', host built with '{}' (rebuild the plugin "
                                 "against this Zoo with the same compiler and libraries)",
                                 label, toolchain, kPluginToolchain));
  }
  if (descriptor->name == nullptr || *descriptor->name == '\0') {
    throw InputError(fmt::format("{}: plugin descriptor has no name", label));
  }

  PluginInfo& info = loaded->info;
  info.name = descriptor->name;
  info.version = descriptor->version != nullptr ? descriptor->version : "";
  info.model_types = c_string_list(descriptor->model_types);
  info.architectures = c_string_list(descriptor->architectures);
  info.path = file;

  for (const auto& other : loaded_) {
    for (const std::string& type : info.model_types) {
      if (contains(other->info.model_types, type)) {
        throw InputError(fmt::format("{}: model type '{}' is already served by plugin '{}' ({})", label, type,
                                     other->info.name, other->info.path.string()));
      }
    }
    if (other->info.name == info.name) {
      throw InputError(fmt::format("{}: plugin name '{}' is already taken by {}", label, info.name,
                                   other->info.path.string()));
    }
  }

  if (!loaded->library.has(kCreateSymbol)) {
    throw InputError(fmt::format("{}: plugin '{}' has no '{}' symbol (define it with ZOO_DEFINE_PLUGIN)", label,
                                 info.name, kCreateSymbol));
  }
  loaded->create = reinterpret_cast<PluginCreateFn*>(exported_function_pointer(loaded->library, kCreateSymbol, label));

  loaded_.push_back(loaded);
  infos_.push_back(loaded->info);
  log(LogLevel::Debug, fmt::format("loaded plugin '{}' {} from {}", info.name, info.version, label));
  return loaded->info;
}

const std::vector<PluginInfo>& PluginRegistry::plugins() const { return infos_; }
const std::vector<std::string>& PluginRegistry::problems() const { return problems_; }

namespace {

std::string available_list(const std::vector<PluginInfo>& infos) {
  if (infos.empty()) return "none";
  std::vector<std::string> items;
  for (const PluginInfo& info : infos) {
    items.push_back(info.model_types.empty()
                        ? info.name
                        : fmt::format("{} (types {})", info.name, fmt::join(info.model_types, ", ")));
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

// One place builds the "nothing matched" tail so resolve and resolve_config read alike.
std::string not_served_tail(const std::vector<PluginInfo>& infos, const std::vector<std::string>& problems) {
  std::string tail = fmt::format(" (available: {})", available_list(infos));
  if (!problems.empty()) {
    tail += fmt::format("; {} failed to load, see `zoo plugins`", plugin_count(problems.size()));
  }
  return tail;
}

}  // namespace

const PluginInfo& PluginRegistry::resolve(std::string_view plugin_or_type) const {
  for (const auto& loaded : loaded_) {
    if (loaded->info.name == plugin_or_type) return loaded->info;
  }
  for (const auto& loaded : loaded_) {
    if (contains(loaded->info.model_types, plugin_or_type)) return loaded->info;
  }
  for (const auto& loaded : loaded_) {
    if (contains(loaded->info.architectures, plugin_or_type)) return loaded->info;
  }
  throw InputError(fmt::format("no plugin serves '{}'{}", plugin_or_type, not_served_tail(infos_, problems_)));
}

const PluginInfo& PluginRegistry::resolve_config(const nlohmann::json& config, std::string_view label) const {
  if (!config.is_object()) throw InputError(fmt::format("{}: model config is not a JSON object", label));
  std::string model_type;
  if (auto it = config.find("model_type"); it != config.end() && it->is_string()) {
    model_type = it->get<std::string>();
    for (const auto& loaded : loaded_) {
      if (contains(loaded->info.model_types, model_type)) return loaded->info;
    }
  }
  std::vector<std::string> architectures;
  if (auto it = config.find("architectures"); it != config.end() && it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_string()) continue;
      architectures.push_back(entry.get<std::string>());
      for (const auto& loaded : loaded_) {
        if (contains(loaded->info.architectures, architectures.back())) return loaded->info;
      }
    }
  }
  if (model_type.empty() && architectures.empty()) {
    throw InputError(fmt::format(
        "{}: has no \"model_type\" or \"architectures\" to pick a plugin by (name the plugin instead)", label));
  }
  std::vector<std::string> wanted;
  if (!model_type.empty()) wanted.push_back(fmt::format("model_type '{}'", model_type));
  if (!architectures.empty()) {
    wanted.push_back(fmt::format("architectures '{}'", fmt::join(architectures, "', '")));
  }
  throw InputError(fmt::format("{}: no plugin serves {}{}", label, fmt::join(wanted, " or "),
                               not_served_tail(infos_, problems_)));
}

std::shared_ptr<Model> PluginRegistry::create_model(std::string_view plugin_or_type, const ModelArgs& args) {
  const PluginInfo& info = resolve(plugin_or_type);
  auto it = std::find_if(loaded_.begin(), loaded_.end(),
                         [&](const std::shared_ptr<Loaded>& loaded) { return &loaded->info == &info; });
  const std::shared_ptr<Loaded> loaded = *it;  // resolve only returns infos owned by loaded_

  std::unique_ptr<Model> model = loaded->create(args, *this);
  if (!model) {
    throw InputError(fmt::format("{}: plugin '{}' returned no model", info.path.string(), info.name));
  }
  // A split asked for must be a split honoured (a plugin that never reads the field would run on
  // one rank and say nothing).
  if (args.tensor_parallel != 1) {
    const auto& split = model->need_extension<TensorParallel>();
    if (split.ranks() != args.tensor_parallel)
      throw InputError(fmt::format("model '{}' (plugin {}) runs over {} ranks, not the {} asked for",
                                   model->info().model_type, info.name, split.ranks(), args.tensor_parallel));
  }
  if (args.batch_invariant && !model->need_extension<BatchInvariant>().batch_invariant())
    throw InputError(fmt::format("model '{}' (plugin {}) {}", model->info().model_type, info.name,
                                 BatchInvariant::kLacking));
  auto holder = std::make_shared<ModelHolder>(ModelHolder{loaded, std::move(model)});
  Model* raw = holder->model.get();
  return std::shared_ptr<Model>(std::move(holder), raw);
}

void PluginRegistry::log(LogLevel level, std::string_view message) {
  if (level == LogLevel::Debug && !verbose_) return;
  fmt::print(stderr, "zoo: {}{}\n", level == LogLevel::Warning ? "warning: " : "", message);
}

std::string plugins_table(const PluginRegistry& registry) {
  std::string out;
  const auto& plugins = registry.plugins();
  if (plugins.empty()) {
    std::vector<std::string> dirs;
    for (const auto& dir : registry.search_dirs()) dirs.push_back(dir.string());
    out += fmt::format("no plugins found (searched: {})\n", dirs.empty() ? "nothing" : fmt::format("{}", fmt::join(dirs, ", ")));
  } else {
    std::vector<std::array<std::string, 5>> rows;
    rows.push_back({"NAME", "VERSION", "MODEL TYPES", "PATH", "FROM"});
    for (const PluginInfo& info : plugins) {
      rows.push_back({info.name, info.version.empty() ? "-" : info.version,
                      info.model_types.empty() ? "-" : fmt::format("{}", fmt::join(info.model_types, ", ")),
                      info.path.string(), info.origin});
    }
    std::array<std::size_t, 4> widths{};
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    for (const auto& row : rows) {
      out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", row[0], widths[0], row[1], widths[1], row[2],
                         widths[2], row[3], widths[3], row[4]);
    }
  }
  const auto& problems = registry.problems();
  if (!problems.empty()) {
    out += fmt::format("\n{} problem{}:\n", problems.size(), problems.size() == 1 ? "" : "s");
    for (const std::string& problem : problems) out += fmt::format("  {}\n", problem);
  }
  return out;
}

nlohmann::json plugins_json(const PluginRegistry& registry) {
  nlohmann::json plugins = nlohmann::json::array();
  for (const PluginInfo& info : registry.plugins()) {
    plugins.push_back({{"name", info.name},
                       {"version", info.version},
                       {"model_types", info.model_types},
                       {"architectures", info.architectures},
                       {"path", info.path.string()},
                       {"origin", info.origin}});
  }
  nlohmann::json dirs = nlohmann::json::array();
  for (const auto& dir : registry.search_dirs()) dirs.push_back(dir.string());
  return {{"plugins", std::move(plugins)}, {"problems", registry.problems()}, {"search_dirs", std::move(dirs)}};
}

}  // namespace zoo
