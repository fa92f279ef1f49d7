// mkmodel for Qwen3.5 text models: the tensor table and metadata llama.cpp's converter
// (conversion/qwen.py, Qwen3_5TextModel) writes, checked against the converter-made fixture
// tiny-qwen35-*.gguf. Facts of that layout:
// - per DeltaNet layer, in checkpoint (name-sorted) order: attn_norm, ssm_a, ssm_conv1d,
//   ssm_dt.bias, ssm_alpha, ssm_beta, attn_qkv, attn_gate, ssm_norm, ssm_out, ffn_down,
//   ffn_gate, ffn_up, post_attention_norm; per attention layer: attn_norm, ffn_*,
//   post_attention_norm, attn_k_norm, attn_k, attn_output, attn_q_norm, attn_q, attn_v;
// - ssm_conv1d ([conv_kernel, conv_dim]) stays F32 like the 1-D tensors; ssm_alpha/ssm_beta
//   take the file type like every other matrix;
// - attn_q has 2 * n_head * head_dim rows (query and output gate per head);
// - no MTP block: the file is what the converter writes with --no-mtp (llama.cpp treats the
//   MTP block as optional, and our engine ignores it).
#include <string>
#include <vector>

#include "engine/mkmodel.h"
#include "formats/gguf.h"

namespace geist {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION

GgmlType matrix_type(GgmlType wanted, int64_t ne0) {
  // The converter falls back to F16 when rows do not split into whole blocks.
  return ggml_row_size(wanted, ne0) == 0 ? GgmlType::F16 : wanted;
}

}  // namespace

std::vector<MkTensorSpec> mkmodel_qwen35_tensor_specs(const MkModelPreset& p,
                                                      GgmlType weight_type) {
  const MkHybrid& h = p.hybrid;
  const int64_t e = p.n_embd;
  const int64_t n_q = static_cast<int64_t>(p.n_head) * p.head_dim;
  const int64_t n_kv = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
  const int64_t key_dim = static_cast<int64_t>(h.n_k_heads) * h.d_k;
  const int64_t value_dim = static_cast<int64_t>(h.n_v_heads) * h.d_v;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  std::vector<MkTensorSpec> specs;
  auto matrix = [&](std::string name, int64_t ne0, int64_t ne1) {
    specs.push_back({std::move(name), matrix_type(weight_type, ne0), {ne0, ne1}, MkInit::WEIGHT});
  };
  auto f32 = [&](std::string name, std::vector<int64_t> ne, MkInit init) {
    specs.push_back({std::move(name), GgmlType::F32, std::move(ne), init});
  };

  // With q4_0 the tied embedding (also the output projection) stays Q8_0, as for Llama.
  const GgmlType embd_type = weight_type == GgmlType::Q4_0 ? GgmlType::Q8_0 : weight_type;
  specs.push_back({"token_embd.weight", matrix_type(embd_type, e), {e, p.n_vocab}, MkInit::WEIGHT});
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool attention = (il + 1) % h.full_attention_interval == 0;
    f32(b + "attn_norm.weight", {e}, MkInit::NORM);
    if (!attention) {
      f32(b + "ssm_a", {h.n_v_heads}, MkInit::SSM_A);
      f32(b + "ssm_conv1d.weight", {h.conv_kernel, conv_dim}, MkInit::WEIGHT);
      f32(b + "ssm_dt.bias", {h.n_v_heads}, MkInit::DT_BIAS);
      matrix(b + "ssm_alpha.weight", e, h.n_v_heads);
      matrix(b + "ssm_beta.weight", e, h.n_v_heads);
      matrix(b + "attn_qkv.weight", e, conv_dim);
      matrix(b + "attn_gate.weight", e, value_dim);
      f32(b + "ssm_norm.weight", {h.d_v}, MkInit::NORM);
      matrix(b + "ssm_out.weight", value_dim, e);
    }
    matrix(b + "ffn_down.weight", p.n_ff, e);
    matrix(b + "ffn_gate.weight", e, p.n_ff);
    matrix(b + "ffn_up.weight", e, p.n_ff);
    f32(b + "post_attention_norm.weight", {e}, MkInit::NORM);
    if (attention) {
      f32(b + "attn_k_norm.weight", {p.head_dim}, MkInit::NORM);
      matrix(b + "attn_k.weight", e, n_kv);
      matrix(b + "attn_output.weight", n_q, e);
      f32(b + "attn_q_norm.weight", {p.head_dim}, MkInit::NORM);
      matrix(b + "attn_q.weight", e, 2 * n_q);
      matrix(b + "attn_v.weight", e, n_kv);
    }
  }
  f32("output_norm.weight", {e}, MkInit::NORM);
  if (!p.tied_embeddings) matrix("output.weight", e, p.n_vocab);
  return specs;
}

void mkmodel_qwen35_add_metadata(const MkModelPreset& p, GgmlType weight_type, GgufWriter* w) {
  const MkHybrid& h = p.hybrid;
  const std::string a = "qwen35.";
  // Same keys, value types and order as the converter's output (tiny-qwen35-f32.gguf).
  w->add_u32(a + "block_count", p.n_layer);
  w->add_u32(a + "context_length", p.n_ctx_train);
  w->add_u32(a + "embedding_length", p.n_embd);
  w->add_u32(a + "feed_forward_length", p.n_ff);
  w->add_u32(a + "attention.head_count", p.n_head);
  w->add_u32(a + "attention.head_count_kv", p.n_head_kv);
  w->add_arr_i32(a + "rope.dimension_sections",
                 {h.rope_sections[0], h.rope_sections[1], h.rope_sections[2], h.rope_sections[3]});
  w->add_f32(a + "rope.freq_base", p.rope_theta);
  w->add_f32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  w->add_u32(a + "attention.key_length", p.head_dim);
  w->add_u32(a + "attention.value_length", p.head_dim);
  w->add_u32("general.file_type", mkmodel_file_type(weight_type));
  w->add_u32(a + "ssm.conv_kernel", h.conv_kernel);
  w->add_u32(a + "ssm.state_size", h.d_k);
  w->add_u32(a + "ssm.group_count", h.n_k_heads);
  w->add_u32(a + "ssm.time_step_rank", h.n_v_heads);
  w->add_u32(a + "ssm.inner_size", h.n_v_heads * h.d_v);
  w->add_u32(a + "full_attention_interval", h.full_attention_interval);
  w->add_u32(a + "rope.dimension_count", h.n_rot);
  w->add_u32("general.quantization_version", kQuantizationVersion);

  // What the converter's gpt2 vocab path writes for Qwen's tokenizer (Qwen3 GGUFs in the wild
  // carry the same keys): no BOS is added; <|endoftext|> doubles as bos and pad.
  MkVocab v = mkmodel_build_vocab(p);
  w->add_str("tokenizer.ggml.model", "gpt2");
  w->add_str("tokenizer.ggml.pre", "qwen35");
  w->add_arr_str("tokenizer.ggml.tokens", std::move(v.tokens));
  w->add_arr_i32("tokenizer.ggml.token_type", std::move(v.types));
  w->add_arr_str("tokenizer.ggml.merges", std::move(v.merges));
  w->add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  w->add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w->add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w->add_bool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace geist
