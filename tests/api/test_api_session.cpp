// C API sessions on stories260K: greedy continuation against llama.cpp's reference, session
// isolation, capacity and state errors, owed-forward semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "geist/geist.h"
#include "geist/geist_util.h"

namespace geist::test {
namespace {

constexpr int32_t kVocab = 512;
// llama.cpp (F32 KV cache) vs geist on an all-F32 model: both accumulate in float32 with
// different summation orders; 1e-3 absolute on logits of magnitude ~10 covers that.
constexpr float kLogitTol = 1e-3f;
constexpr float kF16LogitTol = 5e-2f;  // f16 KV cache vs the f32-cache reference

class ApiSession : public testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_FIXTURES();
    char err[512] = "";
    ASSERT_EQ(geist_model_load(stories260k_path().c_str(), nullptr, &model_.m, err, sizeof err),
              GEIST_OK)
        << err;
    ref_ = load_prompt1();
    ASSERT_EQ(ref_.prompt_tokens.size(), 32u);
    ASSERT_EQ(ref_.greedy_tokens.size(), 64u);
    ASSERT_EQ(ref_.logits.size(), 95u * kVocab);
  }

  // An f32 KV cache: the llama.cpp reference was computed with one.
  geist_session_params params(float temperature, uint64_t seed, int32_t max_seq_len = 256,
                              int32_t kv_mode = GEIST_KV_F32) {
    geist_session_params p;
    geist_session_params_default(&p);
    p.kv_mode = kv_mode;
    p.max_seq_len = max_seq_len;
    p.n_threads = 2;
    p.sampler.temperature = temperature;
    p.sampler.seed = seed;
    return p;
  }

  void create(SessionHandle* s, const geist_session_params& p) {
    ASSERT_EQ(geist_session_create(model_.m, &p, &s->s), GEIST_OK)
        << geist_model_last_error(model_.m);
  }

  ModelHandle model_;
  Prompt1 ref_;
};

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_F(ApiSession, GreedyContinuationMatchesLlamaCpp) {
  SessionHandle s;
  create(&s, params(0.0f, 0));
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), ref_.prompt_tokens.size()),
            GEIST_OK);
  std::vector<int32_t> got;
  for (size_t i = 0; i < ref_.greedy_tokens.size(); ++i) {
    const float* logits = nullptr;
    int32_t nv = 0;
    ASSERT_EQ(geist_session_logits(s.s, &logits, &nv), GEIST_OK);
    ASSERT_EQ(nv, kVocab);
    // Row 31 is the prompt's last position; row 32 + i - 1 the logits after generated token i-1.
    const float* want = ref_.logits.data() + (31 + i) * kVocab;
    EXPECT_LT(max_abs_diff(logits, want, kVocab), kLogitTol) << "step " << i;
    geist_token t = -1;
    ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK) << geist_session_last_error(s.s);
    got.push_back(t);
  }
  EXPECT_EQ(got, ref_.greedy_tokens);
  EXPECT_EQ(geist_session_position(s.s), 96);
  const geist_token* hist = nullptr;
  size_t n = 0;
  ASSERT_EQ(geist_session_tokens(s.s, &hist, &n), GEIST_OK);
  ASSERT_EQ(n, 96u);
  EXPECT_TRUE(std::equal(ref_.prompt_tokens.begin(), ref_.prompt_tokens.end(), hist));
  EXPECT_TRUE(std::equal(ref_.greedy_tokens.begin(), ref_.greedy_tokens.end(), hist + 32));
}

TEST_F(ApiSession, PrefillTextEqualsReferenceTokensAndAddsBosOnlyAtStart) {
  SessionHandle s;
  create(&s, params(0.0f, 0));
  ASSERT_EQ(geist_session_prefill_text(s.s, ref_.prompt.data(), ref_.prompt.size(), 1), GEIST_OK);
  const geist_token* hist = nullptr;
  size_t n = 0;
  ASSERT_EQ(geist_session_tokens(s.s, &hist, &n), GEIST_OK);
  EXPECT_EQ(std::vector<int32_t>(hist, hist + n), ref_.prompt_tokens);
  // Later text with add_special: no second BOS.
  ASSERT_EQ(geist_session_prefill_text(s.s, " One day", 8, 1), GEIST_OK);
  ASSERT_EQ(geist_session_tokens(s.s, &hist, &n), GEIST_OK);
  ASSERT_GT(n, 32u);
  for (size_t i = 32; i < n; ++i) EXPECT_NE(hist[i], geist_model_token_bos(model_.m));
}

