// Qwen3.5 hybrid forward pass: DeltaNet layers (conv1d + gated delta rule with a recurrent
// state) and gated attention layers (KV cache), each followed by a SwiGLU FFN. One flat
// sequence of Stream ops (backends/backend.h), so it runs on every backend.
#include "archs/qwen35.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

#include "archs/loaders.h"

namespace geist {

namespace {

// Rows per micro-batch on the CPU (Backend::micro_batch may raise it): bounds scratch memory
// for long prompts. No row depends on it: micro-batches are cut on the prefill grid.
constexpr int32_t kUbatch = 128;
// Chunk of the chunked delta rule (the Hugging Face reference uses 64 too): the prefill grid,
// so that chunks start at absolute multiples of it (deltanet_layer).
constexpr int32_t kDeltaChunk = kPrefillGrid;
// Segments whose delta rules run in one Stream call (deltanet_layer).
constexpr int32_t kDeltaBatch = 16;

}  // namespace

Status Qwen35State::can_continue_at(int32_t pos) const {
  if (pos == 0 || pos == n_past) return Status::ok();
  return Status::error(GEIST_E_INVALID_STATE,
                       "qwen35: the recurrent state is at position %d and cannot continue at %d "
                       "(it cannot be rolled back; restore a snapshot instead)",
                       n_past, pos);
}

int32_t Qwen35Model::cpu_micro_batch() const { return kUbatch; }

void Qwen35State::reset() {
  n_past = 0;
  stream->fill_zero(conv->data(), conv->size());
  stream->fill_zero(ssm->data(), ssm->size());
}

Status Qwen35Model::upload_weights(const GgufFile& file) {
  Backend& b = *backend_;
  GEIST_RETURN_IF_ERROR(upload_embeddings(b, file, &tok_embd_, &output_));
  auto up = [&](const std::vector<float>& v, const float** dev) {
    return v.empty() ? Status::ok() : b.upload_floats(v.data(), v.size(), dev);
  };
  GEIST_RETURN_IF_ERROR(up(output_norm_, &d_output_norm_));
  GEIST_RETURN_IF_ERROR(up(rope_factors_host_, &d_rope_factors_));
  for (Qwen35Layer& L : layers_) {
    GEIST_RETURN_IF_ERROR(up(L.attn_norm, &L.d.attn_norm));
    GEIST_RETURN_IF_ERROR(up(L.post_norm, &L.d.post_norm));
    GEIST_RETURN_IF_ERROR(up(L.q_norm, &L.d.q_norm));
    GEIST_RETURN_IF_ERROR(up(L.k_norm, &L.d.k_norm));
    GEIST_RETURN_IF_ERROR(up(L.conv1d, &L.d.conv1d));
    GEIST_RETURN_IF_ERROR(up(L.dt_bias, &L.d.dt_bias));
    GEIST_RETURN_IF_ERROR(up(L.ssm_a, &L.d.ssm_a));
    GEIST_RETURN_IF_ERROR(up(L.ssm_norm, &L.d.ssm_norm));
    for (WeightMatrix* w : {&L.ffn_gate, &L.ffn_up, &L.ffn_down, &L.wq, &L.wk, &L.wv, &L.wo,
                            &L.wqkv, &L.wz, &L.w_alpha, &L.w_beta, &L.ssm_out}) {
      if (w->data) GEIST_RETURN_IF_ERROR(upload_matrix(b, file, w));
    }
  }
  return Status::ok();
}

Status Qwen35Model::create_state(int32_t max_seq_len, KvMode kv_mode,
                                 std::unique_ptr<ArchState>* out) const {
  if (max_seq_len <= 0) {
    return Status::error(GEIST_E_INVALID_ARG, "qwen35: max_seq_len must be positive, got %d",
                         max_seq_len);
  }
  const Qwen35Config& c = cfg_;
  std::vector<KvLayerSpec> specs(static_cast<size_t>(c.n_layer));
  for (int32_t il = 0; il < c.n_layer; ++il) {
    if (!c.is_recurrent(il)) {
      specs[static_cast<size_t>(il)].n_embd_k = c.n_head_kv * c.head_dim;
      specs[static_cast<size_t>(il)].n_embd_v = c.n_head_kv * c.head_dim;
      specs[static_cast<size_t>(il)].head_dim_k = c.head_dim;
      specs[static_cast<size_t>(il)].head_dim_v = c.head_dim;
      // As attention() ropes its keys (q4 keys are relative to position 0's key turned by it).
      specs[static_cast<size_t>(il)].rope.style = RopeStyle::NEOX;
      specs[static_cast<size_t>(il)].rope.n_rot = c.n_rot;
      specs[static_cast<size_t>(il)].rope.freq_base = c.rope_base;
      specs[static_cast<size_t>(il)].rope.freq_factors =
          rope_factors_host_.empty() ? nullptr : rope_factors_host_.data();
      specs[static_cast<size_t>(il)].rope.mscale = rope_mscale_;
    }
  }
  std::unique_ptr<Qwen35State> st(new (std::nothrow) Qwen35State());
  if (!st) return Status(GEIST_E_OOM, "qwen35: out of memory for the session state");
  GEIST_RETURN_IF_ERROR(backend_->new_stream(&st->stream));
  Stream& s = *st->stream;
  GEIST_RETURN_IF_ERROR(s.create_kv(kv_mode, specs, max_seq_len, &st->kv));
  st->max_seq_len_ = max_seq_len;
  st->rec_slot_ = rec_slot_;
  st->conv_layer_floats = int64_t{c.conv_kernel - 1} * c.conv_dim();
  st->ssm_layer_floats = int64_t{c.n_v_heads} * c.d_k * c.d_v;
  const size_t n_rec = static_cast<size_t>(n_rec_);
  GEIST_RETURN_IF_ERROR(
      s.alloc(static_cast<size_t>(st->conv_layer_floats) * n_rec * sizeof(float), &st->conv));
  GEIST_RETURN_IF_ERROR(
      s.alloc(static_cast<size_t>(st->ssm_layer_floats) * n_rec * sizeof(float), &st->ssm));

  st->n_ubatch = std::min(max_seq_len, micro_batch());
  GEIST_RETURN_IF_ERROR(state_workspace(s, st->n_ubatch, &st->workspace));
  *out = std::move(st);
  return Status::ok();
}

Status Qwen35Model::create_workspace(Stream& s, int32_t rows,
                                     std::unique_ptr<ArchWorkspace>* out) const {
  const Qwen35Config& c = cfg_;
  std::unique_ptr<Qwen35Workspace> w(new (std::nothrow) Qwen35Workspace());
  if (!w) return Status(GEIST_E_OOM, "qwen35: out of memory for a workspace");
  const size_t ub = static_cast<size_t>(rows) * sizeof(float);
  const size_t e = static_cast<size_t>(c.n_embd);
  const size_t big =
      static_cast<size_t>(std::max({c.conv_dim(), 2 * c.n_head * c.head_dim, c.n_ff}));
  const size_t mid = static_cast<size_t>(
      std::max({c.value_dim(), c.n_head_kv * c.head_dim, c.n_head * c.head_dim}));
  const size_t heads = static_cast<size_t>(c.n_v_heads);
  Qwen35Workspace& a = *w;
  GEIST_RETURN_IF_ERROR(s.alloc(ub * e, &a.x));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * e, &a.xn));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * e, &a.mix));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * big, &a.big0));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * big, &a.big1));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * mid, &a.mid0));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * mid, &a.mid1));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * mid, &a.mid2));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * heads, &a.heads0));
  GEIST_RETURN_IF_ERROR(s.alloc(ub * heads, &a.heads1));
  *out = std::move(w);
  return Status::ok();
}

