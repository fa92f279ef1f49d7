/* geist — C ABI, extras (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h. Session extras (all-position logits, cancel, token history),
 * the model description, the file tools behind `geist mkmodel` / `geist quantize`, and a
 * benchmark hook. Snapshots and files of session state are in geist_snapshot.h, backends in
 * geist_backend.h. */
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

/* EXPERIMENTAL. Asks the prefill that `session` runs now (on another thread), or its next one,
 * to stop at its next micro-batch boundary. The only call that may be made on a session while
 * another thread is inside a call on it; it does not touch the session's error slot. The
 * prefill then returns GEIST_E_CANCELLED, keeping the tokens of the micro-batches it
 * completed with the last one's logits pending: geist_session_position says where it stopped
 * (a multiple of 64 past where it started, or the prefill grid point: docs/ARCHITECTURE.md
 * "Determinism"), and the session is as if it had been prefilled with those tokens. A prefill
 * consumes the request when it returns, whether it stopped or finished. NULL is a no-op. */
void geist_session_cancel(geist_session* session);

/* EXPERIMENTAL. The session's prefill grid G (docs/ARCHITECTURE.md "Determinism"): the
 * smallest G such that prefill(0:N) in one call and prefill(0:k), snapshot, restore (into this
 * or another session of the model), prefill(k:N) give memcmp-equal logits and snapshot images
 * for every k that is a multiple of G (so any calls that all end at multiples of G, or at
 * the end, give the same bits). A cache of prefix states is exact when it keeps states that
 * prefill produced at multiples of G (or at a prompt's end, for that same prompt). Decided by the
 * model's layers and the session's KV mode, never by its name: 64 for a model with recurrent layers
 * (Qwen3.5's gated DeltaNet rounds its state where a prefill chunk ends), 1 for an attention-only
 * model (Llama) in every KV mode. Verified bitwise on the CPU backends. Constant for the session's
 * life; 0 for NULL; touches no error slot. */
int32_t geist_session_prefill_grid(const geist_session* session);

/* EXPERIMENTAL. The token geist_session_decode would sample now, without changing the session:
 * the same sampler, settings, history and pending logits, on a copy of the RNG, so the next
 * geist_session_decode returns this token. A caller can hand the token out first and snapshot
 * the state it was drawn from afterwards (a server's checkpoint of a prompt's end off the
 * first token's path). GEIST_E_INVALID_STATE when no logits are pending or a forward is owed
 * (after a decode: peek never runs a forward), GEIST_E_TOO_MANY_TOKENS when the session is
 * full, GEIST_E_INVALID_ARG for a NULL out_token; the session is unchanged in every case. */
geist_status geist_session_peek(geist_session* session, geist_token* out_token);

/* EXPERIMENTAL. Forgets every token from position n_tokens on: the session goes on from there
 * as if its history were its first n_tokens tokens (the next prefill writes position
 * n_tokens), with no logits pending until that prefill (geist_session_decode,
 * geist_session_logits and snapshots return GEIST_E_INVALID_STATE until then) and its sampler
 * settings and RNG as they are. Exact where those positions were written by prefill calls of
 * a model whose prefill grid is 1 (attention only; geist_session_prefill_grid): a rewind to n
 * and a prefill of the rest give the logits and snapshot image that prefilling the whole
 * history gives, and that restoring the image of the first n tokens and prefilling the rest
 * gives, memcmp-equal. So a server can keep a sequence's prompt in place for the next
 * request that shares its start instead of restoring it (llama-server's slot reuse). Rows that
 * decode steps wrote are not covered: a decode's forward may round differently from a
 * prefill's. GEIST_E_INVALID_ARG when n_tokens is negative or past the history;
 * GEIST_E_INVALID_STATE, the session unchanged, when the state cannot continue at n_tokens:
 * recurrent layers (Qwen3.5: their state is that of the whole history), or a Q4 window / KIVI
 * residual whose rows later positions overwrote. n_tokens equal to the history is a no-op. */
geist_status geist_session_rewind(geist_session* session, int32_t n_tokens);

/* EXPERIMENTAL. The session's token history; the pointer stays valid until the next call on
 * the session. */
