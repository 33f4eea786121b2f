// Hugging Face tokenizer.json (BPE family: byte-level and sentencepiece-style), mirroring what the `tokenizers` library does
// for encode(add_special_tokens=False) and decode: the order of operations, the Split behaviours,
// the added-token flags and the merge order are the library's, so ids come out identical.
#include "zoo/tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include "regex_work.hpp"
#include "token_trie.hpp"
#include "tokenizer_unicode.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {
namespace {

using Json = nlohmann::json;
using tokenizer_detail::append_codepoint;
using tokenizer_detail::append_lossy_utf8;
using tokenizer_detail::decode_codepoint;
using tokenizer_detail::first_invalid_utf8;
using tokenizer_detail::is_white_space;
using tokenizer_detail::is_word_char;
using tokenizer_detail::TokenTrie;

// Text from tokenizer.json (a token, a pattern) as messages quote it: a megabyte-long pattern would
// drown the message, so at most 80 bytes (cut on a character boundary), then "..." and the length.
std::string abbrev(std::string_view s) {
  constexpr size_t kMax = 80;
  if (s.size() <= kMax) return std::string(s);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", s.substr(0, cut), s.size());
}

// A token id as tokenizer.json spells it: an integer in 0..INT32_MAX (BPE ids are int32 here, as
// in HF), or nullopt. nlohmann keeps positive integers unsigned, so both kinds are read as such
// (no narrowing of 2^64-1 to -1, no overflow later).
std::optional<int64_t> token_id(const Json& j) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT32_MAX)) return static_cast<int64_t>(u);
  } else if (j.is_number_integer()) {
    const auto v = j.get<int64_t>();
    if (v >= 0 && v <= INT32_MAX) return v;
  }
  return std::nullopt;
}

// ---- PCRE2 -------------------------------------------------------------------------------------

// Oniguruma's \s is Unicode White_Space; PCRE2 10.42's (with UCP) also takes U+180E: \s and \S
// spelled out as White_Space, so both engines split alike (\S inside a class is left as is).
std::string onig_compatible(const std::string& pattern) {
  static constexpr const char* kWhite = R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') out += in_class ? std::string(kWhite) : fmt::format("[{}]", kWhite);
      else if (e == 'S' && !in_class) out += fmt::format("[^{}]", kWhite);
      else (out += '\\') += e;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a leading ] is literal
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// What one encode call may spend, and where in the caller's text it is, for messages.
struct Work {
  // Backtracking that a start position may spend beyond kCheapSteps, in PCRE2 match-limit units,
  // for the whole call: kBaseSteps + kStepsPerByte per byte of the text. A fixed per-call limit
  // (PCRE2's own) bounds one start position only; a pattern like a*a*b|. on a run of a's stays
  // under it at every position and takes time cubic in the run.
  static constexpr uint64_t kBaseSteps = 1 << 20, kStepsPerByte = 32;
  uint64_t steps_left = kBaseSteps, steps_total = kBaseSteps;
  size_t text_bytes = 0;
  // Pieces that are views into `text` are placed exactly; others (normalized copies) at `origin`,
  // the start of the raw stretch they came from. `label` replaces the position when not encoding.
  std::string_view text;
  size_t origin = 0;
  std::string label;
  // The most bytes normalization may make of the piece at hand: kGrowth x its bytes + kGrowthSlack.
  // Real normalizers grow text a little (Replace " " -> U+2581 3x; NFKD of U+FDFA, the worst
  // single character, 11x); 40 chained Replace a -> aa would make 2^40 bytes of one "a".
  static constexpr size_t kGrowth = 32, kGrowthSlack = 4096;
  size_t piece_bytes = 0, grow_limit = kGrowthSlack;
  void normalizing(size_t bytes) {
    piece_bytes = bytes;
    grow_limit = kGrowth * bytes + kGrowthSlack;
  }

  explicit Work(std::string_view t) : text_bytes(t.size()), text(t) {
    steps_left = steps_total = kBaseSteps + kStepsPerByte * t.size();
  }
  std::string where(const char* p) const {
    if (!label.empty()) return label;
    const std::less_equal<const char*> le;
    if (p && le(text.data(), p) && le(p, text.data() + text.size()))
      return fmt::format("at byte {} of the text", p - text.data());
    return fmt::format("in the text from byte {}", origin);
  }
};

// A compiled pattern (UTF + UCP, JIT when the platform has it). Patterns come from tokenizer.json,
// written for Oniguruma; the ones that family uses (\p{..}, (?i:..), look-ahead) mean the same here
// (\s and \S after onig_compatible).
class Regex {
 public:
  Regex(const std::string& source, const std::string& where) : where_(where), shown_(abbrev(source)) {
    const std::string pattern = onig_compatible(source);
    int err = 0;
    PCRE2_SIZE offset = 0;
    // NEVER_BACKSLASH_C: \C matches one byte and could leave a match inside a UTF-8 sequence,
    // which the next NO_UTF_CHECK match would trust. NO_AUTO_POSSESS: auto-possessified repeats
    // rescan without counting toward the match limit, so the limit stops measuring the work;
    // without it every give-back counts. USE_OFFSET_LIMIT: lets a match try one start position.
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_NO_AUTO_POSSESS |
                              PCRE2_USE_OFFSET_LIMIT,
                          &err, &offset, nullptr);
    if (!code_) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw InputError(fmt::format("{}: regex /{}/ does not compile at offset {}: {}", where, shown_, offset,
                                   reinterpret_cast<const char*>(msg.data())));
    }
    if (const auto what = tokenizer_detail::uncounted_construct(pattern); !what.empty()) {
      pcre2_code_free(code_);
      throw InputError(fmt::format("{}: regex /{}/ uses {}, whose work PCRE2's match limit does not count (a long "
                                   "line would take quadratic time); Zoo refuses it",
                                   where, shown_, what));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls f(start, end) for every match in s, left to right, the way the onig crate's find_iter
  // steps (an empty match right after the previous match is skipped by advancing one character).
  // s must be valid UTF-8. Spends work's budget; InputError (naming the file, the pattern and the
  // position) when a start position needs more than is left.
  template <class F>
  void for_each_match(std::string_view s, Work& work, F&& f) const {
    Matcher m(*this, s, work);
    size_t search_from = 0;
    std::optional<size_t> last_match_end;
    while (search_from <= s.size()) {
      const int rc = m.first_match(search_from);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
      const size_t start = ov[0], end = ov[1];
      if (start == end && last_match_end && *last_match_end == end) {
        if (search_from >= s.size()) return;
        search_from += tokenizer_detail::utf8_length(static_cast<unsigned char>(s[search_from]));
        continue;
      }
      search_from = end;
      last_match_end = end;
      f(start, end);
    }
  }

 private:
  // Every start position gets kCheapSteps for free: the ones tried number at most a few per byte,
  // so that part is linear by construction. A position that needs more is retried alone with
  // doubling limits, each drawn from the call's budget (so it pays at most 4x what it used).
  static constexpr uint32_t kCheapSteps = 1000;
  // The interpreter (the JIT's fallback on deep recursion) keeps its frames on the heap; PCRE2's
  // default cap is 20 GB.
  static constexpr uint32_t kHeapLimitKiB = 256 * 1024;

  // One match data and context per call (a pattern is shared between threads); one ovector pair
  // is all we read.
  struct Matcher {
    const Regex& re;
    std::string_view s;
    Work& work;
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    pcre2_match_context* mc = pcre2_match_context_create(nullptr);

    Matcher(const Regex& r, std::string_view subject, Work& w) : re(r), s(subject), work(w) {
      if (!md || !mc) {
        free();
        throw std::bad_alloc();
      }
      pcre2_set_heap_limit(mc, kHeapLimitKiB);
    }
    ~Matcher() { free(); }
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    void free() {
      pcre2_match_data_free(md);
      pcre2_match_context_free(mc);
    }

    // from: the first start position; only_there: try no other.
    int run(size_t from, bool only_there, uint32_t limit) {
      pcre2_set_match_limit(mc, limit);
      pcre2_set_offset_limit(mc, only_there ? from : PCRE2_UNSET);
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
      int rc = re.jit_ ? pcre2_jit_match(re.code_, subject, s.size(), from, PCRE2_NO_UTF_CHECK, md, mc)
                       : pcre2_match(re.code_, subject, s.size(), from, PCRE2_NO_UTF_CHECK, md, mc);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: the interpreter keeps its frames on the heap
        rc = pcre2_match(re.code_, subject, s.size(), from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, mc);
      return rc;
    }

    // The first match starting at or after `from` (rc > 0, in md) or PCRE2_ERROR_NOMATCH.
    int first_match(size_t from) {
      int rc = run(from, false, kCheapSteps);
      if (rc == PCRE2_ERROR_MATCHLIMIT) {
        // Some position from `from` on needs more: find it one position at a time.
        for (size_t p = from;; p += tokenizer_detail::utf8_length(static_cast<unsigned char>(s[p]))) {
          uint32_t limit = kCheapSteps;
          while ((rc = run(p, true, limit)) == PCRE2_ERROR_MATCHLIMIT) {
            const uint64_t want = 2 * static_cast<uint64_t>(limit);
            if (want > work.steps_left || want > UINT32_MAX)
              throw InputError(fmt::format("{}: regex /{}/ backtracks past this text's budget ({} steps for {} bytes) {}",
                                           re.where_, re.shown_, work.steps_total, work.text_bytes,
                                           work.where(s.data() + p)));
            work.steps_left -= want;
            limit = static_cast<uint32_t>(want);
          }
          if (rc != PCRE2_ERROR_NOMATCH || p >= s.size()) break;
        }
      }
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(rc, msg.data(), msg.size());
        throw InputError(fmt::format("{}: regex /{}/ failed {}: {}", re.where_, re.shown_, work.where(s.data() + from),
                                     reinterpret_cast<const char*>(msg.data())));
      }
      return rc;
    }
  };

  std::string where_, shown_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

