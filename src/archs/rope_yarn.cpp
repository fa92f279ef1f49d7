#include "archs/rope_yarn.h"

#include <cmath>

namespace geist {
namespace {

// An optional key: absent leaves *out, a key of another type is a format error.
Status optional_f32(const GgufFile& f, const std::string& key, float* out) {
  const Status st = f.get_f32(key, out);
  if (st || st.code() == GEIST_E_NOT_FOUND) return Status::ok();
  return Status(GEIST_E_FORMAT, st.message());
}

Status optional_i32(const GgufFile& f, const std::string& key, int32_t* out) {
  const Status st = f.get_i32(key, out);
  if (st || st.code() == GEIST_E_NOT_FOUND) return Status::ok();
  return Status(GEIST_E_FORMAT, st.message());
}

}  // namespace

Status read_yarn_config(const GgufFile& f, const std::string& p, int32_t n_ctx_train,
                        YarnConfig* y) {
  float factor = 0;
  GEIST_RETURN_IF_ERROR(optional_f32(f, p + "rope.scaling.factor", &factor));
  if (factor < 0 || !std::isfinite(factor)) {
    return Status::error(GEIST_E_FORMAT, "%srope.scaling.factor %g must be positive", p.c_str(),
                         static_cast<double>(factor));
  }
  y->factor = factor == 0 ? 1.0f : factor;
  y->n_ctx_orig = n_ctx_train;
  GEIST_RETURN_IF_ERROR(
      optional_i32(f, p + "rope.scaling.original_context_length", &y->n_ctx_orig));
  if (y->n_ctx_orig <= 0) {
    return Status::error(GEIST_E_FORMAT,
                         "%srope.scaling.original_context_length %d must be positive", p.c_str(),
                         y->n_ctx_orig);
  }
  GEIST_RETURN_IF_ERROR(optional_f32(f, p + "rope.scaling.yarn_beta_fast", &y->beta_fast));
  GEIST_RETURN_IF_ERROR(optional_f32(f, p + "rope.scaling.yarn_beta_slow", &y->beta_slow));
  if (!(y->beta_fast > 0) || !(y->beta_slow > 0) || !std::isfinite(y->beta_fast) ||
      !std::isfinite(y->beta_slow)) {
    return Status::error(GEIST_E_FORMAT,
                         "%srope.scaling.yarn_beta_fast / yarn_beta_slow must be positive",
                         p.c_str());
  }
  const struct {
    const char* key;
    float neutral;
  } fixed[] = {{"rope.scaling.yarn_ext_factor", 1.0f},
               {"rope.scaling.yarn_attn_factor", 1.0f},
               {"rope.scaling.yarn_log_multiplier", 0.0f}};
  for (const auto& k : fixed) {
    float v = k.neutral;
    GEIST_RETURN_IF_ERROR(optional_f32(f, p + k.key, &v));
    if (v != k.neutral) {
      return Status::error(GEIST_E_UNSUPPORTED, "%s%s %g is not supported", p.c_str(), k.key,
                           static_cast<double>(v));
    }
  }
  return Status::ok();
}

}  // namespace geist
