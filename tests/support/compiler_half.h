// The compiler's own binary16 type, for checking our f16 conversion against an implementation
// that is not ours: _Float16 (GCC on x86-64: libgcc's soft-float) or __fp16 (64-bit Arm, IEEE
// format there: one hardware fcvt, round to nearest even). GCC 12 has no _Float16 in C++ on
// Arm, hence the alternative.
#pragma once

#if defined(__aarch64__)
#define GEIST_TEST_COMPILER_HALF __fp16
#elif defined(__FLT16_MAX__)
#define GEIST_TEST_COMPILER_HALF _Float16
#endif
