// Sampling on the device (kernels sample_row, and OutputRequest::sample through the CUDA decoder)
// against the host reference zoo::sample_logits: the same logits and the same draw give the same id.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <tuple>

#include "cuda/cuda_model_util.hpp"
#include "cuda/cuda_test_util.hpp"
#include "zoo/generation.hpp"
#include "zoo/kernels/cuda/ops.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/plugin_registry.hpp"
#include "zoo/request.hpp"
#include "zoo/sampling.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;

namespace {

namespace fs = std::filesystem;

// One device row sampler, its buffers allocated once (the workspace zeroed, as the decoder does).
struct DeviceSampler {
  std::int64_t n;
  Stream stream;
  DeviceBuffer logits, params, out, workspace;
  explicit DeviceSampler(std::int64_t n_)
      : n(n_), logits(n_ * 4), params(sizeof(SampleParams)), out(sizeof(SampleOutput)),
        workspace(sample_workspace_bytes(n_)) {
    workspace.fill_bytes(0);
  }
  // mode: the one the decoder would take (sample_mode) unless given.
  SampleOutput run(const std::vector<float>& row, const zoo::SampleRequest& r, std::optional<SampleMode> mode = {}) {
    REQUIRE(static_cast<std::int64_t>(row.size()) == n);
    logits.upload(row.data(), row.size() * 4);
    const SampleParams p{r.u, r.temperature, r.top_k, r.top_p, r.min_p};
    params.upload(&p, sizeof p);
    sample_row(logits.as<float>(), n, mode.value_or(sample_mode(r.temperature, r.top_k)), params.as<SampleParams>(),
               out.as<SampleOutput>(), workspace.data(), workspace.size(), stream);
    stream.synchronize();
    SampleOutput o;
    out.download(&o, sizeof o);
    return o;
  }
};

void check_same(const SampleOutput& got, const zoo::SampledToken& want) {
  CHECK(got.id == want.id);
  CHECK(got.logit == want.logit);
  CHECK(got.bad_index == want.bad_index);
  if (want.bad_index >= 0) CHECK(std::memcmp(&got.bad_value, &want.bad_value, 4) == 0);
  CHECK((got.unmasked == 0) == want.all_masked);
}

}  // namespace

TEST_CASE("sample_row picks the host reference's id for the same logits and draw", "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 2024;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<zoo::SampleRequest> requests = {
      {.temperature = 0.0f},
      {.temperature = 1.0f},
      {.temperature = 0.6f, .top_k = 1},
      {.temperature = 0.7f, .top_k = 50},
      {.temperature = 1.3f, .top_k = 1000},
      {.temperature = 1.0f, .top_k = 200000},
      {.temperature = 1.0f, .top_k = 0, .top_p = 0.1f},
      {.temperature = 0.8f, .top_k = 0, .top_p = 0.9f},
      {.temperature = 2.0f, .top_k = 0, .top_p = 0.0f},
      {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},
      {.temperature = 1.0f, .top_k = 50, .top_p = 0.1f},
      {.temperature = 0.05f, .top_k = 0, .top_p = 1.0f},
      {.temperature = 1.0f, .top_k = kSampleSelectMaxK},
      {.temperature = 0.9f, .top_k = kSampleSelectMaxK + 1, .top_p = 0.9f},
      {.temperature = 1.0f, .min_p = 0.05f},
      {.temperature = 0.8f, .top_p = 0.9f, .min_p = 0.1f},
      {.temperature = 0.7f, .top_k = 50, .min_p = 0.2f},
      {.temperature = 1.0f, .top_k = 100, .top_p = 0.8f, .min_p = 0.01f},
      {.temperature = 1.2f, .top_k = kSampleSelectMaxK + 1, .min_p = 0.3f},
      {.temperature = 1.0f, .top_k = 10, .min_p = 1.0f},
  };
  int rows = 0, moved = 0, selected = 0;
  for (std::int64_t n : {151936, 1, 7, 1000, 4097, 65537}) {
    DeviceSampler dev(n);
    for (int kind = 0; kind < 5; ++kind) {
      // 0: spread normal logits (scale 4); 1: bf16-rounded small integers (many ties);
      // 2: normal with a quarter masked (-inf); 3: one sharp peak over a flat floor; 4: a narrow
      // band (the top-k select needs more than its first histogram).
      std::vector<float> row(static_cast<std::size_t>(n));
      std::uniform_int_distribution<int> small(0, 12);
      std::uniform_real_distribution<float> band(8.0f, 8.5f);
      for (std::int64_t i = 0; i < n; ++i) {
        float v = 4.0f * normal(rng);
        if (kind == 1) v = static_cast<float>(small(rng));
        if (kind == 2 && (i % 4 == 1)) v = -INFINITY;
        if (kind == 3) v = i == n / 2 ? 12.0f : zoo::round_to_bf16(0.01f * normal(rng));
        if (kind == 4) v = band(rng);
        row[static_cast<std::size_t>(i)] = v;
      }
      if (kind == 1 && n > 3) row[2] = row[1] = 13.0f;  // a tie at the top
      for (const auto& base : requests) {
        for (int draw = 0; draw < 3; ++draw) {
          zoo::SampleRequest r = base;
          r.u = draw == 0 ? 0.0 : uni(rng);
          INFO("n " << n << " kind " << kind << " T " << r.temperature << " top_k " << r.top_k << " top_p " << r.top_p
                    << " min_p " << r.min_p << " u " << r.u);
          const zoo::SampledToken want = zoo::sample_logits(row, r);
          const SampleOutput got = dev.run(row, r);
          check_same(got, want);
          if (sample_mode(r.temperature, r.top_k) == SampleMode::select) {
            check_same(dev.run(row, r, SampleMode::sort), want);  // both paths take any top-k
            ++selected;
          }
          ++rows;
          moved += want.id != zoo::sample_logits(row, {}).id;
        }
      }
    }
  }
  INFO(rows << " rows");
  CHECK(moved > rows / 10);  // sampling does leave the argmax
  CHECK(selected > rows / 3);
}

