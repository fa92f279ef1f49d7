// The forward protocol every architecture shares (ArchModel::forward): checks, cutting on the
// prefill grid, the stream's scope and the backend's ask-again loop. Architecture files
// describe only the ops of one micro-batch (ArchModel::run_micro_batch).
#include "archs/arch.h"

#include <algorithm>

namespace geist {

int32_t ArchModel::micro_batch() const {
  const int32_t mb = backend().micro_batch(cpu_micro_batch());
  return std::max(kPrefillGrid, mb / kPrefillGrid * kPrefillGrid);
}

int32_t ArchModel::micro_batch_end(int32_t pos, int32_t end) const {
  const int64_t reach = int64_t{pos} + micro_batch();  // micro_batch() >= kPrefillGrid
  const int64_t grid_end = reach / kPrefillGrid * kPrefillGrid;
  return static_cast<int32_t>(std::min<int64_t>(end, grid_end));
}

Status ArchModel::forward(ArchState& st, const int32_t* tokens, int32_t n, int32_t pos,
                          const LogitsOut& out, ThreadPool& pool) const {
  const ModelInfo& mi = info();
  if (!owns(st)) {
    return Status::error(GEIST_E_INVALID_ARG, "%s forward: the state belongs to another model",
                         mi.architecture.c_str());
  }
  GEIST_RETURN_IF_ERROR(st.status());  // a failed device: nothing it computes can be trusted
  if (out.argmax != nullptr && (n != 1 || out.all || out.rows == nullptr)) {
    return Status::error(GEIST_E_INVALID_ARG, "%s forward: a greedy choice is of one token's row",
                         mi.architecture.c_str());
  }
  if (out.rows == nullptr && out.all) {
    return Status::error(GEIST_E_INVALID_ARG, "%s forward: every row asked for, no buffer",
                         mi.architecture.c_str());
  }
  if (n <= 0 || pos < 0 || pos > st.max_seq_len() - n) {
    return Status::error(GEIST_E_INVALID_ARG, "%s forward: %d tokens at %d exceed %d positions",
                         mi.architecture.c_str(), n, pos, st.max_seq_len());
  }
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= mi.n_vocab) {
      return Status::error(GEIST_E_INVALID_ARG,
                           "%s forward: token id %d outside the vocabulary "
                           "of %d",
                           mi.architecture.c_str(), tokens[i], mi.n_vocab);
    }
  }
  GEIST_RETURN_IF_ERROR(st.can_continue_at(pos));
  GEIST_CHECK(st.micro_batch() >= std::min(micro_batch(), st.max_seq_len()),
              "a state's scratch holds a micro-batch of its model");

  Stream& s = st.compute_stream();
  s.set_pool(&pool);
  StreamScope scope(s);
  st.begin_at(pos);
  const int32_t end = pos + n;
  for (int32_t p = pos; p < end;) {
    const int32_t e = micro_batch_end(p, end);
    MicroBatch mb;
    mb.tokens = tokens + (p - pos);
    mb.n = e - p;
    mb.pos = p;
    mb.all = out.all;
    mb.argmax = out.argmax;
    if (out.all) {
      mb.logits = out.rows + static_cast<int64_t>(p - pos) * mi.n_vocab;
    } else if (e == end) {
      mb.logits = out.rows;
    }
    do {  // a backend may record the step and ask for it again (Stream::end_forward)
      s.begin_forward(mb.tokens, mb.n, mb.pos);
      run_micro_batch(st, mb);
    } while (!s.end_forward());
    st.advanced_to(e);
    p = e;
  }
  return s.status();  // a device failure surfaces here at the latest with the logits' copy
}

}  // namespace geist
