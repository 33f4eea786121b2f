#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "framework/validation_test_util.hpp"
#include "zoo/compare.hpp"
#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;
using Catch::Contains;
using Catch::StartsWith;
using Catch::WithinAbs;
using Catch::WithinRel;

namespace {

TensorView f32(const std::vector<float>& v, Shape shape) { return {v.data(), DType::F32, std::move(shape)}; }
TensorView f32(const std::vector<float>& v) { return f32(v, {static_cast<std::int64_t>(v.size())}); }

std::string gate_error(const std::string& yaml) {
  try {
    parse_gates(YAML::Load(yaml), "g.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("no InputError for:\n" << yaml);
  return {};
}

}  // namespace

TEST_CASE("compare_tensors: elementwise metrics against hand-computed values", "[compare]") {
  const std::vector<float> golden = {1, 2, 3, 4}, actual = {1, 2, 3, 5};
  const auto m = compare_tensors("x", f32(golden), f32(actual));
  CHECK(m.shape_match);
  CHECK_FALSE(m.integer);
  CHECK_FALSE(m.has_rows);
  CHECK_THAT(m.cosine, WithinRel(34.0 / std::sqrt(30.0 * 39.0), 1e-15));
  CHECK(m.max_abs == 1.0);
  CHECK(m.max_abs_index == 3);
  CHECK(m.mean_abs == 0.25);
  CHECK(m.rmse == 0.5);
  CHECK(m.p99_abs == 1.0);
  // MSE 0.25 over Var(golden) = mean((g - 2.5)^2) = 1.25.
  CHECK_THAT(m.nmse, WithinRel(0.2, 1e-14));
}

TEST_CASE("compare_tensors: cosine edge cases", "[compare]") {
  CHECK(compare_tensors("o", f32({1, 0}), f32({0, 1})).cosine == 0.0);
  CHECK(compare_tensors("n", f32({1, 2}), f32({-1, -2})).cosine == -1.0);
  CHECK(compare_tensors("s", f32({1, 2}), f32({2, 4})).cosine == 1.0);  // cosine ignores scale
  std::vector<float> wiggly(1000);
  for (std::size_t i = 0; i < wiggly.size(); ++i) wiggly[i] = std::sin(0.37f * static_cast<float>(i)) * 3.1f;
  CHECK(compare_tensors("same", f32(wiggly), f32(wiggly)).cosine == 1.0);  // exactly, not 1 - 1 ulp
  const auto zeros = compare_tensors("z", f32({0, 0, 0}), f32({0, 0, 0}));
  CHECK(zeros.cosine == 1.0);
  CHECK(zeros.nmse == 0.0);
  const auto one_zero = compare_tensors("z1", f32({0, 0}), f32({0, 1e-3f}));
  CHECK(one_zero.cosine == 0.0);
  CHECK(std::isinf(one_zero.nmse));  // Var(golden) = 0 and MSE > 0
  CHECK(compare_tensors("c", f32({3, 3, 3}), f32({3, 3, 3})).nmse == 0.0);
  const auto empty = compare_tensors("e", f32({}, {0, 4}), f32({}, {0, 4}));
  CHECK(empty.cosine == 1.0);
  CHECK(empty.max_abs == 0.0);
}

TEST_CASE("compare_tensors: NaN in the actual poisons the metrics", "[compare]") {
  const auto m = compare_tensors("n", f32({1, 2, 3}), f32({1, NAN, 3}));
  CHECK(std::isnan(m.cosine));
  CHECK(std::isnan(m.max_abs));
  CHECK(m.max_abs_index == 1);
  CHECK(std::isnan(m.rmse));
  CHECK(std::isnan(m.p99_abs));
}

TEST_CASE("compare_tensors: p99 is the nearest-rank percentile of |diff|", "[compare]") {
  std::vector<float> golden(200, 0.0f), actual(200);
  for (int i = 0; i < 200; ++i) actual[i] = static_cast<float>(200 - i);  // |diff| = 1..200
  const auto m = compare_tensors("p", f32(golden), f32(actual));
  CHECK(m.p99_abs == 198.0);  // ceil(0.99 * 200) = 198th smallest
  CHECK(m.max_abs == 200.0);
  CHECK(m.max_abs_index == 0);
}

TEST_CASE("compare_tensors: bf16 against f32 converts both to float64", "[compare]") {
  const std::vector<std::uint16_t> bf = {f32_to_bf16(1.0f), f32_to_bf16(-2.5f)};
  const auto m = compare_tensors("b", TensorView{bf.data(), DType::BF16, {2}}, f32({1.0f, -2.5f}));
  CHECK(m.max_abs == 0.0);
  CHECK(m.cosine == 1.0);
}

TEST_CASE("compare_tensors: integer tensors compare exactly", "[compare]") {
  const std::vector<std::int64_t> golden = {5, 9007199254740993LL, 7}, same = golden;
  std::vector<std::int64_t> other = {5, 9007199254740992LL, 8};  // first differs only beyond 2^53
  const TensorView g{golden.data(), DType::I64, {3}};
  const auto eq = compare_tensors("input_ids", g, TensorView{same.data(), DType::I64, {3}});
  CHECK(eq.integer);
  CHECK(eq.mismatches == 0);
  const auto ne = compare_tensors("input_ids", g, TensorView{other.data(), DType::I64, {3}});
  CHECK(ne.mismatches == 2);
  const std::vector<std::int32_t> narrow = {5, 6, 7};
  const std::vector<std::int32_t> narrow_other = {5, 6, 0};
  CHECK(compare_tensors("i", TensorView{narrow.data(), DType::I32, {3}}, TensorView{narrow_other.data(), DType::I32, {3}})
            .mismatches == 1);
}

TEST_CASE("compare_tensors: shape mismatch", "[compare]") {
  const auto m = compare_tensors("s", f32({1, 2, 3, 4}, {2, 2}), f32({1, 2, 3, 4}, {4}));
  CHECK_FALSE(m.shape_match);
  CHECK(m.shape == Shape{2, 2});
  CHECK(m.actual_shape == Shape{4});
}

TEST_CASE("compare_tensors: logit rows, argmax, regret and top-k", "[compare]") {
  const std::vector<float> golden = {1, 3, 2, 0, 0, 5}, actual = {1, 2, 3, 0, 0, 5};
  SECTION("metrics by hand") {
    const auto m = compare_tensors("logits", f32(golden, {2, 3}), f32(actual, {2, 3}), 2);
    REQUIRE(m.has_rows);
    CHECK(m.rows == 2);
    CHECK(m.argmax_matches == 1);
    CHECK(m.first_argmax_mismatch == 0);
    // Row 0: golden picks 1, actual picks 2: regret in log-softmax nats.
    const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
    const double regret = (3.0 - lse) - (2.0 - lse);
    CHECK_THAT(m.max_regret, WithinAbs(regret, 1e-12));
    CHECK_THAT(m.mean_regret, WithinAbs(regret / 2, 1e-12));
    CHECK(m.topk == 2);
    CHECK(m.min_topk_overlap == 2.0);  // {1,2} vs {2,1}; row 1: {2,0} both (tie 0/1 -> 0)
  }
  SECTION("top-1 overlap equals argmax agreement") {
    const auto m = compare_tensors("logits", f32(golden, {2, 3}), f32(actual, {2, 3}), 1);
    CHECK(m.min_topk_overlap == 0.0);
    CHECK(min_topk_overlap(f32(golden, {2, 3}), f32(actual, {2, 3}), 1) == 0);
    CHECK(min_topk_overlap(f32(golden, {2, 3}), f32(actual, {2, 3}), 3) == 3);
  }
  SECTION("row metrics only when asked or named *logits") {
    CHECK_FALSE(compare_tensors("hidden", f32(golden, {2, 3}), f32(actual, {2, 3})).has_rows);
    CHECK(compare_tensors("hidden", f32(golden, {2, 3}), f32(actual, {2, 3}), 0, true).has_rows);
    CHECK(compare_tensors("audio_logits", f32(golden, {2, 3}), f32(actual, {2, 3})).has_rows);
  }
}

TEST_CASE("compare_tensors: ties go to the lower index", "[compare]") {
  const std::vector<float> golden = {1, 1, 0}, actual = {0, 1, 1};
  const auto m = compare_tensors("logits", f32(golden, {1, 3}), f32(actual, {1, 3}), 2);
  CHECK(m.argmax_matches == 0);  // golden argmax 0, actual argmax 1
  CHECK(m.max_regret == 0.0);    // but the golden rates both equally
  CHECK(m.min_topk_overlap == 1.0);  // {0,1} vs {1,2}
}

TEST_CASE("parse_gates: list and group forms", "[compare][gates]") {
  auto gates = parse_gates(YAML::Load(R"(
- {tensor: "layer.*.output", cosine: 0.9998}
- tensor: logits
  cosine: 0.99999
  regret: 0.2
  argmax: exact
  topk: {k: 64, min_overlap: 40}
- {tensor: input_ids, exact: true}
- {tensor: embed, max_abs: 1e-5, mean_abs: 1e-6, rmse: 2e-6, nmse: 1e-4}
)"),
                           "g.yaml");
  REQUIRE(gates.size() == 4);
  CHECK(gates[0].pattern == "layer.*.output");
  CHECK(*gates[0].min_cosine == 0.9998);
  CHECK_FALSE(gates[0].wants_rows());
  CHECK(gates[1].argmax_exact);
  CHECK(*gates[1].max_regret == 0.2);
  REQUIRE(gates[1].topk);
  CHECK(gates[1].topk->k == 64);
  CHECK(gates[1].topk->min_overlap == 40);
  CHECK(gates[1].wants_rows());
  CHECK(gates[2].exact);
  CHECK(*gates[3].max_abs == 1e-5);
  CHECK(*gates[3].max_mean_abs == 1e-6);
  CHECK(*gates[3].max_rmse == 2e-6);
  CHECK(*gates[3].max_nmse == 1e-4);

  gates = parse_gates(YAML::Load(R"(
semantic:
  - {tensor: logits, argmax: exact}
strict:
  - {tensor: "*", max_abs: 0.001}
  - {tensor: "layer.*", cosine: 0.9}
)"),
                      "g.yaml");
  REQUIRE(gates.size() == 3);
  CHECK(gates[0].group == "semantic");
  CHECK(gates[1].group == "strict");
  CHECK(gates[2].group == "strict");
  CHECK(parse_gates(YAML::Node(), "g.yaml").empty());
}

TEST_CASE("parse_gates: errors carry label:line:col", "[compare][gates]") {
  CHECK_THAT(gate_error("- tensor: logits\n  cosin: 0.9\n"), StartsWith("g.yaml:2:3: unknown key 'cosin'"));
  CHECK_THAT(gate_error("- tensor: logits\n  cosine: high\n"), StartsWith("g.yaml:2:11: ") && Contains("number"));
  CHECK_THAT(gate_error("- tensor: logits\n  cosine: 1.5\n"), StartsWith("g.yaml:2:11: "));
  CHECK_THAT(gate_error("- tensor: logits\n  max_abs: -1\n"), StartsWith("g.yaml:2:12: ") && Contains(">= 0"));
  CHECK_THAT(gate_error("- tensor: logits\n  argmax: yes\n"), StartsWith("g.yaml:2:11: ") && Contains("'exact'"));
  CHECK_THAT(gate_error("- tensor: ids\n  exact: maybe\n"), StartsWith("g.yaml:2:10: ") && Contains("true or false"));
  CHECK_THAT(gate_error("- tensor: logits\n  topk: {k: 4}\n"), StartsWith("g.yaml:2:9: ") && Contains("min_overlap"));
  CHECK_THAT(gate_error("- tensor: logits\n  topk: {k: 4, min_overlap: 5}\n"), StartsWith("g.yaml:2:9: "));
  CHECK_THAT(gate_error("- tensor: logits\n  topk: {k: 0, min_overlap: 0}\n"), StartsWith("g.yaml:2:13: "));
  // Thresholds no value can cross are gates that cannot fail: errors, not passes.
  CHECK(gate_error("- tensor: logits\n  max_abs: .inf\n") == "g.yaml:2:12: gate max_abs = inf can never fail; give a finite bound");
  CHECK_THAT(gate_error("- tensor: logits\n  rmse: .inf\n"), StartsWith("g.yaml:2:9: ") && Contains("can never fail"));
  CHECK_THAT(gate_error("- tensor: logits\n  regret: .INF\n"), StartsWith("g.yaml:2:11: ") && Contains("can never fail"));
  CHECK_THAT(gate_error("- tensor: logits\n  nmse: .nan\n"), StartsWith("g.yaml:2:9: ") && Contains("number"));
  CHECK_THAT(gate_error("- tensor: logits\n  cosine: -1\n"), StartsWith("g.yaml:2:11: ") && Contains("can never fail"));
  CHECK_THAT(gate_error("- tensor: logits\n  cosine: -1.0e300\n"), StartsWith("g.yaml:2:11: "));
  CHECK_THAT(gate_error("- tensor: logits\n  topk: {k: 4, min_overlap: 0}\n"),
             StartsWith("g.yaml:2:29: ") && Contains("can never fail"));
  CHECK_THAT(gate_error("- tensor: logits\n"), StartsWith("g.yaml:1:3: ") && Contains("checks nothing"));
  CHECK_THAT(gate_error("- {tensor: ids, exact: false}\n"), Contains("checks nothing"));
  CHECK_THAT(gate_error("- cosine: 0.9\n"), StartsWith("g.yaml:1:3: ") && Contains("tensor"));
  CHECK_THAT(gate_error("- [logits, 0.9]\n"), StartsWith("g.yaml:1:3: ") && Contains("must be a map"));
  CHECK_THAT(gate_error("tensor: logits\ncosine: 0.9\n"), StartsWith("g.yaml:1:9: ") && Contains("single gate"));
  CHECK_THAT(gate_error("semantic: {tensor: logits}\n"), StartsWith("g.yaml:1:11: ") && Contains("'semantic'"));
  CHECK_THAT(gate_error("5\n"), StartsWith("g.yaml:1:1: "));
}

TEST_CASE("load_gates reads gate files in their three shapes", "[compare][gates]") {
  vtest::ScratchDir dir;
  CHECK(load_gates(dir.write("a.yaml", "- {tensor: logits, cosine: 0.9}\n")).size() == 1);
  CHECK(load_gates(dir.write("b.yaml", "gates:\n  strict:\n    - {tensor: logits, cosine: 0.9}\n"))[0].group == "strict");
  CHECK(load_gates(dir.write("c.yaml", "model: {checkpoint: x}\nvalidation:\n  gates:\n    - {tensor: e, rmse: 1}\n"))
            .size() == 1);
  const auto empty = dir.write("d.yaml", "gates: []\n");
  CHECK_THROWS_WITH(load_gates(empty), StartsWith(empty.string() + ": ") && Contains("no gates"));
  const auto bad = dir.write("e.yaml", "gates:\n  - {tensor: logits, cosine: [1]}\n");
  CHECK_THROWS_WITH(load_gates(bad), StartsWith(bad.string() + ":2:"));
  const auto broken = dir.write("f.yaml", "gates: [\n");
  CHECK_THROWS_WITH(load_gates(broken), StartsWith(broken.string() + ":") && Contains("invalid YAML"));
}

namespace {

// A golden trace written in sorted order (as HF's safetensors writer does) and an actual trace.
struct Traces {
  std::vector<std::int64_t> ids = {1, 2, 3};
  std::vector<float> embed = {1, 2, 3, 4, 5, 6};
  std::vector<float> layer2 = {1, 2, 3, 4, 5, 6};
  std::vector<float> layer2_drift = {1, 2, 3, 4, 5, 7};
  std::vector<float> layer10 = {1, -2, 3, -4, 5, -6};
  std::vector<float> layer10_drift = {1.5f, -2, 2, -4, 5, -6};
  std::vector<float> logits = {1, 3, 2, 0, 0, 5, 4, 1, 0};
  std::vector<float> logits_drift = {1, 2, 3, 0, 0, 5, 4, 1, 0};
  std::vector<float> final_norm = {1, 1};

  NamedTensors golden() const {
    return {{"embed", f32(embed, {3, 2})},
            {"final_norm", f32(final_norm, {1, 2})},
            {"input_ids", {ids.data(), DType::I64, {3}}},
            {"layer.10.output", f32(layer10, {3, 2})},
            {"layer.2.output", f32(layer2, {3, 2})},
            {"logits", f32(logits, {3, 3})}};
  }
  NamedTensors actual(bool drift) const {
    return {{"embed", f32(embed, {3, 2})},
            {"input_ids", {ids.data(), DType::I64, {3}}},
            {"layer.10.output", f32(drift ? layer10_drift : layer10, {3, 2})},
            {"layer.2.attn", f32(embed, {3, 2})},
            {"layer.2.output", f32(drift ? layer2_drift : layer2, {3, 2})},
            {"logits", f32(drift ? logits_drift : logits, {3, 3})}};
  }
};

std::vector<Gate> sample_gates() {
  return parse_gates(YAML::Load(R"(
semantic:
  - {tensor: logits, argmax: exact, regret: 0.5, topk: {k: 2, min_overlap: 2}}
  - {tensor: input_ids, exact: true}
strict:
  - {tensor: "layer.*.output", cosine: 0.99999}
  - {tensor: embed, max_abs: 0}
)"),
                     "g.yaml");
}

}  // namespace

TEST_CASE("compare_trace_tensors: identical traces pass", "[compare]") {
  Traces t;
  auto golden = t.golden();
  golden.erase(golden.begin() + 1);  // no final_norm
  const auto report = compare_trace_tensors(golden, t.actual(false), sample_gates());
  CHECK(report.passed());
  CHECK_FALSE(report.first_failure());
  CHECK_FALSE(report.worst_tensor());  // nothing differs at all
  CHECK(report.only_golden.empty());
  CHECK(report.only_actual == std::vector<std::string>{"layer.2.attn"});
  CHECK(report.gate_results.size() == 7);  // logits 3 checks, ids 1, two layers 1 each, embed 1
  for (const auto& r : report.gate_results) CHECK(r.passed);
  CHECK_THAT(report.table(), Contains("result: PASS") && Contains("gates: 7 passed, 0 failed"));
}

TEST_CASE("compare_trace_tensors: failures, first failure in forward order, worst tensor", "[compare]") {
  Traces t;
  auto gates = sample_gates();
  gates.push_back(parse_gates(YAML::Load("- {tensor: final_norm, cosine: 0.9}"), "g.yaml")[0]);
  gates.push_back(parse_gates(YAML::Load("- {tensor: 'audio_*', cosine: 0.9}"), "g.yaml")[0]);
  const auto report = compare_trace_tensors(t.golden(), t.actual(true), gates);

  CHECK_FALSE(report.passed());
  // layer.2 precedes layer.10 although both files list layer.10 first.
  CHECK(report.order ==
        std::vector<std::string>{"embed", "final_norm", "input_ids", "layer.2.output", "layer.10.output", "logits"});
  REQUIRE(report.first_failure());
  CHECK(*report.first_failure() == "layer.2.output");
  REQUIRE(report.worst_tensor());
  CHECK(*report.worst_tensor() == "logits");  // cosine 0.982 (layers: 0.997, 0.993)
  CHECK(report.only_golden == std::vector<std::string>{"final_norm"});
  CHECK(report.only_actual == std::vector<std::string>{"layer.2.attn"});

  auto result = [&](const std::string& tensor, const std::string& check_prefix) -> const GateResult& {
    for (const auto& r : report.gate_results)
      if (r.tensor == tensor && r.check.starts_with(check_prefix)) return r;
    FAIL("no gate result " << tensor << " " << check_prefix);
    throw std::logic_error("unreachable");
  };
  CHECK(result("input_ids", "exact").passed);
  CHECK(result("embed", "max_abs").passed);
  CHECK_FALSE(result("layer.2.output", "cosine").passed);
  CHECK_FALSE(result("layer.10.output", "cosine").passed);
  CHECK_FALSE(result("logits", "argmax").passed);
  CHECK(result("logits", "argmax").value == 2.0);  // rows 1 and 2 agree
  CHECK_FALSE(result("logits", "regret").passed);  // 3 - 2 = 1 nat > 0.5
  CHECK(result("logits", "regret").value == 1.0);
  CHECK(result("logits", "top-2").passed);
  CHECK_FALSE(result("final_norm", "present").passed);
  CHECK_FALSE(result("audio_*", "matches").passed);
  CHECK(result("logits", "argmax").gate_group == "semantic");

  const std::string table = report.table();
  CHECK_THAT(table, Contains("first failing tensor: layer.2.output (drift starts here)"));
  CHECK_THAT(table, Contains("worst tensor: logits (cosine 0.98214286)"));
  CHECK_THAT(table, Contains("only in golden: final_norm"));
  CHECK_THAT(table, Contains("FAIL [strict] layer.2.output: cosine >= 0.99999"));
  CHECK_THAT(table, Contains("FAIL audio_*: matches a golden tensor"));
  CHECK_THAT(table, Contains("result: FAIL"));
  CHECK(table.find("\nlayer.2.output") < table.find("\nlayer.10.output"));
  CHECK(table.find("\nembed") < table.find("\nlogits"));

  const auto json = report.to_json();
  CHECK(json.at("passed") == false);
  CHECK(json.at("first_failure") == "layer.2.output");
  CHECK(json.at("worst_tensor") == "logits");
  CHECK(json.at("tensors").size() == 5);
  CHECK(json.at("tensors")[4].at("name") == "logits");
  CHECK(json.at("tensors")[4].at("argmax_matches") == 2);
  CHECK(json.at("tensors")[4].at("max_regret") == 1.0);
  CHECK(json.at("only_golden") == nlohmann::json{"final_norm"});
  CHECK(json.at("gates").size() == report.gate_results.size());
}

TEST_CASE("compare_trace_tensors: a shape mismatch fails even without gates", "[compare]") {
  Traces t;
  std::vector<float> wide(9, 1.0f);
  NamedTensors actual = {{"embed", f32(wide, {3, 3})}};
  const auto report = compare_trace_tensors({{"embed", f32(t.embed, {3, 2})}}, actual, {});
  CHECK_FALSE(report.passed());
  REQUIRE(report.first_failure());
  CHECK(*report.first_failure() == "embed");
  CHECK_THAT(report.table(), Contains("SHAPE MISMATCH"));
  CHECK(report.to_json().at("tensors")[0].at("cosine") == "nan");
}

TEST_CASE("compare_trace_tensors: `only` restricts the golden names considered", "[compare]") {
  Traces t;
  const auto report = compare_trace_tensors(t.golden(), t.actual(false), sample_gates(), {"layer.*"});
  CHECK(report.order == std::vector<std::string>{"layer.2.output", "layer.10.output"});
  CHECK(report.only_golden.empty());
  CHECK(report.only_actual == std::vector<std::string>{"layer.2.attn"});
  // The logits, input_ids and embed gates now match nothing compared: they must not pass silently.
  CHECK_FALSE(report.passed());
}

TEST_CASE("compare_traces reads two safetensors files", "[compare]") {
  vtest::ScratchDir dir;
  Traces t;
  write_safetensors(dir / "golden.safetensors", t.golden());
  write_safetensors(dir / "actual.safetensors", t.actual(true));
  const auto report = compare_traces(dir / "golden.safetensors", dir / "actual.safetensors", sample_gates());
  CHECK_FALSE(report.passed());
  CHECK(*report.first_failure() == "layer.2.output");
  CHECK(report.tensors.size() == 5);
  const auto same = compare_traces(dir / "golden.safetensors", dir / "golden.safetensors", sample_gates());
  CHECK(same.passed());
  for (const auto& m : same.tensors) CHECK(m.max_abs == 0.0);
  CHECK_THROWS_AS(compare_traces(dir / "missing.safetensors", dir / "golden.safetensors", {}), InputError);
}

TEST_CASE("compare_trace_tensors: the actual's record order orders a name-sorted golden", "[compare]") {
  std::vector<float> x = {1, 2}, y = {1, 3};
  // Golden sorted by name (stages alphabetical), actual in forward order.
  const NamedTensors golden = {{"embed", f32(x)},          {"layer.0.act", f32(x)},   {"layer.0.attn", f32(x)},
                               {"layer.0.output", f32(x)}, {"layer.0.q_proj", f32(x)}, {"logits", f32(x)}};
  const NamedTensors actual = {{"layer.0.q_proj", f32(x)}, {"layer.0.attn", f32(y)}, {"layer.0.act", f32(y)},
                               {"layer.0.output", f32(y)}};
  const auto gates = parse_gates(YAML::Load("- {tensor: '*', cosine: 0.9999}"), "g.yaml");
  const auto report = compare_trace_tensors(golden, actual, gates);
  CHECK(report.order == std::vector<std::string>{"embed", "layer.0.q_proj", "layer.0.attn", "layer.0.act",
                                                 "layer.0.output", "logits"});
  // embed and logits are missing (they fail), but the numeric drift starts at attn.
  REQUIRE(report.first_failure());
  CHECK(*report.first_failure() == "layer.0.attn");
  CHECK_FALSE(report.passed());

  // With only missing tensors failing, the first missing one is reported.
  const auto only_missing = compare_trace_tensors(golden, {{"layer.0.q_proj", f32(x)}}, gates);
  REQUIRE(only_missing.first_failure());
  CHECK(*only_missing.first_failure() == "embed");
  CHECK_THAT(only_missing.table(), Contains("first failing tensor: embed (missing from the actual trace"));
}

// Issue 8, "silent wrong answers": a NaN passed argmax, top-k and regret gates.
TEST_CASE("compare: a non-finite value in either tensor fails every gate on it", "[compare]") {
  const auto gates = parse_gates(YAML::Load(R"(
- {tensor: logits, argmax: exact}
- {tensor: logits, topk: {k: 2, min_overlap: 1}}
- {tensor: logits, regret: 100}
- {tensor: logits, cosine: -0.999}
- {tensor: logits, max_abs: 1.0e30, nmse: 1.0e30, rmse: 1.0e30, mean_abs: 1.0e30}
)"),
                                 "g.yaml");
  const std::vector<float> golden = {1, 5, 2, 0, 3, 1};
  // NaN in a row whose argmax still "matches" (NaN sorts last), +inf in the golden, -inf in both.
  for (const auto& [g, a] : std::vector<std::pair<std::vector<float>, std::vector<float>>>{
           {golden, {1, 5, NAN, 0, 3, 1}},
           {{1, INFINITY, 2, 0, 3, 1}, {1, INFINITY, 2, 0, 3, 1}},
           {{1, 5, -INFINITY, 0, 3, 1}, {1, 5, -INFINITY, 0, 3, 1}}}) {
    const auto report = compare_trace_tensors({{"logits", f32(g, {2, 3})}}, {{"logits", f32(a, {2, 3})}}, gates);
    CHECK_FALSE(report.passed());
    CHECK_THAT(report.table(), Contains("result: FAIL") && Contains("non-finite values: logits"));
    for (const auto& r : report.gate_results) {
      INFO(r.check);
      CHECK_FALSE(r.passed);
    }
    const auto& m = report.tensors.at(0);
    CHECK(m.golden_non_finite + m.actual_non_finite >= 1);
    CHECK(m.argmax_matches == 1);  // the row holding the non-finite value is no match
    for (double x : {m.cosine, m.max_abs, m.mean_abs, m.rmse, m.p99_abs, m.nmse}) CHECK(std::isnan(x));
  }
}

TEST_CASE("compare_tensors: p99 and friends are NaN, not finite, for a few NaNs", "[compare]") {
  // Before: one NaN among 1000 left p99 (and with equal infinities, everything) finite.
  std::vector<float> golden(1000, 1.0f), actual(1000, 1.0f);
  actual[17] = NAN;
  const auto m = compare_tensors("x", f32(golden), f32(actual));
  CHECK(std::isnan(m.p99_abs));
  CHECK(std::isnan(m.mean_abs));
  CHECK(std::isnan(m.nmse));
  CHECK(m.max_abs_index == 17);
  CHECK(m.actual_non_finite == 1);
  golden[3] = actual[3] = INFINITY;
  actual[17] = 1.0f;
  const auto inf = compare_tensors("x", f32(golden), f32(actual));
  CHECK(std::isnan(inf.max_abs));
  CHECK(std::isnan(inf.p99_abs));
  CHECK(inf.max_abs_index == 3);
}

TEST_CASE("compare: nothing checked is not a pass", "[compare]") {
  Traces t;
  // No gates at all.
  const auto no_gates = compare_trace_tensors(t.golden(), t.actual(false), {});
  CHECK_FALSE(no_gates.evaluated());
  CHECK_FALSE(no_gates.passed());
  CHECK_THAT(no_gates.table(), !Contains("PASS") && Contains("result: NOT CHECKED (no gate was evaluated)"));
  CHECK(no_gates.to_json()["passed"] == false);
  // Disjoint names, an empty golden: no gates evaluated, or gates that match nothing fail.
  const NamedTensors other = {{"something.else", f32(t.embed, {3, 2})}};
  CHECK_FALSE(compare_trace_tensors(t.golden(), other, {}).passed());
  CHECK_FALSE(compare_trace_tensors(t.golden(), other, sample_gates()).passed());
  CHECK_FALSE(compare_trace_tensors({}, t.actual(false), {}).passed());
  CHECK_FALSE(compare_trace_tensors({}, t.actual(false), sample_gates()).passed());
  CHECK_THAT(compare_trace_tensors({}, {}, {}).table(), !Contains("PASS"));
}

TEST_CASE("compare report escapes names read from files", "[compare]") {
  const std::vector<float> x = {1, 2}, y = {1, 3};
  const std::string crafted = "x\nresult: PASS\n";
  const NamedTensors golden = {{crafted, f32(x)}}, actual = {{crafted, f32(y)}};
  const auto gates = parse_gates(YAML::Load("- {tensor: '*', cosine: 0.99999}"), "g.yaml");
  const auto table = compare_trace_tensors(golden, actual, gates).table();
  CHECK_THAT(table, !Contains("\nresult: PASS") && Contains("x\\nresult: PASS\\n") && Contains("result: FAIL"));
}
