#include "zoo/load_plan.hpp"

#include "zoo/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <numeric>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

namespace zoo {
namespace {

bool is_problem(PlanEntry::Status status) {
  return status == PlanEntry::Status::Missing || status == PlanEntry::Status::ShapeMismatch ||
         status == PlanEntry::Status::DTypeMismatch;
}

std::string dtype_list(const std::vector<DType>& dtypes, std::string_view separator) {
  std::string out;
  for (auto d : dtypes) out += fmt::format("{}{}", out.empty() ? "" : separator, dtype_name(d));
  return out;
}

// The name shown for an entry: both names when the source stores it under another one.
std::string display_name(const PlanEntry& entry) {
  const auto& stored = entry.found ? entry.found->stored_name : entry.stored_name;
  if (stored.empty() || stored == entry.requirement.name) return entry.requirement.name;
  return fmt::format("{} <- {}", entry.requirement.name, stored);
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

std::string_view status_name(PlanEntry::Status status) {
  switch (status) {
    case PlanEntry::Status::Ok: return "ok";
    case PlanEntry::Status::Missing: return "missing";
    case PlanEntry::Status::OptionalMissing: return "optional-missing";
    case PlanEntry::Status::ShapeMismatch: return "shape-mismatch";
    case PlanEntry::Status::DTypeMismatch: return "dtype-mismatch";
  }
  return "unknown";
}

LoadPlan make_load_plan(const std::vector<TensorRequirement>& requirements, const WeightSource& source) {
  LoadPlan plan;
  plan.source = source.describe();
  std::set<std::string, std::less<>> requested;
  std::set<std::string, std::less<>> used_stored;
  for (const auto& requirement : requirements) {
    PlanEntry entry;
    entry.requirement = requirement;
    entry.stored_name = source.stored_name(requirement.name);
    entry.found = source.info(requirement.name);
    requested.insert(requirement.name);
    if (!entry.found) {
      entry.status = requirement.optional ? PlanEntry::Status::OptionalMissing : PlanEntry::Status::Missing;
    } else if (entry.found->shape != requirement.shape) {
      entry.status = PlanEntry::Status::ShapeMismatch;
    } else if (!requirement.accepted.empty() &&
               std::find(requirement.accepted.begin(), requirement.accepted.end(), entry.found->dtype) ==
                   requirement.accepted.end()) {
      entry.status = PlanEntry::Status::DTypeMismatch;
    } else {
      entry.status = PlanEntry::Status::Ok;
      plan.total_bytes += entry.found->nbytes;
    }
    if (entry.found) used_stored.insert(entry.stored_name);
    plan.entries.push_back(std::move(entry));
  }
  // A tensor asked for under another of its names (an alias, or its stored form) is used too.
  for (const auto& name : source.names())
    if (!requested.contains(name) && !used_stored.contains(source.stored_name(name))) plan.unused.push_back(name);
  return plan;
}

bool LoadPlan::ok() const { return problem_count() == 0; }

std::size_t LoadPlan::problem_count() const {
  return static_cast<std::size_t>(
      std::count_if(entries.begin(), entries.end(), [](const PlanEntry& e) { return is_problem(e.status); }));
}

namespace {

struct Row {
  std::array<std::string, 7> cells;
};

// A name with its last run of digits replaced by "{}", and that number (-1: the name has none).
std::pair<std::string, long long> last_number(const std::string& name) {
  const std::size_t end = name.find_last_of("0123456789");
  if (end == std::string::npos) return {name, -1};
  std::size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (end - begin > 9) return {name, -1};
  return {name.substr(0, begin) + "{}" + name.substr(end + 1), std::stoll(name.substr(begin, end - begin + 1))};
}

// Rows that say the same thing about tensors numbered a, a + 1, ... b (layers, experts) become one
// row "...{a..b}..." at the first one's place: a 48-layer model of 128 experts has 18k tensors,
// and a table of them all would hide the one that is missing. Only rows whose status, dtype, shape,
// size, file and note are all equal fold (so a model sharded over files folds per file), and only
// runs of at least kFold consecutive numbers; every other row (any problem included) stays as it is.
void fold_numbered_rows(std::vector<Row>& rows) {
  constexpr std::size_t kFold = 8;
  struct Group {
    std::vector<std::size_t> members;  // row indices, in order
    std::vector<long long> numbers;
  };
  std::map<std::pair<std::string, std::array<std::string, 6>>, Group> groups;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto [name, number] = last_number(rows[i].cells[0]);
    if (number < 0 || rows[i].cells[1] != "ok") continue;
    std::array<std::string, 6> rest;
    std::copy(rows[i].cells.begin() + 1, rows[i].cells.end(), rest.begin());
    Group& g = groups[{name, rest}];
    g.members.push_back(i);
    g.numbers.push_back(number);
  }
  std::vector<bool> drop(rows.size(), false);
  for (auto& [key, g] : groups) {
    if (g.members.size() < kFold) continue;
    // Each maximal run of consecutive numbers folds on its own.
    std::vector<std::size_t> order(g.members.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return g.numbers[a] < g.numbers[b]; });
    for (std::size_t begin = 0, end = 1; begin < order.size(); begin = end, end = begin + 1) {
      while (end < order.size() && g.numbers[order[end]] == g.numbers[order[end - 1]] + 1) ++end;
      if (end - begin < kFold) continue;
      std::size_t first = g.members[order[begin]];
      for (std::size_t j = begin; j < end; ++j) first = std::min(first, g.members[order[j]]);
      for (std::size_t j = begin; j < end; ++j)
        if (g.members[order[j]] != first) drop[g.members[order[j]]] = true;
      std::string folded = key.first;
      folded.replace(folded.find("{}"), 2,
                     fmt::format("{{{}..{}}}", g.numbers[order[begin]], g.numbers[order[end - 1]]));
      rows[first].cells[0] = folded;
      rows[first].cells[4] += fmt::format(" x{}", end - begin);
    }
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (drop[i]) continue;
    if (out != i) rows[out] = std::move(rows[i]);
    ++out;
  }
  rows.resize(out);
}

}  // namespace

std::string LoadPlan::table() const {
  std::vector<Row> rows;
  rows.push_back({{"tensor", "status", "dtype", "shape", "size", "file", "note"}});
  std::array<std::size_t, 5> counts{};
  for (const auto& e : entries) {
    ++counts[static_cast<std::size_t>(e.status)];
    Row row;
    row.cells[0] = display_name(e);
    row.cells[1] = std::string(status_name(e.status));
    if (e.found) {
      row.cells[2] = std::string(dtype_name(e.found->dtype));
      row.cells[3] = shape_str(e.found->shape);
      row.cells[4] = format_bytes(e.found->nbytes);
      row.cells[5] = std::filesystem::path(e.found->file).filename().string();
    } else {
      row.cells[2] = row.cells[3] = row.cells[4] = row.cells[5] = "-";
    }
    switch (e.status) {
      case PlanEntry::Status::ShapeMismatch: row.cells[6] = "expected " + shape_str(e.requirement.shape); break;
      case PlanEntry::Status::DTypeMismatch:
        row.cells[6] = "expected " + dtype_list(e.requirement.accepted, " or ");
        break;
      case PlanEntry::Status::Missing:
        row.cells[6] = fmt::format("need {} {}", shape_str(e.requirement.shape),
                                   e.requirement.accepted.empty() ? "" : dtype_list(e.requirement.accepted, "/"));
        break;
      case PlanEntry::Status::OptionalMissing: row.cells[6] = "optional"; break;
      case PlanEntry::Status::Ok: break;
    }
    rows.push_back(std::move(row));
  }
  fold_numbered_rows(rows);

  std::array<std::size_t, 7> width{};
  for (const auto& row : rows)
    for (std::size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], row.cells[c].size());
  std::string out = fmt::format("Load plan for {}\n", source);
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < width.size(); ++c) {
      // Size is a number: right-align it so magnitudes line up.
      line += c == 4 ? fmt::format("{:>{}}  ", row.cells[c], width[c]) : fmt::format("{:<{}}  ", row.cells[c], width[c]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += "  " + line + "\n";
  }

  using S = PlanEntry::Status;
  auto count = [&](S s) { return counts[static_cast<std::size_t>(s)]; };
  out += fmt::format("summary: {}, {} to load; {} missing, {}, {}, {} absent; {} unused in the source => {}\n",
                     plural(entries.size(), "tensor", "tensors"), format_bytes(total_bytes), count(S::Missing),
                     plural(count(S::ShapeMismatch), "shape mismatch", "shape mismatches"),
                     plural(count(S::DTypeMismatch), "dtype mismatch", "dtype mismatches"),
                     plural(count(S::OptionalMissing), "optional tensor", "optional tensors"), unused.size(),
                     ok() ? "OK" : plural(problem_count(), "problem", "problems"));
  if (!unused.empty()) {
    constexpr std::size_t kShown = 20;  // the full list is in to_json()
    std::vector<std::string_view> shown(unused.begin(), unused.begin() + std::min(unused.size(), kShown));
    out += fmt::format("unused: {}{}\n", fmt::join(shown, ", "),
                       unused.size() > kShown ? fmt::format(", ... and {} more", unused.size() - kShown) : "");
  }
  return out;
}

