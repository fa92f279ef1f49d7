// mkmodel: presets, the converter's tensor/metadata layout, and the streaming writer.
#include "engine/mkmodel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/quant.h"

namespace geist {
namespace {

// Fields in MkModelPreset order: name, model_name, n_vocab, n_special, n_embd, n_ff, n_layer,
// n_head, n_head_kv, head_dim, n_ctx_train, rope_theta, rms_eps, tied_embeddings, llama3_rope,
// rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_orig_ctx, arch, hybrid
// {n_rot, full_attention_interval, conv_kernel, n_k_heads, n_v_heads, d_k, d_v, sections}.
// clang-format off
constexpr MkModelPreset kPresets[] = {
    // A small Llama-3 stand-in: seconds to build and run, same structure as llama-1b.
    {"tiny-llama", "tiny-llama (geist mkmodel, random weights)", 3072, 16, 256, 704, 4, 8, 4, 32,
     2048, 500000.0f, 1e-5f, true, true, 32.0f, 1.0f, 4.0f, 8192, MkArch::LLAMA, {}},
    // Llama-3.2-1B's shapes and hyper-parameters (config.json of meta-llama/Llama-3.2-1B).
    {"llama-1b", "Llama-3.2-1B shapes (geist mkmodel, random weights)", 128256, 256, 2048, 8192, 16,
     32, 8, 64, 131072, 500000.0f, 1e-5f, true, true, 32.0f, 1.0f, 4.0f, 8192, MkArch::LLAMA, {}},
    // A small Qwen3.5 hybrid for tests: 2 x (3 DeltaNet + 1 attention), 4 value heads over 2
    // key heads (so the tiled value-head order matters), 26 added tokens + 38 [PAD] fillers.
    {"tiny-qwen35", "tiny-qwen35 (geist mkmodel, random weights)", 4096, 64, 128, 384, 8, 4, 2, 64,
     262144, 10000000.0f, 1e-6f, true, false, 0.0f, 0.0f, 0.0f, 0, MkArch::QWEN35,
     {16, 4, 4, 2, 4, 32, 32, {3, 3, 2, 0}}},
    // Qwen3.5-0.8B's text model (config.json text_config of Qwen/Qwen3.5-0.8B): 248044 BPE
    // tokens, then the added tokens from <|endoftext|> = 248044 on, padded to 248320.
    {"qwen35-0.8b", "Qwen3.5-0.8B shapes (geist mkmodel, random weights)", 248320, 276, 1024, 3584,
     24, 8, 2, 256, 262144, 10000000.0f, 1e-6f, true, false, 0.0f, 0.0f, 0.0f, 0, MkArch::QWEN35,
     {64, 4, 4, 16, 16, 128, 128, {11, 11, 10, 0}}},
    // Qwen3.5-2B's text model: Qwen3.5-0.8B's layout with n_embd 2048 and n_ff 6144 (hidden_size
    // 2048 confirmed from public notes on Qwen/Qwen3.5-2B; n_ff from its config.json as recalled,
    // the search tools did not surface that file).
    {"qwen35-2b", "Qwen3.5-2B shapes (geist mkmodel, random weights)", 248320, 276, 2048, 6144,
     24, 8, 2, 256, 262144, 10000000.0f, 1e-6f, true, false, 0.0f, 0.0f, 0.0f, 0, MkArch::QWEN35,
     {64, 4, 4, 16, 16, 128, 128, {11, 11, 10, 0}}},
};
// clang-format on

// llama.cpp's LlamaFileType values.
constexpr uint32_t kFileTypeAllF32 = 0;
constexpr uint32_t kFileTypeMostlyF16 = 1;
constexpr uint32_t kFileTypeMostlyQ4_0 = 2;
constexpr uint32_t kFileTypeMostlyQ8_0 = 7;
constexpr uint32_t kFileTypeMostlyBF16 = 32;
constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64 stream; one per tensor row so the bytes do not depend on the thread count.
struct RowRng {
  uint64_t s;
  uint64_t next() { return mix64(s += 0x9E3779B97F4A7C15ull); }
  // Irwin-Hall sum of four 16-bit uniforms, rescaled to mean 0 and variance 1: close enough
  // to normal for random weights and several times cheaper than Box-Muller.
  float normalish() {
    const uint64_t r = next();
    const uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) +
                         static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                         static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    constexpr float kMean = 2.0f * 65535.0f;
    constexpr float kScale = 1.7320508f / 65535.0f;  // sqrt(3): the sum of 4 U(0,1) has var 1/3
    return (static_cast<float>(sum) - kMean) * kScale;
  }
};

GgmlType weight_type_for(GgmlType wanted, int64_t ne0) {
  // The converter falls back to F16 when rows do not split into whole blocks.
  return ggml_row_size(wanted, ne0) == 0 ? GgmlType::F16 : wanted;
}

// gguf-py's size label: at least two significant digits, e.g. "3.7M", "1.2B".
std::string size_label(int64_t n_params) {
  const double n = static_cast<double>(n_params);
  double scaled = n * 1e-3;
  char suffix = 'K';
  if (n > 1e12) {
    scaled = n * 1e-12;
    suffix = 'T';
  } else if (n > 1e9) {
    scaled = n * 1e-9;
    suffix = 'B';
  } else if (n > 1e6) {
    scaled = n * 1e-6;
    suffix = 'M';
  }
  const int int_digits = static_cast<int>(std::to_string(std::llround(scaled)).size());
  const int decimals = std::max(2 - int_digits, 0);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f%c", decimals, scaled, suffix);
  return buf;
}

void add_metadata(const MkModelPreset& p, GgmlType weight_type, GgufWriter* w) {
  const std::string a = p.arch == MkArch::QWEN35 ? "qwen35" : "llama";
  w->add_str("general.architecture", a);
  w->add_str("general.type", "model");
  w->add_str("general.name", p.model_name);
  w->add_str("general.size_label", size_label(mkmodel_param_count(p)));
  if (p.arch == MkArch::QWEN35) {
    mkmodel_qwen35_add_metadata(p, weight_type, w);
    return;
  }
  w->add_u32(a + ".block_count", p.n_layer);
  w->add_u32(a + ".context_length", p.n_ctx_train);
  w->add_u32(a + ".embedding_length", p.n_embd);
  w->add_u32(a + ".feed_forward_length", p.n_ff);
  w->add_u32(a + ".attention.head_count", p.n_head);
  w->add_u32(a + ".attention.head_count_kv", p.n_head_kv);
  w->add_f32(a + ".rope.freq_base", p.rope_theta);
  w->add_f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  // Llama-3.2's config.json states head_dim, so the converter writes key/value lengths.
  w->add_u32(a + ".attention.key_length", p.head_dim);
  w->add_u32(a + ".attention.value_length", p.head_dim);
  w->add_u32("general.file_type", mkmodel_file_type(weight_type));
  w->add_u32(a + ".vocab_size", p.n_vocab);
  w->add_u32(a + ".rope.dimension_count", p.head_dim);
  w->add_u32("general.quantization_version", kQuantizationVersion);

  MkVocab v = mkmodel_build_vocab(p);
  w->add_str("tokenizer.ggml.model", "gpt2");
  w->add_str("tokenizer.ggml.pre", "llama-bpe");
  w->add_arr_str("tokenizer.ggml.tokens", std::move(v.tokens));
  w->add_arr_i32("tokenizer.ggml.token_type", std::move(v.types));
  w->add_arr_str("tokenizer.ggml.merges", std::move(v.merges));
  w->add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w->add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  // From the tokenizer.json post-processor ("<|begin_of_text|> $A").
  w->add_bool("tokenizer.ggml.add_bos_token", true);
  w->add_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace

const MkModelPreset* find_mkmodel_preset(std::string_view name) {
  for (const MkModelPreset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::string mkmodel_preset_list() {
  std::string s;
  for (const MkModelPreset& p : kPresets) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

Status parse_mkmodel_type(std::string_view name, GgmlType* out) {
  struct Entry {
    const char* name;
    GgmlType type;
  };
  static constexpr Entry kTypes[] = {{"f32", GgmlType::F32},
                                     {"f16", GgmlType::F16},
                                     {"bf16", GgmlType::BF16},
                                     {"q8_0", GgmlType::Q8_0},
                                     {"q4_0", GgmlType::Q4_0}};
  for (const Entry& e : kTypes) {
    if (name == e.name) {
      *out = e.type;
      return Status::ok();
    }
  }
  return Status::error(GEIST_E_INVALID_ARG,
                       "unknown model type '%.*s' (expected f32, f16, bf16, q8_0 or q4_0)",
                       static_cast<int>(name.size()), name.data());
}

uint32_t mkmodel_file_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
      return kFileTypeAllF32;
    case GgmlType::F16:
      return kFileTypeMostlyF16;
    case GgmlType::BF16:
      return kFileTypeMostlyBF16;
    case GgmlType::Q8_0:
      return kFileTypeMostlyQ8_0;
    case GgmlType::Q4_0:
      return kFileTypeMostlyQ4_0;
    default:
      GEIST_CHECK(false, "mkmodel_file_type: type not produced by parse_mkmodel_type");
  }
  return 0;
}

int64_t mkmodel_param_count(const MkModelPreset& p) {
  int64_t n_params = 0;
  for (const MkTensorSpec& s : mkmodel_tensor_specs(p, GgmlType::F32)) {
    int64_t n = 1;
    for (int64_t d : s.ne) n *= d;
    n_params += n;
  }
  return n_params;
}

std::vector<MkTensorSpec> mkmodel_tensor_specs(const MkModelPreset& p, GgmlType weight_type) {
  if (p.arch == MkArch::QWEN35) return mkmodel_qwen35_tensor_specs(p, weight_type);
  const int64_t n_embd = p.n_embd;
  const int64_t n_q = static_cast<int64_t>(p.n_head) * p.head_dim;
  const int64_t n_kv = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
  std::vector<MkTensorSpec> specs;
  auto weight = [&](std::string name, int64_t ne0, int64_t ne1) {
    specs.push_back(
        {std::move(name), weight_type_for(weight_type, ne0), {ne0, ne1}, MkInit::WEIGHT});
  };
  auto norm = [&](std::string name) {
    specs.push_back({std::move(name), GgmlType::F32, {n_embd}, MkInit::NORM});
  };

  // The converter emits generated tensors first, then the checkpoint's in its (sorted) order.
  if (p.llama3_rope) {
    specs.push_back({"rope_freqs.weight", GgmlType::F32, {p.head_dim / 2}, MkInit::ROPE_FREQS});
  }
  const GgmlType embd_type = weight_type == GgmlType::Q4_0 ? GgmlType::Q8_0 : weight_type;
  specs.push_back({"token_embd.weight",
                   weight_type_for(embd_type, n_embd),
                   {n_embd, p.n_vocab},
                   MkInit::WEIGHT});
  for (int32_t i = 0; i < p.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    norm(b + "attn_norm.weight");
    weight(b + "ffn_down.weight", p.n_ff, n_embd);
    weight(b + "ffn_gate.weight", n_embd, p.n_ff);
    weight(b + "ffn_up.weight", n_embd, p.n_ff);
    norm(b + "ffn_norm.weight");
    weight(b + "attn_k.weight", n_embd, n_kv);
    weight(b + "attn_output.weight", n_q, n_embd);
    weight(b + "attn_q.weight", n_embd, n_q);
    weight(b + "attn_v.weight", n_embd, n_kv);
  }
  norm("output_norm.weight");
  if (!p.tied_embeddings) weight("output.weight", n_embd, p.n_vocab);
  return specs;
}

std::vector<float> llama3_rope_factors(const MkModelPreset& p) {
  // Same arithmetic as the converter, which works on float32 tensors throughout.
  const int32_t dim = p.head_dim;
  const float low_freq_wavelen = static_cast<float>(p.rope_orig_ctx) / p.rope_low_freq_factor;
  const float high_freq_wavelen = static_cast<float>(p.rope_orig_ctx) / p.rope_high_freq_factor;
  const float two_pi = static_cast<float>(2.0 * M_PI);
  std::vector<float> factors;
  for (int32_t i = 0; i < dim; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(dim);
    const float freq = 1.0f / std::pow(p.rope_theta, exponent);
    const float wavelen = two_pi / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(p.rope_factor);
    } else {
      const float smooth =
          (static_cast<float>(p.rope_orig_ctx) / wavelen - p.rope_low_freq_factor) /
          (p.rope_high_freq_factor - p.rope_low_freq_factor);
      factors.push_back(1.0f / ((1.0f - smooth) / p.rope_factor + smooth));
    }
  }
  return factors;
}

Status mkmodel_write(const MkModelPreset& p, std::string_view type, const std::string& path,
                     uint64_t seed, const std::function<void(float)>& progress,
                     bool metadata_only) {
  GgmlType weight_type;
  GEIST_RETURN_IF_ERROR(parse_mkmodel_type(type, &weight_type));
  for (GgmlType t : {weight_type, GgmlType::Q8_0, GgmlType::F16, GgmlType::F32}) {
    if (!quant_type_writable(t)) {
      return Status::error(GEIST_E_UNSUPPORTED, "mkmodel: cannot write tensors of type %s",
                           ggml_type_name(t));
    }
  }

  GgufWriter w;
  add_metadata(p, weight_type, &w);
  const std::vector<MkTensorSpec> specs =
      metadata_only ? std::vector<MkTensorSpec>{} : mkmodel_tensor_specs(p, weight_type);
  for (const MkTensorSpec& s : specs) w.add_tensor_deferred(s.name, s.type, s.ne);

  const std::vector<float> rope_factors =
      p.llama3_rope ? llama3_rope_factors(p) : std::vector<float>{};
  ThreadPool pool(0);
  auto fill = [&](size_t index, uint8_t* dst, size_t nbytes) -> Status {
    GEIST_CHECK(index < specs.size(), "mkmodel: fill index out of range");
    const MkTensorSpec& s = specs[index];
    const int64_t ne0 = s.ne[0];
    int64_t rows = 1;
    for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
    const size_t row_bytes = ggml_row_size(s.type, ne0);
    GEIST_CHECK(row_bytes * static_cast<size_t>(rows) == nbytes, "mkmodel: tensor size mismatch");
    if (s.init == MkInit::ROPE_FREQS) {
      GEIST_CHECK(nbytes == rope_factors.size() * sizeof(float), "mkmodel: rope_freqs size");
      std::memcpy(dst, rope_factors.data(), nbytes);
      return Status::ok();
    }
    const uint64_t tensor_key = mix64(seed ^ mix64(0x6d6b6d6f64656cull + index));
    if (s.init == MkInit::SSM_A || s.init == MkInit::DT_BIAS) {
      GEIST_CHECK(s.type == GgmlType::F32 && rows == 1, "mkmodel: ssm_a/dt_bias are f32 vectors");
      RowRng rng{mix64(tensor_key)};
      std::vector<float> v(static_cast<size_t>(ne0));  // [n_v_heads]
      for (float& x : v) {
        const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;  // U[0, 1)
        if (s.init == MkInit::SSM_A) {
          x = static_cast<float>(-(1.0 + 15.0 * u));
        } else {
          // softplus(dt_bias) == dt: dt_bias = dt + log(1 - exp(-dt)).
          const double dt = std::exp(std::log(1e-3) + u * (std::log(1e-1) - std::log(1e-3)));
          x = static_cast<float>(dt + std::log(-std::expm1(-dt)));
        }
      }
      std::memcpy(dst, v.data(), nbytes);
      return Status::ok();
    }
    const float std_dev =
        s.init == MkInit::NORM ? 0.05f : 1.0f / std::sqrt(static_cast<float>(ne0));
    const float mean = s.init == MkInit::NORM ? 1.0f : 0.0f;
    pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(ne0));  // [ne0] one row before conversion
      for (int64_t r = begin; r < end; ++r) {
        RowRng rng{mix64(tensor_key + static_cast<uint64_t>(r))};
        for (float& x : row) x = mean + std_dev * rng.normalish();
        quantize_row(s.type, row.data(), dst + static_cast<size_t>(r) * row_bytes, ne0);
      }
    });
    return Status::ok();
  };
  return w.write_file(path, fill, progress);
}

}  // namespace geist
