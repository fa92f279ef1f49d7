// libFuzzer target for snapshot restore: arbitrary bytes go to geist_session_restore on live
// sessions of stories260K (f32 and KIVI-4 KV) and tiny-qwen35 (hybrid). Anything accepted must
// leave a session that decodes; anything refused must return an error, never crash.
// Models come from $GEIST_FIXTURES (default <repo>/../shared/fixtures).
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "geist/geist.h"
#include "geist/geist_snapshot.h"

namespace {

struct Target {
  geist_model* model = nullptr;
  geist_session* session = nullptr;
};

Target g_targets[3];

Target open_target(const std::string& path, int32_t kv_mode) {
  Target t;
  char err[256] = {};
  if (geist_model_load(path.c_str(), nullptr, &t.model, err, sizeof err) != GEIST_OK) {
    std::fprintf(stderr, "fuzz_restore: cannot load %s: %s\n", path.c_str(), err);
    std::abort();
  }
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.max_seq_len = 128;
  sp.n_threads = 1;
  sp.kv_mode = kv_mode;
  if (geist_session_create(t.model, &sp, &t.session) != GEIST_OK) std::abort();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("GEIST_FIXTURES");
  const std::string dir = env ? env : std::string(GEIST_SOURCE_DIR) + "/../shared/fixtures";
  g_targets[0] = open_target(dir + "/models/stories260K.gguf", GEIST_KV_F32);
  g_targets[1] = open_target(dir + "/models/stories260K.gguf", GEIST_KV_KIVI4);
  g_targets[2] = open_target(dir + "/models/tiny-qwen35-f32.gguf", GEIST_KV_F32);
  return 0;
}

static void restore_into_all(const uint8_t* data, size_t size) {
  for (Target& t : g_targets) {
    if (geist_session_restore(t.session, data, size) != GEIST_OK) continue;
    // Accepted: the restored state must be usable.
    for (int i = 0; i < 2 && geist_session_position(t.session) < 128; ++i) {
      geist_token tok = 0;
      if (geist_session_decode(t.session, &tok) != GEIST_OK) break;
    }
    if (geist_session_pin_len(t.session) >= 0) geist_session_reset_to_prefix(t.session);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  restore_into_all(data, size);
  // The checksum refuses nearly every mutation; a re-sealed copy (checksum recomputed as the
  // format defines it) reaches the semantic checks behind it.
  if (size >= 96) {
    std::vector<uint8_t> sealed(data, data + size);
    std::memset(sealed.data() + 24, 0, 8);
    const uint64_t h = XXH3_64bits(sealed.data(), sealed.size());
    std::memcpy(sealed.data() + 24, &h, 8);
    restore_into_all(sealed.data(), sealed.size());
  }
  return 0;
}