TEST_CASE("sample_row's top-k keeps the lower indices among ties at the k-th value", "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::int64_t n = 151936;
  DeviceSampler dev(n);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> position(0, n - 1);
  std::uniform_real_distribution<float> low(-4.0f, 1.0f);
  // `above` entries at 6, `tied` at 5 (at random places), the rest below 1 (or all at 5): the
  // k-th value is 5 and only the lowest indices among the 5s survive. Equal masses spread the
  // draws over the survivors, so a wrong one is picked by some draw.
  for (const auto& [above, tied, top_k] :
       {std::tuple{0, 30, 20}, std::tuple{10, 30, 20}, std::tuple{19, 5000, 20}, std::tuple{0, 5000, 50},
        std::tuple{1000, 3000, kSampleSelectMaxK}, std::tuple{0, 5000, kSampleSelectMaxK},
        std::tuple{100, 5000, kSampleSelectMaxK + 1}, std::tuple{0, static_cast<int>(n), 50}}) {
    INFO("above " << above << " tied " << tied << " top_k " << top_k);
    std::vector<float> row(static_cast<std::size_t>(n));
    if (tied == n) {
      std::fill(row.begin(), row.end(), 5.0f);
    } else {
      for (auto& v : row) v = low(rng);
      for (int placed = 0; placed < above + tied;) {
        float& v = row[static_cast<std::size_t>(position(rng))];
        if (v < 2.0f) v = placed++ < above ? 6.0f : 5.0f;
      }
    }
    for (int d = 0; d < 20; ++d) {
      const zoo::SampleRequest r{.temperature = 1.0f, .top_k = top_k, .u = d / 20.0};
      INFO("u " << r.u);
      const zoo::SampledToken want = zoo::sample_logits(row, r);
      check_same(dev.run(row, r), want);
      check_same(dev.run(row, r, SampleMode::sort), want);
    }
  }
}

TEST_CASE("sample_row reports NaN, +inf and all -inf rows like the host reference", "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::int64_t n = 151936;
  DeviceSampler dev(n);
  for (const zoo::SampleRequest& r : {zoo::SampleRequest{}, zoo::SampleRequest{.temperature = 1.0f, .top_k = 10, .u = 0.3}}) {
    std::vector<float> row(n, 0.5f);
    row[70000] = NAN;
    row[90000] = INFINITY;
    row[80000] = 2.0f;
    check_same(dev.run(row, r), zoo::sample_logits(row, r));
    std::fill(row.begin(), row.end(), -INFINITY);
    const SampleOutput masked = dev.run(row, r);
    check_same(masked, zoo::sample_logits(row, r));
    CHECK(masked.unmasked == 0);
    row[123456] = 1.0f;  // one finite token: every pick takes it
    const SampleOutput one = dev.run(row, r);
    CHECK(one.id == 123456);
    CHECK(one.unmasked == 1);
  }
}

