/* geist — C ABI, core (STABLE).
 *
 * Conventions
 * - Every function that can fail returns a geist_status. GEIST_OK is 0.
 * - Handles are opaque. A model is immutable after load and may be shared by any number of
 *   sessions and threads. A session is NOT thread-safe: use one session from one thread at a
 *   time (different sessions may run concurrently).
 * - After a failing call on a handle, geist_model_last_error / geist_session_last_error return
 *   a message that names what was wrong. Messages stay valid until the next call on the handle.
 * - No C++ exception ever crosses this boundary; failures inside become GEIST_E_INTERNAL or
 *   GEIST_E_OOM.
 * - A failing call leaves the session as it was before the call unless its comment says
 *   otherwise.
 *
 * Stability tags: every declaration carries STABLE (kept source- and binary-compatible
 * within a major version) or EXPERIMENTAL (may change in any release). This header holds
 * STABLE declarations only. A C enum or struct cannot be split across headers, so the few
 * EXPERIMENTAL members of STABLE types (GEIST_E_CANCELLED; geist_model_params.backend and
 * .vocab_only) are tagged where they stand. Everything else lives in its own header, each
 * EXPERIMENTAL as a whole (docs/API.md "Headers"):
 *   geist_snapshot.h  snapshot, restore, fork, save/load files, pinned prefix
 *   geist_batch.h     many sessions in one forward
 *   geist_chat.h      chat templates, output parsing (stop strings, reasoning, tool calls)
 *   geist_backend.h   the geist_backend values of geist_model_params.backend
 *   geist_abi.h       ABI version and struct layouts, for bindings
 *   geist_util.h      session extras (all-position logits, cancel, history), model
 *                     description, mkmodel, quantize, benchmark hooks
 *   geist.hpp         C++ RAII wrappers over all of them
 */
#ifndef GEIST_GEIST_H
#define GEIST_GEIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* STABLE */
typedef enum geist_status {
  GEIST_OK = 0,
  GEIST_E_OOM = 1,              /* memory allocation failed */
  GEIST_E_INVALID_ARG = 2,      /* null handle/pointer, bad value, buffer too small */
  GEIST_E_INTERNAL = 3,         /* a bug in geist: please report */
  GEIST_E_FILE_NOT_FOUND = 4,   /* the path does not exist */
  GEIST_E_IO = 5,               /* the OS failed to read or write */
  GEIST_E_FORMAT = 6,           /* malformed input file or image */
  GEIST_E_UNSUPPORTED = 7,      /* well-formed but not supported (architecture, tensor type) */
  GEIST_E_NOT_FOUND = 8,        /* a named item (metadata key, token) does not exist */
  GEIST_E_BACKEND = 9,          /* the compute backend failed */
  GEIST_E_INVALID_STATE = 10,   /* the call is not allowed in the handle's current state */
  GEIST_E_TOO_MANY_TOKENS = 11, /* the session's max_seq_len would be exceeded */
  GEIST_E_CANCELLED = 12        /* EXPERIMENTAL: the caller cancelled the call
                                 * (geist_session_cancel) */
} geist_status;

/* STABLE */
typedef int32_t geist_token;
/* STABLE */
typedef struct geist_model geist_model;
/* STABLE */
typedef struct geist_session geist_session;

/* STABLE. Log levels passed to a geist_log_fn. */
typedef enum geist_log_level {
  GEIST_LOG_DEBUG = 0,
  GEIST_LOG_INFO = 1,
  GEIST_LOG_WARN = 2,
  GEIST_LOG_ERROR = 3
} geist_log_level;

/* STABLE. Log callback; `msg` is a NUL-terminated line without trailing newline. May be called
 * from the thread that called into geist. */
typedef void (*geist_log_fn)(void* user, geist_log_level level, const char* msg);

/* STABLE. Load progress callback: `fraction` in [0, 1]. Return 0 to continue. */
typedef int (*geist_progress_fn)(void* user, float fraction);