void Qwen35Model::run_micro_batch(ArchState& state, ArchWorkspace& ws, const MicroBatch& mb) const {
  Qwen35State& st = static_cast<Qwen35State&>(state);
  const Qwen35Workspace& w = static_cast<const Qwen35Workspace&>(ws);
  const Qwen35Config& c = cfg_;
  Stream& s = *st.stream;
  const int32_t n = mb.n_rows;
  const int64_t e = c.n_embd;
  float* x = w.x->f32();      // [n][n_embd]
  float* xn = w.xn->f32();    // [n][n_embd]
  float* mix = w.mix->f32();  // [n][n_embd]
  s.get_rows(tok_embd_, mb.tokens, n, x);
  // Each residual add and the norm after it are one op (Stream::add_rms_norm): the feed-forward's
  // add goes with the next layer's input norm, the last one with the head's.
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
    if (il == 0) {
      s.rms_norm(x, e, L.d.attn_norm, xn, e, n, e, c.norm_eps);
    } else {
      s.add_rms_norm(x, mix, L.d.attn_norm, xn, e, n, e, c.norm_eps);
    }
    if (L.recurrent) {
      deltanet_layer(st, w, il, mb);
    } else {
      attention_layer(st, w, il, mb);
    }
    s.add_rms_norm(x, mix, L.d.post_norm, xn, e, n, e, c.norm_eps);
    ffn(st, w, il, n);
  }
  logits_head(s, mb, x, c.n_layer > 0 ? mix : nullptr, xn, e, d_output_norm_, c.norm_eps, output_,
              c.n_vocab);
}

