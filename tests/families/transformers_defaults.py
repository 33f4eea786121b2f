#!/usr/bin/env python3
"""Prints what transformers' config classes make of a config.json missing a field (the class default,
after __post_init__), for the families Zoo reads through layers/hf_config.cpp. The values in
tests/families/test_hf_config_defaults.cpp and docs/validation.md ("Where every hyperparameter comes
from") were read off this output under transformers 5.25:  python3 tests/families/transformers_defaults.py
"""
import dataclasses
import json
import warnings

import transformers
from transformers import CONFIG_MAPPING

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

TYPES = ["gemma", "gemma2", "gemma3_text", "llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "qwen3_moe", "qwen2_moe"]
FIELDS = ["hidden_act", "hidden_activation", "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_parameters",
          "tie_word_embeddings", "attention_bias", "mlp_bias", "max_position_embeddings", "sliding_window",
          "layer_types", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "num_experts",
          "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",
          "shared_expert_intermediate_size", "qkv_bias"]
SIZES = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4}

for model_type in TYPES:
    cls = CONFIG_MAPPING[model_type]
    declared = {f.name for f in dataclasses.fields(cls)}
    config = cls.from_dict({"model_type": model_type, **SIZES})
    out = {}
    for field in FIELDS:
        if field in declared:
            out[field] = getattr(config, field)
    # The attention modules' getattr(config, "head_dim", hidden_size // num_attention_heads).
    out["head_dim (used)"] = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    nulls = []
    for field in ("num_key_value_heads", "head_dim", "rms_norm_eps", "hidden_act", "hidden_activation"):
        if field not in declared:
            continue
        try:
            cls.from_dict({"model_type": model_type, **SIZES, field: None})
        except Exception:  # noqa: BLE001 - @strict refuses the None
            nulls.append(field)
    print(f"{model_type} ({cls.__name__}): {json.dumps(out, default=str)}; null refused: {nulls}")
