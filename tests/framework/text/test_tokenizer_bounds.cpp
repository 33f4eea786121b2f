// tokenizer.json is untrusted input: ids, regexes, added tokens and normalizers in it must not
// make loading or encoding allocate or run without bound. Each case is sized so the code before
// the bounds took many seconds (or gigabytes) on it; with them it takes milliseconds.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zoo/error.hpp"
#include "zoo/tokenizer.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using zoo::Tokenizer;
using Ids = std::vector<int64_t>;

namespace {

// A minimal BPE tokenizer.json: the given vocab, no merges, optional parts merged in.
Json minimal(Json vocab) {
  return Json{{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", Json::array()}}}};
}

fs::path write_json(const std::string& name, const Json& j) {
  const fs::path p = fs::temp_directory_path() / fmt::format("zoo-tokb-{}-{}.json", ::getpid(), name);
  std::ofstream(p) << j.dump();
  return p;
}

// The message of the InputError that f throws ("" and a failed check if it throws none).
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const zoo::InputError& e) {
    return e.what();
  }
  FAIL_CHECK("no InputError");
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Json split(const std::string& regex) {
  return Json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

Json added(int64_t id, const std::string& content, Json extra = Json::object()) {
  Json t{{"id", id}, {"content", content}, {"special", true}, {"normalized", false}};
  t.update(extra);
  return t;
}

}  // namespace

TEST_CASE("tokenizer bounds: ids beyond the file's entries are refused, not allocated", "[tokenizer][bounds]") {
  // Tables are indexed by id: an id far beyond the entry count used to size them (2^28 -> 8.5 GB).
  {
    const auto f = write_json("vocab-id", minimal({{"a", 0}, {"far", 1 << 24}}));
    const auto msg = input_error([&] { Tokenizer::from_file(f); });
    CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("'far'") && Catch::Contains("16777216"));
    fs::remove(f);
  }
  {
    Json j = minimal({{"a", 0}, {"b", 1}});
    j["decoder"] = {{"type", "ByteLevel"}};
    j["added_tokens"] = Json::array({added(1 << 28, "<far>")});
    const auto f = write_json("added-id", j);
    const auto msg = input_error([&] { Tokenizer::from_file(f); });
    CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("<far>"));
    fs::remove(f);
  }
  // Out of range or not an integer: refused without overflow (UBSan watches the INT64_MAX case).
  const std::vector<std::pair<std::string, Json>> bad_ids = {
      {"int64max", std::numeric_limits<int64_t>::max()},
      {"uint64max", std::numeric_limits<uint64_t>::max()},
      {"negative", -1},
      {"2^31", int64_t{1} << 31},
      {"fraction", 1.5},
      {"string", "3"}};
  for (const auto& [name, id] : bad_ids) {
    INFO(name);
    Json j = minimal({{"a", 0}});
    j["decoder"] = {{"type", "ByteLevel"}};
    j["added_tokens"] = Json::array({{{"id", id}, {"content", "<bad>"}, {"special", true}}});
    const auto f = write_json("added-" + name, j);
    CHECK_THAT(input_error([&] { Tokenizer::from_file(f); }), Catch::Contains(f.string()));
    Json v = minimal({{"a", 0}, {"b", id}});
    const auto g = write_json("vocab-" + name, v);
    CHECK_THAT(input_error([&] { Tokenizer::from_file(g); }), Catch::Contains(g.string()) && Catch::Contains("'b'"));
    fs::remove(f);
    fs::remove(g);
  }
  // Small holes stay legal (some real files have them): an added token a few ids past the vocab.
  Json j = minimal({{"a", 0}, {"b", 1}, {"c", 2}});
  j["added_tokens"] = Json::array({added(9, "<x>")});
  const auto f = write_json("hole", j);
  const auto tok = Tokenizer::from_file(f);
  CHECK(tok.vocab_size() == 10);
  CHECK(tok.encode("ab<x>") == Ids{0, 1, 9});
  CHECK(tok.id_to_token(5) == std::nullopt);
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: a backtracking Split regex fails fast, naming the file", "[tokenizer][bounds]") {
  // a*a*b on a run of a's backtracks quadratically at every start position (cubic in all); the old
  // per-call PCRE2 limit never tripped, 5,000 a's took ~20 s.
  Json j = minimal({{"a", 0}, {"b", 1}});
  j["pre_tokenizer"] = split("a*a*b|.");
  const auto f = write_json("backtrack", j);
  const auto tok = Tokenizer::from_file(f);
  CHECK(tok.encode("aab") == Ids{0, 0, 1});
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = input_error([&] { tok.encode(std::string(5000, 'a')); });
  CHECK(seconds_since(t0) < 2.0);
  CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("a*a*b|.") && Catch::Contains("byte 0"));
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: a match-limit error is an InputError naming the file and the position",
          "[tokenizer][bounds]") {
  // Exponential backtracking at one start position (PCRE2's own per-call limit trips): this used to
  // be a std::runtime_error naming neither the tokenizer file nor where in the text.
  Json j = minimal({{"a", 0}, {"b", 1}, {"x", 2}});
  j["pre_tokenizer"] = split("(?:a+)+b|.");
  const auto f = write_json("matchlimit", j);
  const auto tok = Tokenizer::from_file(f);
  std::string text = "xx";
  text.append(40, 'a');
  const auto msg = input_error([&] { tok.encode(text); });
  CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("byte 2"));
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: long legitimate backtracking still encodes (Qwen regex, 200 KB of spaces)",
          "[tokenizer][bounds]") {
  // \s*[\r\n]+ gives back a whole whitespace run before \s+(?!\S) takes it: work linear in the run
  // (hundreds of times the free 1,000 steps of a start position here), which the budget must allow.
  // Qwen's pre-tokenizer and decoder over a vocab of the 256 byte-level characters (loads fast).
  Json vocab = Json::object();
  for (int b = 0, next = 256; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string utf8 = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                 : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    vocab[utf8] = b;
  }
  Json j = minimal(vocab);
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  j["decoder"] = {{"type", "ByteLevel"}};
  const auto f = write_json("qwen-regex", j);
  const auto tok = Tokenizer::from_file(f);
  const std::string text = std::string(200000, ' ') + "x" + std::string(100000, '\t') + "\ny";
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok.encode(text);
  CHECK(seconds_since(t0) < 2.0);
  CHECK(ids.size() == text.size());
  CHECK(tok.decode(ids) == text);
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: a pattern with backslash-C is refused at load (it splits UTF-8 the matcher trusts)", "[tokenizer][bounds]") {
  Json j = minimal({{"a", 0}});
  j["pre_tokenizer"] = split("\\C|.");
  const auto f = write_json("backslash-c", j);
  CHECK_THAT(input_error([&] { Tokenizer::from_file(f); }), Catch::Contains(f.string()) && Catch::Contains("\\C"));
  Json n = minimal({{"a", 0}});
  n["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "a\\C"}}}, {"content", "b"}};
  const auto g = write_json("backslash-c-replace", n);
  CHECK_THAT(input_error([&] { Tokenizer::from_file(g); }), Catch::Contains(g.string()) && Catch::Contains("\\C"));
  fs::remove(f);
  fs::remove(g);
}

TEST_CASE("tokenizer bounds: messages quote at most a prefix of a huge pattern", "[tokenizer][bounds]") {
  Json j = minimal({{"a", 0}});
  std::string pattern(1000001, 'a');
  pattern[0] = '(';  // unclosed
  j["pre_tokenizer"] = split(pattern);
  const auto f = write_json("huge-pattern", j);
  const auto msg = input_error([&] { Tokenizer::from_file(f); });
  CHECK(msg.size() < 400);
  CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("(aaaa") && Catch::Contains("...") &&
                      Catch::Contains("1000001"));
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: added-token matching is linear in the text", "[tokenizer][bounds]") {
  // A long token whose prefix matches everywhere: the byte trie walked 30,000 bytes from each of
  // 270,000 start positions.
  const std::string token = std::string(30000, 'a') + "b";
  Json j = minimal({{"a", 0}, {"b", 1}});
  j["added_tokens"] = Json::array({added(2, token)});
  const auto f = write_json("long-added", j);
  const auto tok = Tokenizer::from_file(f);
  auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok.encode(std::string(300000, 'a') + "b");
  CHECK(seconds_since(t0) < 2.0);
  REQUIRE(ids.size() == 270001);
  CHECK(ids.back() == 2);
  CHECK(ids[269999] == 0);
  fs::remove(f);

  // lstrip / rstrip over a whitespace run between many matches: each walk used to cover the run.
  for (const char* flag : {"lstrip", "rstrip"}) {
    INFO(flag);
    Json k = minimal({{"a", 0}});
    k["added_tokens"] = Json::array({added(1, " ", {{flag, true}})});
    const auto g = write_json(std::string("strip-") + flag, k);
    const auto t = Tokenizer::from_file(g);
    t0 = std::chrono::steady_clock::now();
    const Ids spaces = t.encode(std::string(100000, ' '));
    CHECK(seconds_since(t0) < 2.0);
    CHECK(spaces == Ids(100000, 1));
    fs::remove(g);
  }
}

