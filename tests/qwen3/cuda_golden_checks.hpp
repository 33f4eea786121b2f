#pragma once
// The CUDA (bf16) check every decoder plugin's fixture tests share: the fixture's prompt on the
// first CUDA device against transformers' bf16 golden made on the GPU host (golden-bf16.safetensors):
// final_norm and logits direction, regret, and argmax on every row whose golden margin is not a
// bf16 tie. Only in builds with CUDA.
#if defined(ZOO_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/cuda_model_util.hpp"
#include "qwen3/fixture_test_util.hpp"
#include "zoo/compare.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {

inline void check_cuda_bf16_golden(const fs::path& dir, const std::string& plugin_name) {
  const ModelArgs args = cuda_test::cuda_bf16_args(dir);
  const auto& plugin = registry().resolve_config(args.config, (dir / "config.json").string());
  CHECK(plugin.name == plugin_name);
  auto model = registry().create_model(plugin.name, args);
  model->load();
  const Prompt prompt = model->prepare(load_request(dir / "request.json"));
  TraceRecorder trace(PointSelection({"*"}));
  model->new_session()->forward(prompt.step(), &trace);

  const TraceFile golden(dir / "golden-bf16.safetensors");
  const HostTensor hidden_golden = golden.get("final_norm");
  const HostTensor* hidden = trace.find("final_norm");
  REQUIRE(hidden != nullptr);
  const auto h = compare_tensors("final_norm", hidden_golden.view(), hidden->view());
  INFO("final_norm cosine " << h.cosine);
  CHECK(h.cosine >= 0.9998);

  const HostTensor expected = golden.get("logits");
  const HostTensor* actual = trace.find("logits");
  REQUIRE(actual != nullptr);
  const auto m = compare_tensors("logits", expected.view(), actual->view(), 16, true);
  REQUIRE(m.shape_match);
  INFO("logits cosine " << m.cosine << ", max regret " << m.max_regret << ", argmax " << m.argmax_matches << "/"
                        << m.rows);
  CHECK(m.cosine >= 0.9999);
  CHECK(m.max_regret <= 0.20);
  // Argmax must agree on every row whose golden top-2 margin is not a tie. bf16 logits are
  // rounded to 8 significant bits, so a margin of up to two bf16 steps at the top value's size
  // is a tie that either implementation may break either way.
  const auto V = expected.shape()[1];
  const auto g = expected.span<float>();
  const auto a = actual->span<float>();
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const auto row = g.subspan(static_cast<std::size_t>(r * V), static_cast<std::size_t>(V));
    const auto arow = a.subspan(static_cast<std::size_t>(r * V), static_cast<std::size_t>(V));
    std::size_t top = 0;
    float second = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (row[i] > row[top]) {
        second = row[top];
        top = i;
      } else if (row[i] > second) {
        second = row[i];
      }
    }
    const double step = std::ldexp(1.0, std::ilogb(std::abs(row[top])) - 7);  // bf16 spacing at the top value
    if (row[top] - second <= 2 * step) {
      WARN("row " << r << ": golden margin " << row[top] - second << " is a bf16 tie; argmax not compared");
      continue;
    }
    const auto actual_top = static_cast<std::size_t>(std::max_element(arow.begin(), arow.end()) - arow.begin());
    INFO("row " << r << ": golden margin " << row[top] - second);
    CHECK(actual_top == top);
  }
}

}  // namespace zoo::ptest
#endif
