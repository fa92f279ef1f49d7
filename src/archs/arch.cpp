// The forward protocol every architecture shares (ArchModel::forward): checks, cutting on the
// prefill grid, the forward's workspace, the stream's scope and the backend's ask-again loop.
// Architecture files describe only the ops of one micro-batch (ArchModel::run_micro_batch)
// and the buffers of their workspace (create_workspace).
#include "archs/arch.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

namespace geist {

namespace {

bool cpu_kind(BackendKind k) { return k == BackendKind::CPU || k == BackendKind::CPU_DEVICE_LOCAL; }

}  // namespace

void logits_head(Stream& s, const MicroBatch& mb, float* x, const float* res, float* xn, int64_t e,
                 const float* norm_w, float eps, const WeightMatrix& output, int32_t n_vocab) {
  bool added = res == nullptr;
  const auto add = [&] {
    if (!added) s.add(x, res, mb.n_rows * e);
    added = true;
  };
  if (mb.logits == nullptr) {
    add();
    return;
  }
  int32_t rows = 0;
  // Wanted rows that follow each other in x and in xn (a batched decode step's: every row)
  // are normed in one call; the norm is per row, so the bits are the same.
  int32_t run_src = 0, run_dst = 0, run_n = 0;
  const auto norm_run = [&] {
    if (run_n == 0) return;
    if (!added && run_src == 0 && run_n == mb.n_rows) {
      s.add_rms_norm(x, res, norm_w, xn + run_dst * e, e, run_n, e, eps);
      added = true;
      return;
    }
    add();
    s.rms_norm(x + run_src * e, e, norm_w, xn + run_dst * e, e, run_n, e, eps);
  };
  for (const Segment& g : segments(mb)) {
    if (!g.logits) continue;
    const int32_t first = mb.all ? 0 : g.n - 1;  // every row, or the last one
    const int32_t src = g.row0 + first;
    if (run_n > 0 && src == run_src + run_n && rows == run_dst + run_n) {
      run_n += g.n - first;
    } else {
      norm_run();
      run_src = src;
      run_dst = rows;
      run_n = g.n - first;
    }
    rows += g.n - first;
  }
  norm_run();
  add();  // no row wanted
  if (rows == 0) return;
  if (mb.argmax != nullptr) {
    s.matmul_argmax_to_host(output, xn, rows, mb.logits, mb.argmax);
  } else {
    s.matmul_to_host(output, xn, e, rows, mb.logits, n_vocab);
  }
}

int32_t ArchModel::micro_batch() const {
  const int32_t mb = backend().micro_batch(cpu_micro_batch());
  return std::max(kPrefillGrid, mb / kPrefillGrid * kPrefillGrid);
}

int32_t ArchModel::prefill_grid(KvMode kv_mode) const {
  return std::lcm(has_recurrent_layers() ? kPrefillGrid : 1, kv_mode_split_grid(kv_mode));
}

int32_t ArchModel::micro_batch_end(int32_t pos, int32_t end) const {
  const int64_t reach = int64_t{pos} + micro_batch();  // micro_batch() >= kPrefillGrid
  const int64_t grid_end = reach / kPrefillGrid * kPrefillGrid;
  return static_cast<int32_t>(std::min<int64_t>(end, grid_end));
}

Status ArchModel::state_workspace(Stream& s, int32_t rows,
                                  std::unique_ptr<ArchWorkspace>* out) const {
  out->reset();
  if (cpu_kind(backend().kind())) return Status::ok();  // borrowed from the pool per forward
  GEIST_RETURN_IF_ERROR(create_workspace(s, rows, out));
  (*out)->rows = rows;
  return Status::ok();
}

Status ArchModel::lend_workspace(const ArchState& lead, WorkspaceLease* out) const {
  if (ArchWorkspace* own = lead.own_workspace()) {
    *out = WorkspaceLease::own(own);
    return Status::ok();
  }
  GEIST_CHECK(cpu_kind(backend().kind()), "a device state owns its workspace");
  const WorkspacePool::Make make = [this](std::unique_ptr<ArchWorkspace>* ws) {
    std::unique_ptr<Stream> s;
    GEIST_RETURN_IF_ERROR(backend().new_stream(&s));
    GEIST_RETURN_IF_ERROR(create_workspace(*s, micro_batch(), ws));
    (*ws)->rows = micro_batch();
    (*ws)->stream = std::move(s);
    return Status::ok();
  };
  return WorkspaceLease::borrow(workspaces_, make, out);
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
  WorkspaceLease ws;
  GEIST_RETURN_IF_ERROR(lend_workspace(st, &ws));
  GEIST_CHECK(
      st.micro_batch() >= std::min(micro_batch(), st.max_seq_len()) && ws->rows >= st.micro_batch(),
      "a forward's workspace holds a micro-batch of its model");

  Stream& s = st.compute_stream();
  s.set_pool(&pool);
  StreamScope scope(s);
  std::optional<StreamScope> ws_scope;  // a pooled workspace's buffers (CPU_DEVICE_LOCAL)
  if (ws->stream) ws_scope.emplace(*ws->stream);
  st.begin_at(pos);
  const int32_t end = pos + n;
  for (int32_t p = pos; p < end;) {
    const int32_t e = micro_batch_end(p, end);
    Segment seg;
    seg.state = &st;
    seg.tokens = tokens + (p - pos);
    seg.n = e - p;
    seg.pos = p;
    seg.logits = out.rows != nullptr && (out.all || e == end);
    MicroBatch mb;
    mb.seg = &seg;
    mb.n_seg = 1;
    mb.n_rows = seg.n;
    mb.tokens = seg.tokens;
    mb.all = out.all;
    mb.argmax = out.argmax;
    mb.logits = out.all ? out.rows + static_cast<int64_t>(p - pos) * mi.n_vocab : out.rows;
    do {  // a backend may record the step and ask for it again (Stream::end_forward)
      s.begin_forward(seg.tokens, seg.n, seg.pos);
      run_micro_batch(st, *ws, mb);
    } while (!s.end_forward());
    st.advanced_to(e);
    p = e;
  }
  return s.status();  // a device failure surfaces here at the latest with the logits' copy
}

Status ArchModel::forward_batch(ArchState& lead, const Segment* segs, int32_t n_seg, float* logits,
                                int32_t* argmax, ThreadPool& pool) const {
  int32_t rows = 0;
  for (int32_t i = 0; i < n_seg; ++i) {
    const Segment& g = segs[i];
    GEIST_CHECK(g.state != nullptr && owns(*g.state) && g.n > 0 &&
                    g.pos + g.n <= g.state->max_seq_len() && g.row0 == rows &&
                    micro_batch_end(g.pos, g.pos + g.n) == g.pos + g.n,
                "forward_batch: segments are this model's, packed, within the grid");
    rows += g.n;
    GEIST_RETURN_IF_ERROR(g.state->status());
  }
  GEIST_CHECK(owns(lead) && rows <= lead.micro_batch(), "forward_batch: the lead holds the rows");
  WorkspaceLease ws;
  GEIST_RETURN_IF_ERROR(lend_workspace(lead, &ws));
  GEIST_CHECK(ws->rows >= rows, "forward_batch: the workspace holds the rows");
  std::vector<int32_t> tokens;  // every row's id, in row order (one get_rows for the rows)
  tokens.reserve(static_cast<size_t>(rows));
  for (int32_t i = 0; i < n_seg; ++i)
    tokens.insert(tokens.end(), segs[i].tokens, segs[i].tokens + segs[i].n);
  MicroBatch mb;
  mb.seg = segs;
  mb.n_seg = n_seg;
  mb.n_rows = rows;
  mb.tokens = tokens.data();
  mb.logits = logits;
  mb.argmax = argmax;
  Stream& s = lead.compute_stream();
  s.set_pool(&pool);
  // Every state's stream opens its buffers (CPU_DEVICE_LOCAL) and runs its attention on the
  // pool (the CPU stores compute on their own stream); on a device the lead's stream, which
  // carries all the ops, first waits for the work each state's own stream still has queued,
  // begin_at's included (a recurrent state zeroed at position 0 is zeroed on its own stream).
  for (int32_t i = 0; i < n_seg; ++i) {
    Stream& o = segs[i].state->compute_stream();
    o.set_pool(&pool);
    o.begin();
    segs[i].state->begin_at(segs[i].pos);
    s.wait_for(o);
  }
  // The step's position: its segments' smallest, so that no segment's is below it (a device
  // that records the step reads each as an offset to it, Stream::begin_forward).
  int32_t step_pos = segs[0].pos;
  for (int32_t i = 1; i < n_seg; ++i) step_pos = std::min(step_pos, segs[i].pos);
  {
    StreamScope scope(s);
    std::optional<StreamScope> ws_scope;
    if (ws->stream) ws_scope.emplace(*ws->stream);
    do {  // as forward: a backend may record the step and ask for it again
      s.begin_forward(mb.tokens, rows, step_pos, n_seg);
      run_micro_batch(lead, *ws, mb);
    } while (!s.end_forward());
  }
  for (int32_t i = 0; i < n_seg; ++i) {
    Stream& o = segs[i].state->compute_stream();
    o.wait_for(s);  // its next work reads what the lead's stream wrote (and its failure)
    segs[i].state->advanced_to(segs[i].pos + segs[i].n);
    o.end();
  }
  return s.status();
}

}  // namespace geist
