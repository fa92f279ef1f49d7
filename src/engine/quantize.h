// Re-quantizes a GGUF model's weight matrices into another type (geist quantize), the way
// llama-quantize does it for the simple file types: every metadata key/value is copied as it is
// except general.file_type, which names the new type (llama.cpp's llama_ftype); the tensors keep
// their names, shapes and order. (general.alignment is kept as a value but written as u32, and
// only when it is not the default 32: GgufWriter's rule.)
//
// Type policy, one tensor at a time (quantize_tensor_type):
// - converted: tensors of 2 or more dimensions whose name ends in ".weight", except
//   ssm_conv1d.weight (the DeltaNet conv stays F32, as llama.cpp's converter and llama-quantize
//   keep it, and as the qwen35 loader requires), when ne[0] is a multiple of the target's block
//   size and the tensor is not already of the type it would get;
// - targets below 5 bits (q2_k, q3_k, q4_0, q4_1, q4_k, iq4_nl, iq4_xs) keep token_embd.weight
//   and output.weight at Q8_0 (when ne[0] allows): llama-quantize spends more bits on them too
//   (it picks Q6_K for output), and with tied embeddings token_embd is also the output
//   projection, the most sensitive tensor;
// - 256-block targets whose matrices' rows are whole 32-blocks only fall back as llama-quantize
//   does for q2_k / q3_k (Q4_0), q5_k (Q5_1) and iq4_xs (IQ4_NL); q4_k and q6_k take Q8_0
//   (llama-quantize: Q5_0 and Q8_0), never coarser than the target;
// - everything else (norms, biases, ssm_a, rows that are not whole blocks) is copied bit for bit.
//
// Conversion is dequantize_row to f32, then quantize_row to the target (kernels/quant.h). The
// legacy types', Q2_K's, Q3_K's, Q5_K's and the IQ4 types' bytes follow the quantizer
// llama-quantize runs without an importance matrix; Q4_K/Q6_K use our own scale search, so
// their bytes differ from llama-quantize's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "formats/ggml_type.h"

namespace geist {

struct GgufTensorInfo;

struct QuantizeTarget {
  const char* name;    // "q4_0", as given to --type
  GgmlType type;       // the weight type
  uint32_t file_type;  // general.file_type: llama.cpp's llama_ftype for the file
};

// The target for a --type name: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,
// q4_k, q5_k, q6_k, iq4_nl, iq4_xs.
// GEIST_E_INVALID_ARG naming the type when it is not one of those; GEIST_E_UNSUPPORTED when the
// kernels cannot write it (quant_type_writable).
Status parse_quantize_type(std::string_view name, QuantizeTarget* out);
// "f32, f16, ..." (the writable targets, for messages and help).
std::string quantize_type_list();

// The type tensor `t` gets in a file quantized to `target` (t.type when it is copied).
GgmlType quantize_tensor_type(const GgufTensorInfo& t, GgmlType target);

// Reads `in_path`, writes the quantized model to `out_path` (temp file + rename: on failure no
// output file is left and an existing one is untouched). Tensors are converted one at a time
// while the file is written, rows in parallel on n_threads (<= 0: all cores); the input stays
// mapped, so memory holds one output tensor at a time. progress(fraction) may be empty.
// GEIST_E_INVALID_ARG (unknown type, output path is the input file), GEIST_E_UNSUPPORTED (type
// not writable, a tensor to convert whose type cannot be read, an alignment over 2^31),
// GEIST_E_FILE_NOT_FOUND / GEIST_E_IO / GEIST_E_FORMAT (input), GEIST_E_IO (output).
Status quantize_file(const std::string& in_path, const std::string& out_path, std::string_view type,
                     int n_threads, const std::function<void(float)>& progress);

}  // namespace geist
