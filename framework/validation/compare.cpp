#include "zoo/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "zoo/diagnostic_hook.hpp"
#include "zoo/format.hpp"
#include "zoo/safetensors.hpp"

namespace zoo {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Elements converted per chunk: bounded memory even for [T, 150k] logits.
constexpr std::int64_t kChunk = 1 << 16;

template <class T>
void widen(const std::byte* src, double* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, src + i * sizeof(T), sizeof(T));  // mmapped payloads may be unaligned
    dst[i] = static_cast<double>(value);
  }
}

// Elements [begin, begin + n) of a host view as float64 (exact for every dtype but huge integers).
void load_f64(const TensorView& v, std::int64_t begin, std::int64_t n, double* out) {
  const auto* bytes = static_cast<const std::byte*>(v.data) + begin * static_cast<std::int64_t>(dtype_size(v.dtype));
  switch (v.dtype) {
    case DType::F32: widen<float>(bytes, out, n); break;
    case DType::F64: widen<double>(bytes, out, n); break;
    case DType::BF16:
    case DType::F16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        out[i] = v.dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      }
      break;
    case DType::I64: widen<std::int64_t>(bytes, out, n); break;
    case DType::I32: widen<std::int32_t>(bytes, out, n); break;
    case DType::I16: widen<std::int16_t>(bytes, out, n); break;
    case DType::I8: widen<std::int8_t>(bytes, out, n); break;
    case DType::U8:
    case DType::BOOL: widen<std::uint8_t>(bytes, out, n); break;
  }
}

std::int64_t load_i64(const TensorView& v, std::int64_t i) {
  const auto* p = static_cast<const std::byte*>(v.data) + i * static_cast<std::int64_t>(dtype_size(v.dtype));
  auto read = [p]<class T>(T) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return static_cast<std::int64_t>(value);
  };
  switch (v.dtype) {
    case DType::I64: return read(std::int64_t{});
    case DType::I32: return read(std::int32_t{});
    case DType::I16: return read(std::int16_t{});
    case DType::I8: return read(std::int8_t{});
    case DType::U8:
    case DType::BOOL: return read(std::uint8_t{});
    default: break;
  }
  throw std::logic_error("load_i64: not an integer dtype");
}

void require_host(const TensorView& v, const std::string& name) {
  if (!v.device.is_cpu()) throw std::invalid_argument(fmt::format("compare: tensor '{}' is not on the host", name));
  if (v.numel() > 0 && v.data == nullptr) throw std::invalid_argument(fmt::format("compare: tensor '{}' has no data", name));
}

// NaN sorts below everything so orderings stay strict weak orders; a NaN row then loses argmax.
double order_key(double x) { return std::isnan(x) ? -kInf : x; }

std::int64_t argmax(const std::vector<double>& row) {
  std::int64_t best = 0;
  for (std::size_t j = 1; j < row.size(); ++j)
    if (order_key(row[j]) > order_key(row[best])) best = static_cast<std::int64_t>(j);
  return best;
}

