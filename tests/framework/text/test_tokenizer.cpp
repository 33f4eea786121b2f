// The tokenizer against Hugging Face `tokenizers` 0.23 (goldens made by
// tools/tokenizer/make_fixtures.py): ids and decode on a ~0.9 MB corpus for a Qwen2-style
// tokenizer.json rebuilt from the real Qwen ranks, a Llama-3-style one and the sentencepiece
// family (Llama 2, Mistral v0.3 and Gemma shapes: byte fallback, Metaspace, the decoder chain),
// plus every Split behaviour, normalizer, ByteLevel flag and Metaspace scheme on a smaller sample.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "framework/tokenizer_fixture_util.hpp"
#include "zoo/error.hpp"
#include "zoo/tokenizer.hpp"

namespace fs = std::filesystem;
using zoo::Tokenizer;
using Ids = std::vector<int64_t>;

namespace {

std::vector<nlohmann::json> read_jsonl(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE(in);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// Every line: ids equal HF's, decode equal HF's, decode(skip_special_tokens) equal HF's.
void check_against_hf(const Tokenizer& tok, const fs::path& corpus, const fs::path& expected) {
  const auto lines = read_jsonl(corpus);
  const auto rows = read_jsonl(expected);
  REQUIRE(lines.size() == rows.size());
  size_t bad_ids = 0, bad_decode = 0, bytes = 0, tokens = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto text = lines[i].get<std::string>();
    bytes += text.size();
    const Ids want = rows[i].at("ids").get<Ids>();
    tokens += want.size();
    const Ids got = tok.encode(text);
    if (got != want) {
      size_t k = 0;
      while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
      if (++bad_ids <= 5)
        UNSCOPED_INFO(fmt::format("{} line {}: ids differ at token {} (got {} want {}), text near: {}", expected.filename().string(),
                                  i, k, k < got.size() ? got[k] : -1, k < want.size() ? want[k] : -1,
                                  tok.decode(std::span(want).subspan(k > 3 ? k - 3 : 0, std::min<size_t>(8, want.size() - (k > 3 ? k - 3 : 0))))));
    }
    const std::string want_decode = rows[i].at("decode").is_null() ? text : rows[i].at("decode").get<std::string>();
    const std::string want_skip = rows[i].at("skip").is_null() ? want_decode : rows[i].at("skip").get<std::string>();
    if (tok.decode(want) != want_decode || tok.decode(want, true) != want_skip) {
      if (++bad_decode <= 5) UNSCOPED_INFO(fmt::format("{} line {}: decode differs", expected.filename().string(), i));
    }
  }
  INFO(fmt::format("{}: {} lines, {} bytes, {} tokens", expected.filename().string(), lines.size(), bytes, tokens));
  CHECK(bad_ids == 0);
  CHECK(bad_decode == 0);
}

// Id sequences encode never makes (split byte tokens, special tokens first...): HF's decode and
// decode(skip_special_tokens) of each.
void check_decode_probes(const Tokenizer& tok, const fs::path& probes) {
  size_t bad = 0, n = 0;
  for (const auto& row : read_jsonl(probes)) {
    const Ids ids = row.at("ids").get<Ids>();
    ++n;
    if (tok.decode(ids) != row.at("decode").get<std::string>() || tok.decode(ids, true) != row.at("skip").get<std::string>())
      if (++bad <= 5) UNSCOPED_INFO(fmt::format("{}: decode of {} differs: got '{}' want '{}'", probes.filename().string(),
                                                nlohmann::json(ids).dump(), tok.decode(ids), row.at("decode").get<std::string>()));
  }
  INFO(fmt::format("{}: {} id sequences", probes.string(), n));
  CHECK(n > 0);
  CHECK(bad == 0);
}

const Tokenizer& qwen() {
  static const Tokenizer tok = Tokenizer::from_file(zoo::test::tokenizer_fixture_dir() / "qwen/tokenizer.json");
  return tok;
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / fmt::format("zoo-tok-{}-{}", ::getpid(), name);
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("tokenizer: Qwen-style tokenizer.json gives HF's ids and decode on the corpus") {
  const auto dir = zoo::test::tokenizer_fixture_dir();
  check_against_hf(qwen(), dir / "corpus.jsonl", dir / "expected/qwen.jsonl");
}

TEST_CASE("tokenizer: Llama-3-style tokenizer.json (ignore_merges, added-token flags) gives HF's ids") {
  const auto dir = zoo::test::tokenizer_fixture_dir();
  const auto tok = Tokenizer::from_file(dir / "llama3/tokenizer.json");
  check_against_hf(tok, dir / "corpus.jsonl", dir / "expected/llama3.jsonl");
}

TEST_CASE("tokenizer: Split behaviours, invert, normalizers and ByteLevel flags match HF") {
  const auto dir = zoo::test::tokenizer_fixture_dir();
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir / "variants")) {
    const auto name = e.path().filename().string();
    if (!name.ends_with(".json")) continue;
    const auto stem = name.substr(0, name.size() - 5);
    INFO(stem);
    const auto tok = Tokenizer::from_file(e.path());
    check_against_hf(tok, dir / "variants/sample.jsonl", dir / "variants" / (stem + ".expected.jsonl"));
    ++n;
  }
  CHECK(n >= 15);
}