// ---- through the CUDA decoder --------------------------------------------------------------------

namespace {

const fs::path kFixtures = fs::path(ZOO_SOURCE_DIR) / "tests" / "fixtures";

using zoo::cuda_test::load_cuda_fixture;

// Drops OutputRequest::sample: the session returns logits and generate() samples on the host.
class LogitsOnly : public zoo::Session {
 public:
  explicit LogitsOnly(zoo::Session& inner) : inner_(inner) {}
  zoo::ForwardResult forward(const zoo::ForwardStep& step, zoo::DiagnosticHook* hook) override {
    zoo::ForwardStep plain = step;
    plain.outputs.sample.reset();
    return inner_.forward(plain, hook);
  }
  std::int64_t position() const override { return inner_.position(); }
  void reset() override { inner_.reset(); }

 private:
  zoo::Session& inner_;
};

}  // namespace

TEST_CASE("CUDA generate with sampling on the device equals the full-logits path", "[cuda][sampling][parity]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = kFixtures / "qwen3-tiny-hd64";
  auto loaded = load_cuda_fixture(dir);
  const auto prompt = loaded->model->prepare(zoo::load_request(dir / "request.json"));
  for (const zoo::SamplingOptions& o :
       {zoo::SamplingOptions{}, zoo::SamplingOptions{.temperature = 0.8f, .top_k = 20, .top_p = 0.95f, .seed = 5},
        zoo::SamplingOptions{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 6}}) {
    INFO("temperature " << o.temperature);
    zoo::GenerationOptions options;
    options.max_new_tokens = 300;  // decode graphs across the 256 -> 512 bucket
    options.sampling = o;
    auto device = loaded->model->new_session();
    auto host_session = loaded->model->new_session();
    LogitsOnly host(*host_session);
    const auto a = zoo::generate(*device, prompt, options);
    const auto b = zoo::generate(host, prompt, options);
    CHECK(a.size() == 300);
    CHECK(a == b);
  }
}

TEST_CASE("CUDA graph-replayed decode with device sampling picks the logits' token", "[cuda][sampling][parity]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  auto loaded = load_cuda_fixture(kFixtures / "qwen3-tiny-hd64");
  const auto vocab = loaded->model->info().vocab_size;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37 + 11) % vocab);
  const int decode_steps = 8;
  const std::size_t prefill = ids.size() - decode_steps;
  // Two sessions step in lockstep through the decode graphs: one samples on the device, the other
  // returns its logits, which the host reference samples; greedy steps also match a re-prefill.
  auto sampled = loaded->model->new_session();
  auto plain = loaded->model->new_session();
  sampled->forward({std::span(ids.data(), prefill), {}, {}, {}});
  plain->forward({std::span(ids.data(), prefill), {}, {}, {}});
  for (int s = 0; s < decode_steps; ++s) {
    const std::size_t upto = prefill + s + 1;
    const std::span<const std::int64_t> token(ids.data() + upto - 1, 1);
    const zoo::SampleRequest r =
        s % 2 ? zoo::SampleRequest{} : zoo::SampleRequest{.temperature = 0.9f, .top_k = 40, .top_p = 0.9f, .u = 0.1 * s};
    zoo::OutputRequest outputs;
    outputs.sample = r;
    const auto got = sampled->forward({token, {}, {}, outputs});
    REQUIRE(got.sampled.has_value());
    CHECK(got.logits.empty());
    const auto logits = plain->forward({token, {}, {}, {}});
    INFO("step " << s);
    CHECK(got.sampled->id == zoo::sample_logits(logits.logits.span<float>(), r).id);
    CHECK(got.sampled->valid());
    if (r.temperature == 0.0f) {
      const auto fresh = loaded->model->new_session()->forward({std::span(ids.data(), upto), {}, {}, {}});
      CHECK(got.sampled->id == zoo::sample_logits(fresh.logits.span<float>(), r).id);
    }
  }
  CHECK(sampled->position() == static_cast<std::int64_t>(ids.size()));
}