TEST_CASE("tokenizer bounds: added tokens keep leftmost-longest and the HF flags", "[tokenizer][bounds]") {
  Json j = minimal({{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}, {"x", 4}, {" ", 5}});
  j["added_tokens"] = Json::array({added(10, "ab"), added(11, "abc"), added(12, "bcd"), added(13, "cd"),
                                   added(14, "xd", {{"single_word", true}}), added(15, "d", {{"lstrip", true}}),
                                   added(16, "c x", {{"rstrip", true}})});
  const auto f = write_json("semantics", j);
  const auto tok = Tokenizer::from_file(f);
  CHECK(tok.encode("xabcd") == Ids{4, 11, 15});      // leftmost start wins, then the longest there
  CHECK(tok.encode("abab") == Ids{10, 10});
  CHECK(tok.encode("bcdx") == Ids{12, 4});
  CHECK(tok.encode("axd") == Ids{0, 4, 3});  // xd is no single word here, and its bytes are spent (HF's find_iter)
  CHECK(tok.encode("a xd") == Ids{0, 5, 14});
  CHECK(tok.encode("a   d") == Ids{0, 15});          // lstrip takes the spaces before
  CHECK(tok.encode("c x   a") == Ids{16, 0});        // rstrip takes the spaces after
  fs::remove(f);
}

