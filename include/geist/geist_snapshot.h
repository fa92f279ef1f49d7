/* geist — C ABI, session state: snapshot, restore, fork, files, pinned prefix
 * (EXPERIMENTAL: may change in any release). Same conventions as geist.h.
 *
 * A session's complete decoding state (KV rows, recurrent and conv state, token history,
 * pending logits, owed forward, sampler RNG) is a value: geist_session_snapshot writes it into
 * a caller buffer, geist_session_restore puts it back into the same session or into another
 * session of the same model (a fork is snapshot(a) -> restore(b)), geist_session_save_file /
 * geist_session_load_file do the same through a file. Format: docs/SNAPSHOT_FORMAT.md. An
 * image restores into any session of the same model (same snapshot_id) and KV mode whose
 * max_seq_len holds its tokens, and that session then continues bit-identically (tokens and
 * logits, greedy and sampled).
 *
 *   size_t size, written;
 *   geist_session_snapshot_size(a, &size);
 *   void* image = malloc(size);
 *   geist_session_snapshot(a, image, size, &written);
 *   geist_session_restore(b, image, written);   // b now continues exactly as a would
 */
#ifndef GEIST_GEIST_SNAPSHOT_H
#define GEIST_GEIST_SNAPSHOT_H

#include "geist/geist.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* EXPERIMENTAL. geist_session_restore for bytes whose integrity the caller has established
 * already: a cache that verified them with its own checksum when they came in, or an image this
 * process wrote and kept. Every check of geist_session_restore runs except the image checksum
 * (an XXH3 pass over the whole image, as long as the copy itself), so bytes that are not a valid
 * image for this session are still refused, nothing is read outside the buffer, and a refusal
 * leaves the session untouched; but a valid image whose state bytes were altered would be
 * restored as it is. Same statuses as geist_session_restore, less the checksum check. */
geist_status geist_session_restore_trusted(geist_session* session, const void* buf, size_t size);

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

#endif /* GEIST_GEIST_SNAPSHOT_H */
