#include "zoo/load_plan.hpp"

#include "zoo/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
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

std::string LoadPlan::table() const {
  struct Row {
    std::array<std::string, 7> cells;
  };
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