// Not run by default: device time per sample_row call over a 151936 row (one call captured in a
// graph, events around 200 replays); top-k requests both by the select and by the full sort.
TEST_CASE("sample_row timing", "[.sampling_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::int64_t n = 151936;
  DeviceSampler dev(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 12);
  std::vector<float> spread(n), ints(n), flat(n, 1.0f);  // flat: every entry tied
  for (auto& v : spread) v = normal(rng);
  for (auto& v : ints) v = static_cast<float>(small(rng));  // ~11700 ties at the top value
  const char* names[] = {"greedy", "select", "sort"};
  for (const auto& [row, r] :
       {std::pair{&spread, zoo::SampleRequest{}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 0.7f, .top_k = 50, .u = 0.5}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .u = 0.5}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 1.0f, .top_k = 1000, .u = 0.5}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 1.0f, .top_k = kSampleSelectMaxK, .u = 0.5}},
        std::pair{&ints, zoo::SampleRequest{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .u = 0.5}},
        std::pair{&flat, zoo::SampleRequest{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .u = 0.5}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .u = 0.5}},
        std::pair{&spread, zoo::SampleRequest{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .u = 0.5}}}) {
    const SampleMode natural = sample_mode(r.temperature, r.top_k);
    std::vector<SampleMode> modes{natural};
    if (natural == SampleMode::select) modes.push_back(SampleMode::sort);
    for (const SampleMode mode : modes) {
      dev.run(*row, r, mode);  // warm up, and sets params
      // As in a decode graph: one call captured, replayed (host launch costs out of the picture).
      CudaGraph graph;
      graph.begin_capture(dev.stream);
      sample_row(dev.logits.as<float>(), n, mode, dev.params.as<SampleParams>(), dev.out.as<SampleOutput>(),
                 dev.workspace.data(), dev.workspace.size(), dev.stream);
      graph.end_capture(dev.stream);
      graph.launch(dev.stream);
      Event start(true), stop(true);
      start.record(dev.stream);
      const int calls = 200;
      for (int i = 0; i < calls; ++i) graph.launch(dev.stream);
      stop.record(dev.stream);
      stop.synchronize();
      SampleOutput o;
      dev.out.download(&o, sizeof o);
      CHECK(o.id == zoo::sample_logits(*row, r).id);  // replays leave the workspace as they found it
      std::printf("sample_row n=%lld %s T=%.2f top_k=%d top_p=%.2f %s: %.2f us per graph replay\n",
                  static_cast<long long>(n), row == &ints ? "ints" : row == &flat ? "flat" : "spread", r.temperature, r.top_k, r.top_p,
                  names[static_cast<int>(mode)], 1e3 * Event::elapsed_ms(start, stop) / calls);
    }
  }
}

TEST_CASE("sample_rows_greedy: many rows in one launch pick as sample_row does (ties, NaN, +inf, all -inf)",
          "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::int64_t n = 151936, rows = 37;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> all(static_cast<std::size_t>(rows * n));
  for (auto& x : all) x = normal(rng);
  all[5 * n + 100] = all[5 * n + 90000] = 50.0f;  // a tie: the lower index wins
  all[7 * n + 3] = NAN;
  all[9 * n + 77] = INFINITY;
  std::fill(all.begin() + 11 * n, all.begin() + 12 * n, -INFINITY);
  // Picks read rows in another order than they are stored: pick i reads row (i * 7) % rows.
  std::vector<std::int32_t> order(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7) % rows);
  Stream stream;
  DeviceBuffer logits = upload(all), index = upload(order), out(rows * sizeof(SampleOutput));
  const std::size_t ws = sample_workspace_bytes(n);
  DeviceBuffer workspace(rows * ws);
  workspace.fill_bytes(0);
  for (int call = 0; call < 2; ++call) {  // the second call finds the tickets as the first left them
    sample_rows_greedy(logits.as<float>(), n, index.as<std::int32_t>(), rows, out.as<SampleOutput>(), workspace.data(),
                       ws, stream);
    stream.synchronize();
    std::vector<SampleOutput> got(static_cast<std::size_t>(rows));
    out.download(got.data(), got.size() * sizeof(SampleOutput));
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t r = order[static_cast<std::size_t>(i)];
      INFO("pick " << i << " of row " << r << ", call " << call);
      const std::span<const float> row(all.data() + r * n, static_cast<std::size_t>(n));
      const zoo::SampledToken want = zoo::sample_logits(row, zoo::SampleRequest{});
      const SampleOutput& p = got[static_cast<std::size_t>(i)];
      CHECK(p.id == want.id);
      CHECK(p.bad_index == want.bad_index);
      CHECK((p.unmasked == 0) == want.all_masked);
    }
  }
}

