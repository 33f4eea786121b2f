#include <catch2/catch.hpp>

#include <cstring>

#include "framework/weights_test_util.hpp"
#include "zoo/alias_weight_source.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/sliced_weight_source.hpp"
#include "zoo/weight_source.hpp"

using namespace zoo;
using Catch::Contains;
using Catch::StartsWith;
using zoo::test::input_error;
using zoo::test::TempDir;

namespace {

// Values differ per tensor so a view of the wrong tensor cannot pass.
struct Tensors {
  std::vector<std::pair<std::string, std::vector<float>>> values;
  std::vector<std::pair<std::string, TensorView>> views() const {
    std::vector<std::pair<std::string, TensorView>> out;
    for (const auto& [name, v] : values)
      out.emplace_back(name, TensorView{v.data(), DType::F32, {static_cast<std::int64_t>(v.size())}, {}});
    return out;
  }
};

Tensors make_tensors(const std::vector<std::string>& names) {
  Tensors t;
  float next = 1;
  for (const auto& name : names) {
    std::vector<float> v(names.size() % 3 + 2);
    for (auto& x : v) x = next++;
    t.values.emplace_back(name, std::move(v));
  }
  return t;
}

std::vector<float> values_of(const WeightSource& source, const std::string& name) { return to_f32(source.view(name)); }

// shard 1 holds a, b; shard 2 holds c; index maps them.
void write_sharded(const TempDir& dir, const Tensors& t) {
  auto views = t.views();
  write_safetensors(dir / "model-00001-of-00002.safetensors", {views[0], views[1]}, {{"format", "pt"}, {"shard", "1"}});
  write_safetensors(dir / "model-00002-of-00002.safetensors", {views[2]}, {{"shard", "2"}});
  zoo::test::write_file(dir / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 1234},
    "weight_map": {
      "a": "model-00001-of-00002.safetensors",
      "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"
    }})");
}

}  // namespace