void Qwen35Model::deltanet_layer(Qwen35State& st, const Qwen35Workspace& w, int32_t il,
                                 const MicroBatch& mb) const {
  const int32_t n = mb.n_rows;
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Stream& s = *st.stream;
  const int64_t e = c.n_embd;
  const int64_t cd = c.conv_dim();
  const int64_t vd = c.value_dim();
  const int32_t nv = c.n_v_heads;
  const float* xn = w.xn->f32();
  float* qkv = w.big0->f32();       // [n][conv_dim] projections before the conv
  float* conv_out = w.big1->f32();  // [n][conv_dim] q | k | v after conv + SiLU
  float* z = w.mid0->f32();         // [n][value_dim] output gate
  float* core = w.mid1->f32();      // [n][value_dim] delta rule output
  float* beta = w.heads0->f32();    // [n][n_v_heads]
  float* g = w.heads1->f32();       // [n][n_v_heads] log decay

  const MatmulDst proj[] = {
      {&L.wqkv, qkv, cd}, {&L.wz, z, vd}, {&L.w_beta, beta, nv}, {&L.w_alpha, g, nv}};
  s.matmul_many(proj, 4, xn, e, n);
  // One token: the gates are part of its segment's prologue (Stream::deltanet_prep).
  if (n != 1) s.deltanet_gates(beta, g, n, nv, L.d.ssm_a, L.d.dt_bias);

  const float q_scale = 1.0f / std::sqrt(static_cast<float>(c.d_k));
  const int32_t slot = rec_slot(il);
  // The delta rule's arguments for n_tok rows from row r of the workspace, on state.
  auto delta_args = [&](int64_t r, int32_t n_tok, float* state) {
    GatedDeltaArgs a;
    a.n_tokens = n_tok;
    a.n_k_heads = c.n_k_heads;
    a.n_v_heads = nv;
    a.d_k = c.d_k;
    a.d_v = c.d_v;
    a.q = conv_out + r * cd;
    a.k = a.q + c.key_dim();
    a.v = a.q + 2 * c.key_dim();
    a.q_stride = a.k_stride = a.v_stride = cd;
    a.g = g + r * nv;
    a.beta = beta + r * nv;
    a.state = state;
    a.out = core + r * vd;
    a.out_stride = vd;
    return a;
  };
  if (mb.n_seg == n && n > 1) {  // a batched decode step: row r is session r's token
    std::vector<float*> conv_states(static_cast<size_t>(n)), ssm_states(static_cast<size_t>(n));
    for (int32_t r = 0; r < n; ++r) {
      Qwen35State& ss = *static_cast<Qwen35State*>(mb.seg[r].state);
      conv_states[static_cast<size_t>(r)] = ss.conv->f32() + slot * ss.conv_layer_floats;
      ssm_states[static_cast<size_t>(r)] = ss.ssm->f32() + slot * ss.ssm_layer_floats;
    }
    s.conv1d_silu_rows(qkv, cd, n, cd, L.d.conv1d, c.conv_kernel, conv_states.data(), conv_out, cd);
    s.l2_norm_heads_pair(conv_out, q_scale, conv_out + c.key_dim(), 1.0f, cd, n, c.n_k_heads, c.d_k,
                         c.norm_eps);
    // Row 0's arguments; row r's are r rows on (Stream::gated_delta_rule_rows).
    s.gated_delta_rule_rows(delta_args(0, 1, nullptr), n, ssm_states.data(), kDeltaChunk);
  } else {
    // The delta rule of up to kDeltaBatch segments at a time in one call (one parallel region on
    // the CPU, rather than one per session); a segment's off-grid head runs before its rest
    // (heads are flushed first).
    GatedDeltaArgs heads[kDeltaBatch], rests[kDeltaBatch];
    int32_t n_heads = 0, n_rests = 0;
    auto flush = [&] {
      if (n_heads > 0) s.gated_delta_rule_many(heads, n_heads, kDeltaChunk);
      if (n_rests > 0) s.gated_delta_rule_many(rests, n_rests, kDeltaChunk);
      n_heads = n_rests = 0;
    };
    for (const Segment& sg : segments(mb)) {  // the conv and the delta rule: the session's state
      Qwen35State& ss = *static_cast<Qwen35State*>(sg.state);
      const int64_t r = sg.row0;
      float* conv_state = ss.conv->f32() + slot * ss.conv_layer_floats;  // [kernel-1][conv_dim]
      float* ssm = ss.ssm->f32() + slot * ss.ssm_layer_floats;           // [n_v][d_k][d_v]
      float* co = conv_out + r * cd;
      DeltaNetPrepArgs pa;
      pa.n_tok = sg.n;
      if (n == 1) {
        pa.beta = beta;
        pa.g = g;
        pa.gate_heads = nv;
        pa.a = L.d.ssm_a;
        pa.dt_bias = L.d.dt_bias;
      }
      pa.x = qkv + r * cd;
      pa.x_stride = cd;
      pa.n_ch = cd;
      pa.w = L.d.conv1d;
      pa.kernel = c.conv_kernel;
      pa.state = conv_state;
      pa.out = co;
      pa.out_stride = cd;
      pa.l2_heads = c.n_k_heads;
      pa.d = c.d_k;
      pa.eps = c.norm_eps;
      pa.q_scale = q_scale;
      s.deltanet_prep(pa);

      GatedDeltaArgs a = delta_args(r, sg.n, ssm);
      if (n == 1) {  // one token: its delta rule and the gated norm of its output are one op
        s.gated_delta_rule_norm(a, kDeltaChunk, z, L.d.ssm_norm, c.norm_eps);
        continue;
      }
      // Chunks start at absolute multiples of kDeltaChunk (the prefill grid): a segment that
      // starts off the grid first runs the rows up to the next grid point on their own.
      const int32_t head = std::min(sg.n, (kDeltaChunk - sg.pos % kDeltaChunk) % kDeltaChunk);
      if (head > 0) {
        GatedDeltaArgs& h = heads[n_heads++];
        h = a;
        h.n_tokens = head;
        a.n_tokens = sg.n - head;
        a.q += int64_t{head} * a.q_stride;
        a.k += int64_t{head} * a.k_stride;
        a.v += int64_t{head} * a.v_stride;
        a.g += int64_t{head} * nv;
        a.beta += int64_t{head} * nv;
        a.out += int64_t{head} * a.out_stride;
      }
      if (a.n_tokens > 0) rests[n_rests++] = a;
      if (n_heads == kDeltaBatch || n_rests == kDeltaBatch) flush();
    }
    flush();
  }

  if (n != 1) s.rms_norm_gated(core, z, L.d.ssm_norm, n * nv, c.d_v, c.norm_eps, core);
  s.matmul(L.ssm_out, core, vd, n, w.mix->f32(), e);
}