// A Split/Replace pattern: {"Regex": ...} or {"String": ...} (a literal).
struct Pattern {
  std::unique_ptr<Regex> regex;
  std::string literal;

  template <class F>
  void for_each_match(std::string_view s, Work& work, F&& f) const {
    if (regex) return regex->for_each_match(s, work, f);
    if (literal.empty()) return;
    for (size_t pos = s.find(literal); pos != std::string_view::npos; pos = s.find(literal, pos + literal.size()))
      f(pos, pos + literal.size());
  }
};

// ---- reading tokenizer.json ---------------------------------------------------------------------

struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", file, what)); }
  const Json& member(const Json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) fail(fmt::format("{} has no \"{}\"", where, key));
    return obj.at(key);
  }
  std::string string_of(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = member(obj, key, where);
    if (!v.is_string()) fail(fmt::format("{}.{} is not a string", where, key));
    return v.get<std::string>();
  }
  bool bool_of(const Json& obj, const char* key, bool fallback) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
    if (!obj.at(key).is_boolean()) fail(fmt::format("\"{}\" is not a boolean", key));
    return obj.at(key).get<bool>();
  }
  Pattern pattern(const Json& obj, const std::string& where) const {
    const Json& p = member(obj, "pattern", where);
    Pattern out;
    if (p.is_object() && p.contains("Regex") && p.at("Regex").is_string()) {
      out.regex = std::make_unique<Regex>(p.at("Regex").get<std::string>(), file + ": " + where);
    } else if (p.is_object() && p.contains("String") && p.at("String").is_string()) {
      out.literal = p.at("String").get<std::string>();
    } else {
      fail(fmt::format("{}.pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}", where));
    }
    return out;
  }
};

// ---- normalizers ----------------------------------------------------------------------------------

enum class NormKind { NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend };

struct NormStep {
  NormKind kind;
  bool strip_left = false, strip_right = false;
  Pattern pattern;
  std::string content;  // Replace's content, Prepend's prepend
  std::string where;    // the file and which normalizer, for messages
};

[[noreturn]] void grew_too_much(const NormStep& step, const Work& work) {
  throw InputError(fmt::format("{} grows the text past {} bytes ({} x its {} bytes + {}) {}", step.where,
                               work.grow_limit, Work::kGrowth, work.piece_bytes, Work::kGrowthSlack,
                               work.where(nullptr)));
}