/* STABLE. Static string naming a status ("GEIST_E_FORMAT: malformed input"). Never NULL. */
const char* geist_status_string(geist_status status);

/* STABLE. Library version, e.g. "0.1.0". */
const char* geist_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Models                                                                                    */

/* STABLE. Model load parameters. Initialise with geist_model_params_default. */
typedef struct geist_model_params {
  uint32_t struct_size; /* sizeof(geist_model_params), set by the default function */
  geist_log_fn log_fn;  /* NULL: no logging */
  void* log_user;
  geist_progress_fn progress_fn; /* NULL: no progress reports */
  void* progress_user;
  /* EXPERIMENTAL (added in 0.2; a struct_size without it means GEIST_BACKEND_AUTO). A backend
   * this build or machine lacks makes geist_model_load fail with GEIST_E_UNSUPPORTED. */
  int32_t backend; /* geist_backend (geist_backend.h), default 0: GEIST_BACKEND_AUTO */
  /* EXPERIMENTAL (added after `backend`; a struct_size without it means 0). Non-zero: load
   * only the tokenizer (and metadata), as llama.cpp's vocab_only. The file may hold no tensors
   * and name any architecture, even one geist cannot run. Tokenizer calls work; calls that
   * need the weights (geist_session_create, ...) fail with GEIST_E_INVALID_STATE. */
  int32_t vocab_only; /* 0 or 1, default 0 */
} geist_model_params;

/* STABLE. Fills *params with defaults. */
void geist_model_params_default(geist_model_params* params);

/* STABLE. Loads a GGUF model (memory-mapped, zero-copy).
 * params may be NULL (defaults). On failure *out_model is NULL and, when err_buf is not NULL,
 * a NUL-terminated message (truncated to err_cap) is written there.
 * Returns GEIST_OK, GEIST_E_INVALID_ARG, GEIST_E_FILE_NOT_FOUND, GEIST_E_IO, GEIST_E_FORMAT,
 * GEIST_E_UNSUPPORTED, GEIST_E_OOM, GEIST_E_INTERNAL, and GEIST_E_INVALID_STATE when the
 * progress callback cancelled the load. */
geist_status geist_model_load(const char* path, const geist_model_params* params,
                              geist_model** out_model, char* err_buf, size_t err_cap);

/* STABLE. Frees the model. All its sessions must have been destroyed. NULL is a no-op. */
void geist_model_free(geist_model* model);

/* STABLE. Message of the last failing call on this model ("" if none). */
const char* geist_model_last_error(const geist_model* model);

/* STABLE. Vocabulary size (number of logits per position); 0 for NULL. */
int32_t geist_model_n_vocab(const geist_model* model);
/* STABLE. Context length the model was trained with (metadata); 0 if unknown. */
int32_t geist_model_n_ctx_train(const geist_model* model);
/* STABLE. Special tokens; -1 when the model has none. */
geist_token geist_model_token_bos(const geist_model* model);
geist_token geist_model_token_eos(const geist_model* model);
/* STABLE. 1 when `token` ends generation (EOS, EOT, ...), else 0. */
int geist_model_token_is_eog(const geist_model* model, geist_token token);

/* STABLE. Tokenizes UTF-8 text.
 * add_special: add BOS/EOS as the model's metadata asks. parse_special: recognise special
 * token texts (e.g. "<|im_start|>") in the text.
 * Writes up to `cap` ids to `out` and the total count to *n_out. If cap is too small, returns
 * GEIST_E_INVALID_ARG with *n_out set to the count needed (out may be NULL when cap is 0). */
geist_status geist_tokenize(geist_model* model, const char* text, size_t text_len, int add_special,
                            int parse_special, geist_token* out, size_t cap, size_t* n_out);

