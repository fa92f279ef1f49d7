#include "engine/batch.h"

#include <algorithm>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "base/parallel_copy.h"

namespace geist {

// The rows an item still owes, in order: its owed token (one row at position() - 1), then its
// prefill rows [position(), position() + n).
struct BatchRunner {
  struct Work {
    BatchItem* item = nullptr;
    Session* s = nullptr;
    bool owed = false;        // the owed token has not run yet
    int32_t next = 0;         // next prefill position
    int32_t end = 0;          // end of the prefill rows
    bool argmax = false;      // its wanted row is wanted only for a greedy choice
    bool got_logits = false;  // logits_scratch_ holds this item's latest logits
    bool got_token = false;   // item->token holds that choice (the row stayed where it was)
    bool done = false;
  };

  static Status check_item(const Model& model, BatchItem& it) {
    Session& s = *it.session;
    if (it.n == 0) return it.decode ? s.check_decode() : s.state_->status();
    if (it.tokens == nullptr) return Status::error(GEIST_E_INVALID_ARG, "tokens is NULL");
    const int32_t n_vocab = model.n_vocab();
    for (size_t i = 0; i < it.n; ++i) {
      if (it.tokens[i] < 0 || it.tokens[i] >= n_vocab) {
        return Status::error(GEIST_E_INVALID_ARG,
                             "token %d at index %zu is outside the vocabulary [0, %d)",
                             it.tokens[i], i, n_vocab);
      }
    }
    const size_t room = static_cast<size_t>(s.max_seq_len_) - s.tokens_.size();
    if (it.n > room) {
      return Status::error(GEIST_E_TOO_MANY_TOKENS,
                           "prefill of %zu tokens at position %d exceeds max_seq_len %d", it.n,
                           s.position(), s.max_seq_len_);
    }
    if (it.decode && it.n == room) {
      return Status::error(GEIST_E_TOO_MANY_TOKENS,
                           "decode after a prefill of %zu tokens at position %d: the session "
                           "would be full (max_seq_len %d)",
                           it.n, s.position(), s.max_seq_len_);
    }
    GEIST_RETURN_IF_ERROR(s.state_->status());
    const int32_t start = s.position() - (s.forward_owed_ ? 1 : 0);
    return s.state_->can_continue_at(start);
  }

  static Status run(const Model& model, BatchItem* items, size_t n_items) {
    std::unordered_set<const Session*> seen;
    for (size_t i = 0; i < n_items; ++i) {
      const Session* s = items[i].session;
      if (s == nullptr) return Status::error(GEIST_E_INVALID_ARG, "batch item %zu: no session", i);
      if (&s->model() != &model) {
        return Status::error(GEIST_E_INVALID_ARG, "batch item %zu: a session of another model", i);
      }
      if (!seen.insert(s).second) {
        return Status::error(GEIST_E_INVALID_ARG, "batch item %zu: a session listed twice", i);
      }
    }
    std::vector<Work> work;
    for (size_t i = 0; i < n_items; ++i) {
      BatchItem& it = items[i];
      it.status = check_item(model, it);
      if (!it.status) continue;
      Session& s = *it.session;
      Work w;
      w.item = &it;
      w.s = &s;
      w.owed = s.forward_owed_;
      w.next = s.position();
      w.end = s.position() + static_cast<int32_t>(it.n);
      w.argmax = it.decode && s.next_is_argmax(it.n);
      if (!w.owed && it.n == 0) continue;  // nothing owed, nothing to prefill
      work.push_back(w);
    }
    if (!work.empty()) run_rows(model.arch(), work);
    sample(items, n_items);
    return Status::ok();
  }