TEST_CASE("tokenizer: sentencepiece-family files (Llama 2, Mistral v0.3, Gemma shapes) give HF's ids and decode") {
  const auto dir = zoo::test::tokenizer_fixture_dir();
  for (const char* name : {"llama2", "mistral", "gemma"}) {
    INFO(name);
    const auto tok = Tokenizer::from_file(dir / name / "tokenizer.json");
    check_against_hf(tok, dir / "corpus.jsonl", dir / "expected" / fmt::format("{}.jsonl", name));
    check_against_hf(tok, dir / "spm_extra.jsonl", dir / "expected" / fmt::format("{}.extra.jsonl", name));
    check_decode_probes(tok, dir / name / "tokenizer.probes.jsonl");
  }
}

TEST_CASE("tokenizer: Metaspace schemes, unk and byte-fallback corners and decoder chains match HF") {
  const auto dir = zoo::test::tokenizer_fixture_dir();
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir / "spm_variants")) {
    const auto name = e.path().filename().string();
    if (!name.ends_with(".json")) continue;
    const auto stem = name.substr(0, name.size() - 5);
    INFO(stem);
    const auto tok = Tokenizer::from_file(e.path());
    check_against_hf(tok, dir / "spm_variants/sample.jsonl", dir / "spm_variants" / (stem + ".expected.jsonl"));
    check_decode_probes(tok, dir / "spm_variants" / (stem + ".probes.jsonl"));
    ++n;
  }
  CHECK(n >= 15);
}

TEST_CASE("tokenizer: byte fallback, the decoder chain and token_bytes in the Llama 2 shape") {
  const auto tok = Tokenizer::from_file(zoo::test::tokenizer_fixture_dir() / "llama2/tokenizer.json");
  const auto id = [&](const char* t) {
    const auto i = tok.token_to_id(t);
    REQUIRE(i);
    return *i;
  };
  // A private-use character is in no vocabulary: "▁" (Prepend) then its four bytes (HF's ids).
  CHECK(tok.encode("\U000F0001") == Ids{id("\u2581"), id("<0xF3>"), id("<0xB0>"), id("<0x80>"), id("<0x81>")});
  CHECK(tok.encode("<s>Hi") == Ids{1, 710, 308});  // the text after an added token gets its own "▁"
  // A byte run that is not UTF-8 gives one U+FFFD per byte (HF's ByteFallback), not per subpart.
  CHECK(tok.decode(Ids{id("<0xE4>"), id("<0xBD>")}) == "\uFFFD\uFFFD");
  CHECK(tok.decode(Ids{id("<0xE4>"), id("<0xBD>"), id("<0xA0>")}) == "\u4F60");
  CHECK(tok.decode(Ids{id("\u2581the"), id("\u2581the")}) == "the the");  // Strip(" ", 1, 0) at the start only
  // Streaming: a token as it reads mid-text, byte tokens as their raw byte.
  CHECK(tok.token_bytes(id("\u2581the")) == " the");
  CHECK(tok.token_bytes(id("<0xE4>")) == "\xE4");
  CHECK(tok.token_bytes(1) == "<s>");
  CHECK(tok.is_special(1));
}

