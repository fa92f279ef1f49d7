// The CPU stream's ops over a batched micro-batch's many segments and rows: the delta rules of
// several sessions in one parallel region (Stream::gated_delta_rule_many), and the row ops it
// splits over the pool once there are many rows, each give bitwise what the kernels give for
// each set or row alone (the kernels' scalar references where they are bitwise ones).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backends/cpu_backend.h"
#include "base/thread_pool.h"
#include "kernels/deltanet.h"

namespace geist {
namespace {

// A CPU backend and one stream of it on `pool`.
struct Cpu {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  explicit Cpu(ThreadPool* pool) {
    EXPECT_TRUE(create_cpu_backend(false, &backend).is_ok());
    EXPECT_TRUE(backend->new_stream(&stream).is_ok());
    stream->set_pool(pool);
  }
};

// One session's delta-rule inputs for n tokens, its state, its outputs.
struct Set {
  int64_t n;
  std::vector<float> q, k, v, g, beta, state, out;
};

constexpr int32_t kNk = 2, kNv = 4, kDk = 16, kDv = 32, kChunk = 64;

Set make_set(int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  Set s{n, {}, {}, {}, {}, {}, {}, {}};
  s.q.resize(static_cast<size_t>(n * kNk * kDk));
  s.k.resize(s.q.size());
  s.v.resize(static_cast<size_t>(n * kNv * kDv));
  s.g.resize(static_cast<size_t>(n * kNv));
  s.beta.resize(s.g.size());
  s.state.resize(static_cast<size_t>(kNv) * kDk * kDv);
  s.out.assign(s.v.size(), -5.0f);
  for (auto& x : s.q) x = 0.2f * nd(*rng);
  for (auto& x : s.k) x = 0.2f * nd(*rng);
  for (auto& x : s.v) x = nd(*rng);
  for (auto& x : s.g) x = -2.0f * ud(*rng);
  for (auto& x : s.beta) x = ud(*rng);
  for (auto& x : s.state) x = 0.3f * nd(*rng);
  return s;
}

GatedDeltaArgs args_of(Set& s) {
  GatedDeltaArgs a;
  a.n_tokens = s.n;
  a.n_k_heads = kNk;
  a.n_v_heads = kNv;
  a.d_k = kDk;
  a.d_v = kDv;
  a.q = s.q.data();
  a.k = s.k.data();
  a.v = s.v.data();
  a.q_stride = a.k_stride = int64_t{kNk} * kDk;
  a.v_stride = a.out_stride = int64_t{kNv} * kDv;
  a.g = s.g.data();
  a.beta = s.beta.data();
  a.state = s.state.data();
  a.out = s.out.data();
  return a;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Sets of 1 (decode), 7 and 64 tokens mixed, on 1, 2 and 3 threads: every set's outputs and
// state equal those of the kernel run on it alone (decode: the scalar recurrent reference;
// prefill: the chunked kernel over all heads at once).
TEST(CpuStreamBatch, DeltaRuleManyEqualsEachSetAlone) {
  const int64_t lengths[] = {1, 1, 7, 1, 64, 1, 1};
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    std::mt19937 rng(5);
    std::vector<Set> batched, alone;
    for (int64_t n : lengths) batched.push_back(make_set(n, &rng));
    alone = batched;
    std::vector<GatedDeltaArgs> a;
    for (Set& s : batched) a.push_back(args_of(s));
    ThreadPool pool(threads);
    Cpu cpu(&pool);
    cpu.stream->gated_delta_rule_many(a.data(), static_cast<int32_t>(a.size()), kChunk);
    std::vector<double> scratch(gated_delta_rule_scratch_doubles(kChunk, kDk, kDv));
    for (size_t i = 0; i < alone.size(); ++i) {
      const GatedDeltaArgs one = args_of(alone[i]);
      if (one.n_tokens == 1) {
        gated_delta_rule_recurrent_reference(one, 0, kNv, scratch.data());
      } else {
        gated_delta_rule_chunked(one, kChunk, 0, kNv, scratch.data());
      }
      EXPECT_TRUE(same_bits(batched[i].out, alone[i].out)) << "set " << i;
      EXPECT_TRUE(same_bits(batched[i].state, alone[i].state)) << "set " << i;
    }
  }
}

// 48 rows of 512 (above the size the stream splits over its threads) against the row kernel /
// the definition, row by row.
TEST(CpuStreamBatch, ManyRowOpsEqualTheRowKernels) {
  const int32_t rows = 48, d = 512;
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * d)), z(x.size()), w(static_cast<size_t>(d));
  for (auto& e : x) e = nd(rng);
  for (auto& e : z) e = nd(rng);
  for (auto& e : w) e = 1.0f + 0.1f * nd(rng);
  std::vector<float> want_norm(x.size()), want_gate = x;
  for (int32_t r = 0; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * d;
    rms_norm_gated(x.data() + o, z.data() + o, w.data(), d, 1e-6f, want_norm.data() + o);
    for (int32_t i = 0; i < d; ++i) want_gate[o + i] *= sigmoid_f32(z[o + i]);
  }
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    Cpu cpu(&pool);
    std::vector<float> norm(x.size(), -1.0f), gate = x;
    cpu.stream->rms_norm_gated(x.data(), z.data(), w.data(), rows, d, 1e-6f, norm.data());
    cpu.stream->sigmoid_mul(gate.data(), d, z.data(), d, rows, d);
    EXPECT_TRUE(same_bits(norm, want_norm));
    EXPECT_TRUE(same_bits(gate, want_gate));
  }
}

}  // namespace
}  // namespace geist
