#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace zoo::higgs {

// Higgs Audio v3 (`higgs_multimodal_qwen3`): a Qwen3 text body plus a tied multi-codebook audio
// table that is both the audio-slot embedding and the audio head.
struct HiggsConfig {
  nlohmann::json text_config;       // handed to the qwen3 plugin as is (rope_theta normalized)
  std::int64_t hidden_size = 0;
  std::int64_t num_codebooks = 0;   // K
  std::int64_t codebook_size = 0;   // V = codes + 2
  std::int64_t audio_token_id = -100;
  bool use_delay_pattern = true;

  std::int64_t boc() const { return codebook_size - 2; }
  std::int64_t eoc() const { return codebook_size - 1; }

  static HiggsConfig parse(const nlohmann::json& config, const std::string& label);
};

// Stored tensor names of the Higgs checkpoint.
inline constexpr const char* kTextEmbedding = "tied.embedding.text_embedding.weight";
inline constexpr const char* kAudioTable = "tied.embedding.modality_embeddings.0.embedding.weight";
inline constexpr const char* kCodecPrefix = "tied.embedding.modality_embeddings.0.model.";
inline constexpr const char* kBodyPrefix = "body.layers.";
inline constexpr const char* kBodyNorm = "body.norm.weight";
inline constexpr const char* kUntiedHeadPrefix = "tied.head.";

}  // namespace zoo::higgs
