// Many sessions, one forward: the rows that several sessions of one model owe (a decode step's
// token, a prefill chunk) run through shared micro-batches, each weight matrix read once for
// all of them, with every session's results bitwise equal to those it gets alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "engine/model.h"
#include "engine/session.h"

namespace geist {

struct BatchItem {
  Session* session = nullptr;
  // A prefill chunk to append (as Session::prefill, without all-logits), run after the
  // session's owed forward if it has one; n == 0: only the owed forward (a decode step's
  // token), after which the session's logits are pending and decode() samples without a
  // forward. A session with neither has nothing to do (OK).
  const int32_t* tokens = nullptr;
  size_t n = 0;
  // After the rows, sample the session's next token as Session::decode does (into token): a
  // greedy choice is then made where the logits are (a device backend copies out 4 bytes a
  // session instead of its row), other samplers run on the pool's threads, one session each.
  bool decode = false;
  int32_t token = 0;  // out, with decode
  Status status;      // out: this session's result
};

// Advances every item's session by its rows. Rows are packed into micro-batches of at most the
// largest state's micro_batch() rows; each session's rows are cut on the prefill grid as when
// it runs alone, so its tokens, logits and state are bitwise those of
//   session.prefill(tokens, n)   (or, for n == 0, paying its owed forward)
// run alone. Errors are per session: an item whose input is invalid (ids, capacity, a state
// that cannot continue) gets Session::prefill's status and its session is left untouched; the
// others proceed. A device failure under a micro-batch fails the items in it.
// An item with decode that could not sample after its rows (no pending logits, or a session
// that would then be full) gets Session::decode's status, with nothing run.
// GEIST_E_INVALID_ARG, with nothing run, for a null session, a session of another model or one
// listed twice. On every backend the rows of a micro-batch run as one forward
// (ArchModel::forward_batch); on CUDA a prefill piece that does not fit the rows left in a
// micro-batch waits for the next one rather than being cut at a grid point (batch.cpp says why).
// The call holds the pool lock of the sessions' pools it uses, micro-batch by micro-batch;
// the sessions must not be used by other threads meanwhile.
Status forward_batch(const Model& model, BatchItem* items, size_t n_items);

}  // namespace geist
