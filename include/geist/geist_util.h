/* geist — C ABI, extras (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h. */
#ifndef GEIST_GEIST_UTIL_H
#define GEIST_GEIST_UTIL_H

#include "geist/geist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* EXPERIMENTAL. Like geist_session_prefill, but also writes the logits of every one of the
 * n_tokens positions to `out_logits`, row-major [n_tokens x n_vocab]. out_cap is the capacity
 * of out_logits in floats; GEIST_E_INVALID_ARG (session unchanged) if it is too small. */
geist_status geist_session_prefill_all_logits(geist_session* session, const geist_token* tokens,
                                              size_t n_tokens, float* out_logits, size_t out_cap);

/* EXPERIMENTAL. The session's token history; the pointer stays valid until the next call on
 * the session. */
geist_status geist_session_tokens(const geist_session* session, const geist_token** out_tokens,
                                  size_t* out_n);

/* EXPERIMENTAL. Human-readable description of the model (architecture, hyper-parameters,
 * tensor type counts, tokenizer), as `geist info` prints it. Buffer rules as in
 * geist_detokenize (no NUL terminator written). */
geist_status geist_model_describe(geist_model* model, char* out, size_t cap, size_t* n_out);

/* EXPERIMENTAL. Writes a GGUF with random weights and exactly the tensor names, shapes and
 * metadata that llama.cpp's converter writes for the preset (so llama.cpp loads the same
 * file). Presets: "tiny-llama", "llama-1b". Types: "f32", "f16", "bf16", "q8_0", "q4_0".
 * A synthetic vocabulary is included. progress_fn may be NULL. On failure, err_buf (if not
 * NULL) receives a message. Returns GEIST_OK, GEIST_E_INVALID_ARG (unknown preset or type),
 * GEIST_E_IO, GEIST_E_OOM. */
geist_status geist_mkmodel(const char* preset, const char* type, const char* out_path,
                           uint64_t seed, geist_progress_fn progress_fn, void* progress_user,
                           char* err_buf, size_t err_cap);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_UTIL_H */
