#include "zoo/synth_checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/output_file.hpp"
#include "zoo/random.hpp"
#include "zoo/safetensors.hpp"

namespace zoo {
namespace {

namespace fs = std::filesystem;

// A source with no tensors: lets a plugin declare its requirements before any checkpoint exists.
class EmptyWeightSource : public WeightSource {
 public:
  std::vector<std::string> names() const override { return {}; }
  std::optional<TensorInfo> info(std::string_view) const override { return std::nullopt; }
  TensorView view(std::string_view name) const override {
    throw InputError(fmt::format("{} not found in an empty weight source", name));
  }
  std::string describe() const override { return "an empty weight source"; }
};

// Fills values [begin, end) of a tensor with N(mean, std) in `dtype`; the stream depends only on the
// seed, the tensor index and the position, so the result is the same for any thread count.
void fill_normal(HostTensor& tensor, std::int64_t begin, std::int64_t end, float mean, float stddev,
                 std::uint64_t seed) {
  for (std::int64_t i = begin; i < end; i += 2) {
    std::uint64_t state = seed ^ (static_cast<std::uint64_t>(i) * 0xd1342543de82ef95ull);
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const float pair[2] = {mean + stddev * static_cast<float>(r * std::cos(2 * M_PI * u2)),
                           mean + stddev * static_cast<float>(r * std::sin(2 * M_PI * u2))};
    for (int j = 0; j < 2 && i + j < end; ++j) {
      const auto at = static_cast<std::size_t>(i + j);
      switch (tensor.dtype()) {
        case DType::BF16: tensor.as<std::uint16_t>()[at] = f32_to_bf16(pair[j]); break;
        case DType::F16: tensor.as<std::uint16_t>()[at] = f32_to_f16(pair[j]); break;
        default: tensor.as<float>()[at] = pair[j]; break;
      }
    }
  }
}

bool is_shard_name(const std::string& name) {
  // model-00001-of-00003.safetensors, as written below
  return name.size() == 32 && name.starts_with("model-") && name.ends_with(".safetensors") && name.substr(11, 4) == "-of-";
}

// Refuses a non-empty output directory unless --force; with --force removes config.json first, so
// that a synth failing half-way leaves no directory that looks like a complete checkpoint.
void prepare_output_dir(const fs::path& out, bool force, const fs::path& config) {
  std::error_code ec;
  const auto status = fs::status(out, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(fmt::format("--out {}: exists and is not a directory", out.string()));
  if (fs::exists(status)) {
    std::vector<std::string> entries;
    for (const auto& entry : fs::directory_iterator(out, ec)) entries.push_back(entry.path().filename().string());
    if (ec) throw InputError(fmt::format("--out {}: cannot list: {}", out.string(), ec.message()));
    if (!entries.empty() && !force)
      throw InputError(fmt::format("--out {}: is not empty ({} entries, e.g. '{}'); refusing to overwrite a "
                                   "checkpoint (use --force to replace its model files)",
                                   out.string(), entries.size(), entries.front()));
    // Unless it is the --config being read: that one is rewritten with the same content at the end.
    const bool is_input = fs::equivalent(out / "config.json", config, ec);
    if (!is_input && (fs::remove(out / "config.json", ec), ec))
      throw InputError(fmt::format("{}: cannot remove: {}", (out / "config.json").string(), ec.message()));
  }
  fs::create_directories(out, ec);
  if (ec) throw InputError(fmt::format("--out {}: cannot create: {}", out.string(), ec.message()));
}

// After the new weights are in place: no older single file beside a new index, no older index or
// shards beside a new single file (loaders would pick the stale one).
void remove_stale_weights(const fs::path& out, const std::set<std::string>& written) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const auto name = entry.path().filename().string();
    if (written.count(name)) continue;
    if (name == "model.safetensors" || name == "model.safetensors.index.json" || is_shard_name(name))
      stale.push_back(entry.path());
  }
  for (const auto& path : stale)
    if (fs::remove(path, ec); ec) throw InputError(fmt::format("{}: cannot remove: {}", path.string(), ec.message()));
}

}  // namespace

std::shared_ptr<const WeightSource> empty_weight_source() { return std::make_shared<EmptyWeightSource>(); }

std::vector<SynthTensor> required_tensors(const Model& model, float stddev) {
  std::vector<SynthTensor> tensors;
  for (const auto& req : model.requirements()) {
    if (req.optional) continue;
    const bool is_norm = req.shape.size() == 1;
    tensors.push_back({model.weight_source().stored_name(req.name), req.shape, is_norm ? 1.0f : 0.0f,
                       is_norm ? 0.05f : stddev});
  }
  return tensors;
}