// Top-k indices, larger values first, ties to the lower index; returned sorted by index.
std::vector<std::int64_t> topk_indices(const std::vector<double>& row, int k) {
  std::vector<std::int64_t> idx(row.size());
  for (std::size_t j = 0; j < row.size(); ++j) idx[j] = static_cast<std::int64_t>(j);
  const auto kk = std::min<std::size_t>(static_cast<std::size_t>(k), row.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(kk), idx.end(), [&](auto a, auto b) {
    const double x = order_key(row[a]), y = order_key(row[b]);
    return x != y ? x > y : a < b;
  });
  idx.resize(kk);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::int64_t overlap(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::int64_t n = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) {
      ++n, ++i, ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

bool row_capable(const TensorView& golden, const TensorView& actual) {
  return is_floating(golden.dtype) && is_floating(actual.dtype) && !golden.shape.empty() && golden.shape.back() > 0;
}

// Calls fn(row_index, golden_row, actual_row) over rows of the last dimension.
template <class Fn>
void for_each_row(const TensorView& golden, const TensorView& actual, Fn&& fn) {
  const std::int64_t width = golden.shape.back();
  const std::int64_t rows = golden.numel() / width;
  std::vector<double> g(static_cast<std::size_t>(width)), a(static_cast<std::size_t>(width));
  for (std::int64_t r = 0; r < rows; ++r) {
    load_f64(golden, r * width, width, g.data());
    load_f64(actual, r * width, width, a.data());
    fn(r, g, a);
  }
}

// `layer.N.` (or exactly `layer.N`): the index N, for numeric ordering.
std::optional<std::int64_t> layer_index(std::string_view name) {
  constexpr std::string_view kPrefix = "layer.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  std::int64_t index = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec != std::errc() || end == name.data()) return std::nullopt;
  if (end != name.data() + name.size() && *end != '.') return std::nullopt;
  return index;
}

// Reference order with layer tensors re-sorted numerically in the slots layer tensors occupy, so
// non-layer tensors (embed before, logits after) keep their place.
std::vector<std::string> forward_order(std::vector<std::string> names) {
  std::vector<std::size_t> slots;
  std::vector<std::pair<std::int64_t, std::string>> layers;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (auto index = layer_index(names[i])) {
      slots.push_back(i);
      layers.emplace_back(*index, names[i]);
    }
  std::stable_sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < slots.size(); ++i) names[slots[i]] = std::move(layers[i].second);
  return names;
}

std::string fmt_threshold(double x) { return fmt::format("{}", x); }

std::string fmt_sci(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return "0";
  return fmt::format("{:.3e}", x);
}

// Cosine near 1 is unreadable in fixed notation (0.99999999 vs 0.99999998): show 1-x instead.
std::string fmt_cosine(double c) {
  if (std::isnan(c)) return "nan";
  if (c == 1.0) return "1";
  if (1.0 - c < 1e-4) return fmt::format("1-{:.2e}", 1.0 - c);
  return fmt::format("{:.8f}", c);
}

nlohmann::json num(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
}

std::string multi_index(const Shape& shape, std::int64_t flat) {
  if (shape.empty()) return "[]";
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto extent = std::max<std::int64_t>(shape[d], 1);
    idx[d] = flat % extent;
    flat /= extent;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

// " (got X)" for checks that measured something; missing tensors and shape mismatches did not.
std::string describe_value(const GateResult& r) {
  for (std::string_view bare : {"present", "matches", "shape", "logit metrics", "finite"})
    if (r.check.starts_with(bare)) return "";
  if (r.check.starts_with("argmax")) return fmt::format(" (got {} matching)", static_cast<std::int64_t>(r.value));
  if (r.check.starts_with("cosine")) return fmt::format(" (got {})", std::isnan(r.value) ? "nan" : fmt::format("{:.10f}", r.value));
  if (std::isfinite(r.value) && r.value == std::floor(r.value) && std::abs(r.value) < 1e15 &&
      !r.check.starts_with("exact (max_abs"))
    return fmt::format(" (got {})", static_cast<std::int64_t>(r.value));
  return fmt::format(" (got {})", fmt_sci(r.value));
}

}  // namespace

TensorMetrics compare_tensors(const std::string& name, const TensorView& golden, const TensorView& actual, int topk,
                              bool logit_metrics) {
  require_host(golden, name);
  require_host(actual, name);
  TensorMetrics m;
  m.name = name;
  m.shape = golden.shape;
  m.actual_shape = actual.shape;
  m.integer = !is_floating(golden.dtype);
  if (golden.shape != actual.shape) {
    m.shape_match = false;
    m.cosine = m.max_abs = m.mean_abs = m.rmse = m.p99_abs = m.nmse = kNaN;
    return m;
  }

  const std::int64_t n = golden.numel();
  if (m.integer && !is_floating(actual.dtype)) {
    for (std::int64_t i = 0; i < n; ++i) m.mismatches += load_i64(golden, i) != load_i64(actual, i);
  }

  // One pass in chunks. Golden variance uses sums shifted by the first element, which keeps the
  // cancellation in S2 - S1^2/n small when the mean dwarfs the spread.
  double dot = 0, gg = 0, aa = 0, sum_abs = 0, sum_sq = 0, shift = 0, s1 = 0, s2 = 0;
  bool saw_nan = false;
  std::vector<float> abs_diff(static_cast<std::size_t>(n));
  std::vector<double> g(static_cast<std::size_t>(std::min(n, kChunk))), a(g.size());
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    const std::int64_t count = std::min(kChunk, n - begin);
    load_f64(golden, begin, count, g.data());
    load_f64(actual, begin, count, a.data());
    if (begin == 0) shift = std::isfinite(g[0]) ? g[0] : 0.0;
    for (std::int64_t j = 0; j < count; ++j) {
      const double x = g[j], y = a[j];
      const double d = x == y ? 0.0 : std::abs(y - x);  // equal infinities are no difference
      const std::int64_t i = begin + j;
      const bool golden_finite = std::isfinite(x), actual_finite = std::isfinite(y);
      m.golden_non_finite += !golden_finite;
      m.actual_non_finite += !actual_finite;
      if ((!golden_finite || !actual_finite) && m.first_non_finite < 0) m.first_non_finite = i;
      if (!m.integer || is_floating(actual.dtype)) m.mismatches += x != y;
      dot += x * y;
      gg += x * x;
      aa += y * y;
      sum_abs += d;
      sum_sq += d * d;
      s1 += x - shift;
      s2 += (x - shift) * (x - shift);
      if (std::isnan(d)) {
        if (!saw_nan) m.max_abs_index = i;
        saw_nan = true;
      } else if (!saw_nan && d > m.max_abs) {
        m.max_abs = d;
        m.max_abs_index = i;
      }
      abs_diff[static_cast<std::size_t>(i)] = std::isnan(d) ? std::numeric_limits<float>::infinity() : static_cast<float>(d);
    }
  }
  if (!m.integer) m.mismatches = 0;  // only meaningful for integer tensors
  if (saw_nan) m.max_abs = kNaN;
  const bool non_finite = m.golden_non_finite > 0 || m.actual_non_finite > 0;

  if (n > 0) {
    const auto nd = static_cast<double>(n);
    if (gg == 0 && aa == 0) {
      m.cosine = 1.0;
    } else if (gg == 0 || aa == 0) {
      m.cosine = 0.0;
    } else {
      // sqrt(x * x) == x exactly in IEEE arithmetic, so identical tensors give exactly 1.
      const double norms = std::isfinite(gg * aa) ? std::sqrt(gg * aa) : std::sqrt(gg) * std::sqrt(aa);
      m.cosine = dot / norms;
      if (!std::isnan(m.cosine)) m.cosine = std::clamp(m.cosine, -1.0, 1.0);
    }
    m.mean_abs = sum_abs / nd;
    const double mse = sum_sq / nd;
    m.rmse = std::sqrt(mse);
    const auto rank = static_cast<std::size_t>(std::ceil(0.99 * nd)) - 1;  // nearest-rank percentile
    std::nth_element(abs_diff.begin(), abs_diff.begin() + static_cast<std::ptrdiff_t>(rank), abs_diff.end());
    m.p99_abs = saw_nan && std::isinf(abs_diff[rank]) ? kNaN : abs_diff[rank];
    const double var = std::max(0.0, (s2 - s1 * s1 / nd) / nd);
    if (std::isnan(mse) || std::isnan(var)) {
      m.nmse = kNaN;
    } else if (var == 0) {
      m.nmse = mse == 0 ? 0.0 : kInf;
    } else {
      m.nmse = mse / var;
    }
  }
  // An infinity or NaN in either tensor means the numbers cannot be trusted: no metric may look
  // finite (a p99 over a few NaNs, a max_abs over equal infinities), and it points at the first one.
  if (non_finite) {
    m.cosine = m.max_abs = m.mean_abs = m.rmse = m.p99_abs = m.nmse = kNaN;
    m.max_abs_index = m.first_non_finite;
  }

  const bool rows_wanted = logit_metrics || topk > 0 || std::string_view(name).ends_with("logits");
  if (rows_wanted && row_capable(golden, actual)) {
    m.has_rows = true;
    const int k = topk > 0 ? static_cast<int>(std::min<std::int64_t>(topk, golden.shape.back())) : 0;
    m.topk = k;
    m.min_topk_overlap = k;
    double regret_sum = 0;
    for_each_row(golden, actual, [&](std::int64_t r, const std::vector<double>& gr, const std::vector<double>& ar) {
      const auto best = argmax(gr), chosen = argmax(ar);
      ++m.rows;
      // A row holding a non-finite value has no meaningful argmax: it never counts as a match.
      auto finite = [](const std::vector<double>& row) {
        return std::all_of(row.begin(), row.end(), [](double x) { return std::isfinite(x); });
      };
      const bool rows_finite = finite(gr) && finite(ar);
      if (best == chosen && rows_finite) {
        ++m.argmax_matches;
      } else if (m.first_argmax_mismatch < 0) {
        m.first_argmax_mismatch = r;
      }
      // log_softmax(g)[i] = g[i] - logsumexp(g): the row constant cancels in the difference.
      const double regret = !rows_finite ? kNaN : best == chosen ? 0.0 : gr[best] - gr[chosen];
      m.max_regret = std::isnan(regret) || std::isnan(m.max_regret) ? kNaN : std::max(m.max_regret, regret);
      regret_sum += regret;
      if (k > 0)
        m.min_topk_overlap = rows_finite ? std::min(m.min_topk_overlap,
                                                    static_cast<double>(overlap(topk_indices(gr, k), topk_indices(ar, k))))
                                         : kNaN;
    });
    m.mean_regret = m.rows ? regret_sum / static_cast<double>(m.rows) : 0.0;
  }
  return m;
}