std::string utf8proc_normalize(std::string_view s, NormKind kind) {
  // Pure ASCII is invariant under every normalization form; below U+0300 nothing composes, so NFC
  // leaves it alone too. Both are the common case and skip the library call.
  unsigned char top = 0;
  bool below_300 = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    top |= c;
    if (c >= 0xCC) below_300 = false;  // lead bytes of U+0300 and above
  }
  if (top < 0x80 || (kind == NormKind::NFC && below_300)) return std::string(s);
  int options = UTF8PROC_STABLE;
  switch (kind) {
    case NormKind::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormKind::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormKind::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                              &out, static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(out, &std::free);
  if (n < 0) throw std::runtime_error(fmt::format("tokenizer normalization failed: {}", utf8proc_errmsg(n)));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = decode_codepoint(s, i, len);
    i += len;
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping (Rust's char::to_lowercase)
      out += "i\xCC\x87";
    } else {
      append_codepoint(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
  }
  return out;
}

void apply_step(const NormStep& step, std::string& s, Work& work) {
  switch (step.kind) {
    case NormKind::NFC:
    case NormKind::NFD:
    case NormKind::NFKC:
    case NormKind::NFKD: s = utf8proc_normalize(s, step.kind); return;
    case NormKind::Lowercase: s = lowercase(s); return;
    case NormKind::Strip: {
      size_t b = 0, e = s.size();
      if (step.strip_left) {
        while (b < e) {
          size_t len = 0;
          if (!is_white_space(decode_codepoint(s, b, len))) break;
          b += len;
        }
      }
      if (step.strip_right) {
        while (e > b) {
          size_t p = e - 1;
          while (p > b && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
          size_t len = 0;
          if (!is_white_space(decode_codepoint(s, p, len))) break;
          e = p;
        }
      }
      s = s.substr(b, e - b);
      return;
    }
    case NormKind::Replace: {
      if (s.empty()) return;  // HF's find_matches gives an empty string no match, not an empty one
      std::string out;
      size_t prev = 0;
      step.pattern.for_each_match(s, work, [&](size_t a, size_t b) {
        out.append(s, prev, a - prev);
        out += step.content;
        prev = b;
        if (out.size() > work.grow_limit) grew_too_much(step, work);  // before it grows any further
      });
      out.append(s, prev, std::string::npos);
      s = std::move(out);
      return;
    }
    case NormKind::Prepend:
      if (!s.empty()) s = step.content + s;
      return;
  }
}

// One normalizer step, its output held to work.grow_limit.
void apply_normalizer(const NormStep& step, std::string& s, Work& work) {
  apply_step(step, s, work);
  if (s.size() > work.grow_limit) grew_too_much(step, work);
}

void read_normalizer(const Reader& r, const Json& j, std::vector<NormStep>& out) {
  if (j.is_null()) return;
  const std::string type = r.string_of(j, "type", "normalizer");
  if (type == "Sequence") {
    const Json& list = r.member(j, "normalizers", "normalizer Sequence");
    if (!list.is_array()) r.fail("normalizer Sequence.normalizers is not an array");
    for (const auto& n : list) read_normalizer(r, n, out);
    return;
  }
  NormStep step{};
  if (type == "NFC") step.kind = NormKind::NFC;
  else if (type == "NFD") step.kind = NormKind::NFD;
  else if (type == "NFKC") step.kind = NormKind::NFKC;
  else if (type == "NFKD") step.kind = NormKind::NFKD;
  else if (type == "Lowercase") step.kind = NormKind::Lowercase;
  else if (type == "Strip") {
    step.kind = NormKind::Strip;
    step.strip_left = r.bool_of(j, "strip_left", true);
    step.strip_right = r.bool_of(j, "strip_right", true);
  } else if (type == "Replace") {
    step.kind = NormKind::Replace;
    step.pattern = r.pattern(j, "normalizer Replace");
    step.content = r.string_of(j, "content", "normalizer Replace");
  } else if (type == "Prepend") {
    step.kind = NormKind::Prepend;
    step.content = r.string_of(j, "prepend", "normalizer Prepend");
  } else {
    r.fail(fmt::format("normalizer type '{}' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
                       "Replace, Prepend, Sequence)",
                       type));
  }
  step.where = fmt::format("{}: normalizer {} (step {} of the chain)", r.file, type, out.size() + 1);
  out.push_back(std::move(step));
}

// ---- pre-tokenizers -----------------------------------------------------------------------------

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct SplitStep {
  Pattern pattern;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
};

struct Span {
  size_t begin, end;
  bool match;
};

// HF's SplitDelimiterBehavior applied to a piece: the matches and the gaps between them, combined
// as the behaviour says, handed to emit(begin, end) left to right as they are found (at most one
// span held back, for the merging behaviours). Empty results are dropped (as
// PreTokenizedString::split does).
template <class Emit>
void split_piece(const SplitStep& step, std::string_view piece, Work& work, Emit&& emit) {
  std::optional<Span> held;
  bool previous_match = false, first = true;
  auto give = [&](const Span& s) {
    if (s.end > s.begin) emit(s.begin, s.end);
  };
  auto take = [&](Span s) {
    if (step.invert) s.match = !s.match;
    switch (step.behavior) {
      case Behavior::Removed:
        if (!s.match) give(s);
        break;
      case Behavior::Isolated:
        give(s);
        break;
      case Behavior::MergedWithPrevious:  // a match joins the gap before it
        if (s.match && !previous_match && held) {
          held->end = s.end;
        } else {
          if (held) give(*held);
          held = s;
        }
        break;
      case Behavior::MergedWithNext:  // a match joins the gap after it (only matches are held)
        if (s.match) {
          if (held) give(*held);
          held = s;
        } else if (held) {
          give({held->begin, s.end, false});
          held.reset();
        } else {
          give(s);
        }
        break;
      case Behavior::Contiguous:  // runs of matches, runs of gaps
        if (!first && previous_match == s.match && held) {
          held->end = s.end;
        } else {
          if (held) give(*held);
          held = s;
        }
        break;
    }
    previous_match = s.match;
    first = false;
  };
  size_t prev = 0;
  step.pattern.for_each_match(piece, work, [&](size_t a, size_t b) {
    if (prev != a) take({prev, a, false});
    take({a, b, true});
    prev = b;
  });
  if (prev != piece.size()) take({prev, piece.size(), false});
  if (held) give(*held);
}

// HF's Metaspace pre-tokenizer: every ' ' becomes the replacement character, the replacement is
// put in front (always; first: only for the piece that starts the input, as HF's offsets say;
// never) unless the piece already starts with it, then (split) the piece is cut before every
// replacement character (Split on it, MergedWithNext).
enum class PrependScheme { Always, First, Never };

struct MetaspaceStep {
  std::string replacement;  // one character
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
  SplitStep splitter;  // the replacement as a literal, MergedWithNext
  std::string where;   // the file and which pre-tokenizer, for messages
};

// A pre-tokenizer before ByteLevel: a Split or a Metaspace.
struct PreStep {
  std::optional<SplitStep> split;
  std::optional<MetaspaceStep> metaspace;
};

// One piece of text between pre-tokenizer steps, and whether it starts the input (HF's
// offsets_original().0 == 0, which Metaspace's prepend_scheme "first" asks).
struct Piece {
  std::string_view text;
  bool at_origin;
};

// The most pre-tokenizers that split a file may chain (each is a level of encode's depth-first walk).
constexpr size_t kMaxSplittingPreTokenizers = 256;

// One encode call's pre-tokenizing: where ids go, and Metaspace's output so far per step, held to
// the normalizers' growth bound on the text given (grow_limit, from text_bytes).
struct PreTokenizing {
  Work& work;
  std::vector<int64_t>& out;
  std::vector<size_t> grown;
  size_t grow_limit, text_bytes;
};

// Metaspace's replace and prepend for one piece, into out.
void metaspace_text(const MetaspaceStep& m, const Piece& p, std::string& out) {
  out.clear();
  out.reserve(p.text.size() + m.replacement.size());
  for (const char c : p.text) {
    if (c == ' ') out += m.replacement;
    else out.push_back(c);
  }
  const bool starts = std::string_view(out).starts_with(m.replacement);
  if (!starts && (m.prepend == PrependScheme::Always || (m.prepend == PrependScheme::First && p.at_origin)))
    out.insert(0, m.replacement);
}

// ByteLevel's own pattern, the one it splits with when use_regex is set.
constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The ByteLevel byte table (bytes_to_unicode): printable bytes stand for themselves, the other 68 (controls, space,
// 0x7F-0xA0, 0xAD) for U+0100 upwards in byte order.
std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? b : next++;
  }
  return table;
}

// ---- added tokens ---------------------------------------------------------------------------------

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
  // What id_to_token and decode give: HF hands back a normalized token in its normalized form.
  std::string shown;
};

// One piece of the input after splitting on added tokens: text (id < 0) or an added token.
struct Segment {
  size_t begin, end;
  int64_t id;
};

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t p = s.size() - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  size_t len = 0;
  return is_word_char(decode_codepoint(s, p, len));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t len = 0;
  return is_word_char(decode_codepoint(s, 0, len));
}

// ---- BPE ----------------------------------------------------------------------------------------

struct PairHash {
  size_t operator()(uint64_t k) const noexcept {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Merge {
  uint32_t rank;
  int32_t id;
};

// 12 bytes: a piece of 20 MB is 20 M symbols. A symbol merged into the one before it has id -1.
struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool live() const { return id >= 0; }
};

// Metaspace's fields as HF reads them (pre-tokenizer and decoder alike): replacement is one
// character; prepend_scheme first/always/never, always when absent; the older add_prefix_space:
// false must come with prepend_scheme never (HF refuses the file otherwise); split defaults true.
MetaspaceStep read_metaspace(const Reader& r, const Json& j, const std::string& where) {
  MetaspaceStep m;
  m.replacement = r.string_of(j, "replacement", where);
  size_t len = 0;
  if (m.replacement.empty() || first_invalid_utf8(m.replacement) != std::string_view::npos ||
      (decode_codepoint(m.replacement, 0, len), len != m.replacement.size()))
    r.fail(fmt::format("{}.replacement '{}' is not one character", where, abbrev(m.replacement)));
  if (j.contains("prepend_scheme") && !j.at("prepend_scheme").is_null()) {
    const std::string scheme = r.string_of(j, "prepend_scheme", where);
    if (scheme == "always") m.prepend = PrependScheme::Always;
    else if (scheme == "first") m.prepend = PrependScheme::First;
    else if (scheme == "never") m.prepend = PrependScheme::Never;
    else r.fail(fmt::format("{}.prepend_scheme '{}' is unknown (first, always or never)", where, scheme));
  }
  if (j.contains("add_prefix_space") && !r.bool_of(j, "add_prefix_space", true) && m.prepend != PrependScheme::Never)
    r.fail(fmt::format("{}: add_prefix_space false does not match prepend_scheme (HF refuses this too)", where));
  m.split = r.bool_of(j, "split", true);
  return m;
}

// ---- decoders -------------------------------------------------------------------------------------

// A decoder step of a chain (HF's decode_chain: every step maps the list of token strings to a new
// list; decode joins the last one).
enum class DecKind { Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel };

struct DecStep {
  DecKind kind = DecKind::Fuse;
  Pattern pattern;              // Replace
  std::string content;          // Replace's content; Strip's character
  size_t start = 0, stop = 0;   // Strip: how many of the character to take off either end
  std::string replacement;      // Metaspace
  bool prepend_never = false;   // Metaspace: the first token keeps its replacement characters too
  std::string where;            // the file and which decoder, for messages
};

void read_decoder(const Reader& r, const Json& j, std::vector<DecStep>& out) {
  const std::string type = r.string_of(j, "type", "decoder");
  if (type == "Sequence") {
    const Json& list = r.member(j, "decoders", "decoder Sequence");
    if (!list.is_array()) r.fail("decoder Sequence.decoders is not an array");
    for (const auto& d : list) read_decoder(r, d, out);
    return;
  }
  DecStep step;
  if (type == "Replace") {
    step.kind = DecKind::Replace;
    step.pattern = r.pattern(j, "decoder Replace");
    step.content = r.string_of(j, "content", "decoder Replace");
  } else if (type == "ByteFallback") {
    step.kind = DecKind::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecKind::Fuse;
  } else if (type == "Strip") {
    step.kind = DecKind::Strip;
    step.content = r.string_of(j, "content", "decoder Strip");
    size_t len = 0;
    if (step.content.empty() || (decode_codepoint(step.content, 0, len), len != step.content.size()))
      r.fail(fmt::format("decoder Strip.content '{}' is not one character", abbrev(step.content)));
    for (auto [key, field] : {std::pair{"start", &step.start}, {"stop", &step.stop}}) {
      const auto v = token_id(r.member(j, key, "decoder Strip"));  // a count; the same 0..2^31-1 range
      if (!v) r.fail(fmt::format("decoder Strip.{} is not a count", key));
      *field = static_cast<size_t>(*v);
    }
  } else if (type == "Metaspace") {
    const MetaspaceStep m = read_metaspace(r, j, "decoder Metaspace");
    step.kind = DecKind::Metaspace;
    step.replacement = m.replacement;
    step.prepend_never = m.prepend == PrependScheme::Never;
  } else if (type == "ByteLevel") {
    step.kind = DecKind::ByteLevel;
  } else {
    r.fail(fmt::format("decoder type '{}' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                       "Metaspace, Sequence)",
                       type));
  }
  step.where = fmt::format("{}: decoder {} (step {} of the chain)", r.file, type, out.size() + 1);
  out.push_back(std::move(step));
}

