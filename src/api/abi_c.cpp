// C ABI: the library's self-description for bindings (geist_abi.h). The layout text is built
// from offsetof / sizeof here, so it is whatever this compiler made of the public headers.
// Every public struct of every header is listed (geist.h's three, geist_batch.h's item).
#include <cstddef>
#include <string>

#include "geist/geist.h"
#include "geist/geist_abi.h"
#include "geist/geist_batch.h"

namespace {

// Appends piece by piece (GCC 12 warns falsely, -Wrestrict, on "literal" + std::string&&).
struct LayoutWriter {
  std::string out;
  bool first_struct = true;
  bool first_field = true;

  void number(size_t v) { out.append(std::to_string(v)); }
  void begin(const char* name, size_t size, size_t align) {
    if (!first_struct) out.append(", ");
    first_struct = false;
    first_field = true;
    out.append("\"").append(name).append("\": {\"size\": ");
    number(size);
    out.append(", \"align\": ");
    number(align);
    out.append(", \"fields\": {");
  }
  void field(const char* name, size_t offset, size_t size) {
    if (!first_field) out.append(", ");
    first_field = false;
    out.append("\"").append(name).append("\": [");
    number(offset);
    out.append(", ");
    number(size);
    out.append("]");
  }
  void end() { out.append("}}"); }
};

#define GEIST_LAYOUT_BEGIN(w, T) (w).begin(#T, sizeof(T), alignof(T))
#define GEIST_LAYOUT_FIELD(w, T, f) (w).field(#f, offsetof(T, f), sizeof(T::f))

std::string build_layout() {
  LayoutWriter w;
  w.out.append("{\"abi_version\": ");
  w.number(GEIST_ABI_VERSION);
  w.out.append(", \"pointer_size\": ");
  w.number(sizeof(void*));
  w.out.append(", \"structs\": {");

  GEIST_LAYOUT_BEGIN(w, geist_model_params);
  GEIST_LAYOUT_FIELD(w, geist_model_params, struct_size);
  GEIST_LAYOUT_FIELD(w, geist_model_params, log_fn);
  GEIST_LAYOUT_FIELD(w, geist_model_params, log_user);
  GEIST_LAYOUT_FIELD(w, geist_model_params, progress_fn);
  GEIST_LAYOUT_FIELD(w, geist_model_params, progress_user);
  GEIST_LAYOUT_FIELD(w, geist_model_params, backend);
  GEIST_LAYOUT_FIELD(w, geist_model_params, vocab_only);
  w.end();

  GEIST_LAYOUT_BEGIN(w, geist_sampler_params);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, struct_size);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, temperature);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, top_k);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, top_p);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, min_p);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, repeat_penalty);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, presence_penalty);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, penalty_last_n);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, seed);
  GEIST_LAYOUT_FIELD(w, geist_sampler_params, frequency_penalty);
  w.end();

  GEIST_LAYOUT_BEGIN(w, geist_session_params);
  GEIST_LAYOUT_FIELD(w, geist_session_params, struct_size);
  GEIST_LAYOUT_FIELD(w, geist_session_params, max_seq_len);
  GEIST_LAYOUT_FIELD(w, geist_session_params, n_threads);
  GEIST_LAYOUT_FIELD(w, geist_session_params, sampler);
  GEIST_LAYOUT_FIELD(w, geist_session_params, kv_mode);
  w.end();

  GEIST_LAYOUT_BEGIN(w, geist_batch_item);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, struct_size);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, session);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, tokens);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, n_tokens);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, status);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, decode);
  GEIST_LAYOUT_FIELD(w, geist_batch_item, token);
  w.end();

  w.out.append("}}");
  return w.out;
}

#undef GEIST_LAYOUT_FIELD
#undef GEIST_LAYOUT_BEGIN

}  // namespace

extern "C" {

uint32_t geist_abi_version(void) { return GEIST_ABI_VERSION; }

const char* geist_abi_layout(void) {
  // Built once (thread-safe static initialisation); if the allocation fails the exception
  // would escape, so fall back to a minimal valid object.
  static const std::string* layout = []() noexcept -> const std::string* {
    try {
      return new std::string(build_layout());
    } catch (...) {
      return nullptr;
    }
  }();
  return layout != nullptr ? layout->c_str() : "{\"abi_version\": 0, \"structs\": {}}";
}

}  // extern "C"
