#include "engine/model.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "engine/snapshot.h"

namespace geist {
void Model::read_chat_metadata() {
  constexpr std::string_view kKey = "tokenizer.chat_template";
  for (const GgufKv& kv : gguf_->kvs()) {
    const std::string_view key = kv.key;
    if (key.substr(0, kKey.size()) != kKey) continue;
    std::string_view src;
    if (!gguf_->get_str(key, &src).is_ok()) continue;  // not a string: not a template
    if (key.size() == kKey.size()) {
      chat_templates_.emplace_back("", std::string(src));
    } else if (key[kKey.size()] == '.' && key.size() > kKey.size() + 1) {
      chat_templates_.emplace_back(std::string(key.substr(kKey.size() + 1)), std::string(src));
    }
  }
  const std::vector<std::string_view>* texts = nullptr;
  if (gguf_->get_arr_str("tokenizer.ggml.tokens", &texts).is_ok()) {
    const auto text_of = [&](int32_t id) {
      return id >= 0 && static_cast<size_t>(id) < texts->size() ? std::string((*texts)[id])
                                                                : std::string();
    };
    bos_text_ = text_of(tokenizer_->bos());
    eos_text_ = text_of(tokenizer_->eos());
  }
}

const std::string* Model::chat_template(std::string_view name) const {
  for (const auto& [n, src] : chat_templates_) {
    if (n == name) return &src;
  }
  return nullptr;
}

namespace {

// Calls the user's progress callback; a non-zero answer cancels the load.
Status report_progress(const geist_model_params& params, float fraction) {
  if (params.progress_fn && params.progress_fn(params.progress_user, fraction) != 0) {
    return Status::error(GEIST_E_INVALID_STATE,
                         "model load cancelled by the progress callback at %.0f%%",
                         static_cast<double>(fraction) * 100.0);
  }
  return Status::ok();
}

}  // namespace

Model::~Model() = default;

Status Model::require_weights(const char* what) const {
  if (arch_) return Status::ok();
  return Status::error(GEIST_E_INVALID_STATE,
                       "%s needs the weights, but the model was loaded vocab-only "
                       "(geist_model_params.vocab_only)",
                       what);
}

Status Model::load(const std::string& path, const geist_model_params& params,
                   std::unique_ptr<Model>* out) {
  out->reset();
  std::unique_ptr<Model> m(new Model());
  m->logger_ = Logger{params.log_fn, params.log_user};
  GEIST_RETURN_IF_ERROR(report_progress(params, 0.0f));

  GEIST_RETURN_IF_ERROR(GgufFile::open(path, &m->gguf_).with_prefix(path));
  GEIST_RETURN_IF_ERROR(report_progress(params, 0.3f));

  GEIST_RETURN_IF_ERROR(
      Tokenizer::load(*m->gguf_, m->logger_, &m->tokenizer_).with_prefix(path + ": tokenizer"));
  GEIST_RETURN_IF_ERROR(report_progress(params, 0.5f));
  m->read_chat_metadata();

  if (params.vocab_only != 0) {
    // Any architecture will do: nothing of it is read but names and lengths for info().
    ModelInfo& vi = m->vocab_info_;
    std::string_view arch;
    if (m->gguf_->get_str("general.architecture", &arch).is_ok()) {
      vi.architecture = std::string(arch);
      int32_t n_ctx = 0;
      if (m->gguf_->get_i32(vi.architecture + ".context_length", &n_ctx).is_ok() && n_ctx > 0) {
        vi.n_ctx_train = n_ctx;
      }
    }
    vi.n_vocab = m->tokenizer_->n_vocab();
  } else {
    // Before the weights are uploaded: the id samples tensor bytes, whose pages the backend
    // may release once it holds its own copy.
    m->snapshot_id_ = compute_snapshot_id(*m->gguf_);
    GEIST_RETURN_IF_ERROR(
        load_arch_model(*m->gguf_, static_cast<BackendKind>(params.backend), m->logger_, &m->arch_)
            .with_prefix(path));
  }
  m->gguf_->release_string_arrays();  // the tokenizer and the id hold what they need
  const ModelInfo& info = m->info();
  if (info.n_vocab <= 0 || info.n_vocab != m->tokenizer_->n_vocab()) {
    return Status::error(GEIST_E_FORMAT,
                         "%s: the tokenizer has %d tokens but the weights have %d logits",
                         path.c_str(), m->tokenizer_->n_vocab(), info.n_vocab);
  }

  std::vector<int32_t> empty;
  GEIST_RETURN_IF_ERROR(m->tokenizer_->encode("", true, false, &empty));
  m->adds_bos_ = !empty.empty() && m->tokenizer_->bos() >= 0 && empty[0] == m->tokenizer_->bos();

  m->logger_.log(GEIST_LOG_INFO,
                 "loaded %s%s: %s, %d layers, n_embd %d, n_vocab %d, %zu tensors, tokenizer %.*s",
                 path.c_str(), m->vocab_only() ? " (vocab only)" : "", info.architecture.c_str(),
                 info.n_layer, info.n_embd, info.n_vocab, m->gguf_->tensors().size(),
                 static_cast<int>(m->tokenizer_->model_name().size()),
                 m->tokenizer_->model_name().data());
  GEIST_RETURN_IF_ERROR(report_progress(params, 1.0f));
  *out = std::move(m);
  return Status::ok();
}

namespace {

// "12.0 KiB", "1.31 MiB": short sizes for the state lines.
std::string human_bytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, kUnits[u]);
  return buf;
}