// The byte a ByteFallback decoder reads from a token: six bytes, "<0x", two more that Rust's
// u8::from_str_radix(.., 16) takes (hex digits of either case, or '+' and one digit), ">".
std::optional<unsigned char> fallback_byte(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = t[3] == '+' ? 0 : hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

// HF's Strip decoder on one token: up to `start` leading and `stop` trailing copies of the
// character. Where the two overlap or `stop` runs past the token HF panics; here the token is
// stripped to nothing.
std::string strip_token(const DecStep& step, const std::string& t) {
  const std::string_view c = step.content;
  size_t b = 0, e = t.size();
  for (size_t k = 0; k < step.start && std::string_view(t).substr(b).starts_with(c); ++k) b += c.size();
  for (size_t k = 0; k < step.stop && e >= b + c.size() && std::string_view(t).substr(0, e).ends_with(c); ++k) e -= c.size();
  return t.substr(b, e - b);
}

}  // namespace

// ---- the tokenizer --------------------------------------------------------------------------------

struct Tokenizer::Impl {
  std::filesystem::path file;
  std::vector<AddedToken> added;
  std::unordered_map<int64_t, size_t> added_by_id;
  StringMap<size_t> added_by_content;
  TokenTrie raw_trie, normalized_trie;  // tokens matched on raw text / on normalized text

  std::vector<NormStep> normalizers;
  std::vector<PreStep> pre_steps;
  bool byte_level = false, prefix_space = false;
  std::unique_ptr<Regex> byte_level_regex;

  StringMap<int32_t> vocab;
  std::vector<std::string> vocab_r;  // id -> token string ("" for holes)
  std::unordered_map<uint64_t, Merge, PairHash> merges;
  bool ignore_merges = false, byte_fallback = false, fuse_unk = false;
  std::optional<int32_t> unk;
  std::string prefix, suffix;
  std::array<uint32_t, 256> byte_cp{};
  std::array<int32_t, 256> byte_id{};  // vocab id of each byte's character, -1 if absent
  std::array<int32_t, 256> byte_token{};  // vocab id of each byte's <0xXX> token (byte_fallback), -1 if absent
  StringMap<int32_t> raw_vocab;        // byte-level vocab keyed by the bytes (for ignore_merges)

  // ByteLevel alone reads per-id bytes (id_bytes); any other decoder runs as a chain of steps.
  enum class Decoder { None, ByteLevel, Chain } decoder = Decoder::None;
  std::vector<std::string> id_bytes;  // decoder output per id (ByteLevel)
  std::vector<DecStep> dec_steps;
  std::unordered_map<uint32_t, unsigned char> cp_byte;  // ByteLevel's table, backwards
  int64_t size = 0;

  // Per-piece BPE results. HF caches the same way (no effect on ids); pieces are short and repeat.
  mutable std::shared_mutex cache_mutex;
  mutable StringMap<std::vector<int32_t>> cache;
  static constexpr size_t kCacheCapacity = 1 << 17, kCacheMaxPiece = 256;

  void load(const Json& root);
  void bound_ids(const Reader& r);
  void encode_text(std::string_view text, std::vector<int64_t>& out) const;
  void encode_normalized(std::string_view text, bool at_origin, std::vector<int64_t>& out, Work& work) const;
  void pre_tokenize(size_t step, const Piece& piece, PreTokenizing& pt) const;
  void model_piece(std::string_view piece, std::vector<int64_t>& out, Work& work) const;
  void bpe_piece(std::string_view piece, std::vector<int64_t>& out) const;
  void bpe_symbols(std::vector<Symbol>& symbols) const;
  void symbols_for_chars(std::string_view word, std::vector<Symbol>& symbols) const;
  template <class Emit>
  void split_added(std::string_view s, const TokenTrie& trie, Emit&& emit) const;
  std::optional<std::string> unmap(std::string_view token) const;
  std::string run_decoders(std::vector<std::string>& tokens) const;
  void decoder_step(const DecStep& step, std::vector<std::string>& tokens, Work& work) const;
  std::string token_alone(std::string token) const;
};

// Tables indexed by id (vocab_r, id_bytes) are sized by the highest id, so a lone id of 2^28 would
// cost gigabytes. Real files are dense or nearly (released BPE files' added tokens follow the vocab
// directly; a few files leave small holes), so the id space may be at most twice the distinct ids
// plus 1024: tables stay within a small multiple of what the file itself spells out.
void Tokenizer::Impl::bound_ids(const Reader& r) {
  std::vector<int32_t> ids;
  ids.reserve(vocab.size() + added.size());
  for (const auto& [token, id] : vocab) ids.push_back(id);
  for (const auto& a : added) ids.push_back(static_cast<int32_t>(a.id));
  std::sort(ids.begin(), ids.end());
  const auto distinct = static_cast<int64_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
  const int64_t limit = 2 * distinct + 1024;
  auto refuse = [&](const std::string& what, int64_t id) {
    r.fail(fmt::format("{} has id {}, beyond this file's id space: ids must be below {} (twice its {} distinct ids "
                       "plus 1024)",
                       what, id, limit, distinct));
  };
  for (const auto& a : added)
    if (a.id >= limit) refuse(fmt::format("added token '{}'", abbrev(a.content)), a.id);
  if (!ids.empty() && ids[static_cast<size_t>(distinct) - 1] >= limit) {
    // The vocab map has no file order; name the offender with the highest id.
    const auto it = std::max_element(vocab.begin(), vocab.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    refuse(fmt::format("model.vocab['{}']", abbrev(it->first)), it->second);
  }
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab) max_id = std::max<int64_t>(max_id, id);
  vocab_r.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab) vocab_r[static_cast<size_t>(id)] = token;
  for (const auto& a : added) max_id = std::max(max_id, a.id);
  size = max_id + 1;
}

