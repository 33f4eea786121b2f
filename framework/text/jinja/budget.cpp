// The budgets of the render running on this thread: steps (work) and bytes of values built, shared
// by the renderer and every builtin without passing a context through each of them.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {
thread_local Budget* active_budget = nullptr;
}  // namespace

Budget::Budget(const RenderLimits& limits) : limits_(limits), previous_(active_budget) {
  active_budget = this;
}
Budget::~Budget() {
  active_budget = previous_;
}

void charge_steps(std::uint64_t n) {
  Budget* b = active_budget;
  if (!b) return;
  b->steps_ += n;
  if (b->steps_ > b->limits_.max_steps)
    failure(fmt::format("the template ran more than {} steps (a loop or recursion without end?)",
                        b->limits_.max_steps));
}

void charge_bytes(std::uint64_t n) {
  Budget* b = active_budget;
  if (!b) return;
  b->bytes_ += n;
  if (b->bytes_ > b->limits_.max_value_bytes)
    failure(
        fmt::format("the template built more than {} MiB of values (a string or list growing without end?)",
                    b->limits_.max_value_bytes >> 20));
  charge_steps(n / 256);
}

std::size_t string_cap() {
  return active_budget ? active_budget->limits_.max_output_bytes : RenderLimits{}.max_output_bytes;
}

void check_length(std::size_t size) {
  if (active_budget && size > string_cap())
    failure(fmt::format("a string longer than the output cap ({} MiB)", string_cap() >> 20));
}

std::size_t find_text(std::string_view s, std::string_view sub, std::size_t from) {
  if (from > s.size()) return std::string_view::npos;
  if (sub.empty()) return from;
  // Two-way search reads no further than the match: the bytes up to it are the work.
  const void* at = ::memmem(s.data() + from, s.size() - from, sub.data(), sub.size());
  const std::size_t f =
      at ? static_cast<std::size_t>(static_cast<const char*>(at) - s.data()) : std::string_view::npos;
  charge_steps(1 + ((at ? f + sub.size() : s.size()) - from) / 64);
  return f;
}

// The last match is the first match of the reversed needle in the reversed text: linear as well.
std::size_t rfind_text(std::string_view s, std::string_view sub) {
  if (sub.size() > s.size()) return std::string_view::npos;
  if (sub.empty()) return s.size();
  charge_bytes(s.size() + sub.size());
  const std::string rs(s.rbegin(), s.rend()), rsub(sub.rbegin(), sub.rend());
  const std::size_t f = find_text(rs, rsub);
  return f == std::string_view::npos ? f : s.size() - f - sub.size();
}

}  // namespace zoo::jinja::detail