TEST_F(ApiSession, PrefillAllLogitsMatchesLlamaCpp) {
  SessionHandle s;
  create(&s, params(0.0f, 0));
  const size_t n = ref_.prompt_tokens.size();
  std::vector<float> rows(n * kVocab);
  EXPECT_EQ(geist_session_prefill_all_logits(s.s, ref_.prompt_tokens.data(), n, rows.data(),
                                             rows.size() - 1),
            GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_position(s.s), 0);
  ASSERT_EQ(
      geist_session_prefill_all_logits(s.s, ref_.prompt_tokens.data(), n, rows.data(), rows.size()),
      GEIST_OK);
  for (size_t r = 0; r < n; ++r) {
    EXPECT_LT(max_abs_diff(rows.data() + r * kVocab, ref_.logits.data() + r * kVocab, kVocab),
              kLogitTol)
        << "row " << r;
  }
  const float* pending = nullptr;
  ASSERT_EQ(geist_session_logits(s.s, &pending, nullptr), GEIST_OK);
  EXPECT_EQ(0, std::memcmp(pending, rows.data() + (n - 1) * kVocab, kVocab * sizeof(float)));
}

// One step of a recorded run: the token and the logits it was sampled from.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [steps][n_vocab]
};

void step(geist_session* s, Trace* t) {
  const float* l = nullptr;
  ASSERT_EQ(geist_session_logits(s, &l, nullptr), GEIST_OK);
  t->logits.insert(t->logits.end(), l, l + kVocab);
  geist_token tok = -1;
  ASSERT_EQ(geist_session_decode(s, &tok), GEIST_OK) << geist_session_last_error(s);
  t->tokens.push_back(tok);
}

TEST_F(ApiSession, InterleavedSessionsEqualSoloRuns) {
  const std::vector<int32_t> prompt_a = ref_.prompt_tokens;
  const std::vector<int32_t> prompt_b(ref_.prompt_tokens.begin(), ref_.prompt_tokens.begin() + 9);
  struct Config {
    float temperature;
    uint64_t seed;
  };
  for (const Config& cfg : {Config{0.0f, 0}, Config{0.9f, 1234}}) {
    SCOPED_TRACE(cfg.temperature);
    const int kSteps = 40;
    auto solo = [&](const std::vector<int32_t>& prompt, uint64_t seed) {
      SessionHandle s;
      create(&s, params(cfg.temperature, seed));
      Trace t;
      EXPECT_EQ(geist_session_prefill(s.s, prompt.data(), prompt.size()), GEIST_OK);
      for (int i = 0; i < kSteps; ++i) step(s.s, &t);
      return t;
    };
    const Trace solo_a = solo(prompt_a, cfg.seed);
    const Trace solo_b = solo(prompt_b, cfg.seed + 1);

    SessionHandle a, b;
    create(&a, params(cfg.temperature, cfg.seed));
    create(&b, params(cfg.temperature, cfg.seed + 1));
    ASSERT_EQ(geist_session_prefill(a.s, prompt_a.data(), prompt_a.size()), GEIST_OK);
    ASSERT_EQ(geist_session_prefill(b.s, prompt_b.data(), prompt_b.size()), GEIST_OK);
    Trace ta, tb;
    for (int i = 0; i < kSteps; ++i) {
      step(a.s, &ta);
      step(b.s, &tb);
    }
    EXPECT_EQ(ta.tokens, solo_a.tokens);
    EXPECT_EQ(tb.tokens, solo_b.tokens);
    EXPECT_EQ(
        0, std::memcmp(ta.logits.data(), solo_a.logits.data(), ta.logits.size() * sizeof(float)));
    EXPECT_EQ(
        0, std::memcmp(tb.logits.data(), solo_b.logits.data(), tb.logits.size() * sizeof(float)));
    if (cfg.temperature > 0) {
      // Sampling really happened: a sampled run leaves the greedy path somewhere.
      EXPECT_NE(
          std::vector<int32_t>(solo_a.tokens.begin(), solo_a.tokens.end()),
          std::vector<int32_t>(ref_.greedy_tokens.begin(), ref_.greedy_tokens.begin() + kSteps));
    }
  }
}