void Tokenizer::Impl::load(const Json& root) {
  const Reader r{file.string()};
  if (!root.is_object()) r.fail("not a JSON object");
  const Json& model = r.member(root, "model", "tokenizer.json");
  std::string type = model.contains("type") && model.at("type").is_string() ? model.at("type").get<std::string>() : "";
  if (type.empty() && model.contains("merges")) type = "BPE";
  if (type != "BPE")
    r.fail(fmt::format("tokenizer model type '{}' is not supported (only BPE, the byte-level family)",
                       type.empty() ? "?" : type));
  // HF reads dropout as an optional f32 in [0, 1]; anything else is refused by name, as there.
  if (model.contains("dropout") && !model.at("dropout").is_null()) {
    const Json& d = model.at("dropout");
    if (!d.is_number()) r.fail(fmt::format("model.dropout is a {}, not a number", d.type_name()));
    const double p = d.get<double>();
    if (!(p >= 0.0 && p <= 1.0)) r.fail(fmt::format("model.dropout {} is outside [0, 1]", abbrev(d.dump())));
    if (p > 0.0) r.fail("BPE dropout is not supported (it makes encode random)");
  }

  // Vocabulary.
  const Json& v = r.member(model, "vocab", "model");
  if (!v.is_object()) r.fail("model.vocab is not an object");
  vocab.reserve(v.size());
  for (const auto& [token, idj] : v.items()) {
    const auto id = token_id(idj);
    if (!id) r.fail(fmt::format("model.vocab['{}'] has id {}, not an integer in 0..2^31-1", abbrev(token), abbrev(idj.dump())));
    vocab.emplace(token, static_cast<int32_t>(*id));
  }

  ignore_merges = r.bool_of(model, "ignore_merges", false);
  byte_fallback = r.bool_of(model, "byte_fallback", false);
  fuse_unk = r.bool_of(model, "fuse_unk", false);
  // Optional strings (HF's Option<String>): absent or null is none, another type is refused.
  const auto optional_string = [&](const char* key) -> std::optional<std::string> {
    if (!model.contains(key) || model.at(key).is_null()) return std::nullopt;
    if (!model.at(key).is_string())
      r.fail(fmt::format("model.{} is a {}, not a string", key, model.at(key).type_name()));
    return model.at(key).get<std::string>();
  };
  prefix = optional_string("continuing_subword_prefix").value_or("");
  suffix = optional_string("end_of_word_suffix").value_or("");
  if (const auto name = optional_string("unk_token")) {
    const auto it = vocab.find(*name);
    if (it == vocab.end()) r.fail(fmt::format("model.unk_token '{}' is not in the vocab", abbrev(*name)));
    unk = it->second;
  }

  // Merges: rank = position; "a b" strings (legacy) or ["a", "b"] pairs.
  const Json& m = r.member(model, "merges", "model");
  if (!m.is_array()) r.fail("model.merges is not an array");
  merges.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    std::string a, b;
    const Json& e = m[i];
    if (e.is_string()) {
      const auto s = e.get<std::string>();
      const auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        r.fail(fmt::format("model.merges[{}] \"{}\" is not two tokens separated by one space", i, s));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      r.fail(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", i));
    }
    const auto ia = vocab.find(a), ib = vocab.find(b);
    if (ia == vocab.end() || ib == vocab.end())
      r.fail(fmt::format("model.merges[{}]: '{}' is not in the vocab", i, ia == vocab.end() ? a : b));
    if (!prefix.empty() && b.size() < prefix.size())
      r.fail(fmt::format("model.merges[{}]: '{}' is shorter than the continuing_subword_prefix", i, b));
    const std::string joined = a + b.substr(prefix.size());
    const auto ij = vocab.find(joined);
    if (ij == vocab.end()) r.fail(fmt::format("model.merges[{}]: the merged token '{}' is not in the vocab", i, joined));
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
    // HF collects the list into a map, so a pair listed twice keeps its last rank.
    merges.insert_or_assign(key, Merge{static_cast<uint32_t>(i), ij->second});
  }

  // Added tokens.
  if (root.contains("added_tokens") && !root.at("added_tokens").is_null()) {
    const Json& list = root.at("added_tokens");
    if (!list.is_array()) r.fail("added_tokens is not an array");
    for (const auto& t : list) {
      AddedToken a;
      if (!t.is_object() || !t.contains("id") || !t.contains("content") || !t.at("content").is_string())
        r.fail("an added_tokens entry lacks an \"id\" or a string \"content\"");
      a.content = t.at("content").get<std::string>();
      const auto id = token_id(t.at("id"));
      if (!id)
        r.fail(fmt::format("added token '{}' has id {}, not an integer in 0..2^31-1", abbrev(a.content),
                           abbrev(t.at("id").dump())));
      a.id = *id;
      a.single_word = r.bool_of(t, "single_word", false);
      a.lstrip = r.bool_of(t, "lstrip", false);
      a.rstrip = r.bool_of(t, "rstrip", false);
      a.special = r.bool_of(t, "special", false);
      a.normalized = r.bool_of(t, "normalized", !a.special);
      if (first_invalid_utf8(a.content) != std::string_view::npos) r.fail("an added token is not valid UTF-8");
      added_by_id[a.id] = added.size();
      added_by_content[a.content] = added.size();
      added.push_back(std::move(a));
    }
  }
  bound_ids(r);

  read_normalizer(r, root.contains("normalizer") ? root.at("normalizer") : Json(), normalizers);

  // Pre-tokenizer chain: Splits and Metaspaces, then at most one ByteLevel, last.
  std::vector<const Json*> chain;
  if (root.contains("pre_tokenizer") && !root.at("pre_tokenizer").is_null()) {
    const Json& p = root.at("pre_tokenizer");
    if (r.string_of(p, "type", "pre_tokenizer") == "Sequence") {
      const Json& list = r.member(p, "pretokenizers", "pre_tokenizer Sequence");
      if (!list.is_array()) r.fail("pre_tokenizer Sequence.pretokenizers is not an array");
      for (const auto& e : list) chain.push_back(&e);
    } else {
      chain.push_back(&p);
    }
  }
  // Encoding walks the splitting steps depth first, a stack frame each: 10^5 would overflow the
  // stack. Released files split at most a few times.
  size_t splitting = 0;
  const auto count_split = [&] {
    if (++splitting > kMaxSplittingPreTokenizers)
      r.fail(fmt::format(
          "pre_tokenizer Sequence splits more than {} times (Split, or Metaspace with split); Zoo "
          "reads at most that many",
          kMaxSplittingPreTokenizers));
  };
  for (size_t i = 0; i < chain.size(); ++i) {
    const Json& p = *chain[i];
    const std::string ptype = r.string_of(p, "type", "pre_tokenizer");
    if (byte_level) r.fail(fmt::format("pre_tokenizer '{}' after ByteLevel is not supported", ptype));
    if (ptype == "Split") {
      SplitStep s;
      s.pattern = r.pattern(p, "pre_tokenizer Split");
      const std::string beh = r.string_of(p, "behavior", "pre_tokenizer Split");
      if (beh == "Removed") s.behavior = Behavior::Removed;
      else if (beh == "Isolated") s.behavior = Behavior::Isolated;
      else if (beh == "MergedWithPrevious") s.behavior = Behavior::MergedWithPrevious;
      else if (beh == "MergedWithNext") s.behavior = Behavior::MergedWithNext;
      else if (beh == "Contiguous") s.behavior = Behavior::Contiguous;
      else r.fail(fmt::format("pre_tokenizer Split behavior '{}' is unknown", beh));
      s.invert = r.bool_of(p, "invert", false);
      count_split();
      pre_steps.push_back({std::move(s), std::nullopt});
    } else if (ptype == "Metaspace") {
      MetaspaceStep m = read_metaspace(r, p, "pre_tokenizer Metaspace");
      m.splitter.pattern.literal = m.replacement;
      m.splitter.behavior = Behavior::MergedWithNext;
      m.where = fmt::format("{}: pre_tokenizer Metaspace (step {} of the chain)", r.file, i + 1);
      if (m.split) count_split();
      pre_steps.push_back({std::nullopt, std::move(m)});
    } else if (ptype == "ByteLevel") {
      byte_level = true;
      prefix_space = r.bool_of(p, "add_prefix_space", true);
      if (r.bool_of(p, "use_regex", true)) byte_level_regex = std::make_unique<Regex>(kByteLevelPattern, r.file);
    } else {
      r.fail(fmt::format("pre_tokenizer type '{}' is not supported (supported: Split, Metaspace, ByteLevel, Sequence)",
                         ptype));
    }
  }

  // HF spells byte tokens with Rust's {:#04X}: "<0x" then two upper-case hex digits.
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(fmt::format("<0x{:02X}>", b));
    byte_token[static_cast<size_t>(b)] = it == vocab.end() ? -1 : it->second;
  }
  byte_cp = byte_to_codepoint();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_codepoint(s, byte_cp[static_cast<size_t>(b)]);
    const auto it = vocab.find(s);
    byte_id[static_cast<size_t>(b)] = it == vocab.end() ? -1 : it->second;
  }

  // Decoder.
  for (int b = 0; b < 256; ++b) cp_byte[byte_cp[static_cast<size_t>(b)]] = static_cast<unsigned char>(b);
  if (byte_level && ignore_merges && prefix.empty() && suffix.empty()) {
    raw_vocab.reserve(vocab.size());
    for (const auto& [token, id] : vocab)
      if (auto raw = unmap(token)) raw_vocab.emplace(std::move(*raw), id);
  }
  if (root.contains("decoder") && !root.at("decoder").is_null()) {
    read_decoder(r, root.at("decoder"), dec_steps);
    decoder = dec_steps.size() == 1 && dec_steps[0].kind == DecKind::ByteLevel ? Decoder::ByteLevel : Decoder::Chain;
  }
  if (decoder == Decoder::ByteLevel) {
    id_bytes.assign(static_cast<size_t>(size), std::string());
    for (size_t id = 0; id < vocab_r.size(); ++id)
      if (!vocab_r[id].empty()) id_bytes[id] = unmap(vocab_r[id]).value_or(vocab_r[id]);
  }

  // Normalized tokens are matched, shown and decoded in their normalized form.
  for (size_t i = 0; i < added.size(); ++i) {
    AddedToken& a = added[i];
    a.shown = a.content;
    if (a.normalized) {
      Work work(a.content);
      work.label = fmt::format("in added token '{}'", abbrev(a.content));
      work.normalizing(a.content.size());
      for (const auto& n : normalizers) apply_normalizer(n, a.shown, work);
      normalized_trie.add(a.shown, i);
    } else {
      raw_trie.add(a.content, i);
    }
    if (decoder == Decoder::ByteLevel) id_bytes[static_cast<size_t>(a.id)] = unmap(a.shown).value_or(a.shown);
  }
  raw_trie.build();
  normalized_trie.build();
  cache.reserve(4096);
}

