#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zoo {

// A request JSON: {"input_ids": [...], ...}. `input_ids` is the framework's; every other top-level
// field is the model's to interpret (Model::prepare), so the framework stays model-agnostic.
struct Request {
  std::filesystem::path file;  // for messages
  std::vector<std::int64_t> input_ids;
  nlohmann::json fields = nlohmann::json::object();  // everything except input_ids
};

// InputError "FILE: what is wrong" on malformed input (unreadable, not JSON, not an object,
// input_ids missing/empty/not integers).
Request load_request(const std::filesystem::path& file);
Request parse_request(const std::string& text, const std::filesystem::path& label);

}  // namespace zoo