TEST_CASE("tokenizer bounds: normalizers cannot grow text without bound", "[tokenizer][bounds]") {
  // 40 chained Replace a -> aa would make 2^40 bytes of one "a".
  Json seq = Json::array();
  for (int i = 0; i < 40; ++i) seq.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
  Json j = minimal({{"a", 0}});
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", seq}};
  const auto f = write_json("replace-growth", j);
  const auto tok = Tokenizer::from_file(f);
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = input_error([&] { tok.encode("a"); });
  CHECK(seconds_since(t0) < 2.0);
  CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("Replace"));

  // One Replace with a huge content on many matches: refused while it grows, not after.
  Json big = minimal({{"a", 0}});
  big["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(1 << 20, 'a')}};
  const auto g = write_json("replace-big", big);
  const auto t = Tokenizer::from_file(g);
  CHECK_THAT(input_error([&] { t.encode(std::string(100000, 'a')); }), Catch::Contains(g.string()));

  // Ordinary growth (one byte to three, as SentencePiece-style files do) is fine.
  Json ok = minimal({{"a", 0}, {"\xE2\x96\x81", 1}});
  ok["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}};
  const auto h = write_json("replace-ok", ok);
  CHECK(Tokenizer::from_file(h).encode("a  a") == Ids{0, 1, 1, 0});
  for (const auto& p : {f, g, h}) fs::remove(p);
}

TEST_CASE("tokenizer bounds: Metaspace pre-tokenizers and decoders cannot grow text without bound", "[tokenizer][bounds]") {
  // Each Metaspace prepends its replacement when the piece does not start with it: 3000 of them,
  // alternating two replacements, would copy the growing piece 3000 times.
  Json chain = Json::array();
  for (int i = 0; i < 3000; ++i)
    chain.push_back({{"type", "Metaspace"}, {"replacement", i % 2 ? "\xE2\x96\x81" : "_"}, {"prepend_scheme", "always"},
                     {"split", false}});
  Json j = minimal({{"a", 0}});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", chain}};
  const auto f = write_json("metaspace-growth", j);
  const auto tok = Tokenizer::from_file(f);
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(input_error([&] { tok.encode("a"); }), Catch::Contains(f.string()) && Catch::Contains("Metaspace"));
  CHECK(seconds_since(t0) < 2.0);

  // 40 chained Replace a -> aa in the decoder: refused while decoding, naming the step.
  Json seq = Json::array();
  for (int i = 0; i < 40; ++i) seq.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
  Json d = minimal({{"a", 0}});
  d["decoder"] = {{"type", "Sequence"}, {"decoders", seq}};
  const auto g = write_json("decoder-growth", d);
  const auto dt = Tokenizer::from_file(g);
  t0 = std::chrono::steady_clock::now();
  CHECK_THAT(input_error([&] { dt.decode(Ids{0, 0}); }), Catch::Contains(g.string()) && Catch::Contains("decoder Replace"));
  CHECK_THAT(input_error([&] { dt.token_bytes(0); }), Catch::Contains(g.string()));
  CHECK(seconds_since(t0) < 2.0);

  // The real shape (space to U+2581 and back) is fine.
  Json ok = minimal({{"a", 0}, {"\xE2\x96\x81", 1}});
  ok["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  ok["decoder"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  const auto h = write_json("metaspace-ok", ok);
  const auto okt = Tokenizer::from_file(h);
  CHECK(okt.encode("a  a") == Ids{1, 0, 1, 1, 0});
  CHECK(okt.decode(okt.encode("a  a")) == "a  a");
  for (const auto& p : {f, g, h}) fs::remove(p);
}

TEST_CASE("tokenizer bounds: regex work the match limit does not count is refused or stays linear",
          "[tokenizer][bounds]") {
  // PCRE2's match limit counts backtracking points, not characters scanned. A scan that is thrown
  // away without leaving one (a possessive repeat, an atomic group, a repeat inside a look-around)
  // costs the length of the run at every start position and nothing on the budget: quadratic time
  // on one long line. Each pattern here is either refused when the file loads (naming the file and
  // the construct) or encodes a line of 80,000 a's well within a second.
  const std::vector<std::string> patterns = {
      "a*+b|.",        "a++b|.",        "(?>a*)b|.",       "(*atomic:a*)b|.", "(?=a*)a|.",
      "(?=a*c)|.",     "(?!a*+b)a|.",   "(?=(?:a|b)+c)|.", "(?=a{0,}c)|.",    "(*pla:a*c)|.",
      "(a*)(?=(?1)b)|.", "a{1,}+b|.",   "(?=a{1,65535}c)|."};
  for (const auto& pattern : patterns) {
    INFO(pattern);
    Json j = minimal({{"a", 0}, {"b", 1}, {"c", 2}});
    j["pre_tokenizer"] = split(pattern);
    const auto f = write_json("uncounted", j);
    std::optional<Tokenizer> tok;
    try {
      tok.emplace(Tokenizer::from_file(f));
    } catch (const zoo::InputError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(f.string()) && Catch::Contains("not count"));
    }
    if (tok) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        tok->encode(std::string(80000, 'a'));
      } catch (const zoo::InputError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains(f.string()));
      }
      CHECK(seconds_since(t0) < 1.0);
    }
    fs::remove(f);
  }
  // What real tokenizers use stays accepted: bounded look-arounds, lazy and bounded repeats.
  for (const std::string pattern : {R"(\s+(?!\S)|\s+)", R"((?<=\s)\p{L}+|(?=\p{N})\p{N}{1,3}|.)", "a*?b|.",
                                    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}]*[\p{Ll}\p{Lm}]+(?i:'s|'t)?|.)", R"(\(\*\+|.)"}) {
    INFO(pattern);
    Json j = minimal({{"a", 0}});
    j["pre_tokenizer"] = split(pattern);
    const auto f = write_json("counted", j);
    CHECK_NOTHROW(Tokenizer::from_file(f));
    fs::remove(f);
  }
}

