// rope.scaling.type = yarn in a GGUF file's metadata, as llama.cpp reads it (shared by the
// llama and qwen35 loaders).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "formats/gguf.h"
#include "kernels/ops.h"

namespace geist {

// Reads <prefix>rope.scaling.factor (0 or absent: 1), rope.scaling.original_context_length
// (absent: n_ctx_train, llama.cpp's fallback) and rope.scaling.yarn_beta_fast / yarn_beta_slow
// (absent: llama.cpp's defaults 32 and 1) into *y. Keys that would change ggml's YaRN in ways
// geist's rope does not follow (yarn_ext_factor other than 1, yarn_attn_factor other than 1,
// yarn_log_multiplier other than 0) are refused naming the key. y->attn_factor is left to the
// caller (rope.scaling.attn_factor).
Status read_yarn_config(const GgufFile& f, const std::string& prefix, int32_t n_ctx_train,
                        YarnConfig* y);

}  // namespace geist
