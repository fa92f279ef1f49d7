// Logit agreement of geist with reference logits on a fixture: max and mean |difference| and
// argmax agreement per reference file. Used to measure what the fast kernels (16-bit
// activations on the integer path) change against llama.cpp's and HF's fp64 logits.
//   logit_drift MODEL.gguf hf_reference.json REF.f32 [REF.f32 ...]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "geist/geist.h"
#include "geist/geist_util.h"

static std::vector<geist_token> read_tokens(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  std::vector<geist_token> out;
  size_t p = s.find("\"tokens\"");
  if (p == std::string::npos) return out;
  p = s.find('[', p);
  const size_t e = s.find(']', p);
  for (size_t i = p + 1; i < e;) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str() + i, &end, 10);
    if (end == s.c_str() + i) {
      ++i;
      continue;
    }
    out.push_back(static_cast<geist_token>(v));
    i = static_cast<size_t>(end - s.c_str());
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf hf_reference.json REF.f32 [REF.f32 ...]\n", argv[0]);
    return 2;
  }
  const std::vector<geist_token> tokens = read_tokens(argv[2]);
  geist_model* m = nullptr;
  char err[256] = "";
  if (geist_model_load(argv[1], nullptr, &m, err, sizeof(err)) != GEIST_OK) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], err);
    return 1;
  }
  geist_session_params sp;
  geist_session_params_default(&sp);
  sp.n_threads = 2;
  sp.max_seq_len = static_cast<int32_t>(tokens.size());
  geist_session* s = nullptr;
  if (geist_session_create(m, &sp, &s) != GEIST_OK) return 1;
  const size_t nv = static_cast<size_t>(geist_model_n_vocab(m));
  std::vector<float> got(tokens.size() * nv);
  if (geist_session_prefill_all_logits(s, tokens.data(), tokens.size(), got.data(), got.size()) !=
      GEIST_OK) {
    std::fprintf(stderr, "prefill failed: %s\n", geist_session_last_error(s));
    return 1;
  }
  for (int a = 3; a < argc; ++a) {
    std::ifstream f(argv[a], std::ios::binary);
    std::vector<float> ref(got.size());
    f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
    double mx = 0, sum = 0;
    int agree = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* g = got.data() + t * nv;
      const float* r = ref.data() + t * nv;
      for (size_t i = 0; i < nv; ++i) {
        const double d = std::fabs(static_cast<double>(g[i]) - r[i]);
        mx = std::max(mx, d);
        sum += d;
      }
      agree += std::max_element(g, g + nv) - g == std::max_element(r, r + nv) - r;
    }
    std::printf("%s vs %s: max |d| %.3g, mean |d| %.3g, argmax %d/%zu\n", argv[1], argv[a], mx,
                sum / static_cast<double>(got.size()), agree, tokens.size());
  }
  geist_session_destroy(s);
  geist_model_free(m);
  return 0;
}