TEST_F(ApiSession, SameSeedSameTextDifferentSeedsDiffer) {
  auto run = [&](uint64_t seed) {
    SessionHandle s;
    create(&s, params(1.0f, seed));
    Trace t;
    EXPECT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), 1), GEIST_OK);
    for (int i = 0; i < 48; ++i) step(s.s, &t);
    return t.tokens;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST_F(ApiSession, TooManyTokensLeavesSessionUsable) {
  const int32_t cap = 40;
  SessionHandle s, control;
  create(&s, params(0.7f, 77, cap));
  create(&control, params(0.7f, 77, cap));
  EXPECT_EQ(geist_session_max_seq_len(s.s), cap);
  const auto& p = ref_.prompt_tokens;
  ASSERT_EQ(geist_session_prefill(s.s, p.data(), p.size()), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(control.s, p.data(), p.size()), GEIST_OK);
  Trace ts, tc;
  step(s.s, &ts);
  step(control.s, &tc);
  // 33 tokens in, 7 free (one of them owed): 8 more do not fit.
  EXPECT_EQ(geist_session_prefill(s.s, p.data(), 8), GEIST_E_TOO_MANY_TOKENS);
  EXPECT_NE(std::string(geist_session_last_error(s.s)).find("max_seq_len"), std::string::npos);
  EXPECT_EQ(geist_session_position(s.s), 33);
  // An out-of-vocabulary id is refused before anything changes, too.
  const geist_token bad[] = {3, kVocab};
  EXPECT_EQ(geist_session_prefill(s.s, bad, 2), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_position(s.s), 33);
  // Both continue identically up to the capacity, then decode refuses.
  while (geist_session_position(control.s) < cap) {
    step(s.s, &ts);
    step(control.s, &tc);
  }
  EXPECT_EQ(ts.tokens, tc.tokens);
  EXPECT_EQ(0, std::memcmp(ts.logits.data(), tc.logits.data(), ts.logits.size() * sizeof(float)));
  geist_token t = -1;
  EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_E_TOO_MANY_TOKENS);
  EXPECT_EQ(geist_session_position(s.s), cap);
  const float* l = nullptr;
  EXPECT_EQ(geist_session_logits(s.s, &l, nullptr), GEIST_OK);  // the last token's logits
}

TEST_F(ApiSession, StateErrors) {
  SessionHandle s;
  create(&s, params(0.0f, 0));
  geist_token t = -1;
  EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_E_INVALID_STATE);
  EXPECT_NE(std::string(geist_session_last_error(s.s)).find("prefill"), std::string::npos);
  const float* l = nullptr;
  EXPECT_EQ(geist_session_logits(s.s, &l, nullptr), GEIST_E_INVALID_STATE);
  EXPECT_EQ(geist_session_prefill(s.s, nullptr, 0), GEIST_OK);  // n == 0 is a no-op
  EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_E_INVALID_STATE);
}

TEST_F(ApiSession, NullArgumentsAreInvalidWithMessages) {
  SessionHandle s;
  create(&s, params(0.0f, 0));
  EXPECT_EQ(geist_session_decode(s.s, nullptr), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_session_last_error(s.s)).find("out_token"), std::string::npos);
  EXPECT_EQ(geist_session_prefill(s.s, nullptr, 3), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_session_last_error(s.s)).find("tokens"), std::string::npos);
  EXPECT_EQ(geist_session_logits(s.s, nullptr, nullptr), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_session_last_error(s.s)).find("out_logits"), std::string::npos);
  EXPECT_EQ(geist_session_set_sampler(s.s, nullptr), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_prefill_text(s.s, nullptr, 4, 1), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_tokens(s.s, nullptr, nullptr), GEIST_E_INVALID_ARG);
  EXPECT_EQ(geist_session_create(model_.m, nullptr, nullptr), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("out_session"), std::string::npos);
  geist_session_params p = params(0.0f, 0);
  p.struct_size = 1;
  geist_session* bad = nullptr;
  EXPECT_EQ(geist_session_create(model_.m, &p, &bad), GEIST_E_INVALID_ARG);
  EXPECT_EQ(bad, nullptr);
  p = params(0.0f, 0);
  p.max_seq_len = -5;
  EXPECT_EQ(geist_session_create(model_.m, &p, &bad), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_model_last_error(model_.m)).find("max_seq_len"), std::string::npos);
}

