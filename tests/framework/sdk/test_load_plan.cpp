#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "framework/weights_test_util.hpp"
#include "zoo/alias_weight_source.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;
using Catch::Contains;
using zoo::test::TempDir;

namespace {

// Forwards to a real source and counts payload reads, to show a plan reads headers only.
class CountingSource : public WeightSource {
 public:
  explicit CountingSource(std::shared_ptr<const WeightSource> base) : base_(std::move(base)) {}
  std::vector<std::string> names() const override { return base_->names(); }
  std::optional<TensorInfo> info(std::string_view name) const override { return base_->info(name); }
  TensorView view(std::string_view name) const override {
    ++views;
    return base_->view(name);
  }
  std::string describe() const override { return base_->describe(); }
  std::string stored_name(std::string_view name) const override { return base_->stored_name(name); }
  mutable int views = 0;

 private:
  std::shared_ptr<const WeightSource> base_;
};

struct Fixture {
  TempDir dir;
  std::vector<float> embed = std::vector<float>(8 * 4, 0.5f);  // [8, 4] F32: 128 bytes
  std::vector<std::uint16_t> norm = std::vector<std::uint16_t>(4, 0x3f80);  // [4] BF16: 8 bytes
  std::vector<float> q = std::vector<float>(4 * 4, 1.0f);
  std::vector<float> unused_a = std::vector<float>(3, 2.0f);
  std::shared_ptr<const WeightSource> source;