TEST_CASE("tokenizer: known answers from transformers' Qwen2 tests and docs") {
  const auto& tok = qwen();
  CHECK(tok.encode("Hello world") == Ids{9707, 1879});
  CHECK(tok.encode(" Hello world") == Ids{21927, 1879});
  CHECK(tok.encode("Hello, world!") == Ids{9707, 11, 1879, 0});
  CHECK(tok.encode("a  b") == Ids{64, 220, 293});  // \s+(?!\S) leaves the last space to the word
  CHECK(tok.encode("Hello from PegaInfer.") == Ids{9707, 504, 393, 11188, 641, 802, 13});
  CHECK(tok.encode("") == Ids{});
  // Special tokens split out of raw text; the text beside them is pre-tokenized on its own.
  CHECK(tok.encode("<|im_start|>user\nHi<|im_end|>") == Ids{151644, 872, 198, 13048, 151645});
}

TEST_CASE("tokenizer: vocabulary queries") {
  const auto& tok = qwen();
  CHECK(tok.vocab_size() == 151669);  // 151,643 ranks + 26 added tokens
  CHECK(tok.token_to_id("<|im_end|>") == 151645);
  CHECK(tok.token_to_id("Hello") == 9707);
  CHECK(tok.token_to_id("no such token") == std::nullopt);
  CHECK(tok.id_to_token(151643) == "<|endoftext|>");
  CHECK(tok.id_to_token(220) == "\xC4\xA0");  // Ġ, the byte-level space
  CHECK(tok.id_to_token(-1) == std::nullopt);
  CHECK(tok.id_to_token(151669) == std::nullopt);
  CHECK(tok.is_special(151645));
  CHECK_FALSE(tok.is_special(*tok.token_to_id("<think>")));  // added but not special
  CHECK_FALSE(tok.is_special(9707));
  CHECK(tok.token_bytes(220) == " ");
}

TEST_CASE("tokenizer: decode skips special tokens on request and replaces split UTF-8") {
  const auto& tok = qwen();
  const Ids ids = tok.encode("<|im_start|>你好<think>x</think><|im_end|>");
  CHECK(tok.decode(ids) == "<|im_start|>你好<think>x</think><|im_end|>");
  CHECK(tok.decode(ids, true) == "你好<think>x</think>");
  // "é" is one token of two bytes in byte-level space only when merged; its first byte alone
  // decodes to U+FFFD (lossy, as HF).
  const auto e_first = tok.token_to_id("\xC3\x83");  // byte 0xC3 as a byte-level character
  REQUIRE(e_first);
  CHECK(tok.decode(Ids{*e_first}) == "\xEF\xBF\xBD");
  CHECK(tok.decode(Ids{9707, 999999999, -5, 1879}) == "Hello world");  // unknown ids are skipped
}