TEST_F(ApiSession, KvModeDefaultsToF16AndIsValidated) {
  geist_session_params d;
  geist_session_params_default(&d);
  EXPECT_EQ(d.kv_mode, GEIST_KV_F16);  // the default
  for (int32_t bad : {-1, 6, 1000}) {
    geist_session_params p = params(0.0f, 0, 64, bad);
    geist_session* s = nullptr;
    EXPECT_EQ(geist_session_create(model_.m, &p, &s), GEIST_E_INVALID_ARG) << bad;
    EXPECT_EQ(s, nullptr);
    const std::string want = "kv_mode " + std::to_string(bad);
    EXPECT_NE(std::string(geist_model_last_error(model_.m)).find(want), std::string::npos)
        << geist_model_last_error(model_.m);
  }
  // The default f16 cache stays close to llama.cpp's f32-cache reference: f16 keeps 11
  // significant bits of each K/V value (relative error <= 2^-11), which moves this model's
  // logits by a few hundredths at most; the greedy tokens agree.
  SessionHandle s;
  create(&s, params(0.0f, 0, 256, GEIST_KV_F16));
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), ref_.prompt_tokens.size()),
            GEIST_OK);
  std::vector<int32_t> got;
  for (size_t i = 0; i < ref_.greedy_tokens.size(); ++i) {
    const float* logits = nullptr;
    ASSERT_EQ(geist_session_logits(s.s, &logits, nullptr), GEIST_OK);
    EXPECT_LT(max_abs_diff(logits, ref_.logits.data() + (31 + i) * kVocab, kVocab), kF16LogitTol)
        << "step " << i;
    geist_token t = -1;
    ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK);
    got.push_back(t);
  }
  EXPECT_EQ(got, ref_.greedy_tokens);
}

TEST_F(ApiSession, DefaultsAndOwedForward) {
  SessionHandle s;
  ASSERT_EQ(geist_session_create(model_.m, nullptr, &s.s), GEIST_OK);
  const int32_t n_ctx = geist_model_n_ctx_train(model_.m);
  EXPECT_EQ(geist_session_max_seq_len(s.s), n_ctx > 0 && n_ctx < 4096 ? n_ctx : 4096);
  // Decode appends at once; the owed forward is paid by the next logits call.
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), 5), GEIST_OK);
  geist_token t = -1;
  ASSERT_EQ(geist_session_decode(s.s, &t), GEIST_OK);
  EXPECT_EQ(geist_session_position(s.s), 6);
  // A prefill after a decode first runs the decoded token: prefill (after decode) equals a
  // plain prefill of the same history, bit for bit.
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data() + 5, 3), GEIST_OK);
  const geist_token* hist = nullptr;
  size_t n = 0;
  ASSERT_EQ(geist_session_tokens(s.s, &hist, &n), GEIST_OK);
  const std::vector<int32_t> history(hist, hist + n);
  SessionHandle fresh;
  ASSERT_EQ(geist_session_create(model_.m, nullptr, &fresh.s), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(fresh.s, history.data(), history.size()), GEIST_OK);
  const float *la = nullptr, *lb = nullptr;
  ASSERT_EQ(geist_session_logits(s.s, &la, nullptr), GEIST_OK);
  std::vector<float> a(la, la + kVocab);
  ASSERT_EQ(geist_session_logits(fresh.s, &lb, nullptr), GEIST_OK);
  EXPECT_EQ(0, std::memcmp(a.data(), lb, kVocab * sizeof(float)));
}

TEST_F(ApiSession, ResetAndSetSamplerReseed) {
  SessionHandle s, fresh;
  create(&s, params(0.9f, 31));
  create(&fresh, params(0.9f, 31));
  Trace first, again, other;
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), 4), GEIST_OK);
  for (int i = 0; i < 20; ++i) step(s.s, &first);
  ASSERT_EQ(geist_session_reset(s.s), GEIST_OK);
  EXPECT_EQ(geist_session_position(s.s), 0);
  geist_token t;
  EXPECT_EQ(geist_session_decode(s.s, &t), GEIST_E_INVALID_STATE);
  ASSERT_EQ(geist_session_prefill(s.s, ref_.prompt_tokens.data(), 4), GEIST_OK);
  for (int i = 0; i < 20; ++i) step(s.s, &again);
  EXPECT_EQ(first.tokens, again.tokens);
  EXPECT_EQ(0, std::memcmp(first.logits.data(), again.logits.data(),
                           first.logits.size() * sizeof(float)));

  // set_sampler re-seeds: switching to greedy and back to the same seed replays the stream.
  ASSERT_EQ(geist_session_prefill(fresh.s, ref_.prompt_tokens.data(), 4), GEIST_OK);
  geist_sampler_params sp;
  geist_sampler_params_default(&sp);
  sp.temperature = 0.9f;
  sp.seed = 31;
  for (int i = 0; i < 5; ++i) step(fresh.s, &other);
  ASSERT_EQ(geist_session_reset(fresh.s), GEIST_OK);
  ASSERT_EQ(geist_session_prefill(fresh.s, ref_.prompt_tokens.data(), 4), GEIST_OK);
  sp.seed = 31;
  ASSERT_EQ(geist_session_set_sampler(fresh.s, &sp), GEIST_OK);
  Trace replay;
  for (int i = 0; i < 20; ++i) step(fresh.s, &replay);
  EXPECT_EQ(replay.tokens, first.tokens);
  sp.repeat_penalty = -1.0f;
  EXPECT_EQ(geist_session_set_sampler(fresh.s, &sp), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_session_last_error(fresh.s)).find("repeat_penalty"),
            std::string::npos);
}

