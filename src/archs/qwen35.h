// Qwen3.5 text model (general.architecture = "qwen35"): a hybrid of gated DeltaNet layers
// (linear attention with a recurrent state) and gated full-attention layers; layer i is full
// attention when (i + 1) % full_attention_interval == 0. Blocks past the main stack
// (qwen35.nextn_predict_layers, the MTP head) are not part of the main model and are ignored.
//
// Facts of the GGUF layout this code relies on (llama.cpp's converter writes them):
// - every RMSNorm weight except ssm_norm already includes the +1 of the zero-centred norm;
// - ssm_a holds -exp(A_log);
// - value heads are in tiled order: value head h reads key head h % n_k_heads;
// - attn_q rows hold, per head, head_dim query rows then head_dim output-gate rows;
// - RoPE is NEOX-style over the first rope.dimension_count dims of each head (the multimodal
//   sections collapse to plain partial RoPE for text positions).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "archs/arch.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace geist {

struct Qwen35Config {
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;        // main stack only (block_count - nextn_predict_layers)
  int32_t n_layer_nextn = 0;  // trailing MTP blocks, ignored
  int32_t n_ff = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // attention key_length == value_length
  int32_t n_rot = 0;     // rotated dims per head
  float rope_base = 0;
  bool yarn = false;  // rope.scaling.type yarn (rope_yarn.h)
  YarnConfig yarn_cfg;
  float norm_eps = 0;
  int32_t full_attention_interval = 0;
  // DeltaNet
  int32_t conv_kernel = 0;
  int32_t n_k_heads = 0;  // ssm.group_count
  int32_t n_v_heads = 0;  // ssm.time_step_rank
  int32_t d_k = 0;        // ssm.state_size
  int32_t d_v = 0;        // ssm.inner_size / n_v_heads

  bool is_recurrent(int32_t il) const { return (il + 1) % full_attention_interval != 0; }
  int32_t key_dim() const { return n_k_heads * d_k; }
  int32_t value_dim() const { return n_v_heads * d_v; }
  int32_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels of conv/qkv
};

struct Qwen35Layer {
  bool recurrent = false;
  std::vector<float> attn_norm;  // [n_embd]
  std::vector<float> post_norm;  // [n_embd] (post_attention_norm: the pre-FFN norm)
  WeightMatrix ffn_gate;         // n_embd -> n_ff
  WeightMatrix ffn_up;           // n_embd -> n_ff
  WeightMatrix ffn_down;         // n_ff -> n_embd
  // Gated attention layers.
  WeightMatrix wq;            // n_embd -> n_head * 2 * head_dim, per head [query | gate]
  WeightMatrix wk;            // n_embd -> n_head_kv * head_dim
  WeightMatrix wv;            // n_embd -> n_head_kv * head_dim
  WeightMatrix wo;            // n_head * head_dim -> n_embd
  std::vector<float> q_norm;  // [head_dim]
  std::vector<float> k_norm;  // [head_dim]
  // DeltaNet layers.
  WeightMatrix wqkv;            // n_embd -> conv_dim: [q n_k*d_k | k n_k*d_k | v n_v*d_v]
  WeightMatrix wz;              // n_embd -> n_v * d_v (output gate)
  WeightMatrix w_alpha;         // n_embd -> n_v (decay input)
  WeightMatrix w_beta;          // n_embd -> n_v (write strength input)
  WeightMatrix ssm_out;         // n_v * d_v -> n_embd
  std::vector<float> conv1d;    // [conv_dim][conv_kernel]
  std::vector<float> dt_bias;   // [n_v]
  std::vector<float> ssm_a;     // [n_v], -exp(A_log)
  std::vector<float> ssm_norm;  // [d_v], plain weight (no +1)
  // The vectors above on the model's backend (device addresses; the host data on the CPU).
  struct Dev {
    const float* attn_norm = nullptr;
    const float* post_norm = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    const float* conv1d = nullptr;
    const float* dt_bias = nullptr;
    const float* ssm_a = nullptr;
    const float* ssm_norm = nullptr;
  } d;
};

// A forward's activations (archs/workspace.h), sized for `rows` rows of a micro-batch.
struct Qwen35Workspace final : ArchWorkspace {
  std::unique_ptr<Buffer> x;       // [n][n_embd] residual stream
  std::unique_ptr<Buffer> xn;      // [n][n_embd] normed input of a sub-layer
  std::unique_ptr<Buffer> mix;     // [n][n_embd] sub-layer output
  std::unique_ptr<Buffer> big0;    // [n][max(conv_dim, n_head*2*head_dim, n_ff)]
  std::unique_ptr<Buffer> big1;    // [n][max(conv_dim, n_head*head_dim, n_ff)]
  std::unique_ptr<Buffer> mid0;    // [n][max(value_dim, n_head_kv*head_dim)]
  std::unique_ptr<Buffer> mid1;    // [n][max(value_dim, n_head_kv*head_dim)]
  std::unique_ptr<Buffer> mid2;    // [n][max(value_dim, n_head*head_dim)]
  std::unique_ptr<Buffer> heads0;  // [n][n_v_heads]
  std::unique_ptr<Buffer> heads1;  // [n][n_v_heads]
};