/* STABLE. Converts tokens back to UTF-8 text (the inverse of geist_tokenize without special
 * tokens). Writes up to `cap` bytes (no NUL terminator) and the full length to *n_out; if cap
 * is too small returns GEIST_E_INVALID_ARG with *n_out set to the length needed.
 * GEIST_E_INVALID_ARG also for an id outside the vocabulary. */
geist_status geist_detokenize(geist_model* model, const geist_token* tokens, size_t n_tokens,
                              char* out, size_t cap, size_t* n_out);

/* STABLE. The text of one token as it appears in the output stream (same buffer rules as
 * geist_detokenize). A piece may be an incomplete UTF-8 sequence (byte tokens). */
geist_status geist_token_to_piece(geist_model* model, geist_token token, char* out, size_t cap,
                                  size_t* n_out);

/* ---------------------------------------------------------------------------------------- */
/* Sessions                                                                                  */

/* STABLE. Sampler settings. temperature 0 means greedy (argmax; ties pick the lowest id).
 * Order of application: repetition penalty, then presence/frequency penalties -> top-k ->
 * temperature -> top-p -> min-p -> draw. The repetition penalty looks at the last
 * penalty_last_n tokens of the history (prompt included, llama.cpp's semantics); the presence
 * and frequency penalties look at the tokens the session sampled since its last prompt input
 * (prefill or batch tokens), i.e. the current completion, as OpenAI defines them:
 * logit[t] -= frequency_penalty * count[t] + presence_penalty * (count[t] > 0).
 * geist_session_create and geist_session_set_sampler refuse a value outside the range given here
 * with GEIST_E_INVALID_ARG and a message naming the field. */
typedef struct geist_sampler_params {
  uint32_t struct_size;    /* sizeof(geist_sampler_params) */
  float temperature;       /* default 0.8; 0: greedy; finite and >= 0 */
  int32_t top_k;           /* default 40; <= 0: off */
  float top_p;             /* default 0.95; in [0, 1]; 1: off */
  float min_p;             /* default 0.05; in [0, 1]; 0: off */
  float repeat_penalty;    /* default 1.0 (off); > 1 penalises tokens seen in the window;
                            * finite and > 0 */
  float presence_penalty;  /* default 0.0 (off); subtracted once from the logit of each token
                            * generated in this completion; finite */
  int32_t penalty_last_n;  /* the repetition penalty's window of history, default 64; -1:
                            * whole history; >= -1 */
  uint64_t seed;           /* RNG seed, default 0 */
  float frequency_penalty; /* default 0.0 (off); subtracted once per occurrence from the logit
                            * of each token generated in this completion; finite */
} geist_sampler_params;

/* STABLE. Fills *params with the defaults listed above. */
void geist_sampler_params_default(geist_sampler_params* params);

/* STABLE (the names; the byte layouts behind them may still change). Representation of the
 * attention KV cache (recurrent state is always f32).
 * Blocks are 32 values (one head for heads narrower than 32); bytes per value including scales
 * with 32-value blocks: F32 4, F16 2, Q8 1.0625, Q4 0.5625, KIVI4 0.625, KIVI2 0.375 (plus
 * f16 for at most 31 most recent positions). */
typedef enum geist_kv_mode {
  GEIST_KV_F32 = 0,   /* exact; what the reference logits were computed with */
  GEIST_KV_F16 = 1,   /* IEEE half */
  GEIST_KV_Q8 = 2,    /* int8, one f16 scale per 32 values (Hadamard-rotated block) */
  GEIST_KV_Q4 = 3,    /* int4, one f16 scale per 32 values (Hadamard-rotated block) */
  GEIST_KV_KIVI4 = 4, /* KIVI: keys per channel over 32 tokens, values per token, 4 bits */
  GEIST_KV_KIVI2 = 5  /* the same with 2 bits */
} geist_kv_mode;