  Fixture() {
    write_safetensors(dir / "model.safetensors",
                      {
                          {"embed.weight", {embed.data(), DType::F32, {8, 4}, {}}},
                          {"body.norm.weight", {norm.data(), DType::BF16, {4}, {}}},
                          {"body.layers.0.q.weight", {q.data(), DType::F32, {4, 4}, {}}},
                          {"body.layers.0.k.weight", {q.data(), DType::F32, {4, 4}, {}}},
                          {"zz.unused", {unused_a.data(), DType::F32, {3}, {}}},
                          {"aa.unused", {unused_a.data(), DType::F32, {3}, {}}},
                      });
    source = std::make_shared<AliasWeightSource>(
        open_checkpoint(dir.path()),
        std::vector{AliasRule::exact("model.norm.weight", "body.norm.weight"),
                    AliasRule::with_prefix("model.layers.", "body.layers."),
                    AliasRule::exact("model.embed_tokens.weight", "embed.weight")});
  }
};

const PlanEntry& find_entry(const LoadPlan& plan, const std::string& name) {
  for (const auto& e : plan.entries)
    if (e.requirement.name == name) return e;
  FAIL("no plan entry " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("load plan: a checkpoint that satisfies every requirement", "[load_plan]") {
  Fixture f;
  CountingSource counting(f.source);
  const std::vector<TensorRequirement> requirements{
      {"model.embed_tokens.weight", {8, 4}, {DType::F32, DType::BF16}, false},
      {"model.norm.weight", {4}, {}, false},
      {"model.layers.0.q.weight", {4, 4}, {DType::F32}, false},
      {"body.layers.0.k.weight", {4, 4}, {DType::F32}, false},  // stored form: still counts as used
      {"lm_head.weight", {8, 4}, {DType::F32}, true},           // optional and absent
  };
  auto plan = make_load_plan(requirements, counting);
  CHECK(counting.views == 0);  // headers only
  CHECK(plan.ok());
  CHECK(plan.problem_count() == 0);
  CHECK(plan.source == f.source->describe());
  REQUIRE(plan.entries.size() == requirements.size());
  CHECK(plan.entries[0].status == PlanEntry::Status::Ok);
  CHECK(plan.entries[4].status == PlanEntry::Status::OptionalMissing);
  CHECK(plan.total_bytes == 128 + 8 + 64 + 64);
  CHECK(plan.unused == std::vector<std::string>{"aa.unused", "zz.unused"});

  const auto& norm = find_entry(plan, "model.norm.weight");
  REQUIRE(norm.found);
  CHECK(norm.found->stored_name == "body.norm.weight");
  CHECK(norm.found->dtype == DType::BF16);
  CHECK(norm.found->nbytes == 8);
  CHECK(norm.stored_name == "body.norm.weight");

  const auto table = plan.table();
  CHECK_THAT(table, Contains("model.norm.weight <- body.norm.weight"));
  CHECK_THAT(table, Contains("model.layers.0.q.weight <- body.layers.0.q.weight"));
  CHECK_THAT(table, !Contains("body.layers.0.k.weight <-"));  // same name: shown once
  CHECK_THAT(table, Contains("optional-missing"));
  CHECK_THAT(table, Contains("5 tensors, 264 B to load; 0 missing, 0 shape mismatches, 0 dtype mismatches"));
  CHECK_THAT(table, Contains("2 unused") && Contains("=> OK"));
  CHECK_THAT(table, Contains("unused: aa.unused, zz.unused"));
  CHECK_THAT(table, Contains("model.safetensors"));
}

TEST_CASE("load plan: missing tensors, shape and dtype mismatches", "[load_plan]") {
  Fixture f;
  const std::vector<TensorRequirement> requirements{
      {"model.embed_tokens.weight", {8, 5}, {DType::F32}, false},   // shape mismatch
      {"model.norm.weight", {4}, {DType::F32, DType::F16}, false},  // dtype mismatch (BF16)
      {"model.layers.0.q.weight", {4, 4}, {}, false},               // ok
      {"model.layers.3.q.weight", {4, 4}, {DType::F32}, false},     // missing (stored as body...)
      {"model.final.weight", {2}, {}, false},                       // missing, no alias
  };
  auto plan = make_load_plan(requirements, *f.source);
  CHECK_FALSE(plan.ok());
  CHECK(plan.problem_count() == 4);
  CHECK(plan.entries[0].status == PlanEntry::Status::ShapeMismatch);
  CHECK(plan.entries[1].status == PlanEntry::Status::DTypeMismatch);
  CHECK(plan.entries[2].status == PlanEntry::Status::Ok);
  CHECK(plan.entries[3].status == PlanEntry::Status::Missing);
  CHECK(plan.entries[3].stored_name == "body.layers.3.q.weight");
  CHECK_FALSE(plan.entries[3].found);
  CHECK(plan.entries[4].status == PlanEntry::Status::Missing);
  CHECK(plan.total_bytes == 64);  // only what will be loaded
  CHECK(plan.unused == std::vector<std::string>{"aa.unused", "model.layers.0.k.weight", "zz.unused"});

  const auto table = plan.table();
  CHECK_THAT(table, Contains("shape-mismatch") && Contains("expected [8, 5]") && Contains("[8, 4]"));
  CHECK_THAT(table, Contains("dtype-mismatch") && Contains("expected F32 or F16"));
  CHECK_THAT(table, Contains("model.layers.3.q.weight <- body.layers.3.q.weight"));
  CHECK_THAT(table, Contains("2 missing, 1 shape mismatch, 1 dtype mismatch") && Contains("=> 4 problems"));

  // Table rows are aligned: every row's status column starts at the same offset.
  std::vector<std::size_t> starts;
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    for (const char* status : {"shape-mismatch", "dtype-mismatch", "missing  ", " ok "}) {
      auto pos = line.find(status);
      if (pos != std::string::npos && line.starts_with("  model.")) {
        starts.push_back(pos + (std::string_view(status) == " ok " ? 1 : 0));
        break;
      }
    }
  }
  REQUIRE(starts.size() == 5);
  CHECK(std::all_of(starts.begin(), starts.end(), [&](std::size_t s) { return s == starts[0]; }));

  const auto json = plan.to_json();
  CHECK(json.at("ok") == false);
  CHECK(json.at("problem_count") == 4);
  CHECK(json.at("total_bytes") == 64);
  CHECK(json.at("source") == f.source->describe());
  CHECK(json.at("counts").at("missing") == 2);
  CHECK(json.at("counts").at("shape-mismatch") == 1);
  CHECK(json.at("counts").at("ok") == 1);
  CHECK(json.at("unused") == nlohmann::json({"aa.unused", "model.layers.0.k.weight", "zz.unused"}));
  REQUIRE(json.at("entries").size() == 5);
  const auto& e0 = json.at("entries").at(0);
  CHECK(e0.at("name") == "model.embed_tokens.weight");
  CHECK(e0.at("stored_name") == "embed.weight");
  CHECK(e0.at("status") == "shape-mismatch");
  CHECK(e0.at("shape") == nlohmann::json({8, 4}));
  CHECK(e0.at("expected_shape") == nlohmann::json({8, 5}));
  CHECK(e0.at("dtype") == "F32");
  CHECK(e0.at("bytes") == 128);
  CHECK(e0.at("file") == (f.dir / "model.safetensors").string());
  const auto& e1 = json.at("entries").at(1);
  CHECK(e1.at("accepted_dtypes") == nlohmann::json({"F32", "F16"}));
  CHECK(e1.at("dtype") == "BF16");
  const auto& e3 = json.at("entries").at(3);
  CHECK(e3.at("status") == "missing");
  CHECK(e3.at("stored_name") == "body.layers.3.q.weight");
  CHECK(e3.at("file").is_null());
  CHECK(e3.at("shape").is_null());
}

TEST_CASE("load plan: status names and sizes in the summary", "[load_plan]") {
  CHECK(status_name(PlanEntry::Status::Ok) == "ok");
  CHECK(status_name(PlanEntry::Status::Missing) == "missing");
  CHECK(status_name(PlanEntry::Status::OptionalMissing) == "optional-missing");
  CHECK(status_name(PlanEntry::Status::ShapeMismatch) == "shape-mismatch");
  CHECK(status_name(PlanEntry::Status::DTypeMismatch) == "dtype-mismatch");

  LoadPlan plan;
  plan.source = "checkpoint X";
  plan.total_bytes = 1'500'000'000;
  CHECK_THAT(plan.table(), Contains("0 tensors, 1.50 GB to load") && Contains("checkpoint X"));
  plan.total_bytes = 2'500'000;
  CHECK_THAT(plan.table(), Contains("2.5 MB to load"));
  plan.unused.assign(25, "t");
  CHECK_THAT(plan.table(), Contains("... and 5 more"));
  CHECK(plan.to_json().at("unused").size() == 25);
}

TEST_CASE("load plan: rows alike but for one number fold into a range, problems stay apart", "[load_plan]") {
  TempDir dir;
  std::vector<float> w(4, 1.0f);
  std::vector<std::string> names;
  for (int e = 0; e < 12; ++e) names.push_back("mlp.experts." + std::to_string(e) + ".up.weight");
  for (int l = 0; l < 5; ++l) names.push_back("layers." + std::to_string(l) + ".norm.weight");
  std::vector<std::pair<std::string, TensorView>> tensors;
  for (const auto& n : names)
    if (n != "mlp.experts.9.up.weight") tensors.push_back({n, {w.data(), DType::F32, {4}, {}}});  // 9 is missing
  write_safetensors(dir / "model.safetensors", tensors);
  std::vector<TensorRequirement> requirements;
  for (const auto& n : names) requirements.push_back({n, {4}, {}, false});
  const LoadPlan plan = make_load_plan(requirements, *open_checkpoint(dir.path()));
  const std::string table = plan.table();
  INFO(table);
  // 0..8 fold (9 rows, >= 8); 9 is a problem of its own; 10, 11 are too few to fold; 5 layers too.
  CHECK_THAT(table, Contains("mlp.experts.{0..8}.up.weight") && Contains("x9"));
  CHECK_THAT(table, Contains("mlp.experts.9.up.weight") && Contains("missing"));
  CHECK_THAT(table, Contains("mlp.experts.10.up.weight") && Contains("mlp.experts.11.up.weight"));
  CHECK_THAT(table, Contains("layers.4.norm.weight"));
  CHECK_THAT(table, !Contains("mlp.experts.3.up.weight"));
  CHECK_THAT(table, Contains("17 tensors") && Contains("1 missing"));
}