TEST_CASE("tokenizer: errors name the file") {
  const auto missing = fs::temp_directory_path() / "zoo-no-such-dir/tokenizer.json";
  CHECK_THROWS_WITH(Tokenizer::from_file(missing), Catch::Contains(missing.string()));

  const auto unigram = write_temp("unigram.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  CHECK_THROWS_AS(Tokenizer::from_file(unigram), zoo::InputError);
  CHECK_THROWS_WITH(Tokenizer::from_file(unigram), Catch::Contains(unigram.string()) && Catch::Contains("Unigram"));

  const auto wordpiece = write_temp("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  CHECK_THROWS_WITH(Tokenizer::from_file(wordpiece), Catch::Contains("WordPiece"));

  const auto bert_norm = write_temp("bertnorm.json",
                                    R"({"normalizer": {"type": "BertNormalizer"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  CHECK_THROWS_WITH(Tokenizer::from_file(bert_norm), Catch::Contains(bert_norm.string()) && Catch::Contains("BertNormalizer"));

  const auto bad_merge = write_temp("badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})");
  CHECK_THROWS_WITH(Tokenizer::from_file(bad_merge), Catch::Contains("merges[0]") && Catch::Contains("'ab'"));

  const auto bad_regex = write_temp("badregex.json", R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
      "behavior": "Isolated", "invert": false}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  CHECK_THROWS_WITH(Tokenizer::from_file(bad_regex), Catch::Contains(bad_regex.string()) && Catch::Contains("(unclosed"));

  const auto not_json = write_temp("notjson.json", "{\"model\": ");
  CHECK_THROWS_WITH(Tokenizer::from_file(not_json), Catch::Contains(not_json.string()));
  // A FIFO is refused at once (the old std::ifstream reader blocked forever on it).
  const auto fifo = std::filesystem::temp_directory_path() / ("zoo-tokenizer-fifo-" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(Tokenizer::from_file(fifo), Catch::Contains(fifo.string()) && Catch::Contains("regular file"));
  std::filesystem::remove(fifo);

  // The sentencepiece family's components, misspelt: InputErrors naming the file and the component.
  const std::string spm_model = R"("model": {"type": "BPE", "vocab": {"a": 0, "\u2581": 1}, "merges": []})";
  const auto two_char = write_temp("metaspace2.json", R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "ab"}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(two_char), Catch::Contains(two_char.string()) && Catch::Contains("Metaspace") &&
                                                        Catch::Contains("not one character"));
  const auto mismatch = write_temp("metaspace_aps.json", R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
      "add_prefix_space": false, "prepend_scheme": "first"}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(mismatch), Catch::Contains("add_prefix_space"));
  const auto scheme = write_temp("metaspace_scheme.json", R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
      "prepend_scheme": "sometimes"}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(scheme), Catch::Contains("sometimes"));
  const auto wp_dec = write_temp("wpdec.json", R"({"decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"},
      {"type": "WordPiece", "prefix": "##"}]}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(wp_dec), Catch::Contains(wp_dec.string()) && Catch::Contains("decoder type 'WordPiece'"));
  const auto strip = write_temp("strip.json", R"({"decoder": {"type": "Strip", "content": "ab", "start": 1, "stop": 0}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(strip), Catch::Contains("Strip.content"));
  const auto digits = write_temp("digits.json", R"({"pre_tokenizer": {"type": "Digits", "individual_digits": true}, )" + spm_model + "}");
  CHECK_THROWS_WITH(Tokenizer::from_file(digits), Catch::Contains("pre_tokenizer type 'Digits'"));
  for (const auto& p : {two_char, mismatch, scheme, wp_dec, strip, digits}) fs::remove(p);

  CHECK_THROWS_AS(qwen().encode("bad \xC3( utf-8"), zoo::InputError);
  for (const auto& p : {unigram, wordpiece, bert_norm, bad_merge, bad_regex, not_json}) fs::remove(p);
}

TEST_CASE("tokenizer: concurrent encodes agree (the BPE cache is shared)") {
  const auto& tok = qwen();
  const std::string text = "The quick brown fox 🦊 jumps over the lazy dog. 快速的棕色狐狸。 ";
  const Ids want = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (tok.encode(text + std::to_string(i)).size() < want.size()) ++bad;
    });
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
}