/* STABLE. Session parameters. */
typedef struct geist_session_params {
  uint32_t struct_size;         /* sizeof(geist_session_params) */
  int32_t max_seq_len;          /* KV capacity in tokens; default 0: min(n_ctx_train, 4096) */
  int32_t n_threads;            /* compute threads; default 0: hardware concurrency; at most 256
                                 * (more is refused with GEIST_E_INVALID_ARG). Sessions of one model
                                 * with the same count share one pool of threads (docs/ARCHITECTURE.md
                                 * "Threads"). */
  geist_sampler_params sampler; /* initial sampler settings */
  int32_t kv_mode; /* geist_kv_mode of the attention KV cache, default GEIST_KV_F16; a value
                    * outside the enum makes geist_session_create fail with
                    * GEIST_E_INVALID_ARG. External reference logits were made with
                    * GEIST_KV_F32. */
} geist_session_params;

/* STABLE. Fills *params with defaults. */
void geist_session_params_default(geist_session_params* params);

/* STABLE. Creates a session on `model` with its own KV cache and state.
 * params may be NULL (defaults). Returns GEIST_OK, GEIST_E_INVALID_ARG, GEIST_E_OOM, and
 * GEIST_E_INVALID_STATE for a model loaded vocab-only. */
geist_status geist_session_create(geist_model* model, const geist_session_params* params,
                                  geist_session** out_session);

/* STABLE. Destroys the session. NULL is a no-op. */
void geist_session_destroy(geist_session* session);

/* STABLE. Message of the last failing call on this session ("" if none). */
const char* geist_session_last_error(const geist_session* session);

/* STABLE. Appends tokens and runs them through the model (batched), leaving the logits of the
 * last token pending. n_tokens == 0 is a no-op.
 * Returns GEIST_E_TOO_MANY_TOKENS (session unchanged) if position + n_tokens > max_seq_len,
 * GEIST_E_INVALID_ARG for an id outside the vocabulary (session unchanged), GEIST_E_BACKEND
 * when the device behind the session failed (then every later call that needs it fails),
 * GEIST_E_CANCELLED (EXPERIMENTAL) when geist_session_cancel stopped it: the session then
 * holds the rows it completed (geist_util.h). */
geist_status geist_session_prefill(geist_session* session, const geist_token* tokens,
                                   size_t n_tokens);

/* STABLE. Tokenizes `text` (add_special as in geist_tokenize; BOS is only added at position
 * 0; special tokens are parsed) and prefills it. */
geist_status geist_session_prefill_text(geist_session* session, const char* text, size_t text_len,
                                        int add_special);

/* STABLE. One decode step: samples the next token from the pending logits with the session's
 * sampler and RNG, appends it to the history and returns it in *out_token. The forward pass
 * for that token is owed and runs at the start of the next call that needs logits (decode,
 * geist_session_logits, prefill), so generation never computes logits it does not use.
 * Returns GEIST_E_INVALID_STATE when no logits are pending (nothing prefilled),
 * GEIST_E_TOO_MANY_TOKENS when the session is full (session unchanged), GEIST_E_BACKEND when
 * the device behind the session failed. */
geist_status geist_session_decode(geist_session* session, geist_token* out_token);

/* STABLE. Pointer to the pending logits [n_vocab] (running an owed forward first). The pointer
 * stays valid until the next call on the session. GEIST_E_INVALID_STATE when none pending. */
geist_status geist_session_logits(geist_session* session, const float** out_logits,
                                  int32_t* out_n_vocab);

/* STABLE. Forgets all tokens; keeps settings; re-seeds the RNG from the sampler seed. */
geist_status geist_session_reset(geist_session* session);

/* STABLE. Number of tokens in the session's history (the next token's position). */
int32_t geist_session_position(const geist_session* session);

/* STABLE. Capacity in tokens. */
int32_t geist_session_max_seq_len(const geist_session* session);

/* STABLE. Replaces the sampler settings and re-seeds the RNG from params->seed. */
geist_status geist_session_set_sampler(geist_session* session, const geist_sampler_params* params);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_H */
