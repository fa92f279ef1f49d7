// Type dispatch for the scalar reference block formats.
#include "kernels/quant.h"

#include "base/status.h"
#include "kernels/quant_blocks.h"

namespace geist {
namespace {

using namespace quant_detail;

using DequantizeFn = void (*)(const uint8_t* src, float* dst, int64_t n);
using DotFn = float (*)(const uint8_t* w, const float* x, int64_t n);
using QuantizeFn = void (*)(const float* src, uint8_t* dst, int64_t n);

struct QuantOps {
  int block_size;  // elements per block; 0 when the type is not supported
  DequantizeFn dequantize;
  DotFn dot;
  QuantizeFn quantize;  // nullptr when we cannot write the type
};

QuantOps ops_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return {1, dequantize_f32, dot_f32, quantize_f32};
    case GgmlType::F16:
      return {1, dequantize_f16, dot_f16, quantize_f16};
    case GgmlType::BF16:
      return {1, dequantize_bf16, dot_bf16, quantize_bf16};
    case GgmlType::Q4_0:
      return {kQK, dequantize_q4_0, dot_q4_0, quantize_q4_0};
    case GgmlType::Q4_1:
      return {kQK, dequantize_q4_1, dot_q4_1, quantize_q4_1};
    case GgmlType::Q5_0:
      return {kQK, dequantize_q5_0, dot_q5_0, quantize_q5_0};
    case GgmlType::Q5_1:
      return {kQK, dequantize_q5_1, dot_q5_1, quantize_q5_1};
    case GgmlType::Q8_0:
      return {kQK, dequantize_q8_0, dot_q8_0, quantize_q8_0};
    case GgmlType::Q4_K:
      return {kQK_K, dequantize_q4_k, dot_q4_k, quantize_q4_k};
    case GgmlType::Q5_K:
      return {kQK_K, dequantize_q5_k, dot_q5_k, quantize_q5_k};
    case GgmlType::Q6_K:
      return {kQK_K, dequantize_q6_k, dot_q6_k, quantize_q6_k};
    case GgmlType::Q2_K:
      return {kQK_K, dequantize_q2_k, dot_q2_k, quantize_q2_k};
    case GgmlType::Q3_K:
      return {kQK_K, dequantize_q3_k, dot_q3_k, quantize_q3_k};
    case GgmlType::IQ4_NL:
      return {kQK, dequantize_iq4_nl, dot_iq4_nl, quantize_iq4_nl};
    case GgmlType::IQ4_XS:
      return {kQK_K, dequantize_iq4_xs, dot_iq4_xs, quantize_iq4_xs};
    default:
      return {0, nullptr, nullptr, nullptr};
  }
}

QuantOps checked_ops(GgmlType t, int64_t n) {
  const QuantOps ops = ops_for(t);
  GEIST_CHECK(ops.block_size != 0, "quant: type not supported (check quant_type_supported)");
  GEIST_CHECK(n >= 0 && n % ops.block_size == 0, "quant: row length not a multiple of the block");
  return ops;
}

}  // namespace

bool quant_type_supported(GgmlType t) { return ops_for(t).block_size != 0; }

const char* quant_supported_types() {
  return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
         "iq4_xs";
}

bool quant_type_writable(GgmlType t) { return ops_for(t).quantize != nullptr; }

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  checked_ops(t, n).dequantize(static_cast<const uint8_t*>(src), dst, n);
}

float dot_row(GgmlType t, const void* w, const float* x, int64_t n) {
  return checked_ops(t, n).dot(static_cast<const uint8_t*>(w), x, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const QuantOps ops = checked_ops(t, n);
  GEIST_CHECK(ops.quantize != nullptr, "quant: type not writable (check quant_type_writable)");
  ops.quantize(src, static_cast<uint8_t*>(dst), n);
}

}  // namespace geist