geist_status geist_session_tokens(const geist_session* session, const geist_token** out_tokens,
                                  size_t* out_n);

/* EXPERIMENTAL. Human-readable description of the model (architecture, hyper-parameters,
 * tensor type counts, tokenizer), as `geist info` prints it. Buffer rules as in
 * geist_detokenize (no NUL terminator written). */
geist_status geist_model_describe(geist_model* model, char* out, size_t cap, size_t* n_out);

/* EXPERIMENTAL. Names everything about the loaded model that decides the bits of its states
 * and outputs: the file's snapshot_id, the backend (with the device for GPUs), the SIMD
 * target of the CPU kernels and the revision of geist's numerics (raised by every change to
 * any result's bits), e.g. "snapshot_id=0123456789abcdef;backend=cpu;cpu_kernels=AVX2;numerics=2".
 * Snapshot images are bit-exact only between models of the same identity: caches shared
 * between processes (docs/SERVER.md "Tiers") put it in their namespace. Buffer rules as in
 * geist_detokenize. GEIST_E_INVALID_ARG, GEIST_E_INVALID_STATE for a model loaded vocab-only. */
geist_status geist_model_identity(geist_model* model, char* out, size_t cap, size_t* n_out);

/* EXPERIMENTAL. Times one copy of n_bytes from host memory into the model's backend memory
 * (*upload_s) and one back (*download_s), through the same path snapshots and restores use,
 * in this process: memcpy on the CPU backend, cudaMemcpy to/from pageable host memory on
 * CUDA. For benchmarks that put snapshot speed next to the raw copy speed.
 * GEIST_E_INVALID_STATE for a model loaded vocab-only. */
geist_status geist_model_time_copies(geist_model* model, size_t n_bytes, double* upload_s,
                                     double* download_s);

/* EXPERIMENTAL. Writes a GGUF with random weights and exactly the tensor names, shapes and
 * metadata that llama.cpp's converter writes for the preset (so llama.cpp loads the same
 * file). Presets: "tiny-llama", "llama-1b", "tiny-qwen35", "qwen35-0.8b", "qwen35-2b".
 * Types: "f32", "f16", "bf16", "q8_0", "q4_0".
 * A synthetic vocabulary is included. progress_fn may be NULL. On failure, err_buf (if not
 * NULL) receives a message. Returns GEIST_OK, GEIST_E_INVALID_ARG (unknown preset or type),
 * GEIST_E_IO, GEIST_E_OOM. */
geist_status geist_mkmodel(const char* preset, const char* type, const char* out_path,
                           uint64_t seed, geist_progress_fn progress_fn, void* progress_user,
                           char* err_buf, size_t err_cap);

/* EXPERIMENTAL. Re-quantizes the GGUF at in_path into out_path, like llama-quantize: metadata
 * copied unchanged except general.file_type (llama.cpp's llama_ftype for the type); tensors keep
 * their names, shapes and order. Weight matrices (2+ dimensions, name "*.weight", not
 * ssm_conv1d) whose rows are whole blocks of the type are converted; other tensors are copied.
 * For "q4_0" and "q4_k", token_embd.weight and output.weight become q8_0. Types: "f32", "f16",
 * "bf16", "q8_0", "q4_0", "q4_k", "q6_k". Tensors are converted one at a time while the file is
 * written, rows on all cores. The file is written to a temporary name and renamed: on failure
 * no output is left. progress_fn may be NULL. On failure, err_buf (if not NULL) receives a
 * message. Returns GEIST_OK, GEIST_E_INVALID_ARG (NULL argument, unknown type, out_path is the
 * input file), GEIST_E_UNSUPPORTED (type not writable, a tensor type geist cannot read),
 * GEIST_E_FILE_NOT_FOUND, GEIST_E_IO, GEIST_E_FORMAT (input), GEIST_E_IO (output), GEIST_E_OOM. */
geist_status geist_quantize(const char* in_path, const char* out_path, const char* type,
                            geist_progress_fn progress_fn, void* progress_user, char* err_buf,
                            size_t err_cap);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_UTIL_H */