// Per-session state. Everything a snapshot must carry is in n_past, kv, conv and ssm; the
// workspace, on device backends only, is scratch that forward() overwrites before reading.
class Qwen35State final : public ArchState {
 public:
  int32_t max_seq_len() const override { return max_seq_len_; }
  // Zeroes the recurrent state (it has no notion of positions to forget) and forgets the KV.
  void reset() override;
  Stream& compute_stream() const override { return *stream; }
  int32_t micro_batch() const override { return n_ubatch; }
  ArchWorkspace* own_workspace() const override { return workspace.get(); }
  // The recurrent state is at n_past and cannot be rolled back: it continues there, or starts
  // over at 0 (begin_at zeroes it).
  Status can_continue_at(int32_t pos) const override;
  void begin_at(int32_t pos) override {
    if (pos == 0) reset();
  }
  void advanced_to(int32_t pos) override { n_past = pos; }
  KvMode kv_mode() const override { return kv->mode(); }
  // KV regions of the attention layers, conv and recurrent buffers of the DeltaNet layers.
  void state_regions(int32_t n_pos, std::vector<StateRegion>* out) const override;
  void download_region(const StateRegion& r, int32_t n_pos, uint8_t* dst) const override;
  void upload_region(const StateRegion& r, int32_t n_pos, const uint8_t* src) override;
  void set_positions(int32_t n_pos) override { n_past = n_pos; }

  // Declared first so that it is destroyed last: every buffer below comes from it.
  std::unique_ptr<Stream> stream;
  int32_t n_past = 0;             // positions consumed; the recurrent state is at this position
  std::unique_ptr<KvStore> kv;    // attention layers only
  std::unique_ptr<Buffer> conv;   // [n_rec][conv_kernel-1][conv_dim] f32, oldest row first
  std::unique_ptr<Buffer> ssm;    // [n_rec][n_v_heads][d_k][d_v] f32
  int64_t conv_layer_floats = 0;  // floats of one layer's slice of `conv`
  int64_t ssm_layer_floats = 0;   // floats of one layer's slice of `ssm`

  int32_t n_ubatch = 0;  // tokens per micro-batch: min(backend's micro_batch, max_seq_len)
  // Device backends: the state's own activations, n_ubatch rows (nullptr on the CPU backends,
  // where each forward borrows the model's).
  std::unique_ptr<ArchWorkspace> workspace;

 private:
  friend class Qwen35Model;
  // The conv (kStateConv) or recurrent slice of region r's layer (a device address).
  float* recurrent_slice(const StateRegion& r) const;
  int32_t max_seq_len_ = 0;
  std::vector<int32_t> rec_slot_;  // [n_layer] index among the DeltaNet layers, -1 attention
};

class Qwen35Model final : public ArchModel {
 public:
  const ModelInfo& info() const override { return info_; }
  const Backend& backend() const override { return *backend_; }
  const Qwen35Config& config() const { return cfg_; }
  // Index of layer il among the DeltaNet layers (its slice of conv/ssm), -1 for attention.
  int32_t rec_slot(int32_t il) const { return rec_slot_[static_cast<size_t>(il)]; }
  int32_t n_rec_layers() const { return n_rec_; }
  std::string layer_kinds() const override;
  uint64_t fixed_state_bytes() const override;
  bool has_recurrent_layers() const override { return n_rec_ > 0; }

  using ArchModel::create_state;
  Status create_state(int32_t max_seq_len, KvMode kv_mode,
                      std::unique_ptr<ArchState>* out) const override;
  // Besides the ArchModel contract, forward() fails with GEIST_E_INVALID_STATE when pos is
  // neither 0 nor the state's n_past, since the recurrent state cannot be rolled back (restore
  // a snapshot).

 protected:
  bool owns(const ArchState& state) const override {
    return dynamic_cast<const Qwen35State*>(&state) != nullptr;
  }
  int32_t cpu_micro_batch() const override;
  void run_micro_batch(ArchState& state, ArchWorkspace& ws, const MicroBatch& mb) const override;
  Status create_workspace(Stream& s, int32_t rows,
                          std::unique_ptr<ArchWorkspace>* out) const override;

 private:
  friend Status load_qwen35(const GgufFile& file, std::unique_ptr<Backend> backend,
                            const Logger& log, std::unique_ptr<ArchModel>* out);
  Qwen35Model() = default;
  // Replaces every host weight view by its copy on the backend (identity on the CPU).
  Status upload_weights(const GgufFile& file);

  // st: the lead state (stream); w: the forward's activations; each segment's own state for
  // its conv, delta rule and KV.
  void deltanet_layer(Qwen35State& st, const Qwen35Workspace& w, int32_t il,
                      const MicroBatch& mb) const;
  void attention_layer(Qwen35State& st, const Qwen35Workspace& w, int32_t il,
                       const MicroBatch& mb) const;
  void ffn(Qwen35State& st, const Qwen35Workspace& w, int32_t il, int32_t n) const;

  std::unique_ptr<Backend> backend_;
  ModelInfo info_;
  Qwen35Config cfg_;
  WeightMatrix tok_embd_;                 // n_vocab rows of n_embd
  WeightMatrix output_;                   // n_embd -> n_vocab (tok_embd_ when tied)
  std::vector<float> output_norm_;        // [n_embd]
  const float* d_output_norm_ = nullptr;  // output_norm_ on the backend
  std::vector<Qwen35Layer> layers_;       // [n_layer]
  // YaRN (cfg_.yarn): the pairs' frequency factors (host copy, and on the backend) and mscale.
  std::vector<float> rope_factors_host_;
  const float* d_rope_factors_ = nullptr;
  float rope_mscale_ = 1;
  std::vector<int32_t> rec_slot_;  // [n_layer]
  int32_t n_rec_ = 0;
};

}  // namespace geist