TEST_CASE("tokenizer bounds: model fields of the wrong type are named, never the JSON library's error",
          "[tokenizer][bounds]") {
  // A string dropout reached nlohmann's get<double> and came out as "[json.exception.type_error.302] ...".
  const std::vector<std::pair<Json, std::string>> cases{
      {{{"dropout", "0.1"}}, "model.dropout is a string, not a number"},
      {{{"dropout", Json::array()}}, "model.dropout is a array, not a number"},
      {{{"dropout", -0.5}}, "model.dropout -0.5 is outside [0, 1]"},
      {{{"dropout", 2}}, "model.dropout 2 is outside [0, 1]"},
      {{{"dropout", 0.5}}, "BPE dropout is not supported"},
      {{{"unk_token", 7}}, "model.unk_token is a number, not a string"},
      {{{"continuing_subword_prefix", true}}, "model.continuing_subword_prefix is a boolean, not a string"},
      {{{"end_of_word_suffix", Json::object()}}, "model.end_of_word_suffix is a object, not a string"},
  };
  for (const auto& [fields, want] : cases) {
    INFO(fields.dump());
    Json j = minimal({{"a", 0}});
    j["model"].update(fields);
    const auto f = write_json("field-type", j);
    const std::string msg = input_error([&] { (void)Tokenizer::from_file(f); });
    CHECK_THAT(msg,
               Catch::Contains(f.string()) && Catch::Contains(want) && !Catch::Contains("json.exception"));
    fs::remove(f);
  }
  // Still read: no dropout, null, 0.0 and 0 (HF's "none"), and null optional strings.
  for (const Json& fields :
       {Json::object(), Json{{"dropout", nullptr}}, Json{{"dropout", 0.0}}, Json{{"dropout", 0}},
        Json{{"unk_token", nullptr}, {"continuing_subword_prefix", nullptr}}}) {
    INFO(fields.dump());
    Json j = minimal({{"a", 0}});
    j["model"].update(fields);
    const auto f = write_json("field-ok", j);
    CHECK(Tokenizer::from_file(f).encode("aa") == Ids{0, 0});
    fs::remove(f);
  }
}

