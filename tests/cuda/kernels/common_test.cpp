// The CUDA plumbing: error macros, availability, RAII buffers, streams, events, graphs.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "cuda/cuda_test_util.hpp"
#include "scoped_env.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/ops.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;

TEST_CASE("ZOO_CUDA_CHECK throws with the file, line and error name", "[cuda]") {
  // Runs without a GPU: formatting an error needs no device.
  try {
    ZOO_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("common_test.cpp:") != std::string::npos);
    CHECK(what.find("cudaErrorInvalidValue") != std::string::npos);
  }
  CHECK_NOTHROW(ZOO_CUDA_CHECK(cudaSuccess));
  try {
    ZOO_CUBLAS_CHECK(7);  // CUBLAS_STATUS_INVALID_VALUE
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos);
  }
}

TEST_CASE("cuda_available answers without throwing", "[cuda]") {
  bool available = false;
  CHECK_NOTHROW(available = cuda_available());
  CHECK(available == cuda_available());
  if (!available) WARN("no CUDA device: the other [cuda] tests skip");
}

TEST_CASE("hopper_paths: sm_90+ unless ZOO_CUDA_PRE_HOPPER=1", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const bool hopper = device_properties().major >= 9;
  {  // (no kernel runs while the variable is unset here, so a forced pre-Hopper run stays forced)
    const zoo::test::ScopedEnv unset("ZOO_CUDA_PRE_HOPPER", nullptr);
    CHECK(hopper_paths() == hopper);
  }
  {
    const zoo::test::ScopedEnv off("ZOO_CUDA_PRE_HOPPER", "0");
    CHECK(hopper_paths() == hopper);
  }
  {
    const zoo::test::ScopedEnv on("ZOO_CUDA_PRE_HOPPER", "1");
    CHECK_FALSE(hopper_paths());
  }
  const zoo::test::ScopedEnv typo("ZOO_CUDA_PRE_HOPPER", "yes");
  CHECK_THROWS_WITH(hopper_paths(), Catch::Contains("ZOO_CUDA_PRE_HOPPER"));
}

TEST_CASE("DeviceBuffer round-trips data and moves ownership", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const auto& props = device_properties();
  INFO(props.name << " sm_" << props.major << props.minor << ", " << props.multiprocessors << " SMs");
  CHECK(props.multiprocessors > 0);
  std::vector<int> host(1000);
  for (int i = 0; i < 1000; ++i) host[i] = i * 7 - 3;
  DeviceBuffer a = upload(host);
  CHECK(a.size() == 4000);
  DeviceBuffer b = std::move(a);
  CHECK(a.empty());
  CHECK(a.size() == 0);
  CHECK(download<int>(b, 1000) == host);
  std::vector<int> part(10);
  b.download(part.data(), 40, 400);
  CHECK(part[0] == host[100]);
  CHECK_THROWS_AS(b.download(part.data(), 40, 3980), std::out_of_range);

  PinnedBuffer pinned(4000);
  Stream stream;
  b.download_async(pinned.data(), 4000, stream);
  stream.synchronize();
  CHECK(pinned.as<int>()[999] == host[999]);
}

TEST_CASE("Events time stream work", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  Stream stream;
  Event start, end;
  DeviceBuffer x(std::size_t{64} << 20);
  start.record(stream);
  ZOO_CUDA_CHECK(cudaMemsetAsync(x.data(), 1, x.size(), stream));
  end.record(stream);
  end.synchronize();
  CHECK(Event::elapsed_ms(start, end) > 0.0f);
}

TEST_CASE("CudaGraph replays captured work and updates it in place", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1009);
  const std::int64_t n = 4099;
  const auto a = random_bf16_values(rng, n), b = random_bf16_values(rng, n), c = random_bf16_values(rng, n);
  DeviceBuffer da = upload_bf16(a), db = upload_bf16(b), dc = upload_bf16(c), out(n * sizeof(Bf16));
  Stream stream;
  CudaGraph graph;
  CHECK_FALSE(graph.ready());
  graph.begin_capture(stream);
  add(da.as<Bf16>(), db.as<Bf16>(), out.as<Bf16>(), n, stream);
  CHECK_FALSE(graph.end_capture(stream));  // first capture: instantiated, not updated
  REQUIRE(graph.ready());
  out.fill_bytes(0xff);
  graph.launch(stream);
  stream.synchronize();
  auto got = download_bf16(out, n);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(got[i] == zoo::round_to_bf16(a[i] + b[i]));

  // Same topology, other arguments: the instance is updated in place.
  graph.begin_capture(stream);
  add(da.as<Bf16>(), dc.as<Bf16>(), out.as<Bf16>(), n, stream);
  CHECK(graph.end_capture(stream));
  graph.launch(stream);
  stream.synchronize();
  got = download_bf16(out, n);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(got[i] == zoo::round_to_bf16(a[i] + c[i]));

  // Another topology: re-instantiated.
  graph.begin_capture(stream);
  add(da.as<Bf16>(), db.as<Bf16>(), out.as<Bf16>(), n, stream);
  add(out.as<Bf16>(), dc.as<Bf16>(), out.as<Bf16>(), n, stream);
  CHECK_FALSE(graph.end_capture(stream));
  graph.launch(stream);
  stream.synchronize();
  got = download_bf16(out, n);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(got[i] == zoo::round_to_bf16(zoo::round_to_bf16(a[i] + b[i]) + c[i]));
}
