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

/* ---------------------------------------------------------------------------------------- */
/* Snapshots (format: docs/SNAPSHOT_FORMAT.md). An image restores into any session of the same
 * model (same snapshot_id) and KV mode whose max_seq_len holds its tokens, and that session
 * then continues bit-identically (tokens and logits, greedy and sampled). */

/* EXPERIMENTAL. Exact size in bytes of the image geist_session_snapshot would write now. */
geist_status geist_session_snapshot_size(geist_session* session, size_t* out_size);

/* EXPERIMENTAL. Writes the session's complete state into buf (capacity cap) and the byte count
 * to *out_written. GEIST_E_INVALID_ARG (nothing written that matters, session unchanged) when
 * cap is smaller than geist_session_snapshot_size. The session is not modified.
 * GEIST_E_BACKEND when the device behind the session has failed: no image is produced (buf's
 * first 8 bytes are zeroed, so the bytes never restore). */
geist_status geist_session_snapshot(geist_session* session, void* buf, size_t cap,
                                    size_t* out_written);

/* EXPERIMENTAL. Replaces the session's state with the image's. Everything is validated before
 * anything is written: on failure the session is untouched (its continuation is bit-identical
 * to what it would have been without the call). GEIST_E_INVALID_ARG for a NULL or too short
 * buffer; GEIST_E_FORMAT naming the failed check (magic, version, size, checksum, model id,
 * KV mode, capacity, section lengths, token ids). GEIST_E_BACKEND when the device behind the
 * session has failed: before anything was written (session untouched), or while the state was
 * written (the message says so; the state is then undefined). */
geist_status geist_session_restore(geist_session* session, const void* buf, size_t size);

/* EXPERIMENTAL. Snapshot into a file, atomically: temp file in the same directory, fsync,
 * rename; a crash mid-write leaves any previous file intact. GEIST_E_IO on failure;
 * GEIST_E_BACKEND (no file written) when the device behind the session has failed. */
geist_status geist_session_save_file(geist_session* session, const char* path);

/* EXPERIMENTAL. Restore from a file written by geist_session_save_file (same rules as
 * geist_session_restore; GEIST_E_FILE_NOT_FOUND / GEIST_E_IO for file problems). */
geist_status geist_session_load_file(geist_session* session, const char* path);

/* EXPERIMENTAL. Pins the session's current state (its whole history) as its prefix; replaces an
 * earlier pin. For hybrid models this keeps an internal snapshot of the recurrent state. */
geist_status geist_session_pin_prefix(geist_session* session);

/* EXPERIMENTAL. Returns the session to exactly the state it had when the prefix was pinned
 * (history, pending logits, owed forward, recurrent and KV state, RNG state); sampler settings
 * are kept as currently set. GEIST_E_INVALID_STATE when nothing is pinned. */
geist_status geist_session_reset_to_prefix(geist_session* session);

/* EXPERIMENTAL. Length of the pinned prefix, or -1 when nothing is pinned. */
int32_t geist_session_pin_len(const geist_session* session);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_UTIL_H */