std::int64_t min_topk_overlap(const TensorView& golden, const TensorView& actual, int k) {
  require_host(golden, "topk");
  require_host(actual, "topk");
  if (golden.shape != actual.shape) throw std::invalid_argument("min_topk_overlap: shapes differ");
  if (!row_capable(golden, actual) || k <= 0) return 0;
  const int kk = static_cast<int>(std::min<std::int64_t>(k, golden.shape.back()));
  std::int64_t least = kk;
  for_each_row(golden, actual, [&](std::int64_t, const std::vector<double>& gr, const std::vector<double>& ar) {
    least = std::min(least, overlap(topk_indices(gr, kk), topk_indices(ar, kk)));
  });
  return least;
}

CompareReport compare_trace_tensors(const NamedTensors& golden, const NamedTensors& actual,
                                    const std::vector<Gate>& gates, const std::vector<std::string>& only) {
  const PointSelection selection(only);
  const auto selected = [&](const std::string& name) { return only.empty() || selection.matches(name); };
  std::map<std::string, const TensorView*, std::less<>> golden_by, actual_by;
  for (const auto& [name, view] : golden)
    if (selected(name)) golden_by.emplace(name, &view);
  for (const auto& [name, view] : actual)
    if (selected(name)) actual_by.emplace(name, &view);

  CompareReport report;
  // Golden file order, with the tensors the actual trace has re-ordered (in the slots they occupy)
  // by the actual's record order: a Zoo trace is recorded in forward order, while a golden may be
  // sorted by name (HF's safetensors writer does that).
  std::vector<std::string> reference;
  std::map<std::string, std::size_t, std::less<>> actual_rank;
  for (const auto& [name, view] : actual) actual_rank.emplace(name, actual_rank.size());
  for (const auto& [name, view] : golden)
    if (golden_by.count(name) && std::find(reference.begin(), reference.end(), name) == reference.end())
      reference.push_back(name);
  std::vector<std::size_t> slots;
  std::vector<std::string> present;
  for (std::size_t i = 0; i < reference.size(); ++i)
    if (actual_by.count(reference[i])) {
      slots.push_back(i);
      present.push_back(reference[i]);
    }
  std::sort(present.begin(), present.end(),
            [&](const auto& a, const auto& b) { return actual_rank.at(a) < actual_rank.at(b); });
  for (std::size_t i = 0; i < slots.size(); ++i) reference[slots[i]] = present[i];
  report.order = forward_order(std::move(reference));
  for (const auto& [name, view] : actual)
    if (actual_by.count(name) && !golden_by.count(name)) report.only_actual.push_back(name);

  std::map<std::string, std::size_t> metrics_at;
  for (const auto& name : report.order) {
    const auto found = actual_by.find(name);
    if (found == actual_by.end()) {
      report.only_golden.push_back(name);
      continue;
    }
    int topk = 0;
    bool rows = false;
    for (const auto& gate : gates)
      if (glob_match(gate.pattern, name)) {
        rows = rows || gate.wants_rows();
        if (gate.topk) topk = std::max(topk, gate.topk->k);
      }
    metrics_at[name] = report.tensors.size();
    report.tensors.push_back(compare_tensors(name, *golden_by.at(name), *found->second, topk, rows));
  }

  // Results grouped by tensor in forward order, then gates that matched nothing.
  std::vector<bool> matched(gates.size(), false);
  for (const auto& name : report.order) {
    for (std::size_t gi = 0; gi < gates.size(); ++gi) {
      const Gate& gate = gates[gi];
      if (!glob_match(gate.pattern, name)) continue;
      matched[gi] = true;
      auto add = [&](std::string check, double value, bool ok) {
        report.gate_results.push_back({name, gate.group, std::move(check), value, ok});
      };
      const auto at = metrics_at.find(name);
      if (at == metrics_at.end()) {
        add("present (missing from the actual trace)", 0.0, false);
        continue;
      }
      const TensorMetrics& m = report.tensors[at->second];
      if (!m.shape_match) {
        add(fmt::format("shape {} == golden {}", shape_str(m.actual_shape), shape_str(m.shape)), 0.0, false);
        continue;
      }
      // A non-finite value in either tensor fails every check of every gate on it, whatever the
      // metric would say (NaN compares false, but a NaN row can still "match" an argmax).
      if (m.golden_non_finite || m.actual_non_finite)
        add(fmt::format("finite (golden has {}, actual has {} non-finite values)", m.golden_non_finite,
                        m.actual_non_finite),
            static_cast<double>(m.golden_non_finite + m.actual_non_finite), false);
      const bool finite = m.golden_non_finite == 0 && m.actual_non_finite == 0;
      auto check = [&](std::string what, double value, bool ok) { add(std::move(what), value, ok && finite); };
      if (gate.min_cosine) check("cosine >= " + fmt_threshold(*gate.min_cosine), m.cosine, m.cosine >= *gate.min_cosine);
      if (gate.max_abs) check("max_abs <= " + fmt_threshold(*gate.max_abs), m.max_abs, m.max_abs <= *gate.max_abs);
      if (gate.max_mean_abs)
        check("mean_abs <= " + fmt_threshold(*gate.max_mean_abs), m.mean_abs, m.mean_abs <= *gate.max_mean_abs);
      if (gate.max_rmse) check("rmse <= " + fmt_threshold(*gate.max_rmse), m.rmse, m.rmse <= *gate.max_rmse);
      if (gate.max_nmse) check("nmse <= " + fmt_threshold(*gate.max_nmse), m.nmse, m.nmse <= *gate.max_nmse);
      if (gate.exact) {
        if (m.integer)
          check("exact (differing elements == 0)", static_cast<double>(m.mismatches), m.mismatches == 0);
        else
          check("exact (max_abs == 0)", m.max_abs, m.max_abs == 0.0);
      }
      if (gate.wants_rows() && !m.has_rows) {
        add("logit metrics (needs a floating tensor with rows)", 0.0, false);
        continue;
      }
      if (gate.argmax_exact)
        check(fmt::format("argmax exact ({} rows)", m.rows), static_cast<double>(m.argmax_matches),
            m.argmax_matches == m.rows);
      if (gate.max_regret) check("regret <= " + fmt_threshold(*gate.max_regret), m.max_regret, m.max_regret <= *gate.max_regret);
      if (gate.topk) {
        double value = m.min_topk_overlap;
        if (gate.topk->k != m.topk) {
          const TensorView& gv = *golden_by.at(name);
          value = static_cast<double>(min_topk_overlap(gv, *actual_by.at(name), gate.topk->k));
        }
        check(fmt::format("top-{} overlap >= {}", gate.topk->k, gate.topk->min_overlap), value,
            value >= gate.topk->min_overlap);
      }
    }
  }
  for (std::size_t gi = 0; gi < gates.size(); ++gi)
    if (!matched[gi])
      report.gate_results.push_back({gates[gi].pattern, gates[gi].group, "matches a golden tensor (matches none)", 0.0, false});
  return report;
}