// HF AddedVocabulary::find_matches: leftmost-longest, then single_word / lstrip / rstrip. Matches
// do not overlap: the next is searched after the previous match (before its rstrip), as HF's
// find_iter does; a rejected single_word match still spends its bytes.
template <class Emit>
void Tokenizer::Impl::split_added(std::string_view s, const TokenTrie& trie, Emit&& emit) const {
  if (trie.empty()) {
    if (!s.empty()) emit(Segment{0, s.size(), -1});
    return;
  }
  size_t start_offset = 0, from = 0;
  // The White_Space run last measured for rstrip: a later match inside it ends at the same place,
  // so a run is walked once however many matches fall in it.
  size_t run_begin = 0, run_end = 0;
  // In chunks: a text where every byte starts a token holds one chunk's matches, not the text's.
  const size_t chunk = std::max<size_t>(size_t{1} << 16, trie.max_length());
  std::vector<TokenTrie::Match> matches;
  for (size_t begin = 0; begin < s.size(); begin += chunk) {
    const size_t scan_from = std::max(begin, from), scan_end = std::min(s.size(), begin + chunk);
    if (scan_from >= scan_end) continue;
    trie.starts(s, scan_from, scan_end, matches);
    for (const auto& m : matches) {
      const size_t at = scan_from + m.offset;
      if (at < from) continue;
      size_t start = at, stop = at + trie.length(m.token);
      from = stop;
      const AddedToken& tok = added[m.token];
      if (tok.single_word) {
        const bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
        const bool stop_space = stop == s.size() || !starts_with_word(s.substr(stop));
        if (!start_space || !stop_space) continue;
      }
      if (tok.lstrip) {
        // HF strips back to the previous segment at most; walking further would be wasted (and
        // quadratic over a run of matches inside White_Space).
        size_t newstart = start;
        while (newstart > start_offset) {
          size_t p = newstart - 1;
          while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
          size_t len = 0;
          if (!is_white_space(decode_codepoint(s, p, len))) break;
          newstart = p;
        }
        start = std::max(newstart, start_offset);
      }
      if (tok.rstrip) {
        if (stop >= run_begin && stop <= run_end) {
          stop = run_end;
        } else {
          run_begin = stop;
          while (stop < s.size()) {
            size_t len = 0;
            if (!is_white_space(decode_codepoint(s, stop, len))) break;
            stop += len;
          }
          run_end = stop;
        }
      }
      if (start_offset < start) emit(Segment{start_offset, start, -1});
      emit(Segment{start, stop, tok.id});
      start_offset = stop;
    }
  }
  if (start_offset != s.size()) emit(Segment{start_offset, s.size(), -1});
}

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int64_t>& out) const {
  Work work(text);
  // Segments are handled as they are found: a text of one-byte added tokens has one a byte.
  split_added(text, raw_trie, [&](const Segment& seg) {
    if (seg.id >= 0) return out.push_back(seg.id);
    const std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
    work.origin = seg.begin;
    // Then the normalizer, then the tokens matched in normalized text (normalized: true).
    std::string owned;
    std::string_view normalized = piece;
    if (!normalizers.empty()) {
      work.normalizing(piece.size());
      owned.assign(piece);
      for (const auto& n : normalizers) apply_normalizer(n, owned, work);
      normalized = owned;
    }
    // Metaspace's prepend_scheme "first" asks whether a piece starts the input; past a normalized
    // token only a normalizer that inserts text at the front could make HF say yes (not done here).
    if (normalized_trie.empty()) return encode_normalized(normalized, seg.begin == 0, out, work);
    split_added(normalized, normalized_trie, [&](const Segment& s2) {
      if (s2.id >= 0)
        out.push_back(s2.id);
      else
        encode_normalized(normalized.substr(s2.begin, s2.end - s2.begin), seg.begin == 0 && s2.begin == 0,
                          out, work);
    });
  });
}

// Pre-tokenizing is depth first: each part a step makes goes through the next steps and the model
// before the step's next part is found, so a line holds one piece per step at a time (a line of
// 20 MB of digits, a piece each, once held 20 M pieces per step: 1.9 GB). The ids are those of
// going step by step over all pieces, as HF does: each piece is split on its own. The depth is the
// number of splitting steps, bounded when the file is read (kMaxSplittingPreTokenizers).
void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_origin, std::vector<int64_t>& out, Work& work) const {
  if (text.empty()) return;
  PreTokenizing pt{work, out, std::vector<size_t>(pre_steps.size(), 0),
                   Work::kGrowth * text.size() + Work::kGrowthSlack, text.size()};
  pre_tokenize(0, {text, at_origin}, pt);
}

void Tokenizer::Impl::pre_tokenize(size_t k, const Piece& p, PreTokenizing& pt) const {
  // Steps that do not split (Metaspace without split) run here in turn; the next split recurses.
  Piece src = p;
  std::string made, spare;
  const SplitStep* splitter = nullptr;
  for (; !splitter; ++k) {
    if (k == pre_steps.size()) return model_piece(src.text, pt.out, pt.work);
    const PreStep& step = pre_steps[k];
    if (step.split) splitter = &*step.split;
    if (!step.metaspace) continue;
    metaspace_text(*step.metaspace, src, spare);  // src.text may view `made`: written into `spare`
    made.swap(spare);
    src.text = made;
    // Metaspace rewrites text, so it is held to the normalizers' growth bound, on the text given.
    pt.grown[k] += made.size();
    if (pt.grown[k] > pt.grow_limit)
      throw InputError(fmt::format("{} grows the text past {} bytes ({} x its {} bytes + {}) {}",
                                   step.metaspace->where, pt.grow_limit, Work::kGrowth, pt.text_bytes,
                                   Work::kGrowthSlack, pt.work.where(nullptr)));
    if (step.metaspace->split) splitter = &step.metaspace->splitter;
  }
  // k is now the step after the splitting one. Only the part that begins where its piece began
  // can start the input.
  split_piece(*splitter, src.text, pt.work, [&](size_t a, size_t b) {
    pre_tokenize(k, {src.text.substr(a, b - a), src.at_origin && a == 0}, pt);
  });
}

// One pre-tokenized piece: ByteLevel's prefix space and its own pattern, then BPE.
void Tokenizer::Impl::model_piece(std::string_view piece, std::vector<int64_t>& out, Work& work) const {
  std::string prefixed;
  if (byte_level && prefix_space && piece.front() != ' ') {
    prefixed.reserve(piece.size() + 1);
    (prefixed += ' ') += piece;
    piece = prefixed;
  }
  if (byte_level_regex) {
    // Isolated: gaps between matches are pieces too (ByteLevel's pattern leaves none in practice).
    size_t prev = 0;
    byte_level_regex->for_each_match(piece, work, [&](size_t a, size_t b) {
      if (prev != a) bpe_piece(piece.substr(prev, a - prev), out);
      if (b > a) bpe_piece(piece.substr(a, b - a), out);
      prev = b;
    });
    if (prev != piece.size()) bpe_piece(piece.substr(prev), out);
  } else {
    bpe_piece(piece, out);
  }
}