TEST_CASE("checkpoint: a directory with model.safetensors", "[weights]") {
  TempDir dir;
  auto t = make_tensors({"model.norm.weight", "model.embed_tokens.weight", "lm_head.weight"});
  write_safetensors(dir / "model.safetensors", t.views(), {{"format", "pt"}});
  auto source = open_checkpoint(dir.path());

  CHECK(source->describe() == "checkpoint " + dir.path().string());
  CHECK(source->names() == std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"});
  for (const auto& [name, v] : t.values) {
    INFO(name);
    CHECK(values_of(*source, name) == v);
    auto info = source->info(name);
    REQUIRE(info);
    CHECK(info->stored_name == name);
    CHECK(info->file == (dir / "model.safetensors").string());
    CHECK(info->dtype == DType::F32);
    CHECK(info->shape == Shape{static_cast<std::int64_t>(v.size())});
    CHECK(info->nbytes == v.size() * 4);
    CHECK(source->stored_name(name) == name);
  }
  CHECK(source->metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK_FALSE(source->info("nope"));
  CHECK_FALSE(source->contains("nope"));
  CHECK(input_error([&] { source->view("nope"); }) == "nope not found in checkpoint " + dir.path().string());

  // The same file opened directly.
  auto single = open_checkpoint(dir / "model.safetensors");
  CHECK(single->describe() == "checkpoint " + (dir / "model.safetensors").string());
  CHECK(single->names() == source->names());
}

TEST_CASE("checkpoint: sharded round trip through an index", "[weights]") {
  TempDir dir;
  auto t = make_tensors({"a", "b", "c"});
  write_sharded(dir, t);

  for (const auto& path : {dir.path(), dir / "model.safetensors.index.json"}) {
    INFO(path.string());
    auto source = open_checkpoint(path);
    CHECK(source->describe() == "checkpoint " + path.string());
    CHECK(source->names() == std::vector<std::string>{"a", "b", "c"});
    for (const auto& [name, v] : t.values) CHECK(values_of(*source, name) == v);
    CHECK(source->info("a")->file == (dir / "model-00001-of-00002.safetensors").string());
    CHECK(source->info("c")->file == (dir / "model-00002-of-00002.safetensors").string());
    // __metadata__ merged over the shards (the index's own "metadata" is not a file's).
    CHECK(source->metadata() ==
          std::map<std::string, std::string>{{"format", "pt"}, {"shard", "2"}});
    // a and b come from one mapping of shard 1: their views are as far apart as in the file.
    auto shard = SafetensorsFile::open(dir / "model-00001-of-00002.safetensors");
    const auto file_gap = static_cast<std::ptrdiff_t>(shard->find("b")->begin - shard->find("a")->begin);
    const auto view_gap = static_cast<const std::byte*>(source->view("b").data) -
                          static_cast<const std::byte*>(source->view("a").data);
    CHECK(view_gap == file_gap);
  }
}

TEST_CASE("checkpoint: broken checkpoints are InputErrors naming the path", "[weights]") {
  TempDir dir;
  auto t = make_tensors({"a", "b", "c"});

  SECTION("directory with neither file") {
    zoo::test::write_file(dir / "config.json", "{}");
    CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }),
               StartsWith(dir.path().string() + ": ") && Contains("model.safetensors") &&
                   Contains("model.safetensors.index.json"));
  }
  SECTION("path that does not exist") {
    CHECK_THAT(input_error([&] { open_checkpoint(dir / "nothing"); }),
               StartsWith((dir / "nothing").string() + ": no such file"));
  }
  SECTION("index naming a missing shard") {
    write_sharded(dir, t);
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    const auto index = (dir / "model.safetensors.index.json").string();
    CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }),
               StartsWith(index + ": ") && Contains("shard 'model-00002-of-00002.safetensors'") &&
                   Contains("not found"));
  }
  SECTION("weight_map entry whose tensor is not in its shard") {
    write_sharded(dir, t);
    zoo::test::write_file(dir / "model.safetensors.index.json",
                          R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                             "c": "model-00001-of-00002.safetensors"}})");
    CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }),
               StartsWith((dir / "model.safetensors.index.json").string() + ": ") && Contains("'c'") &&
                   Contains("does not contain it"));
  }
  SECTION("broken index files") {
    const auto index = dir / "model.safetensors.index.json";
    zoo::test::write_file(index, "{\"weight_map\": ");
    CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }), StartsWith(index.string() + ": not valid JSON"));
    zoo::test::write_file(index, "[]");
    CHECK_THAT(input_error([&] { open_checkpoint(index); }), Contains("must be a JSON object"));
    zoo::test::write_file(index, "{}");
    CHECK_THAT(input_error([&] { open_checkpoint(index); }), Contains("no \"weight_map\""));
    // A model's config.json given for its checkpoint: named as what it is.
    const auto config = dir / "config.json";
    zoo::test::write_file(config, R"({"model_type": "tiny", "hidden_size": 8})");
    CHECK_THAT(input_error([&] { open_checkpoint(config); }),
               StartsWith(config.string() + ": is a model config (it has \"model_type\"), not a checkpoint") &&
                   Contains("a .safetensors file or a .safetensors.index.json"));
    zoo::test::write_file(index, R"({"weight_map": []})");
    CHECK_THAT(input_error([&] { open_checkpoint(index); }), Contains("\"weight_map\" must be an object"));
    zoo::test::write_file(index, R"({"weight_map": {"a": 3}})");
    CHECK_THAT(input_error([&] { open_checkpoint(index); }), Contains("entry for 'a' must be a file name"));
  }
  SECTION("a broken shard reports the shard's path") {
    write_sharded(dir, t);
    zoo::test::write_file(dir / "model-00002-of-00002.safetensors", "garbage!garbage");
    CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }),
               StartsWith((dir / "model-00002-of-00002.safetensors").string() + ": "));
  }
}