nlohmann::json LoadPlan::to_json() const {
  using nlohmann::json;
  json items = json::array();
  json counts = json::object();
  for (auto s : {PlanEntry::Status::Ok, PlanEntry::Status::Missing, PlanEntry::Status::OptionalMissing,
                 PlanEntry::Status::ShapeMismatch, PlanEntry::Status::DTypeMismatch})
    counts[std::string(status_name(s))] = 0;
  for (const auto& e : entries) {
    counts[std::string(status_name(e.status))] = counts[std::string(status_name(e.status))].get<std::size_t>() + 1;
    json accepted = json::array();
    for (auto d : e.requirement.accepted) accepted.push_back(dtype_name(d));
    json item = {
        {"name", e.requirement.name},
        {"stored_name", e.found ? e.found->stored_name : e.stored_name},
        {"status", status_name(e.status)},
        {"optional", e.requirement.optional},
        {"expected_shape", e.requirement.shape},
        {"accepted_dtypes", accepted},
        {"file", nullptr},
        {"dtype", nullptr},
        {"shape", nullptr},
        {"bytes", nullptr},
    };
    if (e.found) {
      item["file"] = e.found->file;
      item["dtype"] = dtype_name(e.found->dtype);
      item["shape"] = e.found->shape;
      item["bytes"] = e.found->nbytes;
    }
    items.push_back(std::move(item));
  }
  return {
      {"source", source},      {"ok", ok()},         {"problem_count", problem_count()},
      {"total_bytes", total_bytes}, {"tensor_count", entries.size()}, {"counts", counts},
      {"entries", items},      {"unused", unused},
  };
}

}  // namespace zoo