TEST_CASE("tokenizer bounds: pre-tokenizing is depth first, its splitting steps bounded",
          "[tokenizer][bounds]") {
  // Each splitting step is a level of encode's depth-first walk: 257 are refused at load, naming
  // the file; 256 encode (a step that splits nothing still passes every piece down).
  const auto chain_of = [](int n) {
    Json chain = Json::array();
    for (int i = 0; i < n; ++i) chain.push_back(split(i % 2 ? "b" : "\\s"));
    Json j = minimal({{"a", 0}, {"b", 1}, {" ", 2}});
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", chain}};
    return j;
  };
  const auto too_deep = write_json("split-chain-257", chain_of(257));
  CHECK_THAT(input_error([&] { (void)Tokenizer::from_file(too_deep); }),
             Catch::Contains(too_deep.string()) && Catch::Contains("splits more than 256 times"));
  const auto deep = write_json("split-chain-256", chain_of(256));
  const auto tok = Tokenizer::from_file(deep);
  CHECK(tok.encode("ab a bba") == Ids{0, 1, 2, 0, 2, 1, 1, 0});
  // A line of 10,000 pieces goes through all 256 steps one piece at a time.
  std::string line;
  for (int i = 0; i < 2500; ++i) line += "ab a";
  const Ids ids = tok.encode(line);
  REQUIRE(ids.size() == 10000);
  CHECK(ids[9996] == 0);
  CHECK(ids[9997] == 1);
  CHECK(ids[9998] == 2);
  CHECK(ids[9999] == 0);
  for (const auto& p : {too_deep, deep}) fs::remove(p);
}
