// Dumps llama.cpp's logits for every position of a token list, for bench/llamacpp_parity.sh.
// Built by that script against the llama.cpp build in $LLAMA_CPP_DIR (never part of geist's
// build). F32 KV cache and flash attention off, the setting the fixtures' references use.
// usage: llamacpp_logits MODEL OUT.f32 ID [ID ...]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL OUT.f32 ID [ID ...]\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  std::vector<llama_token> ids;
  for (int i = 3; i < argc; ++i) ids.push_back(std::atoi(argv[i]));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(ids.size() < 64 ? 64 : ids.size());
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_batch batch = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(ids.size());
  if (llama_decode(ctx, batch) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* f = std::fopen(argv[2], "wb");
  if (!f) return 1;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), sizeof(float),
                static_cast<size_t>(n_vocab), f);
  }
  std::fclose(f);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
