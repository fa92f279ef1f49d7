/* geist — C ABI, self-description for bindings (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h.
 *
 * A binding that mirrors geist's public structs (ctypes, cffi, Rust FFI) checks at load time
 * that it was written for the library it loaded: geist_abi_version() names the ABI it was
 * built with, and geist_abi_layout() describes every public struct's size and field offsets
 * as the compiler laid them out (geist_model_params, geist_sampler_params,
 * geist_session_params of geist.h; geist_batch_item of geist_batch.h), so a drifted mirror
 * is refused with a clear error instead of corrupting memory. */
#ifndef GEIST_GEIST_ABI_H
#define GEIST_GEIST_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* EXPERIMENTAL. The ABI version of the headers this library was built from. Raised whenever
 * a public struct changes layout, an enum value changes meaning, or a function changes its
 * signature; adding a function, an enum value or a trailing struct field (guarded by
 * struct_size) does not raise it. */
#define GEIST_ABI_VERSION 2 /* 2: geist_batch_item gained struct_size (its first field) */

/* EXPERIMENTAL. GEIST_ABI_VERSION as the loaded library was built with it. */
uint32_t geist_abi_version(void);

/* EXPERIMENTAL. A static NUL-terminated JSON object describing the public structs as this
 * library was compiled (never NULL, never freed):
 *   {"abi_version": 2, "pointer_size": 8,
 *    "structs": {"geist_sampler_params": {"size": 40, "align": 8,
 *                "fields": {"struct_size": [0, 4], "temperature": [4, 4], ...}}, ...}}
 * where each field maps to [offset, size] in bytes. Thread-safe. */
const char* geist_abi_layout(void);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_ABI_H */
