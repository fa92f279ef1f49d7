// A decode step's rope of q and k, the plain KV rows and the attention as one launch
// (cuda::kv_attention_rope; Stream::rope_attend on CUDA) against the launches it replaces:
// rope_kv (itself held to rope() + kv_encode_rows() by CudaDecodeFusion.*) and kv_attention,
// bitwise: the turned q and k, every byte of the caches and the attention rows. Then the same
// through a stream's decode steps (captured and replayed graphs, positions read on the device)
// against a stream with the fusions off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "cuda/cuda_test_util.h"
#include "kv/kv_cache.h"

namespace geist {
namespace {

using test::DeviceVec;
using test::expect_bits_equal;
using test::randn;

struct Case {
  int32_t n_head, n_head_kv, hd, n_rot, pos;
  RopeStyle style;
  bool f16, shift, factors;
};

// The caches hold random earlier rows (values of the head's scale, so the scores are not
// dominated by garbage), and the step's row lands at row_off (+ *row_dev) = its position.
void check_step(const Case& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.hd
                                    << " n_rot " << c.n_rot << " pos " << c.pos << " f16 " << c.f16
                                    << " shift " << c.shift << " factors " << c.factors);
  // The kernels' shared-memory limits (a backend raises them when it makes a KV store; this
  // test calls the kernels directly, so it must not depend on a test that ran before it).
  ASSERT_EQ(cuda::kv_attention_setup(), cudaSuccess);
  const int64_t qd = int64_t{c.n_head} * c.hd, kd = int64_t{c.n_head_kv} * c.hd;
  const int32_t rows = c.pos + 9;
  const std::vector<float> q = randn(static_cast<size_t>(qd), seed, 1.0f);
  const std::vector<float> k = randn(static_cast<size_t>(kd), seed + 1, 1.0f);
  const std::vector<float> v = randn(static_cast<size_t>(kd + 5), seed + 2, 1.0f);
  const std::vector<float> old_k = randn(static_cast<size_t>(kd) * rows, seed + 3, 1.0f);
  const std::vector<float> old_v = randn(static_cast<size_t>(kd) * rows, seed + 4, 1.0f);
  std::vector<float> ff(static_cast<size_t>(c.n_rot / 2));
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.37f * static_cast<float>(i % 5);
  const KvEnc enc = c.f16 ? KvEnc::F16 : KvEnc::F32;
  const int64_t row = kd * (c.f16 ? 2 : 4);
  DeviceVec<float> dok(old_k), dov(old_v), dff(ff), dv(v);
  DeviceVec<uint8_t> kc[2] = {DeviceVec<uint8_t>(static_cast<size_t>(row * rows)),
                              DeviceVec<uint8_t>(static_cast<size_t>(row * rows))};
  DeviceVec<uint8_t> vc[2] = {DeviceVec<uint8_t>(static_cast<size_t>(row * rows)),
                              DeviceVec<uint8_t>(static_cast<size_t>(row * rows))};
  for (int i = 0; i < 2; ++i) {
    GEIST_CUDA_OK(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dok.ptr(), kd, rows,
                                       static_cast<int32_t>(kd), nullptr, kc[i].ptr(), row));
    GEIST_CUDA_OK(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dov.ptr(), kd, rows,
                                       static_cast<int32_t>(kd), nullptr, vc[i].ptr(), row));
  }
  RopeParams p;
  p.style = c.style;
  p.n_rot = c.n_rot;
  p.freq_base = 500000.0f;
  p.freq_scale = 1.0f;
  p.freq_factors = c.factors ? dff.ptr() : nullptr;
  const int32_t shift = c.shift ? 7 : 0;  // a replayed graph's position on the device
  DeviceVec<int32_t> dshift(std::vector<int32_t>{shift});
  const int32_t* pd = c.shift ? dshift.ptr() : nullptr;
  const int32_t off = c.pos - shift;
  const AttentionShape sh{c.n_head, c.n_head_kv, c.hd, c.hd,
                          1.0f / std::sqrt(static_cast<float>(c.hd))};
  DeviceVec<float> dq[2] = {DeviceVec<float>(q), DeviceVec<float>(q)};
  DeviceVec<float> dk[2] = {DeviceVec<float>(k), DeviceVec<float>(k)};
  DeviceVec<float> dout[2] = {DeviceVec<float>(static_cast<size_t>(qd)),
                              DeviceVec<float>(static_cast<size_t>(qd))};
  cuda::KvRowsOut o[2];
  cuda::KvDevSrc ks[2], vs[2];
  for (int i = 0; i < 2; ++i) {
    o[i].f16 = c.f16;
    o[i].v = dv.ptr();
    o[i].v_stride = kd + 5;
    o[i].nv = static_cast<int32_t>(kd);
    o[i].k_dst = kc[i].ptr() + off * row;
    o[i].k_row_bytes = row;
    o[i].v_dst = vc[i].ptr() + off * row;
    o[i].v_row_bytes = row;
    o[i].row_dev = pd;
    ks[i].lo = cuda::KvDevSeg{enc, kc[i].ptr(), row, kKvBlock, 0};
    vs[i].lo = cuda::KvDevSeg{enc, vc[i].ptr(), row, kKvBlock, 0};
  }
  const cuda::RopeTensor tq[2] = {{dq[0].ptr(), qd, c.n_head}, {dq[1].ptr(), qd, c.n_head}};
  const cuda::RopeTensor tk[2] = {{dk[0].ptr(), kd, c.n_head_kv}, {dk[1].ptr(), kd, c.n_head_kv}};
  // [0]: rope_kv, then kv_attention; [1]: one kv_attention_rope.
  GEIST_CUDA_OK(cuda::rope_kv(nullptr, tq[0], tk[0], 1, c.hd, off, pd, p, o[0]));
  GEIST_CUDA_OK(cuda::kv_attention(nullptr, sh, dq[0].ptr(), qd, 1, off, ks[0], vs[0],
                                   dout[0].ptr(), qd, pd));
  cuda::RopeStep st;
  st.q = tq[1];
  st.k = tk[1];
  st.head_dim = c.hd;
  st.pos0 = off;
  st.pos_dev = pd;
  st.p = p;
  st.kv = o[1];
  cudaError_t err = cudaErrorUnknown;
  ASSERT_TRUE(
      cuda::kv_attention_rope(nullptr, sh, st, off, ks[1], vs[1], dout[1].ptr(), qd, pd, &err));
  GEIST_CUDA_OK(err);
  GEIST_CUDA_OK(cudaDeviceSynchronize());
  expect_bits_equal(dq[0].download(), dq[1].download(), "q");
  expect_bits_equal(dk[0].download(), dk[1].download(), "k");
  EXPECT_TRUE(kc[0].download() == kc[1].download()) << "K rows differ";
  EXPECT_TRUE(vc[0].download() == vc[1].download()) << "V rows differ";
  const std::vector<float> out = dout[1].download();
  expect_bits_equal(dout[0].download(), out, "attention");
  // Not a comparison of two no-ops: the query turned (position 0 turns by 0), and the rows are
  // finite.
  const std::vector<float> q1 = dq[1].download();
  if (c.pos > 0) {
    EXPECT_NE(std::memcmp(q1.data(), q.data(), sizeof(float) * static_cast<size_t>(c.hd)), 0);
  }
  for (const float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST(CudaRopeAttend, OneLaunchBitwiseEqualsRopeKvThenAttention) {
  GEIST_REQUIRE_CUDA();
  // heads, kv heads, hd, n_rot, pos, style, f16, shift, freq factors
  check_step({32, 8, 64, 64, 37, RopeStyle::NORMAL, true, true, true}, 1);  // llama-1b
  check_step({32, 8, 64, 64, 200, RopeStyle::NORMAL, false, false, false}, 2);
  check_step({4, 4, 128, 32, 64, RopeStyle::NEOX, true, true, false}, 3);   // partial, group 1
  check_step({8, 2, 256, 64, 130, RopeStyle::NEOX, false, true, true}, 4);  // qwen35-0.8b sizes
  check_step({16, 1, 64, 64, 0, RopeStyle::NEOX, true, false, false}, 5);   // group 16, first
}

// What the one launch does not take is left to the separate launches: nothing is enqueued.
TEST(CudaRopeAttend, OtherStepsAreDeclined) {
  GEIST_REQUIRE_CUDA();
  const int32_t hd = 64, rows = 4;
  DeviceVec<float> dq(static_cast<size_t>(32 * hd)), dk(static_cast<size_t>(8 * hd)),
      dv(static_cast<size_t>(8 * hd)), dout(static_cast<size_t>(32 * hd));
  DeviceVec<uint8_t> kc(static_cast<size_t>(rows * 8 * hd * 2)),
      vc(static_cast<size_t>(rows * 8 * hd * 2));
  cuda::RopeStep base;
  base.q = {dq.ptr(), 32 * hd, 32};
  base.k = {dk.ptr(), 8 * hd, 8};
  base.head_dim = hd;
  base.p.n_rot = hd;
  base.kv.f16 = true;
  base.kv.v = dv.ptr();
  base.kv.v_stride = 8 * hd;
  base.kv.nv = 8 * hd;
  base.kv.k_dst = kc.ptr();
  base.kv.k_row_bytes = 8 * hd * 2;
  base.kv.v_dst = vc.ptr();
  base.kv.v_row_bytes = 8 * hd * 2;
  cuda::KvDevSrc ks, vs;
  ks.lo = cuda::KvDevSeg{KvEnc::F16, kc.ptr(), 8 * hd * 2, kKvBlock, 0};
  vs.lo = cuda::KvDevSeg{KvEnc::F16, vc.ptr(), 8 * hd * 2, kKvBlock, 0};
  const AttentionShape sh{32, 8, hd, hd, 0.125f};
  cudaError_t err = cudaSuccess;
  ASSERT_TRUE(cuda::kv_attention_rope(nullptr, sh, base, 0, ks, vs, dout.ptr(), 32 * hd, nullptr,
                                      &err));  // the base case is taken
  GEIST_CUDA_OK(err);
  GEIST_CUDA_OK(cudaDeviceSynchronize());
  cuda::RopeStep normed = base;
  normed.k.src = dk.ptr();  // head norms in front: rope_kv's norm kernel
  cuda::RopeStep f32_rows = base;
  f32_rows.kv.f16 = false;  // rows of another encoding than the cache's
  cuda::RopeStep odd_rot = base;
  odd_rot.p.n_rot = 63;
  const AttentionShape wide{64, 2, hd, hd, 0.125f};  // 32 query heads per kv head
  const AttentionShape hd48{32, 8, 48, 48, 0.125f};  // not a tensor-core head size
  for (const cuda::RopeStep* st : {&normed, &f32_rows, &odd_rot}) {
    EXPECT_FALSE(
        cuda::kv_attention_rope(nullptr, sh, *st, 0, ks, vs, dout.ptr(), 32 * hd, nullptr, &err));
  }
  EXPECT_FALSE(
      cuda::kv_attention_rope(nullptr, wide, base, 0, ks, vs, dout.ptr(), 64 * hd, nullptr, &err));
  EXPECT_FALSE(
      cuda::kv_attention_rope(nullptr, hd48, base, 0, ks, vs, dout.ptr(), 32 * hd, nullptr, &err));
  cuda::KvDevSrc q8k = ks;
  q8k.lo.enc = KvEnc::Q8;
  EXPECT_FALSE(
      cuda::kv_attention_rope(nullptr, sh, base, 0, q8k, vs, dout.ptr(), 32 * hd, nullptr, &err));
}

// Streams with the fusions on and off (GEIST_CUDA_FUSE, read at creation): decode steps of
// rope_attend (rope of q and k, then the attention), after a prefill, captured once and then
// replayed at later positions; their rows, turned q / k and KV images must match bitwise, and the
// fused stream must have replayed graphs (so positions came from the device).
struct StreamRun {
  std::vector<float> out, qk;
  std::vector<uint8_t> image;
  cuda::CudaStepStats stats;
};

void run_steps(bool fuse, KvMode mode, StreamRun* r) {
  if (fuse) {
    unsetenv("GEIST_CUDA_FUSE");
  } else {
    setenv("GEIST_CUDA_FUSE", "0", 1);
  }
  std::unique_ptr<Stream> s;
  const Status made = cuda::create_cuda_stream(&s);
  unsetenv("GEIST_CUDA_FUSE");
  ASSERT_TRUE(made.is_ok()) << made.message();
  const int32_t n_head = 32, n_head_kv = 8, hd = 64, prefill = 70, steps = 12;
  const int32_t total = prefill + steps;
  const int64_t qd = n_head * hd, kd = n_head_kv * hd;
  KvLayerSpec spec{static_cast<int32_t>(kd), static_cast<int32_t>(kd), hd, hd};
  spec.rope.n_rot = hd;
  spec.rope.freq_base = 500000.0f;
  std::unique_ptr<KvStore> kv;
  ASSERT_TRUE(s->create_kv(mode, {spec}, total, &kv).is_ok());
  const AttentionShape sh{n_head, n_head_kv, hd, hd, 0.125f};
  const std::vector<float> q = randn(static_cast<size_t>(qd * total), 11, 1.0f);
  const std::vector<float> k = randn(static_cast<size_t>(kd * total), 12, 1.0f);
  const std::vector<float> v = randn(static_cast<size_t>(kd * total), 13, 1.0f);
  DeviceVec<float> dq(static_cast<size_t>(qd * prefill)), dk(static_cast<size_t>(kd * prefill)),
      dv(static_cast<size_t>(kd * prefill)), dout(static_cast<size_t>(qd * prefill));
  const auto upload = [&](int32_t pos, int32_t n) {
    s->upload(dq.ptr(), q.data() + pos * qd, sizeof(float) * static_cast<size_t>(qd * n));
    s->upload(dk.ptr(), k.data() + pos * kd, sizeof(float) * static_cast<size_t>(kd * n));
    s->upload(dv.ptr(), v.data() + pos * kd, sizeof(float) * static_cast<size_t>(kd * n));
  };
  const auto step = [&](int32_t pos, int32_t n) {
    upload(pos, n);
    do {
      s->begin_forward(nullptr, n, pos);
      s->rope_attend(*kv, 0, sh, spec.rope, nullptr, dq.ptr(), qd, dk.ptr(), kd, dv.ptr(), kd, n,
                     pos, dout.ptr(), qd);
    } while (!s->end_forward());
    std::vector<float> o(static_cast<size_t>(qd * n)), qq(static_cast<size_t>(qd)),
        kk(static_cast<size_t>(kd));
    s->download(o.data(), dout.ptr(), sizeof(float) * o.size());
    s->download(qq.data(), dq.ptr(), sizeof(float) * qq.size());
    s->download(kk.data(), dk.ptr(), sizeof(float) * kk.size());
    r->out.insert(r->out.end(), o.begin(), o.end());
    r->qk.insert(r->qk.end(), qq.begin(), qq.end());
    r->qk.insert(r->qk.end(), kk.begin(), kk.end());
  };
  step(0, prefill);
  for (int32_t i = 0; i < steps; ++i) step(prefill + i, 1);
  ASSERT_TRUE(cuda::cuda_stream_status(*s).is_ok());
  std::vector<KvRegion> regs;
  kv->regions(total, &regs);
  for (const KvRegion& g : regs) {
    std::vector<uint8_t> b(g.nbytes);
    kv->download_region(g, total, b.data());
    r->image.insert(r->image.end(), b.begin(), b.end());
  }
  ASSERT_TRUE(cuda::cuda_stream_stats(*s, &r->stats).is_ok());
}

TEST(CudaRopeAttend, StreamDecodeStepsBitwiseEqualUnfusedStream) {
  GEIST_REQUIRE_CUDA();
  for (const KvMode mode : {KvMode::F16, KvMode::F32}) {
    SCOPED_TRACE(kv_mode_name(mode));
    StreamRun fused, plain;
    run_steps(true, mode, &fused);
    run_steps(false, mode, &plain);
    if (HasFatalFailure()) return;
    expect_bits_equal(plain.out, fused.out, "attention rows");
    expect_bits_equal(plain.qk, fused.qk, "turned q / k");
    EXPECT_TRUE(plain.image == fused.image) << "KV images differ";
    EXPECT_GT(fused.stats.replays, 0) << "no replayed graph step: positions never came from "
                                         "the device";
  }
}

}  // namespace
}  // namespace geist