void Qwen35Model::attention_layer(Qwen35State& st, const Qwen35Workspace& w, int32_t il,
                                  const MicroBatch& mb) const {
  const int32_t n = mb.n_rows;
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Stream& s = *st.stream;
  const int64_t e = c.n_embd;
  const int32_t hd = c.head_dim;
  const int64_t qd = int64_t{c.n_head} * hd;      // query / output width
  const int64_t kvd = int64_t{c.n_head_kv} * hd;  // key / value width
  const float* xn = w.xn->f32();
  float* qg = w.big0->f32();   // [n][n_head][2][head_dim]: query then gate per head
  float* q = w.big1->f32();    // [n][n_head][head_dim]
  float* k = w.mid0->f32();    // [n][n_head_kv][head_dim]
  float* v = w.mid1->f32();    // [n][n_head_kv][head_dim]
  float* att = w.mid2->f32();  // [n][n_head][head_dim]

  const MatmulDst qkv[] = {{&L.wq, qg, 2 * qd}, {&L.wk, k, kvd}, {&L.wv, v, kvd}};
  s.matmul_many(qkv, 3, xn, e, n);

  RopeParams rp;
  rp.style = RopeStyle::NEOX;
  rp.n_rot = c.n_rot;
  rp.freq_base = c.rope_base;
  rp.freq_factors = d_rope_factors_;  // YaRN's, else nullptr
  rp.mscale = rope_mscale_;
  // Rows (token, head) of the interleaved [query | gate] pairs sit 2 * head_dim apart. One
  // segment: the norms are part of its rope_attend; else they go first, over every row.
  HeadNorms norms;
  norms.q_src = qg;
  norms.q_src_stride = 2 * hd;
  norms.q_w = L.d.q_norm;
  norms.k_src = k;
  norms.k_src_stride = hd;
  norms.k_w = L.d.k_norm;
  norms.eps = c.norm_eps;
  if (mb.n_seg != 1) {
    s.rms_norm(qg, 2 * hd, L.d.q_norm, q, hd, n * c.n_head, hd, c.norm_eps);
    s.rms_norm(k, hd, L.d.k_norm, k, hd, n * c.n_head_kv, hd, c.norm_eps);
  }
  AttentionShape shape;
  shape.n_head = c.n_head;
  shape.n_head_kv = c.n_head_kv;
  shape.head_dim_k = hd;
  shape.head_dim_v = hd;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (mb.n_seg == n && n > 1) {  // a batched decode step: row r is session r's token
    std::vector<KvStore*> row_kv(static_cast<size_t>(n));
    std::vector<int32_t> row_pos(static_cast<size_t>(n));
    for (int32_t r = 0; r < n; ++r) {
      row_kv[static_cast<size_t>(r)] = static_cast<Qwen35State*>(mb.seg[r].state)->kv.get();
      row_pos[static_cast<size_t>(r)] = mb.seg[r].pos;
    }
    s.rope_attend_rows(il, shape, rp, row_kv.data(), row_pos.data(), n, q, qd, k, kvd, v, kvd, att,
                       qd);
  } else {
    for (const Segment& sg : segments(mb)) {  // positions and the KV cache are the session's
      const int64_t r = sg.row0;
      s.rope_attend(*static_cast<Qwen35State*>(sg.state)->kv, il, shape, rp,
                    mb.n_seg == 1 ? &norms : nullptr, q + r * qd, qd, k + r * kvd, kvd, v + r * kvd,
                    kvd, sg.n, sg.pos, att + r * qd, qd);
    }
  }

  s.sigmoid_mul(att, hd, qg + hd, 2 * hd, n * c.n_head, hd);
  s.matmul(L.wo, att, qd, n, w.mix->f32(), e);
}

void Qwen35Model::ffn(Qwen35State& st, const Qwen35Workspace& w, int32_t il, int32_t n) const {
  const Qwen35Config& c = cfg_;
  const Qwen35Layer& L = layers_[static_cast<size_t>(il)];
  Stream& s = *st.stream;
  const int64_t e = c.n_embd;
  const int64_t f = c.n_ff;
  float* gate = w.big0->f32();  // [n][n_ff]
  float* up = w.big1->f32();    // [n][n_ff]
  s.matmul_swiglu(L.ffn_gate, L.ffn_up, w.xn->f32(), e, n, gate, up, gate);
  s.matmul(L.ffn_down, gate, f, n, w.mix->f32(), e);
}

}  // namespace geist