CompareReport compare_traces(const std::filesystem::path& golden, const std::filesystem::path& actual,
                             const std::vector<Gate>& gates, const std::vector<std::string>& only) {
  const auto golden_file = SafetensorsFile::open(golden);
  const auto actual_file = SafetensorsFile::open(actual);
  auto named = [](const SafetensorsFile& file) {
    NamedTensors out;
    for (const auto& entry : file.entries()) out.emplace_back(entry.name, file.view(entry));
    return out;
  };
  return compare_trace_tensors(named(*golden_file), named(*actual_file), gates, only);
}

bool CompareReport::evaluated() const { return !gate_results.empty(); }

bool CompareReport::passed() const {
  if (!evaluated()) return false;
  for (const auto& r : gate_results)
    if (!r.passed) return false;
  for (const auto& m : tensors)
    if (!m.shape_match) return false;
  return true;
}

std::optional<std::string> CompareReport::first_failure() const {
  // Where drift starts: a failure measured on a compared tensor outranks a missing tensor, which is
  // a coverage problem rather than a numeric one.
  auto gate_failed = [&](const std::string& name) {
    return std::any_of(gate_results.begin(), gate_results.end(),
                       [&](const GateResult& r) { return r.tensor == name && !r.passed; });
  };
  for (const bool want_compared : {true, false}) {
    for (const auto& name : order) {
      const auto m = std::find_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.name == name; });
      if ((m != tensors.end()) != want_compared) continue;
      if ((m != tensors.end() && !m->shape_match) || gate_failed(name)) return name;
    }
  }
  return std::nullopt;
}

