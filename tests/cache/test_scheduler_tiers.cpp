// The scheduler over a tier (stories260K): a tier's object that passes the codec but that the
// engine's snapshot reader refuses is a miss: the request is answered by a full prefill with
// the tokens of an uncached run, the entry is dropped; a good object from the tier (another
// process's cache) is restored and answers the same tokens.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "cache/cache_test_util.h"
#include "cache/entry_codec.h"
#include "cache/mem_tier.h"
#include "serving/scheduler.h"
#include "support/fixtures.h"

namespace {

using geist_serving::Scheduler;
using geist_test::MemTier;

struct Outcome {
  std::vector<geist_token> tokens;
  geist_serving::Result res;
};

Outcome generate(Scheduler& s, const std::vector<geist_token>& prompt) {
  auto req = std::make_shared<geist_serving::Request>();
  req->prompt = prompt;
  geist_sampler_params_default(&req->sampler);
  req->sampler.temperature = 0;
  req->max_tokens = 8;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Outcome out;
  req->on_token = [&](const geist_serving::TokenEvent& e) {
    out.tokens.push_back(e.token);
    return true;
  };
  req->on_done = [&](const geist_serving::Result& r) {
    std::lock_guard<std::mutex> l(mu);
    out.res = r;
    done = true;
    cv.notify_all();
  };
  EXPECT_TRUE(s.submit(req));
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  return out;
}

using geist_test::one;

TEST(SchedulerTiers, RefusedImageIsAMissAndAGoodOneAHit) {
  GEIST_REQUIRE_FIXTURES();
  geist_model* model = nullptr;
  char err[512] = {};
  ASSERT_EQ(geist_model_load(geist::test::fixture_path("models/stories260K.gguf").c_str(), nullptr,
                             &model, err, sizeof err),
            GEIST_OK)
      << err;
  std::vector<geist_token> prompt(100);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<geist_token>(1 + i * 7 % 400);
  geist_serving::SchedulerConfig cfg;
  cfg.n_ctx = 256;
  cfg.n_threads = 1;
  Outcome ref;
  {
    Scheduler plain(model, cfg);  // no cache at all: the reference
    std::string why;
    ASSERT_TRUE(plain.start(&why)) << why;
    ref = generate(plain, prompt);
    ASSERT_EQ(ref.res.finish_reason, "length");
  }
  cfg.cache_bytes = 64 << 20;
  std::map<std::string, geist_cache::Image> written;
  {
    auto mem = std::make_unique<MemTier>();
    MemTier* m = mem.get();
    Scheduler s(model, cfg, one(std::move(mem)));
    std::string why;
    ASSERT_TRUE(s.start(&why)) << why;
    // A well-formed object whose image is not a snapshot, at the prompt's last grid point,
    // where the scheduler also checkpoints it (stories260K's grid is 1: the prompt end).
    ASSERT_EQ(s.grid(), 1);
    const size_t at = prompt.size() / static_cast<size_t>(s.grid()) * s.grid();
    const std::string ns = s.cache_namespace("");
    const std::string key = geist_cache::entry_key(ns, prompt.data(), at);
    const std::vector<uint8_t> junk(4096, 0x42);
    m->objects[key] = std::make_shared<const std::vector<uint8_t>>(
        geist_cache::encode_entry(ns, prompt.data(), at, junk.data(), junk.size()));
    const Outcome r = generate(s, prompt);
    EXPECT_EQ(r.res.finish_reason, "length");
    EXPECT_EQ(r.res.cached_tokens, 0);
    EXPECT_EQ(r.tokens, ref.tokens);
    const geist_serving::SchedulerStats st = s.stats();
    EXPECT_EQ(st.cache.tier_hits, 1);
    EXPECT_EQ(st.cache.restore_rejected, 1);
    s.cache()->flush_to_tiers();
    std::lock_guard<std::mutex> l(m->mu);
    // The junk is gone; what the fresh prefill stored there instead is a real state.
    ASSERT_EQ(m->objects.count(key), 1u);
    geist_cache::EntryView v;
    std::string e;
    ASSERT_TRUE(
        geist_cache::decode_entry(m->objects[key]->data(), m->objects[key]->size(), &v, &e));
    EXPECT_NE(v.image_size, junk.size());
    written = m->objects;
  }
  {
    // Another process (fresh RAM) over the tier the first one filled.
    auto mem = std::make_unique<MemTier>();
    mem->objects = written;
    Scheduler s(model, cfg, one(std::move(mem)));
    std::string why;
    ASSERT_TRUE(s.start(&why)) << why;
    const Outcome r = generate(s, prompt);
    EXPECT_EQ(r.res.cached_tokens, 100);
    EXPECT_EQ(r.tokens, ref.tokens);
    EXPECT_EQ(s.stats().cache.restore_rejected, 0);
  }
  geist_model_free(model);
}

}  // namespace
