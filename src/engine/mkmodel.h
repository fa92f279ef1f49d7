// Synthetic Llama models for tests and benchmarks: the tensor names, shapes, types and metadata
// that llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel) writes for a Llama-3 style
// checkpoint, filled with seeded random weights and a synthetic byte-level BPE vocabulary.
//
// Type policy (mirrors the converter, which decides per tensor):
// - 1-D tensors (norms) and rope_freqs stay F32 whatever the file type.
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

struct MkModelPreset {
  const char* name;        // "tiny-llama", "llama-1b"
  const char* model_name;  // general.name
  int32_t n_vocab;
  int32_t n_special;  // Llama-3 control tokens at the end of the vocabulary (part of n_vocab)
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
};

// nullptr when `name` is not a preset.
const MkModelPreset* find_mkmodel_preset(std::string_view name);
// "tiny-llama, llama-1b" (for messages).
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
};

struct MkTensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  MkInit init;
};

// The tensors of the preset in file order, typed for `weight_type`.
std::vector<MkTensorSpec> mkmodel_tensor_specs(const MkModelPreset& p, GgmlType weight_type);

// The converter's rope_freqs: head_dim/2 divisors of the base frequencies (1 for high
// frequencies, rope_factor for low ones, smoothly interpolated between).
std::vector<float> llama3_rope_factors(const MkModelPreset& p);

struct MkVocab {
  std::vector<std::string> tokens;  // [n_vocab] GPT-2 byte-level text
  std::vector<int32_t> types;       // [n_vocab] llama.cpp token types (1 normal, 3 control)
  std::vector<std::string> merges;  // "left right", rank order
  int32_t bos = -1;                 // <|begin_of_text|>
  int32_t eos = -1;                 // <|end_of_text|>
  int32_t eot = -1;                 // <|eot_id|>
};

// Deterministic synthetic vocabulary (independent of the weight seed): 256 byte tokens in
// GPT-2's byte->unicode order, then merged word pieces (each merge joins two earlier tokens
// into a new one), then the Llama-3 control tokens padded with reserved ones to n_vocab.
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

}  // namespace geist