  // The rounds of micro-batches until every item of `work` has run its rows, then each
  // session's observable change.
  static void run_rows(const ArchModel& arch, std::vector<Work>& work) {
    const BackendKind kind = arch.backend().kind();
    // Where a prefill piece may be cut shorter than alone to fill a micro-batch: on the CPU
    // backends at any grid point (their delta rule rounds its state on the grid, so the bits
    // are the same); the CUDA delta scan rounds where a call ends, so there a piece that does
    // not fit waits for the next micro-batch and every session is cut exactly as alone.
    const bool cut_on_grid = kind == BackendKind::CPU || kind == BackendKind::CPU_DEVICE_LOCAL;

    // The lead: the state with the longest micro-batch bounds the rows of each micro-batch (the
    // forward's workspace carries them, ArchModel::forward_batch).
    Work* lead = &work[0];
    for (Work& w : work) {
      if (w.s->state_->micro_batch() > lead->s->state_->micro_batch()) lead = &w;
    }
    Session& ls = *lead->s;
    const int32_t cap = ls.state_->micro_batch();
    const size_t nv = static_cast<size_t>(arch.info().n_vocab);
    std::vector<Segment> segs;
    std::vector<Work*> seg_work;
    std::vector<CopyRange> copies;  // a round's logits rows into their sessions
    std::vector<int32_t> ids;       // a round's greedy choices, when only those are wanted
    copies.reserve(work.size());
    segs.reserve(work.size());
    seg_work.reserve(work.size());
    for (;;) {
      // One round: each unfinished item's next piece, while rows remain.
      segs.clear();
      seg_work.clear();
      int32_t rows = 0;
      int32_t n_logits = 0;
      bool greedy = true;  // every wanted row is wanted only for its greedy choice
      for (Work& w : work) {
        if (w.done || rows == cap) continue;
        Segment g;
        g.state = w.s->state_.get();
        g.row0 = rows;
        if (w.owed) {
          g.pos = w.s->position() - 1;
          g.tokens = &w.s->tokens_[static_cast<size_t>(g.pos)];
          g.n = 1;
          g.logits = w.item->n == 0;  // a prefill's logits supersede the owed row's
        } else {
          int32_t e = arch.micro_batch_end(w.next, w.end);
          if (e - w.next > cap - rows) {
            if (!cut_on_grid) continue;                               // next round, whole
            e = (w.next + cap - rows) / kPrefillGrid * kPrefillGrid;  // a grid point that fits
            if (e <= w.next) continue;                                // next round
          }
          g.pos = w.next;
          g.tokens = w.item->tokens + (w.next - (w.end - static_cast<int32_t>(w.item->n)));
          g.n = e - w.next;
          g.logits = e == w.end;
        }
        rows += g.n;
        n_logits += g.logits ? 1 : 0;
        greedy = greedy && (!g.logits || w.argmax);
        segs.push_back(g);
        seg_work.push_back(&w);
      }
      if (segs.empty()) break;
      // The logits rows live in the pool (one buffer for every call, under its lock).
      std::lock_guard<std::mutex> lock(ls.pool_->mu);
      std::vector<float>& logits = ls.pool_->batch_logits;
      if (logits.size() < static_cast<size_t>(n_logits) * nv) {
        logits.resize(static_cast<size_t>(n_logits) * nv);
      }
      greedy = greedy && n_logits > 0;
      ids.assign(static_cast<size_t>(n_logits), 0);
      const Status st = arch.forward_batch(
          *ls.state_, segs.data(), static_cast<int32_t>(segs.size()),
          n_logits > 0 ? logits.data() : nullptr, greedy ? ids.data() : nullptr, ls.pool_->pool);
      size_t k = 0;
      copies.clear();
      for (size_t i = 0; i < segs.size(); ++i) {
        Work& w = *seg_work[i];
        if (!st) {  // the device failed under this micro-batch: its items fail
          w.item->status = st;
          w.done = true;
          continue;
        }
        if (segs[i].logits && greedy) {
          GEIST_CHECK(ids[k] >= 0 && static_cast<size_t>(ids[k]) < nv,
                      "a greedy choice lies in the vocabulary");
          w.item->token = ids[k];
          w.got_token = true;
          ++k;
        } else if (segs[i].logits) {
          CopyRange c;
          c.dst = reinterpret_cast<uint8_t*>(w.s->logits_scratch_.data());
          c.src = reinterpret_cast<const uint8_t*>(logits.data() + k * nv);
          c.n = nv * sizeof(float);
          copies.push_back(c);
          w.got_logits = true;
          ++k;
        }
        if (w.owed) {
          w.owed = false;
          w.s->forward_owed_ = false;  // the state now holds the owed token (pay_forward)
        } else {
          w.next += segs[i].n;
        }
        if (!w.owed && w.next == w.end) w.done = true;
      }
      // A batched decode step's rows (1 MiB each on a 248k vocabulary) on the pool's threads.
      parallel_copy(copies.data(), copies.size(), &ls.pool_->pool);
    }
    // Only now does each session change observably (as Session::prefill).
    for (Work& w : work) {
      if (!w.item->status) continue;
      Session& s = *w.s;
      const BatchItem& it = *w.item;
      s.tokens_.insert(s.tokens_.end(), it.tokens, it.tokens + it.n);
      if (it.n > 0) s.n_generated_ = 0;  // prompt input: a new completion starts
      if (w.got_logits) std::swap(s.logits_, s.logits_scratch_);
      if (it.n > 0) s.has_logits_ = true;
      if (w.got_token) s.append_decoded(w.item->token);  // logits_ stale, as Session::decode's
    }
  }

  // Every decode item that has no token yet samples its pending logits (Session::decode
  // without the forward), on the threads of the first such session's pool: each session's
  // sampler and RNG are its own, so the tokens do not depend on the split.
  static void sample(BatchItem* items, size_t n_items) {
    std::vector<BatchItem*> todo;
    for (size_t i = 0; i < n_items; ++i) {
      BatchItem& it = items[i];
      if (it.decode && it.status && !it.session->forward_owed_) todo.push_back(&it);
    }
    if (todo.empty()) return;
    SharedPool& pool = *todo[0]->session->pool_;
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.pool.parallel_for(static_cast<int64_t>(todo.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        BatchItem& it = *todo[static_cast<size_t>(i)];
        it.token = it.session->sample_pending();
        it.session->append_decoded(it.token);
      }
    });
  }
};

Status forward_batch(const Model& model, BatchItem* items, size_t n_items) {
  return BatchRunner::run(model, items, n_items);
}

}  // namespace geist