// geist_session_peek: the token decode would draw, the session unchanged (its snapshot image
// memcmp-equal before and after), and the next decode draws it. Greedy against llama.cpp's
// continuation; sampled (with penalties) against a session that only decodes; and the states
// peek refuses.
TEST_F(ApiSession, PeekDrawsTheNextDecodesTokenAndChangesNothing) {
  SessionHandle g;
  create(&g, params(0.0f, 0));
  geist_token t = -1;
  EXPECT_EQ(geist_session_peek(g.s, &t), GEIST_E_INVALID_STATE);  // nothing prefilled
  ASSERT_EQ(geist_session_prefill(g.s, ref_.prompt_tokens.data(), ref_.prompt_tokens.size()),
            GEIST_OK);
  EXPECT_EQ(geist_session_peek(g.s, nullptr), GEIST_E_INVALID_ARG);
  for (size_t i = 0; i < 16; ++i) {
    const float* lg = nullptr;
    ASSERT_EQ(geist_session_logits(g.s, &lg, nullptr), GEIST_OK);  // pays the owed forward
    const std::vector<uint8_t> before = snapshot_of(g.s);
    geist_token peeked = -1, decoded = -2;
    ASSERT_EQ(geist_session_peek(g.s, &peeked), GEIST_OK) << geist_session_last_error(g.s);
    EXPECT_EQ(snapshot_of(g.s), before) << "step " << i;
    EXPECT_EQ(peeked, ref_.greedy_tokens[i]) << "step " << i;
    ASSERT_EQ(geist_session_decode(g.s, &decoded), GEIST_OK);
    EXPECT_EQ(decoded, peeked) << "step " << i;
    // The decoded token's forward is owed now: peek runs no forward, so it refuses.
    EXPECT_EQ(geist_session_peek(g.s, &t), GEIST_E_INVALID_STATE);
    EXPECT_NE(std::string(geist_session_last_error(g.s)).find("owed"), std::string::npos);
  }

  geist_session_params p = params(0.8f, 77);
  p.sampler.top_k = 40;
  p.sampler.top_p = 0.9f;
  p.sampler.repeat_penalty = 1.3f;
  p.sampler.presence_penalty = 0.4f;
  SessionHandle peeking, plain;
  create(&peeking, p);
  create(&plain, p);
  for (geist_session* s : {peeking.s, plain.s}) {
    ASSERT_EQ(geist_session_prefill(s, ref_.prompt_tokens.data(), 8), GEIST_OK);
  }
  for (int i = 0; i < 40; ++i) {
    const float* lg = nullptr;
    ASSERT_EQ(geist_session_logits(peeking.s, &lg, nullptr), GEIST_OK);
    geist_token peeked = -1, again = -1, decoded = -2, want = -3;
    ASSERT_EQ(geist_session_peek(peeking.s, &peeked), GEIST_OK);
    ASSERT_EQ(geist_session_peek(peeking.s, &again), GEIST_OK);  // draws from a copy each time
    EXPECT_EQ(again, peeked);
    ASSERT_EQ(geist_session_decode(peeking.s, &decoded), GEIST_OK);
    ASSERT_EQ(geist_session_decode(plain.s, &want), GEIST_OK);
    EXPECT_EQ(peeked, decoded) << "step " << i;
    EXPECT_EQ(decoded, want) << "step " << i;
  }
  EXPECT_EQ(snapshot_of(peeking.s), snapshot_of(plain.s));

  SessionHandle full;
  create(&full, params(0.0f, 0, 8));
  ASSERT_EQ(geist_session_prefill(full.s, ref_.prompt_tokens.data(), 8), GEIST_OK);
  EXPECT_EQ(geist_session_peek(full.s, &t), GEIST_E_TOO_MANY_TOKENS);
}

}  // namespace
}  // namespace geist::test