namespace {

// Rows of one kind (see the first test) for the batched tests: spread, ties, masked, a sharp peak.
std::vector<float> test_row(std::int64_t n, int kind, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 12);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float v = 4.0f * normal(rng);
    if (kind == 1) v = static_cast<float>(small(rng));
    if (kind == 2 && (i % 4 == 1)) v = -INFINITY;
    if (kind == 3) v = i == n / 2 ? 12.0f : zoo::round_to_bf16(0.01f * normal(rng));
    row[static_cast<std::size_t>(i)] = v;
  }
  return row;
}

}  // namespace

TEST_CASE("sample_rows: each mode's picks of many rows, each with its own request, equal the host's",
          "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::vector<zoo::SampleRequest> requests = {
      {.temperature = 0.0f},
      {.temperature = 1.0f},
      {.temperature = 0.7f, .top_k = 50},
      {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},
      {.temperature = 0.8f, .top_k = 0, .top_p = 0.9f},
      {.temperature = 1.0f, .min_p = 0.05f},
      {.temperature = 0.7f, .top_k = 40, .min_p = 0.1f},
      {.temperature = 1.1f, .top_k = kSampleSelectMaxK + 7, .top_p = 0.7f, .min_p = 0.02f},
  };
  for (const std::int64_t n : {151936, 1000}) {
    const std::int64_t rows = 45;
    std::mt19937 rng(static_cast<std::uint32_t>(n));
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    std::vector<float> all;
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto row = test_row(n, static_cast<int>(r % 4), rng);
      all.insert(all.end(), row.begin(), row.end());
    }
    // Pick i reads row (i * 7) % rows with request i % size; grouped by mode as the runner does.
    std::vector<std::vector<std::int32_t>> index(3);
    std::vector<std::vector<zoo::SampleRequest>> asked(3);
    for (std::int64_t i = 0; i < rows; ++i) {
      zoo::SampleRequest r = requests[static_cast<std::size_t>(i) % requests.size()];
      r.u = uni(rng);
      const auto mode = static_cast<std::size_t>(sample_mode(r.temperature, r.top_k));
      index[mode].push_back(static_cast<std::int32_t>((i * 7) % rows));
      asked[mode].push_back(r);
    }
    Stream stream;
    DeviceBuffer logits = upload(all);
    const std::size_t ws = sample_workspace_bytes(n);
    for (int mode = 0; mode < 3; ++mode) {
      const auto count = static_cast<std::int64_t>(index[static_cast<std::size_t>(mode)].size());
      REQUIRE(count > 0);
      std::vector<SampleParams> params;
      for (const auto& r : asked[static_cast<std::size_t>(mode)]) params.push_back({r.u, r.temperature, r.top_k, r.top_p, r.min_p});
      DeviceBuffer rows_dev = upload(index[static_cast<std::size_t>(mode)]), params_dev = upload(params);
      DeviceBuffer out(static_cast<std::size_t>(count) * sizeof(SampleOutput)), workspace(static_cast<std::size_t>(count) * ws);
      DeviceBuffer temp(std::max<std::size_t>(sample_rows_temp_bytes(n, count), 1));
      workspace.fill_bytes(0);
      for (int call = 0; call < 2; ++call) {  // the second call finds the tickets as the first left them
        sample_rows(logits.as<float>(), n, static_cast<SampleMode>(mode), rows_dev.as<std::int32_t>(), count,
                    params_dev.as<SampleParams>(), out.as<SampleOutput>(), workspace.data(), ws, temp.data(),
                    temp.size(), stream);
        stream.synchronize();
        std::vector<SampleOutput> got(static_cast<std::size_t>(count));
        out.download(got.data(), got.size() * sizeof(SampleOutput));
        for (std::int64_t i = 0; i < count; ++i) {
          const auto& r = asked[static_cast<std::size_t>(mode)][static_cast<std::size_t>(i)];
          const std::int64_t row = index[static_cast<std::size_t>(mode)][static_cast<std::size_t>(i)];
          INFO("n " << n << " mode " << mode << " pick " << i << " row " << row << " T " << r.temperature << " top_k "
                    << r.top_k << " top_p " << r.top_p << " min_p " << r.min_p << " u " << r.u << " call " << call);
          const std::span<const float> values(all.data() + row * n, static_cast<std::size_t>(n));
          check_same(got[static_cast<std::size_t>(i)], zoo::sample_logits(values, r));
        }
      }
    }
  }
}

