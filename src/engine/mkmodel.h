// Synthetic models for tests and benchmarks: the tensor names, shapes, types and metadata that
// llama.cpp's converter writes for a Llama-3 style checkpoint (LlamaModel) or a Qwen3.5 text
// checkpoint (Qwen3_5TextModel, see mkmodel_qwen35.cpp), filled with seeded random weights and a
// synthetic byte-level BPE vocabulary.
//
// Type policy (mirrors the converter, which decides per tensor):
// - 1-D tensors (norms, ssm_a, ssm_dt.bias), rope_freqs and ssm_conv1d stay F32 whatever the
//   file type.
// - f32/f16/bf16/q8_0: every 2-D weight in that type. A tensor whose rows are not a multiple
//   of the block size falls back to F16, as the converter does (never the case for the
//   presets).
// - q4_0 (the converter cannot write it; llama-quantize does): 2-D weights in Q4_0 except
//   token_embd, which stays Q8_0. With tied embeddings token_embd is also the output
//   projection, the tensor most sensitive to quantization; llama-quantize gives it Q6_K, we
//   pick Q8_0 because every consumer of these files (ours included) reads it and it is the
//   more precise of the two.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "formats/ggml_type.h"

namespace geist {

class GgufWriter;

enum class MkArch : uint8_t { LLAMA, QWEN35 };

// Qwen3.5's extra hyper-parameters (zero for Llama presets).
struct MkHybrid {
  int32_t n_rot;                    // rotated dims per attention head (partial RoPE)
  int32_t full_attention_interval;  // layer il is attention when (il + 1) % interval == 0
  int32_t conv_kernel;              // DeltaNet causal conv width
  int32_t n_k_heads;                // DeltaNet key heads (ssm.group_count)
  int32_t n_v_heads;                // DeltaNet value heads (ssm.time_step_rank)
  int32_t d_k;                      // DeltaNet key head dim (ssm.state_size)
  int32_t d_v;                      // DeltaNet value head dim
  int32_t rope_sections[4];         // mrope sections, in rotated pairs (sum n_rot / 2)
};

struct MkModelPreset {
  const char* name;        // "tiny-llama", "llama-1b", "tiny-qwen35", "qwen35-0.8b", ...
  const char* model_name;  // general.name
  int32_t n_vocab;
  // Tokens after the merged BPE pieces (part of n_vocab): Llama-3 control tokens; for Qwen3.5
  // the added tokens (<|endoftext|>, <|im_start|>, ...) then the converter's [PAD<id>] fillers.
  int32_t n_special;
  int32_t n_embd;
  int32_t n_ff;
  int32_t n_layer;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_ctx_train;
  float rope_theta;
  float rms_eps;
  bool tied_embeddings;  // no output.weight: the output projection reuses token_embd
  // Llama-3 rope scaling ("rope_type": "llama3"); written as the rope_freqs.weight tensor.
  bool llama3_rope;
  float rope_factor;
  float rope_low_freq_factor;
  float rope_high_freq_factor;
  int32_t rope_orig_ctx;  // original_max_position_embeddings
  MkArch arch;
  MkHybrid hybrid;
};

// nullptr when `name` is not a preset.
const MkModelPreset* find_mkmodel_preset(std::string_view name);
// "tiny-llama, llama-1b, ..." (for messages).
std::string mkmodel_preset_list();

// Weight type for a --type name ("f32", "f16", "bf16", "q8_0", "q4_0"). GEIST_E_INVALID_ARG
// naming the type when it is not one of those.
Status parse_mkmodel_type(std::string_view name, GgmlType* out);
// general.file_type (llama.cpp's LlamaFileType) for a weight type from parse_mkmodel_type.
uint32_t mkmodel_file_type(GgmlType weight_type);

enum class MkInit : uint8_t {
  WEIGHT,      // normal-ish noise, std 1/sqrt(ne[0]) (ne[0] is the fan-in of a ggml matmul)
  NORM,        // 1 + small noise
  ROPE_FREQS,  // llama3_rope_factors
  SSM_A,       // -A with A ~ U[1, 16] (ssm_a holds -exp(A_log); HF draws A from U[0, 16])
  DT_BIAS,     // inverse softplus of dt ~ log-uniform [1e-3, 1e-1], Mamba's dt init
};

struct MkTensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  MkInit init;
};

// The tensors of the preset in file order, typed for `weight_type`.
std::vector<MkTensorSpec> mkmodel_tensor_specs(const MkModelPreset& p, GgmlType weight_type);
// Parameter count of the preset (all tensors' elements).
int64_t mkmodel_param_count(const MkModelPreset& p);

// The converter's rope_freqs: head_dim/2 divisors of the base frequencies (1 for high
// frequencies, rope_factor for low ones, smoothly interpolated between).
std::vector<float> llama3_rope_factors(const MkModelPreset& p);

struct MkVocab {
  std::vector<std::string> tokens;  // [n_vocab] GPT-2 byte-level text
  std::vector<int32_t> types;       // [n_vocab] llama.cpp token types (1 normal, 3 control, 4 user
                                    // defined, 5 unused)
  std::vector<std::string> merges;  // "left right", rank order
  int32_t bos = -1;                 // <|begin_of_text|>; Qwen: <|endoftext|>
  int32_t eos = -1;                 // <|end_of_text|>; Qwen: <|im_end|>
  int32_t eot = -1;                 // <|eot_id|>; Qwen: <|im_end|>
  int32_t pad = -1;                 // Qwen: <|endoftext|>; -1 for Llama
};

// Deterministic synthetic vocabulary (independent of the weight seed): 256 byte tokens in
// GPT-2's byte->unicode order, then merged word pieces (each merge joins two earlier tokens
// into a new one), then the Llama-3 control tokens padded with reserved ones to n_vocab (Qwen3.5:
// Qwen's added tokens padded with [PAD<id>] as the converter pads to vocab_size).
MkVocab mkmodel_build_vocab(const MkModelPreset& p);

// Writes the model to `path` (temp file + rename). Tensors are generated one at a time while
// the file is written, rows in parallel; the bytes depend only on (preset, type, seed).
// metadata_only: no tensors at all (a vocab-only style GGUF; used to check the metadata of
// large presets quickly). progress(fraction) may be empty.
// GEIST_E_INVALID_ARG (unknown type), GEIST_E_IO, GEIST_E_OOM; GEIST_E_UNSUPPORTED when the
// kernels cannot quantize to a needed type (not the case for the types listed).
Status mkmodel_write(const MkModelPreset& p, std::string_view type, const std::string& path,
                     uint64_t seed, const std::function<void(float)>& progress,
                     bool metadata_only = false);

// Qwen3.5 layout (mkmodel_qwen35.cpp), used by the functions above for MkArch::QWEN35.
std::vector<MkTensorSpec> mkmodel_qwen35_tensor_specs(const MkModelPreset& p, GgmlType weight_type);
// Everything but general.* (written by the caller, shared with Llama).
void mkmodel_qwen35_add_metadata(const MkModelPreset& p, GgmlType weight_type, GgufWriter* w);

}  // namespace geist
