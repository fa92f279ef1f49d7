/* Minimal geist example: load a model, prefill a prompt, generate greedily, print.
 * Usage: geist_example_simple model.gguf [prompt] [n_tokens] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geist/geist.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.gguf [prompt] [n_tokens]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const int n_tokens = argc > 3 ? atoi(argv[3]) : 32;
  char err[512];
  geist_model* model = NULL;
  if (geist_model_load(argv[1], NULL, &model, err, sizeof err) != GEIST_OK) {
    fprintf(stderr, "load failed: %s\n", err);
    return 1;
  }
  geist_session_params params;
  geist_session_params_default(&params);
  params.sampler.temperature = 0.0f; /* greedy */
  geist_session* session = NULL;
  if (geist_session_create(model, &params, &session) != GEIST_OK ||
      geist_session_prefill_text(session, prompt, strlen(prompt), 1) != GEIST_OK) {
    fprintf(stderr, "error: %s%s\n", geist_model_last_error(model),
            session ? geist_session_last_error(session) : "");
    geist_session_destroy(session);
    geist_model_free(model);
    return 1;
  }
  fputs(prompt, stdout);
  for (int i = 0; i < n_tokens; ++i) {
    geist_token tok;
    char piece[256];
    size_t len = 0;
    if (geist_session_decode(session, &tok) != GEIST_OK || geist_model_token_is_eog(model, tok)) {
      break;
    }
    if (geist_token_to_piece(model, tok, piece, sizeof piece, &len) == GEIST_OK) {
      fwrite(piece, 1, len, stdout);
    }
  }
  fputc('\n', stdout);
  geist_session_destroy(session);
  geist_model_free(model);
  return 0;
}