TEST_CASE("sample_segments: many picks in one launch, each of its own row with its own request, equal one-pick "
          "launches bit for bit",
          "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  constexpr std::int64_t kSegments = 4, kWidth = 300, kRows = 9, kPicks = 7;
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<float> all(static_cast<std::size_t>(kRows * kSegments * kWidth));
  for (float& x : all) x = std::round(normal(rng) * 4.0f) / 4.0f;  // ties at the k-th value
  const std::vector<SegmentSampleParams> kinds = {
      {0.0f, 0, 1.0f, 0}, {0.8f, 20, 1.0f, 0}, {1.0f, 0, 0.7f, 0}, {0.7f, 10, 0.9f, 0}, {1.3f, 0, 1.0f, 0}};
  std::vector<SegmentSampleParams> params;
  std::vector<std::int32_t> rows;
  std::vector<double> u;
  for (std::int64_t p = 0; p < kPicks; ++p) {
    params.push_back(kinds[static_cast<std::size_t>(p) % kinds.size()]);
    rows.push_back(static_cast<std::int32_t>((p * 5 + 2) % kRows));
    for (std::int64_t c = 0; c < kSegments; ++c) u.push_back(uni(rng));
  }
  Stream stream;
  DeviceBuffer logits = upload(all), params_dev = upload(params), rows_dev = upload(rows), u_dev = upload(u);
  DeviceBuffer out(static_cast<std::size_t>(kPicks * kSegments) * sizeof(SampleOutput));
  sample_segments(logits.as<float>(), kSegments, kWidth, params_dev.as<SegmentSampleParams>(), u_dev.as<double>(),
                  out.as<SampleOutput>(), stream, kPicks, rows_dev.as<std::int32_t>(), kSegments * kWidth);
  stream.synchronize();
  const auto got = download<SampleOutput>(out, static_cast<std::size_t>(kPicks * kSegments));
  DeviceBuffer one(static_cast<std::size_t>(kSegments) * sizeof(SampleOutput));
  for (std::int64_t p = 0; p < kPicks; ++p) {
    INFO("pick " << p << " row " << rows[static_cast<std::size_t>(p)]);
    sample_segments(logits.as<float>() + rows[static_cast<std::size_t>(p)] * kSegments * kWidth, kSegments, kWidth,
                    params_dev.as<SegmentSampleParams>() + p, u_dev.as<double>() + p * kSegments,
                    one.as<SampleOutput>(), stream);
    stream.synchronize();
    const auto want = download<SampleOutput>(one, static_cast<std::size_t>(kSegments));
    for (std::int64_t c = 0; c < kSegments; ++c)
      CHECK(std::memcmp(&got[static_cast<std::size_t>(p * kSegments + c)], &want[static_cast<std::size_t>(c)],
                        sizeof(SampleOutput)) == 0);
  }
  // Rows apart by less than a whole row are refused.
  CHECK_THROWS_AS(sample_segments(logits.as<float>(), kSegments, kWidth, params_dev.as<SegmentSampleParams>(),
                                  u_dev.as<double>(), out.as<SampleOutput>(), stream, 2, nullptr, kWidth),
                  std::invalid_argument);
}

