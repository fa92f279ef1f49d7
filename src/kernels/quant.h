// Scalar reference implementations of the GGUF block formats: conversion, dequantization,
// dot products and (for the types we write) quantization. These are the test oracle for
// every optimized kernel; they favour clarity over speed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/ggml_type.h"

namespace geist {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even (NaN preserved)

// True for the types with dequantize/dot support: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool quant_type_supported(GgmlType t);
// The names of those types, comma-separated, for refusals (static storage).
const char* quant_supported_types();
// True for the types quantize_row can produce: every supported type.
// The legacy types', Q2_K's, Q3_K's, Q5_K's and the IQ4 types' bytes follow the quantizer
// llama-quantize runs without an importance matrix; Q4_K/Q6_K use our own scale search (see
// quant_k.cpp), so their bytes differ from llama-quantize's.
bool quant_type_writable(GgmlType t);

// n must be a multiple of the type's block size; the type must be supported.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
// sum_i w[i] * x[i] with w in type t and x in f32; accumulates in f32, block by block.
float dot_row(GgmlType t, const void* w, const float* x, int64_t n);
// dst receives ggml_row_size(t, n) bytes.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

}  // namespace geist