TEST_CASE("alias source: rules, names, lookups and views", "[weights][alias]") {
  TempDir dir;
  auto t = make_tensors({"tied.embedding.text_embedding.weight", "body.layers.0.mlp.weight", "body.layers.1.mlp.weight",
                         "body.norm.weight", "codec.encoder.weight", "codec.decoder.weight", "extra.weight"});
  write_safetensors(dir / "model.safetensors", t.views(), {{"format", "pt"}});
  auto base = open_checkpoint(dir.path());
  AliasWeightSource alias(base, {
                                    AliasRule::exact("model.embed_tokens.weight", "tied.embedding.text_embedding.weight"),
                                    AliasRule::exact("lm_head.weight", "tied.embedding.text_embedding.weight"),
                                    AliasRule::with_prefix("model.layers.", "body.layers."),
                                    AliasRule::exact("model.norm.weight", "body.norm.weight"),
                                    AliasRule::drop("codec.", true),
                                    AliasRule::drop("extra.weight", false),
                                });

  SECTION("factories fill the documented fields") {
    const auto& r = alias.rules();
    CHECK((r[0].kind == AliasRule::Kind::Exact && r[0].requested == "model.embed_tokens.weight" &&
           r[0].stored == "tied.embedding.text_embedding.weight"));
    CHECK((r[2].kind == AliasRule::Kind::Prefix && r[2].requested == "model.layers." && r[2].stored == "body.layers."));
    CHECK((r[4].kind == AliasRule::Kind::Drop && r[4].requested.empty() && r[4].stored == "codec." && r[4].prefix));
    CHECK((r[5].kind == AliasRule::Kind::Drop && !r[5].prefix));
    CHECK(&alias.base() == base.get());
  }
  SECTION("names() lists requested names only: stored forms mapped back, dropped hidden, tied ones twice") {
    CHECK(alias.names() == std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                                    "model.layers.0.mlp.weight", "model.layers.1.mlp.weight",
                                                    "model.norm.weight"});
  }
  SECTION("lookups go to the stored tensor and views are the base's views") {
    CHECK(alias.stored_name("model.norm.weight") == "body.norm.weight");
    CHECK(alias.stored_name("model.layers.1.mlp.weight") == "body.layers.1.mlp.weight");
    CHECK(alias.stored_name("unrelated") == "unrelated");
    auto info = alias.info("model.layers.1.mlp.weight");
    REQUIRE(info);
    CHECK(info->stored_name == "body.layers.1.mlp.weight");
    CHECK(info->file == (dir / "model.safetensors").string());
    CHECK(info->shape == base->info("body.layers.1.mlp.weight")->shape);
    for (const auto& name : alias.names()) {
      INFO(name);
      CHECK(alias.view(name).data == base->view(alias.stored_name(name)).data);  // nothing copied
    }
    CHECK(alias.view("lm_head.weight").data == alias.view("model.embed_tokens.weight").data);
    CHECK(to_f32(alias.view("model.norm.weight")) == to_f32(base->view("body.norm.weight")));
    CHECK(alias.metadata() == base->metadata());
  }
  SECTION("idempotent: an already-stored name passes through") {
    CHECK(alias.stored_name("body.norm.weight") == "body.norm.weight");
    REQUIRE(alias.info("body.norm.weight"));
    CHECK(alias.view("body.norm.weight").data == alias.view("model.norm.weight").data);
  }
  SECTION("dropped tensors are invisible") {
    CHECK_FALSE(alias.contains("codec.encoder.weight"));
    CHECK_FALSE(alias.contains("extra.weight"));
    CHECK(base->contains("extra.weight"));
    CHECK_THAT(input_error([&] { alias.view("codec.decoder.weight"); }),
               StartsWith("codec.decoder.weight not found in checkpoint " + dir.path().string()) &&
                   Contains("drop rule"));
  }
  SECTION("a missing lookup reports both names") {
    CHECK_THAT(input_error([&] { alias.view("model.layers.7.mlp.weight"); }),
               Catch::Equals("model.layers.7.mlp.weight (stored as body.layers.7.mlp.weight) not found in checkpoint " +
                             dir.path().string()));
    CHECK(input_error([&] { alias.view("nothing"); }) == "nothing not found in checkpoint " + dir.path().string());
    CHECK_FALSE(alias.info("model.layers.7.mlp.weight"));
  }
  SECTION("describe() names the base") { CHECK_THAT(alias.describe(), StartsWith(base->describe())); }
}