TEST_CASE("logprob_rows: log-probabilities and the top entries of many rows equal fill_logprobs'", "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::int64_t n = 151936, rows = 9;
  std::mt19937 rng(77);
  std::vector<float> all;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = test_row(n, static_cast<int>(r % 4), rng);
    all.insert(all.end(), row.begin(), row.end());
  }
  all[4 * n + 10] = NAN;                                                       // ranks as -inf
  std::fill(all.begin() + 8 * n, all.begin() + 9 * n, -INFINITY);              // nothing finite
  const std::vector<std::int32_t> order{3, 0, 8, 1, 4, 2, 7, 5, 6};
  Stream stream;
  DeviceBuffer logits = upload(all), index = upload(order), lse(rows * 8);
  for (const int top : {0, 1, 5, kMaxLogprobTop}) {
    DeviceBuffer ids(rows * kMaxLogprobTop * 4), values(rows * kMaxLogprobTop * 4);
    logprob_rows(logits.as<float>(), n, index.as<std::int32_t>(), rows, top, lse.as<double>(), ids.as<std::int32_t>(),
                 values.as<float>(), stream);
    stream.synchronize();
    std::vector<double> got_lse(static_cast<std::size_t>(rows));
    std::vector<std::int32_t> got_ids(static_cast<std::size_t>(rows * kMaxLogprobTop));
    std::vector<float> got_values(got_ids.size());
    lse.download(got_lse.data(), got_lse.size() * 8);
    ids.download(got_ids.data(), got_ids.size() * 4);
    values.download(got_values.data(), got_values.size() * 4);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t row = order[static_cast<std::size_t>(i)];
      INFO("top " << top << " pick " << i << " row " << row);
      const std::span<const float> x(all.data() + row * n, static_cast<std::size_t>(n));
      zoo::SampledToken want{.id = 7};
      zoo::fill_logprobs(x, want, top);
      const auto logprob = [&](float v) {
        return static_cast<float>(static_cast<double>(std::isnan(v) ? -INFINITY : v) - got_lse[static_cast<std::size_t>(i)]);
      };
      const auto same = [](float a, float b) { return std::isinf(b) ? a == b : std::abs(a - b) <= 1e-6f; };
      CHECK(same(logprob(x[7]), want.logprob));
      REQUIRE(want.top.size() == static_cast<std::size_t>(top));
      for (int r = 0; r < top; ++r) {
        const std::size_t at = static_cast<std::size_t>(i * top + r);
        CHECK(got_ids[at] == want.top[static_cast<std::size_t>(r)].first);
        const float lp = logprob(got_values[at]), want_lp = want.top[static_cast<std::size_t>(r)].second;
        CHECK(same(lp, want_lp));
      }
    }
  }
  CHECK_THROWS_AS(logprob_rows(logits.as<float>(), n, index.as<std::int32_t>(), rows, kMaxLogprobTop + 1,
                               lse.as<double>(), nullptr, nullptr, stream),
                  std::invalid_argument);
}