// The layer pattern and what a session's state costs (geist info).
void describe_state(const ArchModel& arch, std::ostringstream& os) {
  const ModelInfo& i = arch.info();
  const std::string kinds = arch.layer_kinds();
  const int64_t n_attn = std::count(kinds.begin(), kinds.end(), 'A');
  os << "layers: " << kinds.size();
  if (n_attn == static_cast<int64_t>(kinds.size())) {
    os << " (all attention)\n";
  } else {
    // Grouped by the period of the pattern (the first attention layer closes the first group).
    const size_t first_a = kinds.find('A');
    const size_t group = first_a == std::string::npos ? kinds.size() : first_a + 1;
    os << " (";
    for (size_t l = 0; l < kinds.size(); l += group) {
      if (l > 0) os << ' ';
      os << kinds.substr(l, group);
    }
    os << "; D = gated DeltaNet, A = gated attention)\n";
  }
  // K and V rows of every attention layer; head_dim is both the key and the value length.
  const uint64_t kv_floats = static_cast<uint64_t>(n_attn) * 2 * i.n_head_kv * i.head_dim;
  const uint64_t per_token_f32 = kv_floats * 4;
  const uint64_t per_token_f16 = kv_floats * 2;
  const uint64_t fixed = arch.fixed_state_bytes();
  os << "state per token: " << per_token_f32 << " bytes with f32 KV, " << per_token_f16
     << " bytes with f16 KV (" << n_attn << " attention layers)\n";
  constexpr uint64_t kExampleCtx = 4096;
  os << "state per session: " << fixed << " bytes fixed (" << human_bytes(fixed)
     << " recurrent + conv) + per-token state x context; at n_ctx " << kExampleCtx << ": "
     << human_bytes(fixed + per_token_f16 * kExampleCtx) << " with f16 KV, "
     << human_bytes(fixed + per_token_f32 * kExampleCtx) << " with f32 KV\n";
}

}  // namespace

std::string Model::describe() const {
  const ModelInfo& i = info();
  std::ostringstream os;
  os << "architecture: " << i.architecture << "\n";
  os << "gguf: version " << gguf_->version() << ", " << gguf_->file_size() << " bytes"
     << (gguf_->n_files() > 1 ? " in " + std::to_string(gguf_->n_files()) + " split files" : "")
     << ", " << gguf_->kvs().size() << " metadata keys, " << gguf_->tensors().size()
     << " tensors\n";
  os << "n_vocab: " << i.n_vocab << "\n";
  os << "n_ctx_train: " << i.n_ctx_train << "\n";
  os << "n_embd: " << i.n_embd << "\n";
  os << "n_layer: " << i.n_layer << "\n";
  os << "n_head: " << i.n_head << "\n";
  os << "n_head_kv: " << i.n_head_kv << "\n";
  os << "n_ff: " << i.n_ff << "\n";
  os << "head_dim: " << i.head_dim << "\n";
  if (arch_) {
    os << "backend: " << arch_->backend().description() << "\n";
    describe_state(*arch_, os);
  } else {
    os << "weights: not loaded (vocab only)\n";
  }

  // Ordered by type id so the output is stable.
  std::map<uint32_t, std::pair<size_t, uint64_t>> by_type;  // type -> (count, bytes)
  uint64_t n_params = 0;
  for (const GgufTensorInfo& t : gguf_->tensors()) {
    auto& e = by_type[static_cast<uint32_t>(t.type)];
    ++e.first;
    e.second += t.nbytes;
    n_params += static_cast<uint64_t>(t.n_elements());
  }
  os << "parameters: " << n_params << "\n";
  os << "tensor types:";
  for (const auto& [type, e] : by_type) {
    os << " " << ggml_type_name(static_cast<GgmlType>(type)) << "=" << e.first << " (" << e.second
       << " bytes)";
  }
  os << "\n";
  os << "tokenizer: model " << tokenizer_->model_name() << ", pre "
     << (tokenizer_->pre_name().empty() ? std::string_view("(none)") : tokenizer_->pre_name())
     << ", " << tokenizer_->n_vocab() << " tokens, bos " << tokenizer_->bos() << ", eos "
     << tokenizer_->eos() << "\n";
  return os.str();
}

}  // namespace geist