// Initial symbols of a word given as characters (the byte-level mapping already applied when
// there is one), as HF's BPE::merge_word builds them: each character, with the continuing-subword
// prefix and end-of-word suffix, looked up in the vocab; an unknown one becomes the <0xXX> tokens of
// all its bytes (prefix and suffix included) when byte_fallback finds every one, else unk_token
// (or nothing without one). HF keeps an unk pending until the next known character or the end, so
// byte-fallback tokens can come before the unk of the character that preceded them, and fuse_unk
// extends a pending unk across them; both are kept here, since the ids must match.
void Tokenizer::Impl::symbols_for_chars(std::string_view word, std::vector<Symbol>& symbols) const {
  std::string s;
  bool unk_pending = false;
  auto flush_unk = [&] {
    if (unk_pending) symbols.push_back({*unk, 0, 0});
    unk_pending = false;
  };
  for (size_t i = 0; i < word.size();) {
    size_t len = 0;
    decode_codepoint(word, i, len);
    const bool first = i == 0, last = i + len == word.size();
    s.clear();
    if (!first) s += prefix;
    s.append(word.substr(i, len));
    if (last) s += suffix;
    i += len;
    if (const auto it = vocab.find(s); it != vocab.end()) {
      flush_unk();
      symbols.push_back({it->second, 0, 0});
      continue;
    }
    if (byte_fallback) {
      const size_t before = symbols.size();
      bool all = true;
      for (const char c : s) {
        const int32_t id = byte_token[static_cast<unsigned char>(c)];
        if (id < 0) {
          all = false;
          break;
        }
        symbols.push_back({id, 0, 0});
      }
      if (all) continue;
      symbols.resize(before);
    }
    if (unk) {
      if (!fuse_unk) flush_unk();
      unk_pending = true;
    }
  }
  flush_unk();
}

void Tokenizer::Impl::bpe_piece(std::string_view piece, std::vector<int64_t>& out) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() < kCacheMaxPiece;
  if (cacheable) {
    std::shared_lock lock(cache_mutex);
    const auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  std::vector<int32_t> ids;
  const bool fast = byte_level && prefix.empty() && suffix.empty();
  std::string mapped;
  if (!fast && byte_level)
    for (unsigned char c : piece) append_codepoint(mapped, byte_cp[c]);
  const std::string_view word = fast || !byte_level ? piece : std::string_view(mapped);

  std::optional<int32_t> whole;
  if (ignore_merges) {
    if (fast) {
      if (const auto it = raw_vocab.find(word); it != raw_vocab.end()) whole = it->second;
    } else if (const auto it = vocab.find(word); it != vocab.end()) {
      whole = it->second;
    }
  }
  if (whole) {
    ids.push_back(*whole);
  } else {
    bool all_bytes = fast;
    if (fast) {
      for (unsigned char c : piece) {
        const int32_t id = byte_id[c];
        if (id < 0) {
          all_bytes = false;
          break;
        }
        symbols.push_back({id, 0, 0});
      }
    }
    if (fast && !all_bytes) {  // a vocab lacking some byte's character: the general path handles unk
      symbols.clear();
      for (unsigned char c : piece) append_codepoint(mapped, byte_cp[c]);
      symbols_for_chars(mapped, symbols);
    } else if (!fast) {
      symbols_for_chars(word, symbols);
    }
    bpe_symbols(symbols);
    // A piece too long to cache puts its ids straight out (no copy the size of a long piece's ids).
    for (const auto& s : symbols)
      if (s.live()) (cacheable ? ids.push_back(s.id) : out.push_back(s.id));
    if (!cacheable && symbols.capacity() > 2 * kCacheMaxPiece) std::vector<Symbol>().swap(symbols);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex);
    if (cache.size() < kCacheCapacity) cache.try_emplace(std::string(piece), std::move(ids));
  }
}

// HF word.rs merge_all: repeatedly merge the adjacent pair with the lowest rank, leftmost first.
// Short words scan linearly; long ones use a heap keyed by (rank, position) as HF does.
void Tokenizer::Impl::bpe_symbols(std::vector<Symbol>& sym) const {
  const auto n = static_cast<int32_t>(sym.size());
  if (n < 2) return;
  for (int32_t i = 0; i < n; ++i) {
    sym[static_cast<size_t>(i)].prev = i - 1;
    sym[static_cast<size_t>(i)].next = i + 1 < n ? i + 1 : -1;
  }
  auto lookup = [&](int32_t a, int32_t b) -> const Merge* {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    const auto it = merges.find(key);
    return it == merges.end() ? nullptr : &it->second;
  };
  auto merge_at = [&](int32_t pos, int32_t new_id) {
    auto& s = sym[static_cast<size_t>(pos)];
    auto& nx = sym[static_cast<size_t>(s.next)];
    s.id = new_id;
    nx.id = -1;
    s.next = nx.next;
    if (s.next >= 0) sym[static_cast<size_t>(s.next)].prev = pos;
  };
  if (n <= 48) {
    for (;;) {
      uint32_t best_rank = UINT32_MAX;
      int32_t best_pos = -1, best_id = -1;
      for (int32_t i = 0; i >= 0 && sym[static_cast<size_t>(i)].next >= 0; i = sym[static_cast<size_t>(i)].next) {
        const Merge* m = lookup(sym[static_cast<size_t>(i)].id, sym[static_cast<size_t>(sym[static_cast<size_t>(i)].next)].id);
        if (m && m->rank < best_rank) {
          best_rank = m->rank;
          best_pos = i;
          best_id = m->id;
        }
      }
      if (best_pos < 0) return;
      merge_at(best_pos, best_id);
    }
  }
  struct Entry {
    uint32_t rank;
    int32_t pos, id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  // A min-heap of pairs; merged pairs are left in it and skipped when they come up (as HF). A piece
  // of a million symbols pushes up to three entries a symbol: when the heap is full, the entries no
  // later pop can use (their symbol merged away, or last) are dropped before it grows.
  std::vector<Entry> heap;
  heap.reserve(static_cast<size_t>(n));
  const auto push = [&](Entry e) {
    if (heap.size() == heap.capacity()) {
      std::erase_if(heap, [&](const Entry& x) {
        const Symbol& at = sym[static_cast<size_t>(x.pos)];
        return !at.live() || at.next < 0;
      });
      std::make_heap(heap.begin(), heap.end(), std::greater<>());
      if (heap.size() > heap.capacity() / 2) heap.reserve(2 * heap.capacity());  // linear time, amortized
    }
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const Merge* m = lookup(sym[static_cast<size_t>(i)].id, sym[static_cast<size_t>(i + 1)].id))
      heap.push_back({m->rank, i, m->id});
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Entry top = heap.back();
    heap.pop_back();
    auto& s = sym[static_cast<size_t>(top.pos)];
    if (!s.live() || s.next < 0) continue;
    const Merge* m = lookup(s.id, sym[static_cast<size_t>(s.next)].id);
    if (!m || m->id != top.id) continue;
    merge_at(top.pos, top.id);
    if (s.prev >= 0)
      if (const Merge* pm = lookup(sym[static_cast<size_t>(s.prev)].id, s.id))
        push({pm->rank, s.prev, pm->id});
    if (s.next >= 0)
      if (const Merge* nm = lookup(s.id, sym[static_cast<size_t>(s.next)].id))
        push({nm->rank, top.pos, nm->id});
  }
}

// ---- public API -----------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  // The one reader of user files: regular files only (a FIFO never blocks), size and depth caps.
  const Json root = read_json_file(tokenizer_json, "a tokenizer file");
  auto impl = std::make_unique<Impl>();
  impl->file = tokenizer_json;
  try {
    impl->load(root);
  } catch (const Json::exception& e) {  // a field of the wrong JSON type somewhere we did not check
    throw InputError(fmt::format("{}: {}", tokenizer_json.string(), e.what()));
  }
  return Tokenizer(std::move(impl));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (const auto bad = first_invalid_utf8(text); bad != std::string_view::npos)
    throw InputError(fmt::format("{}: text to encode is not valid UTF-8 (byte {})", impl_->file.string(), bad));
  // A byte gives at most one id but where normalizers or Metaspace add text: reserved so, a line of
  // digits never reallocates (growing from a third of it held 16 bytes a byte at once), and given
  // back when the text made far fewer.
  std::vector<int64_t> out;
  out.reserve(text.size() + 4);
  impl_->encode_text(text, out);
  if (out.capacity() > 2 * out.size() + 4096) out.shrink_to_fit();
  return out;
}

