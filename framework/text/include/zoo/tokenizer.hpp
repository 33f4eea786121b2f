#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zoo {

// A Hugging Face tokenizer.json of the BPE family (byte-level, or sentencepiece-style with byte
// fallback; docs/tokenizer.md lists which models ship which), run the way
// the `tokenizers` library runs it: added tokens split out of the raw text first, then the
// normalizer, the pre-tokenizer and BPE on every remaining piece. Supported components (anything
// else is an InputError naming the file and the component): normalizers NFC/NFD/NFKC/NFKD,
// Lowercase, Strip, Replace, Prepend and Sequence; pre-tokenizers Split (Regex or String, every
// behaviour, invert), Metaspace, ByteLevel (last in the chain) and Sequence; model BPE (both merges
// formats, ignore_merges, byte_fallback, unk_token, fuse_unk); decoders ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace and Sequence (or none). Thread-safe: encode/decode may run
// concurrently.
class Tokenizer {
 public:
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);  // InputError naming the file
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Like HF encode(text, add_special_tokens=False). InputError if text is not valid UTF-8, or if the
  // file's regexes or normalizers would exceed the bounds in docs/tokenizer.md on this text (the
  // message names the tokenizer file and the byte; callers add their input's name and line).
  std::vector<int64_t> encode(std::string_view text) const;
  // Like HF decode(ids, skip_special_tokens): invalid UTF-8 from split characters becomes U+FFFD
  // (as HF places it); unknown ids are skipped. InputError if the file's decoder would exceed the
  // bounds in docs/tokenizer.md.
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens = false) const;
  std::optional<int64_t> token_to_id(std::string_view token) const;  // vocab or added token
  std::optional<std::string> id_to_token(int64_t id) const;
  bool is_special(int64_t id) const;
  int64_t vocab_size() const;  // highest id + 1 incl. added tokens

  // The raw bytes a token stands for after the decoder (what decode() concatenates), for
  // streaming: callers can hold back an incomplete UTF-8 sequence. nullopt for an unknown id. For
  // a decoder chain: the token as it reads in the middle of a text (a <0xXX> byte token as its
  // byte, "▁" as a space); what the chain does at the start of the text (Strip, Metaspace's
  // first token) is not applied.
  std::optional<std::string> token_bytes(int64_t id) const;
  const std::filesystem::path& file() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zoo
