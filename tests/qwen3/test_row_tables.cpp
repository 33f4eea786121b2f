// Row tables (Model::add_row_table) on the decoder runtime, CPU: summed table rows equal the same
// sum given as an override row, a table used as a head equals that product, and bad uses are
// refused. The table here is the fixture's own embedding table, so every expectation is exact.
#include "qwen3/fixture_test_util.hpp"

#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/row_tables.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;

struct RowTableFixture {
  OpenedModel opened;
  int table = -1;
  std::int64_t H = 0, V = 0;
};

RowTableFixture open_with_table() {
  RowTableFixture f{open_fixture(fixture_dir("qwen3-tiny"), false)};
  f.table = f.opened.model->need_extension<RowTables>().add_row_table("rows", f.opened.model->weight_source().view("model.embed_tokens.weight"));
  load_model(f.opened, false);
  f.H = f.opened.model->info().hidden_size;
  f.V = f.opened.model->info().vocab_size;
  return f;
}

}  // namespace

TEST_CASE("row tables: summed rows equal an override row, a table head equals its product", "[qwen3][row_table]") {
  RowTableFixture f = open_with_table();
  REQUIRE(f.table == 0);
  const std::vector<std::int64_t> ids{5, 17, 3, 9};
  const std::vector<std::int64_t> table_positions{1, 3};
  const std::vector<std::int64_t> table_ids{7, 11, 2, 40, 40, 1};  // 3 rows per position

  // The same embeddings as float32 override rows, summed on the host in the same order.
  const HostTensor embed = to_f32_tensor(f.opened.model->weight_source().view("model.embed_tokens.weight"));
  std::vector<float> rows(2 * f.H, 0.0f);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      kernels::cpu::add_inplace(rows.data() + i * f.H, embed.as<float>() + table_ids[i * 3 + j] * f.H, f.H);

  auto a = f.opened.model->new_session();
  ForwardStep with_table{ids, {}, {}, {.hidden = true, .logits = true, .all_positions = true, .head_table = f.table},
                         {f.table, table_positions, table_ids, 3}};
  const ForwardResult got = a->forward(with_table);
  auto b = f.opened.model->new_session();
  const ForwardResult want = b->forward({ids, table_positions, rows, {.hidden = true, .logits = true, .all_positions = true}});
  REQUIRE(got.logits.numel() == want.logits.numel());
  CHECK(std::equal(got.logits.as<float>(), got.logits.as<float>() + got.logits.numel(), want.logits.as<float>()));

  // The table as a head: the fixture's head is tied to this very table, so it equals the logits.
  const HostTensor* head = got.find_extra("rows");
  REQUIRE(head != nullptr);
  CHECK(head->shape() == Shape{4, f.V});
  CHECK(std::equal(head->as<float>(), head->as<float>() + head->numel(), got.logits.as<float>()));
}

TEST_CASE("row tables: bad indices, ids, shapes and late tables are refused", "[qwen3][row_table][input]") {
  RowTableFixture f = open_with_table();
  auto session = f.opened.model->new_session();
  const std::vector<std::int64_t> ids{5, 17};
  const std::vector<std::int64_t> at0{0};
  auto error_of = [&](const ForwardStep& step) { return input_error_of([&] { session->forward(step); }); };
  const std::vector<std::int64_t> two{1, 2};
  CHECK_THAT(error_of({ids, {}, {}, {}, {3, at0, two, 2}}), Contains("row table 3 does not exist"));
  const std::vector<std::int64_t> outside{1, 100000};
  CHECK_THAT(error_of({ids, {}, {}, {}, {f.table, at0, outside, 2}}), Contains("100000"));
  const std::vector<std::int64_t> three{1, 2, 3};
  CHECK_THAT(error_of({ids, {}, {}, {}, {f.table, at0, three, 2}}), Contains("need 2 ids, got 3"));
  const std::vector<std::int64_t> at5{5};
  CHECK_THAT(error_of({ids, {}, {}, {}, {f.table, at5, two, 2}}), Contains("position 5"));
  CHECK_THAT(error_of({ids, {}, {}, {.head_table = 2}, {}}), Contains("head table 2"));
  CHECK(session->position() == 0);  // nothing ran

  CHECK_THROWS_AS(f.opened.model->need_extension<RowTables>().add_row_table("late", f.opened.model->weight_source().view("model.norm.weight")),
                  std::logic_error);
  RowTableFixture g{open_fixture(fixture_dir("qwen3-tiny"), false)};
  CHECK_THAT(input_error_of([&] {
               g.opened.model->need_extension<RowTables>().add_row_table("norm", g.opened.model->weight_source().view("model.norm.weight"));
             }),
             Contains("must be [rows,"));
}

TEST_CASE("row tables: a head sampling request is checked, a CPU session returns the head output instead",
          "[qwen3][row_table][input]") {
  RowTableFixture f = open_with_table();
  auto session = f.opened.model->new_session();
  const std::vector<std::int64_t> ids{5, 17};
  auto error_of = [&](const HeadSampleRequest& r, int head_table) {
    return input_error_of([&] { session->forward({ids, {}, {}, {.head_table = head_table, .head_sample = r}, {}}); });
  };
  REQUIRE(f.V % 2 == 0);
  const std::vector<double> two{0.25, 0.5}, bad{0.25, 1.0};
  CHECK_THAT(error_of({.segments = 2}, -1), Contains("needs a head table"));
  CHECK_THAT(error_of({.segments = f.V + 1}, f.table), Contains("do not split into"));
  CHECK_THAT(error_of({.segments = 2, .temperature = 0.8f}, f.table), Contains("0 uniforms for 2 segments"));
  CHECK_THAT(error_of({.segments = 2, .temperature = 0.8f, .u = bad}, f.table), Contains("invalid head sampling"));
  CHECK_THAT(error_of({.segments = 2, .temperature = -1.0f, .u = two}, f.table), Contains("invalid head sampling"));
  CHECK_THAT(error_of({.segments = 2, .top_p = 1.5f}, f.table), Contains("invalid head sampling"));
  CHECK(session->position() == 0);  // nothing ran

  // The CPU backend does not sample heads: it answers with the head output, for the caller to pick.
  const HeadSampleRequest request{.segments = 2, .temperature = 0.8f, .u = two};
  const ForwardResult got = session->forward({ids, {}, {}, {.head_table = f.table, .head_sample = request}, {}});
  CHECK(got.head_sampled.empty());
  const HostTensor* head = got.find_extra("rows");
  REQUIRE(head != nullptr);
  CHECK(head->shape() == Shape{1, f.V});
}

}  // namespace zoo::ptest