std::vector<SynthTensor> load_extra_tensors(const std::filesystem::path& file) {
  const nlohmann::json doc = load_json_object(file);
  if (!doc.contains("tensors") || !doc.at("tensors").is_array())
    throw InputError(fmt::format("{}: expected {{\"tensors\": [...]}}", file.string()));
  std::vector<SynthTensor> out;
  for (std::size_t i = 0; i < doc.at("tensors").size(); ++i) {
    const auto& t = doc.at("tensors")[i];
    const auto where = fmt::format("{}: tensors[{}]", file.string(), i);
    if (!t.is_object() || !t.contains("name") || !t.at("name").is_string() || !t.contains("shape") || !t.at("shape").is_array())
      throw InputError(fmt::format("{}: needs a string \"name\" and a \"shape\" array", where));
    SynthTensor p{t.at("name").get<std::string>(), {}, 0.0f, 0.02f};
    for (const auto& d : t.at("shape")) {
      // An unsigned value past int64 would read as a negative one.
      if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<std::uint64_t>() > INT64_MAX) ||
          d.get<std::int64_t>() < 0)
        throw InputError(fmt::format("{}: \"shape\" must hold integers >= 0", where));
      p.shape.push_back(d.get<std::int64_t>());
    }
    // Sizes the tensor's buffer: the element count and its bytes (at most 8 a value) must fit.
    std::int64_t bytes = 8;
    for (const std::int64_t d : p.shape) bytes = checked_mul(bytes, d, fmt::format("{}: \"shape\" bytes", where));
    for (const auto& [key, field] : {std::pair<const char*, float*>{"mean", &p.mean}, {"std", &p.stddev}}) {
      if (!t.contains(key)) continue;
      // Read as double first: 1e300 would turn into an infinite float unseen.
      const double v = t.at(key).is_number() ? t.at(key).get<double>() : std::nan("");
      const bool is_std = std::string_view(key) == "std";
      if (!std::isfinite(v) || std::fabs(v) > kMaxSynthWeightScale || (is_std && v < 0))
        throw InputError(fmt::format("{}: \"{}\" must be a finite number{} (at most {:g} in size)", where, key,
                                     is_std ? " >= 0" : "", kMaxSynthWeightScale));
      *field = static_cast<float>(v);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::size_t write_synth_checkpoint(const fs::path& out, const nlohmann::json& config, const fs::path& config_file,
                                   const std::vector<SynthTensor>& tensors, const SynthWrite& options) {
  std::size_t total = 0;
  for (const auto& t : tensors)
    total = static_cast<std::size_t>(checked_add(static_cast<std::int64_t>(total),
                                                 checked_mul(numel(t.shape), static_cast<std::int64_t>(dtype_size(options.dtype)),
                                                             fmt::format("tensor '{}' bytes", t.stored)),
                                                 "the checkpoint's bytes"));
  prepare_output_dir(out, options.force, config_file);
  std::set<std::string> written;

  // Group tensors into shards of about shard_gb; one shard is built in memory, written, freed.
  const auto shard_limit = static_cast<std::size_t>(options.shard_gb * 1e9);
  std::vector<std::vector<std::size_t>> shards(1);
  std::size_t in_shard = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto bytes = static_cast<std::size_t>(numel(tensors[i].shape)) * dtype_size(options.dtype);
    if (in_shard > 0 && in_shard + bytes > shard_limit) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
  }
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  nlohmann::json weight_map = nlohmann::json::object();
  std::size_t done = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<HostTensor> owned;
    for (auto i : shards[s]) owned.emplace_back(options.dtype, tensors[i].shape);
    for (std::size_t j = 0; j < owned.size(); ++j) {
      const auto& t = tensors[shards[s][j]];
      const std::int64_t n = owned[j].numel();
      const std::int64_t chunk = std::max<std::int64_t>(1 << 16, (n / threads + 1) & ~std::int64_t{1});
      std::vector<std::thread> pool;
      const std::uint64_t seed = options.seed * 0x9e3779b97f4a7c15ull + shards[s][j] + 1;
      for (std::int64_t b = 0; b < n; b += chunk)
        pool.emplace_back([&, b] {
          fill_normal(owned[j], b, std::min(n, b + chunk), t.mean, t.stddev, seed);
        });
      for (auto& th : pool) th.join();
    }
    std::vector<std::pair<std::string, TensorView>> views;
    for (std::size_t j = 0; j < owned.size(); ++j) {
      views.emplace_back(tensors[shards[s][j]].stored, owned[j].view());
      weight_map[tensors[shards[s][j]].stored] = file;
      done += owned[j].nbytes();
    }
    write_safetensors(out / file, views, {{"format", "pt"}, {"producer", "zoo synth"}});
    written.insert(file);
    if (options.on_shard) options.on_shard(out / file, views.size(), done, total);
  }
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(out / "model.safetensors.index.json", index.dump(2) + "\n");
    written.insert("model.safetensors.index.json");
  }
  remove_stale_weights(out, written);
  // Last: a directory becomes a checkpoint only once its weights are complete.
  write_file_atomic(out / "config.json", config.dump(2) + "\n");
  return total;
}

}  // namespace zoo
