// Writes real snapshot images as the seed corpus of fuzz_restore: sessions of the fuzzed
// models and KV modes at a few states (empty, after prefill, forward owed, with a pin).
// Usage: fuzz_restore_seed FIXTURES_DIR OUT_DIR
#include <cstdio>
#include <string>

#include "geist/geist.h"
#include "geist/geist_snapshot.h"

namespace {

bool save(geist_session* s, const std::string& path) {
  if (geist_session_save_file(s, path.c_str()) != GEIST_OK) {
    std::fprintf(stderr, "fuzz_restore_seed: %s\n", geist_session_last_error(s));
    return false;
  }
  return true;
}

bool seeds_for(const std::string& model_path, int32_t kv_mode, const std::string& out) {
  geist_model* m = nullptr;
  char err[256] = {};
  if (geist_model_load(model_path.c_str(), nullptr, &m, err, sizeof err) != GEIST_OK) {
    std::fprintf(stderr, "fuzz_restore_seed: %s\n", err);
    return false;
  }
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.max_seq_len = 128;
  sp.n_threads = 1;
  sp.kv_mode = kv_mode;
  geist_session* s = nullptr;
  bool ok = geist_session_create(m, &sp, &s) == GEIST_OK;
  const geist_token prompt[] = {1, 300, 301, 42};
  geist_token tok = 0;
  ok = ok && save(s, out + "_empty.gsnap");
  ok = ok && geist_session_prefill(s, prompt, 4) == GEIST_OK && save(s, out + "_prefill.gsnap");
  ok = ok && geist_session_pin_prefix(s) == GEIST_OK;
  ok = ok && geist_session_decode(s, &tok) == GEIST_OK && save(s, out + "_owed_pin.gsnap");
  geist_session_destroy(s);
  geist_model_free(m);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FIXTURES_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string fx = argv[1], out = argv[2];
  bool ok = seeds_for(fx + "/models/stories260K.gguf", GEIST_KV_F32, out + "/s260k_f32");
  ok = seeds_for(fx + "/models/stories260K.gguf", GEIST_KV_KIVI4, out + "/s260k_kivi4") && ok;
  ok = seeds_for(fx + "/models/tiny-qwen35-f32.gguf", GEIST_KV_F32, out + "/qwen_f32") && ok;
  return ok ? 0 : 1;
}
