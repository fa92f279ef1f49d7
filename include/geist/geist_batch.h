/* geist — C ABI, many sessions in one forward (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h.
 *
 * A decode step of N sessions costs one read of the weights instead of N: collect the
 * sessions' owed forwards (and any prefill chunks) into one geist_batch_forward call, then
 * sample each session with geist_session_decode, which finds its logits pending and runs no
 * forward. Every session's tokens, logits and state are bitwise those it gets alone
 * (docs/ARCHITECTURE.md "Determinism"), whatever else is in the batch.
 *
 *   for (;;) {
 *     for (i = 0; i < n; ++i) geist_batch_item_init(&items[i], sessions[i], NULL, 0);
 *     geist_batch_forward(model, items, n);          // every owed token, one forward
 *     for (i = 0; i < n; ++i) geist_session_decode(sessions[i], &tok[i]);  // no forward
 *   }
 *
 * or, the same tokens in one call a step (items[i].decode = 1; each token in items[i].token):
 *
 *   for (i = 0; i < n; ++i) { geist_batch_item_init(&items[i], sessions[i], NULL, 0);
 *                             items[i].decode = 1; }
 *   for (;;) geist_batch_forward(model, items, n);   // owed forwards, then every sample
 */
#ifndef GEIST_GEIST_BATCH_H
#define GEIST_GEIST_BATCH_H

#include "geist/geist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* EXPERIMENTAL. One session's part of a batched forward. Initialise with
 * geist_batch_item_init (or set struct_size yourself). */
typedef struct geist_batch_item {
  uint32_t struct_size; /* sizeof(geist_batch_item): the items are an array, so every item's
                         * struct_size must be the library's own (else GEIST_E_INVALID_ARG) */
  geist_session* session;
  /* A prefill chunk to append (as geist_session_prefill), run after the session's owed
   * forward if it has one. n_tokens == 0: only the owed forward of the session's last decoded
   * token, after which its logits are pending. Neither: nothing to do. */
  const geist_token* tokens;
  size_t n_tokens;
  /* Out: this session's result, the codes of geist_session_prefill (GEIST_E_INVALID_ARG for
   * an id outside the vocabulary, GEIST_E_TOO_MANY_TOKENS when the chunk does not fit; the
   * session is then unchanged and its geist_session_last_error says why), GEIST_E_BACKEND;
   * with decode, also those of geist_session_decode (GEIST_E_INVALID_STATE: nothing pending;
   * GEIST_E_TOO_MANY_TOKENS: no room for the token), with nothing run. */
  geist_status status;
  /* Nonzero: after the forward, sample the session's next token as geist_session_decode does
   * (its sampler, RNG and history) into `token`: one call per decode step instead of a
   * forward and n decodes. A greedy sampler's choice is made where the logits are (a GPU
   * copies out 4 bytes a session instead of its logits row; the logits are then not kept and
   * geist_session_logits runs no forward for them: the token owes the next one, as after
   * geist_session_decode); other samplers run on the model's threads, one session each. The
   * tokens are those of geist_batch_forward and then geist_session_decode on each session. */
  int32_t decode;
  geist_token token; /* out, with decode */
} geist_batch_item;

/* EXPERIMENTAL. Fills *item: struct_size, the session, the chunk (tokens may be NULL when
 * n_tokens is 0), status GEIST_OK, decode 0 and token 0. NULL item is a no-op. */
void geist_batch_item_init(geist_batch_item* item, geist_session* session,
                           const geist_token* tokens, size_t n_tokens);

/* EXPERIMENTAL. Advances every item's session of `model` in shared forwards: the rows of all
 * items are packed into micro-batches, each weight matrix read once for all rows of one; per
 * session attention, conv and recurrent state. Errors are per item (items[i].status); the
 * others proceed. Returns GEIST_OK when the call ran (look at each status), or, with nothing
 * run, GEIST_E_INVALID_ARG for a NULL model or items, an item whose struct_size is not
 * sizeof(geist_batch_item), a NULL session, a session of another model or one listed twice.
 * The sessions must not be used by other threads during the call. Every backend runs the
 * packed rows as one forward (CUDA: on one stream; docs/ARCHITECTURE.md "Batching across
 * sessions"). */
geist_status geist_batch_forward(geist_model* model, geist_batch_item* items, size_t n_items);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_BATCH_H */