std::string Tokenizer::decode(std::span<const int64_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::string bytes;
  std::vector<std::string> tokens;  // for a decoder chain
  bool first = true;
  for (const int64_t id : ids) {
    if (id < 0 || id >= m.size) continue;
    const auto added = m.added_by_id.find(id);
    if (added != m.added_by_id.end()) {
      if (skip_special_tokens && m.added[added->second].special) continue;
    } else if (static_cast<size_t>(id) >= m.vocab_r.size() || m.vocab_r[static_cast<size_t>(id)].empty()) {
      continue;
    }
    const std::string& token = added != m.added_by_id.end() ? m.added[added->second].shown : m.vocab_r[static_cast<size_t>(id)];
    if (m.decoder == Impl::Decoder::ByteLevel) {
      bytes += m.id_bytes[static_cast<size_t>(id)];
    } else if (m.decoder == Impl::Decoder::Chain) {
      tokens.push_back(token);
    } else {  // no decoder: HF joins the token strings with spaces
      if (!first) bytes += ' ';
      bytes += token;
    }
    first = false;
  }
  if (m.decoder == Impl::Decoder::Chain) bytes = m.run_decoders(tokens);
  std::string out;
  out.reserve(bytes.size());
  append_lossy_utf8(out, bytes);
  return out;
}

std::optional<std::string> Tokenizer::Impl::unmap(std::string_view token) const {
  // The bytes a byte-level token string stands for; nullopt for a string with a character outside
  // the table (HF's ByteLevel decoder then takes the string's own UTF-8).
  std::string out;
  for (size_t i = 0; i < token.size();) {
    size_t len = 0;
    const uint32_t cp = decode_codepoint(token, i, len);
    i += len;
    const auto it = cp_byte.find(cp);
    if (it == cp_byte.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

// HF's decode_chain, step by step, then the strings joined. Decoding is held to the same bounds as
// encoding: a Replace regex spends a budget set by the bytes of the tokens, and the tokens may
// grow to kGrowth x their bytes + kGrowthSlack (checked while a Replace builds a token and after
// every step), so a chain of Replace a -> aa cannot double its way to gigabytes.
std::string Tokenizer::Impl::run_decoders(std::vector<std::string>& tokens) const {
  size_t total = 0;
  for (const auto& t : tokens) total += t.size();
  Work work{std::string_view()};
  work.text_bytes = total;
  work.steps_left = work.steps_total = Work::kBaseSteps + Work::kStepsPerByte * total;
  work.label = fmt::format("while decoding {} tokens", tokens.size());
  work.normalizing(total);
  for (const DecStep& step : dec_steps) decoder_step(step, tokens, work);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

[[noreturn]] static void decoded_too_much(const DecStep& step, const Work& work) {
  throw InputError(fmt::format("{} grows the text past {} bytes ({} x its {} bytes + {}) {}", step.where, work.grow_limit,
                               Work::kGrowth, work.piece_bytes, Work::kGrowthSlack, work.label));
}

void Tokenizer::Impl::decoder_step(const DecStep& step, std::vector<std::string>& tokens, Work& work) const {
  switch (step.kind) {
    case DecKind::Replace: {
      size_t so_far = 0;  // bytes of the tokens already replaced
      for (auto& t : tokens) {
        if (t.empty()) continue;  // HF's find_matches: no match in an empty string
        std::string out;
        size_t prev = 0;
        step.pattern.for_each_match(t, work, [&](size_t a, size_t b) {
          out.append(t, prev, a - prev);
          out += step.content;
          prev = b;
          if (so_far + out.size() > work.grow_limit) decoded_too_much(step, work);
        });
        out.append(t, prev, std::string::npos);
        so_far += out.size();
        t = std::move(out);
      }
      break;
    }
    case DecKind::ByteFallback: {
      // A run of byte tokens becomes its string when it is valid UTF-8, else one U+FFFD per byte.
      std::vector<std::string> out;
      std::string run;
      auto flush = [&] {
        if (run.empty()) return;
        if (first_invalid_utf8(run) == std::string_view::npos) {
          out.push_back(std::move(run));
        } else {
          for (size_t k = 0; k < run.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
        }
        run.clear();
      };
      for (auto& t : tokens) {
        if (const auto b = fallback_byte(t)) {
          run.push_back(static_cast<char>(*b));
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens = std::move(out);
      break;
    }
    case DecKind::Fuse: {
      std::string joined;
      for (const auto& t : tokens) joined += t;
      tokens.assign(1, std::move(joined));
      break;
    }
    case DecKind::Strip:
      for (auto& t : tokens) t = strip_token(step, t);
      break;
    case DecKind::Metaspace:
      // The replacement becomes a space, except in the first token, where it goes (unless the
      // prepend scheme is never): HF drops every one there, not only a leading one.
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string out;
        const std::string& t = tokens[i];
        const bool drop = i == 0 && !step.prepend_never;
        for (size_t pos = 0;;) {
          const size_t hit = t.find(step.replacement, pos);
          out.append(t, pos, hit == std::string::npos ? std::string::npos : hit - pos);
          if (hit == std::string::npos) break;
          if (!drop) out += ' ';
          pos = hit + step.replacement.size();
        }
        tokens[i] = std::move(out);
      }
      break;
    case DecKind::ByteLevel: {
      std::string raw;
      for (const auto& t : tokens) raw += unmap(t).value_or(t);
      std::string text;
      append_lossy_utf8(text, raw);
      tokens.assign(1, std::move(text));
      break;
    }
  }
  size_t now = 0;
  for (const auto& t : tokens) now += t.size();
  if (now > work.grow_limit) decoded_too_much(step, work);
}

// What one token gives in the middle of a text, for streaming: the chain's per-token steps
// (Replace; Metaspace's replacement as a space), a ByteFallback byte token as its raw byte and
// ByteLevel's bytes as they are (the caller holds back incomplete UTF-8; later steps are not
// applied to raw bytes). Fuse and Strip concern the whole text and are left out.
std::string Tokenizer::Impl::token_alone(std::string token) const {
  Work work(token);
  work.label = "while decoding one token";
  work.normalizing(token.size());
  for (const DecStep& step : dec_steps) {
    if (step.kind == DecKind::Replace) {
      std::vector<std::string> one{std::move(token)};
      decoder_step(step, one, work);
      token = std::move(one[0]);
    } else if (step.kind == DecKind::Metaspace) {
      std::vector<std::string> two{std::string(), std::move(token)};  // as the second token
      decoder_step(step, two, work);
      token = std::move(two[1]);
    } else if (step.kind == DecKind::ByteFallback) {
      if (const auto b = fallback_byte(token)) return std::string(1, static_cast<char>(*b));
    } else if (step.kind == DecKind::ByteLevel) {
      return unmap(token).value_or(token);
    }
  }
  return token;
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end())
    return impl_->added[it->second].id;
  if (const auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (const auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) return impl_->added[it->second].shown;
  if (id >= 0 && static_cast<size_t>(id) < impl_->vocab_r.size() && !impl_->vocab_r[static_cast<size_t>(id)].empty())
    return impl_->vocab_r[static_cast<size_t>(id)];
  return std::nullopt;
}

bool Tokenizer::is_special(int64_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

int64_t Tokenizer::vocab_size() const { return impl_->size; }

std::optional<std::string> Tokenizer::token_bytes(int64_t id) const {
  if (impl_->decoder == Impl::Decoder::ByteLevel) {
    if (!id_to_token(id)) return std::nullopt;
    return impl_->id_bytes[static_cast<size_t>(id)];
  }
  auto token = id_to_token(id);
  if (token && impl_->decoder == Impl::Decoder::Chain) return impl_->token_alone(std::move(*token));
  return token;
}

const std::filesystem::path& Tokenizer::file() const { return impl_->file; }

}  // namespace zoo