std::optional<std::string> CompareReport::worst_tensor() const {
  // Lowest cosine; cosine saturates at 1 for tiny differences, so NMSE breaks ties. No tensor is
  // "worst" when every one matches exactly.
  const TensorMetrics* worst = nullptr;
  auto key = [](const TensorMetrics& m) {
    return std::pair(std::isnan(m.cosine) ? -kInf : m.cosine, std::isnan(m.nmse) ? -kInf : -m.nmse);
  };
  for (const auto& m : tensors) {
    if (m.integer || !m.shape_match || m.max_abs == 0.0) continue;
    if (!worst || key(m) < key(*worst)) worst = &m;
  }
  if (!worst) return std::nullopt;
  return worst->name;
}

std::string CompareReport::table() const {
  const std::vector<std::string> header = {"tensor", "shape", "cosine", "max_abs", "at", "mean_abs", "rmse",
                                           "p99_abs", "nmse",   "argmax",  "regret", "top-k"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : tensors) {
    std::vector<std::string> row = {escape_text(m.name), shape_str(m.shape)};
    if (!m.shape_match) {
      row.push_back(fmt::format("SHAPE MISMATCH: actual {}", shape_str(m.actual_shape)));
    } else {
      row.push_back(m.integer ? (m.mismatches ? fmt::format("{} differ", m.mismatches) : std::string("exact"))
                              : fmt_cosine(m.cosine));
      row.push_back(fmt_sci(m.max_abs));
      row.push_back(m.max_abs > 0 || std::isnan(m.max_abs) ? multi_index(m.shape, m.max_abs_index) : "-");
      row.push_back(fmt_sci(m.mean_abs));
      row.push_back(fmt_sci(m.rmse));
      row.push_back(fmt_sci(m.p99_abs));
      row.push_back(fmt_sci(m.nmse));
      if (m.has_rows) {
        row.push_back(fmt::format("{}/{}", m.argmax_matches, m.rows));
        row.push_back(std::isnan(m.max_regret) ? "nan" : fmt::format("{:.4f}", m.max_regret));
        row.push_back(m.topk ? fmt::format("{}/{}", m.min_topk_overlap, m.topk) : "-");
      } else {
        row.insert(row.end(), {"-", "-", "-"});
      }
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      if (c < 2 || row.size() == header.size()) width[c] = std::max(width[c], row[c].size());

  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c) text += "  ";
      // Names and shapes read left-aligned, numbers right-aligned; a shape-mismatch note spans
      // the metric columns.
      if (c < 2) text += fmt::format("{:<{}}", cells[c], width[c]);
      else if (cells.size() < header.size()) text += cells[c];
      else text += fmt::format("{:>{}}", cells[c], width[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);

  std::size_t passes = 0, failures = 0;
  for (const auto& r : gate_results) (r.passed ? passes : failures)++;
  out += "\n";
  if (gate_results.empty()) {
    out += "gates: none given\n";
  } else {
    out += fmt::format("gates: {} passed, {} failed\n", passes, failures);
    for (const auto& r : gate_results) {
      if (r.passed) continue;
      const std::string group = r.gate_group.empty() ? std::string() : fmt::format("[{}] ", escape_text(r.gate_group));
      out += fmt::format("  FAIL {}{}: {}{}\n", group, escape_text(r.tensor), r.check, describe_value(r));
    }
  }
  std::vector<std::string> mismatched;
  for (const auto& m : tensors)
    if (!m.shape_match) mismatched.push_back(escape_text(m.name));
  if (!mismatched.empty()) out += fmt::format("shape mismatches: {}\n", fmt::join(mismatched, ", "));
  auto escaped = [](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const auto& name : names) out.push_back(escape_text(name));
    return out;
  };
  if (!only_golden.empty()) out += fmt::format("only in golden: {}\n", fmt::join(escaped(only_golden), ", "));
  if (!only_actual.empty()) out += fmt::format("only in actual: {}\n", fmt::join(escaped(only_actual), ", "));
  for (const auto& m : tensors)
    if (m.golden_non_finite || m.actual_non_finite)
      out += fmt::format("non-finite values: {} (golden {}, actual {}; first at {})\n", escape_text(m.name), m.golden_non_finite,
                         m.actual_non_finite, multi_index(m.shape, m.first_non_finite));
  if (auto first = first_failure()) {
    const bool missing = std::find(only_golden.begin(), only_golden.end(), *first) != only_golden.end();
    out += fmt::format("first failing tensor: {} ({})\n", escape_text(*first),
                       missing ? "missing from the actual trace; no measured check failed" : "drift starts here");
  }
  if (auto worst = worst_tensor()) {
    for (const auto& m : tensors)
      if (m.name == *worst) out += fmt::format("worst tensor: {} (cosine {})\n", escape_text(m.name), fmt_cosine(m.cosine));
  }
  const bool failed = std::any_of(gate_results.begin(), gate_results.end(), [](const auto& r) { return !r.passed; }) ||
                      !mismatched.empty();
  out += fmt::format("result: {}\n", passed() ? "PASS" : failed ? "FAIL" : "NOT CHECKED (no gate was evaluated)");
  return out;
}

nlohmann::json CompareReport::to_json() const {
  nlohmann::json j;
  j["passed"] = passed();
  j["gates_evaluated"] = gate_results.size();
  const auto first = first_failure();
  const auto worst = worst_tensor();
  j["first_failure"] = first ? nlohmann::json(*first) : nlohmann::json(nullptr);
  j["worst_tensor"] = worst ? nlohmann::json(*worst) : nlohmann::json(nullptr);
  auto& tensors_json = j["tensors"] = nlohmann::json::array();
  for (const auto& m : tensors) {
    nlohmann::json t = {{"name", m.name},         {"shape", m.shape},       {"shape_match", m.shape_match},
                        {"integer", m.integer},   {"cosine", num(m.cosine)}, {"max_abs", num(m.max_abs)},
                        {"max_abs_index", m.max_abs_index}, {"mean_abs", num(m.mean_abs)}, {"rmse", num(m.rmse)},
                        {"p99_abs", num(m.p99_abs)}, {"nmse", num(m.nmse)}};
    if (!m.shape_match) t["actual_shape"] = m.actual_shape;
    if (m.integer) t["mismatches"] = m.mismatches;
    if (m.golden_non_finite || m.actual_non_finite) {
      t["golden_non_finite"] = m.golden_non_finite;
      t["actual_non_finite"] = m.actual_non_finite;
      t["first_non_finite"] = m.first_non_finite;
    }
    if (m.has_rows) {
      t["rows"] = m.rows;
      t["argmax_matches"] = m.argmax_matches;
      t["first_argmax_mismatch"] = m.first_argmax_mismatch;
      t["max_regret"] = num(m.max_regret);
      t["mean_regret"] = num(m.mean_regret);
      if (m.topk) {
        t["topk"] = m.topk;
        t["min_topk_overlap"] = m.min_topk_overlap;
      }
    }
    tensors_json.push_back(std::move(t));
  }
  auto& gates_json = j["gates"] = nlohmann::json::array();
  for (const auto& r : gate_results)
    gates_json.push_back({{"tensor", r.tensor}, {"group", r.gate_group}, {"check", r.check}, {"value", num(r.value)},
                          {"passed", r.passed}});
  j["only_golden"] = only_golden;
  j["only_actual"] = only_actual;
  j["order"] = order;
  return j;
}

}  // namespace zoo