TEST_CASE("alias source: the first matching rule wins and shadowed tensors are not listed", "[weights][alias]") {
  TempDir dir;
  auto t = make_tensors({"new.x", "old.x", "old.y", "model.a"});
  write_safetensors(dir / "model.safetensors", t.views());
  auto base = open_checkpoint(dir.path());
  AliasWeightSource alias(base, {
                                    AliasRule::exact("model.x", "new.x"),
                                    AliasRule::with_prefix("model.", "old."),
                                });
  CHECK(alias.stored_name("model.x") == "new.x");  // exact rule listed first
  CHECK(alias.stored_name("model.y") == "old.y");
  // "old.x" is reachable under no requested name but its own; "model.a" is shadowed by the
  // prefix rule (asking for it reaches "old.a"), so it cannot be listed under any name.
  CHECK(alias.names() == std::vector<std::string>{"model.x", "model.y", "old.x"});
  CHECK(alias.view("old.x").data == base->view("old.x").data);
  CHECK_FALSE(alias.contains("model.a"));

  // Aliases stack: an alias over an alias reports the deepest stored name.
  auto inner = std::make_shared<AliasWeightSource>(base, std::vector{AliasRule::with_prefix("mid.", "old.")});
  AliasWeightSource outer(inner, {AliasRule::with_prefix("top.", "mid.")});
  REQUIRE(outer.info("top.y"));
  CHECK(outer.info("top.y")->stored_name == "old.y");
  CHECK(outer.view("top.y").data == base->view("old.y").data);
}

TEST_CASE("sliced source: fused tensors read as their row ranges, without a copy", "[weights][sliced]") {
  TempDir dir;
  // qkv [2 + 1 + 1, 3] and gate_up [2 + 2, 3], values 0..11 and 100..111 by row.
  std::vector<float> qkv(12), gate_up(12), other{7, 8};
  for (int i = 0; i < 12; ++i) qkv[i] = static_cast<float>(i), gate_up[i] = 100.0f + static_cast<float>(i);
  write_safetensors(dir / "model.safetensors",
                    {{"l.0.attn.qkv.weight", TensorView{qkv.data(), DType::F32, {4, 3}, {}}},
                     {"l.0.mlp.gate_up.weight", TensorView{gate_up.data(), DType::F32, {4, 3}, {}}},
                     {"l.0.norm.weight", TensorView{other.data(), DType::F32, {2}, {}}}},
                    {{"format", "pt"}});
  auto base = open_checkpoint(dir.path());
  const SlicedWeightSource sliced(base, {{"attn.qkv.weight", {{"attn.q.weight", 2}, {"attn.k.weight", 1}, {"attn.v.weight", 1}}},
                                         {"mlp.gate_up.weight", {{"mlp.gate.weight", 2}, {"mlp.up.weight", 2}}}});
  CHECK(sliced.names() == std::vector<std::string>{"l.0.attn.k.weight", "l.0.attn.q.weight", "l.0.attn.v.weight",
                                                   "l.0.mlp.gate.weight", "l.0.mlp.up.weight", "l.0.norm.weight"});
  const TensorView k = sliced.view("l.0.attn.k.weight");
  CHECK(k.shape == Shape{1, 3});
  CHECK(k.as<float>()[0] == 6.0f);  // row 2 of qkv
  CHECK(k.data == static_cast<const std::byte*>(base->view("l.0.attn.qkv.weight").data) + 2 * 3 * sizeof(float));
  CHECK(sliced.view("l.0.mlp.up.weight").as<float>()[0] == 106.0f);
  CHECK(sliced.info("l.0.attn.q.weight")->shape == Shape{2, 3});
  CHECK(sliced.info("l.0.attn.q.weight")->nbytes == 2 * 3 * sizeof(float));
  CHECK(sliced.stored_name("l.0.attn.v.weight") == "l.0.attn.qkv.weight");
  CHECK(sliced.view("l.0.norm.weight").as<float>()[1] == 8.0f);
  CHECK_FALSE(sliced.contains("l.1.attn.q.weight"));
  // A stored tensor whose rows are not the parts' sum is an error naming it, never a wrong slice.
  const SlicedWeightSource wrong(base, {{"attn.qkv.weight", {{"attn.q.weight", 2}, {"attn.k.weight", 2}, {"attn.v.weight", 2}}}});
  CHECK_THAT(input_error([&] { (void)wrong.view("l.0.attn.q.weight"); }),
             Contains("l.0.attn.qkv.weight") && Contains("does not split into 6 rows"));
}