TEST_CASE("apply_penalties_rows: penalized copies equal apply_penalties' bit for bit, picks get the raw logit back, "
          "scatter_tokens",
          "[cuda][sampling]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  for (const std::int64_t n : {151936, 1000, 33}) {
    INFO("n " << n);
    std::mt19937 rng(static_cast<std::uint32_t>(n) + 5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const std::vector<zoo::SampleRequest> kinds = {
        {.repetition_penalty = 1.3f},
        {.frequency_penalty = 0.7f},
        {.presence_penalty = -1.1f},
        {.repetition_penalty = 0.6f, .frequency_penalty = -0.3f, .presence_penalty = 1.9f},
        {.repetition_penalty = 1.05f, .frequency_penalty = 1.7f, .presence_penalty = 0.1f}};
    const std::int64_t rows = 7, stride = 3000;
    std::vector<float> all(static_cast<std::size_t>(2 * rows * n));  // raw rows, then room for the copies
    for (std::int64_t i = 0; i < rows * n; ++i) all[static_cast<std::size_t>(i)] = normal(rng);
    all[3] = 0.0f;
    // Each row's sequence: lengths up to 2999 with many repeats of few ids (and the zero logit's id).
    std::vector<std::int32_t> history(static_cast<std::size_t>(rows * stride), 0);
    std::vector<PenaltyRow> asked;
    std::vector<zoo::SampleRequest> requests;
    for (std::int64_t r = 0; r < rows; ++r) {
      zoo::SampleRequest q = kinds[static_cast<std::size_t>(r) % kinds.size()];
      const std::int32_t length = static_cast<std::int32_t>(1 + (r * 977) % (stride - 1));
      std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(std::min<std::int64_t>(n, 40 + r * 300)) - 1);
      for (std::int32_t t = 0; t < length; ++t) history[static_cast<std::size_t>(r * stride + t)] = id(rng);
      q.output_start = length / 3;
      requests.push_back(q);
      PenaltyRow row;
      row.tokens_at = r * stride;
      row.from_row = static_cast<std::int32_t>((r * 3) % rows);
      row.to_row = static_cast<std::int32_t>(rows + r);
      row.length = length;
      row.output_start = static_cast<std::int32_t>(q.output_start);
      row.repetition = q.repetition_penalty;
      row.frequency = q.frequency_penalty;
      row.presence = q.presence_penalty;
      row.pick = static_cast<std::int32_t>(rows - 1 - r);
      asked.push_back(row);
    }
    // Biases on rows 1 and 4 (applied first; ids distinct per row).
    std::vector<LogitBias> biases;
    std::vector<std::vector<std::pair<std::int64_t, float>>> row_bias(static_cast<std::size_t>(rows));
    for (const std::int64_t r : {std::int64_t{1}, std::int64_t{4}}) {
      auto& list = row_bias[static_cast<std::size_t>(r)];
      list = {{0, 2.5f}, {3, -7.0f}, {n - 1, 9.0f}};
      asked[static_cast<std::size_t>(r)].bias_at = static_cast<std::int32_t>(biases.size());
      asked[static_cast<std::size_t>(r)].bias_count = static_cast<std::int32_t>(list.size());
      for (const auto& [id, bias] : list) biases.push_back({static_cast<std::int32_t>(id), bias});
      requests[static_cast<std::size_t>(r)].logit_bias = list;
    }
    // The history goes up through scatter_tokens: pairs (dest, id), one negative dest skipped.
    std::vector<std::int32_t> pairs(2 * history.size() + 2);
    for (std::size_t i = 0; i < history.size(); ++i) {
      pairs[i] = static_cast<std::int32_t>(i);
      pairs[history.size() + 1 + i] = history[i];
    }
    pairs[history.size()] = -1;
    pairs[2 * history.size() + 1] = 12345;
    Stream stream;
    DeviceBuffer logits = upload(all), rows_dev = upload(asked), pairs_dev = upload(pairs);
    DeviceBuffer history_dev(history.size() * 4), workspace(static_cast<std::size_t>(rows) * penalty_workspace_bytes(n));
    workspace.fill_bytes(0xff);  // the kernel clears its bitmaps itself
    scatter_tokens(history_dev.as<std::int32_t>(), pairs_dev.as<std::int32_t>(), static_cast<std::int64_t>(history.size()) + 1,
                   stream);
    DeviceBuffer bias_dev = upload(biases);
    apply_penalties_rows(logits.as<float>(), n, rows_dev.as<PenaltyRow>(), rows, history_dev.as<std::int32_t>(),
                         workspace.data(), stream, bias_dev.as<LogitBias>());
    // Each pick as if the sampler had chosen id (r * 13) % n from the copy row.
    std::vector<SampleOutput> picks(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      picks[static_cast<std::size_t>(asked[static_cast<std::size_t>(r)].pick)].id = static_cast<std::int32_t>((r * 13) % n);
      picks[static_cast<std::size_t>(asked[static_cast<std::size_t>(r)].pick)].logit = -99.0f;
    }
    DeviceBuffer out = upload(picks);
    restore_pick_logits(logits.as<float>(), n, rows_dev.as<PenaltyRow>(), rows, out.as<SampleOutput>(), stream);
    stream.synchronize();
    std::vector<float> got(all.size());
    logits.download(got.data(), got.size() * 4);
    out.download(picks.data(), picks.size() * sizeof(SampleOutput));
    std::vector<std::int32_t> held(history.size());
    history_dev.download(held.data(), held.size() * 4);
    CHECK(held == history);
    for (std::int64_t r = 0; r < rows; ++r) {
      INFO("row " << r);
      const PenaltyRow& p = asked[static_cast<std::size_t>(r)];
      const auto raw = std::span<const float>(all).subspan(static_cast<std::size_t>(p.from_row * n), static_cast<std::size_t>(n));
      std::vector<float> want(raw.begin(), raw.end());
      zoo::apply_penalties(want, std::span<const std::int32_t>(history).subspan(static_cast<std::size_t>(r * stride), static_cast<std::size_t>(p.length)),
                           requests[static_cast<std::size_t>(r)]);
      const auto copy = std::span<const float>(got).subspan(static_cast<std::size_t>(p.to_row * n), static_cast<std::size_t>(n));
      std::int64_t differ = 0, changed = 0;
      for (std::int64_t v = 0; v < n; ++v) {
        differ += std::memcmp(&copy[static_cast<std::size_t>(v)], &want[static_cast<std::size_t>(v)], 4) != 0;
        changed += want[static_cast<std::size_t>(v)] != raw[static_cast<std::size_t>(v)];
      }
      CHECK(differ == 0);
      CHECK(changed > 0);
      // The raw row is untouched, and the pick reports its raw logit.
      CHECK(std::equal(raw.begin(), raw.end(), got.begin() + p.from_row * n));
      CHECK(picks[static_cast<std::size_t>(p.pick)].logit == raw[static_cast<std::size_t>((r * 13) % n)]);
    }
  }
}
