// A batched decode step's rope + KV rows + attention of many sessions as one launch per 64 rows
// (cuda::kv_attention_rope_rows; Stream::rope_attend_rows) against each session's own
// launch (cuda::kv_attention_rope, itself held to rope_kv + kv_attention bitwise by
// CudaRopeAttend.*), bitwise: the turned q and k, every byte of every cache and the attention
// rows, with the sessions at different positions (offsets below 0 from a recorded step's
// position on the device included). What the launch does not take is declined with nothing
// enqueued. Then the same through a stream's batched decode steps (plain, captured and
// replayed graphs) against a stream with the fusions off, whose rows take the per-row calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/kv_attn_rope_cuda.h"
#include "cuda/cuda_test_util.h"
#include "kv/kv_cache.h"

namespace geist {
namespace {

using test::DeviceVec;
using test::expect_bits_equal;
using test::randn;

struct Shape {
  int32_t n_head, n_head_kv, hd, n_rot;
  RopeStyle style;
  bool f16;
};

// n sessions' caches of `rows` positions holding random earlier rows, and their tokens' q, k
// and v rows packed with padding (strides wider than the rows, as no workspace needs, to
// catch a stride mix-up).
struct Batch {
  int64_t qd, kd, qs, ks, vs, os, row;
  KvEnc enc;
  std::vector<std::unique_ptr<DeviceVec<uint8_t>>> kc, vc;
  std::unique_ptr<DeviceVec<float>> q, k, v, out;

  Batch(const Shape& c, int32_t n, int32_t rows, uint32_t seed) {
    qd = int64_t{c.n_head} * c.hd;
    kd = int64_t{c.n_head_kv} * c.hd;
    qs = qd + 8;
    ks = kd + 4;
    vs = kd + 12;
    os = qd + 2;
    enc = c.f16 ? KvEnc::F16 : KvEnc::F32;
    row = kd * (c.f16 ? 2 : 4);
    const std::vector<float> old = randn(static_cast<size_t>(kd * rows), seed, 1.0f);
    DeviceVec<float> dold(old);
    for (int32_t i = 0; i < n; ++i) {
      kc.push_back(std::make_unique<DeviceVec<uint8_t>>(static_cast<size_t>(row * rows)));
      vc.push_back(std::make_unique<DeviceVec<uint8_t>>(static_cast<size_t>(row * rows)));
      // Session i's rows: the shared random rows shifted by i rows (every cache differs).
      const int32_t m = rows - i % rows;
      EXPECT_EQ(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dold.ptr() + (rows - m) * kd, kd, m,
                                     static_cast<int32_t>(kd), nullptr, kc.back()->ptr(), row),
                cudaSuccess);
      EXPECT_EQ(cuda::kv_encode_rows(nullptr, enc, kKvBlock, dold.ptr(), kd, m,
                                     static_cast<int32_t>(kd), nullptr, vc.back()->ptr(), row),
                cudaSuccess);
    }
    q = std::make_unique<DeviceVec<float>>(randn(static_cast<size_t>(qs * n), seed + 1, 1.0f));
    k = std::make_unique<DeviceVec<float>>(randn(static_cast<size_t>(ks * n), seed + 2, 1.0f));
    v = std::make_unique<DeviceVec<float>>(randn(static_cast<size_t>(vs * n), seed + 3, 1.0f));
    out = std::make_unique<DeviceVec<float>>(static_cast<size_t>(os * n));
  }

  // Row i's arguments for its token at pos[i], with its position as off[i] (+ *pd).
  cuda::RopeRow row_of(const Shape& c, const RopeParams& p, int32_t i, int32_t off,
                       const int32_t* pd) const {
    cuda::RopeRow w;
    w.st.q = cuda::RopeTensor{q->ptr() + i * qs, qs, c.n_head};
    w.st.k = cuda::RopeTensor{k->ptr() + i * ks, ks, c.n_head_kv};
    w.st.head_dim = c.hd;
    w.st.pos0 = off;
    w.st.pos_dev = pd;
    w.st.p = p;
    w.st.kv.f16 = c.f16;
    w.st.kv.v = v->ptr() + i * vs;
    w.st.kv.v_stride = vs;
    w.st.kv.nv = static_cast<int32_t>(kd);
    w.st.kv.k_dst = kc[static_cast<size_t>(i)]->ptr() + off * row;
    w.st.kv.k_row_bytes = row;
    w.st.kv.v_dst = vc[static_cast<size_t>(i)]->ptr() + off * row;
    w.st.kv.v_row_bytes = row;
    w.st.kv.row_dev = pd;
    w.pos0 = off;
    w.k.lo = cuda::KvDevSeg{enc, kc[static_cast<size_t>(i)]->ptr(), row, kKvBlock, 0};
    w.v.lo = cuda::KvDevSeg{enc, vc[static_cast<size_t>(i)]->ptr(), row, kKvBlock, 0};
    w.out = out->ptr() + i * os;
    return w;
  }
};

// n sessions at positions 3 + (37 i) % 90: each row alone (kv_attention_rope at its plain
// position) against all rows in kv_attention_rope_rows with the positions as offsets to a
// device position of 40 (so some offsets are below 0).
void check_rows(const Shape& c, int32_t n, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.hd
                                    << " n_rot " << c.n_rot << " f16 " << c.f16 << " rows " << n);
  ASSERT_EQ(cuda::kv_attention_setup(), cudaSuccess);
  const int32_t rows = 100, shift = 40;
  std::vector<float> ff(static_cast<size_t>(c.n_rot / 2));
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.37f * static_cast<float>(i % 5);
  DeviceVec<float> dff(ff);
  DeviceVec<int32_t> dshift(std::vector<int32_t>{shift});
  RopeParams p;
  p.style = c.style;
  p.n_rot = c.n_rot;
  p.freq_base = 500000.0f;
  p.freq_factors = dff.ptr();
  const AttentionShape sh{c.n_head, c.n_head_kv, c.hd, c.hd,
                          1.0f / std::sqrt(static_cast<float>(c.hd))};
  Batch alone(c, n, rows, seed), batched(c, n, rows, seed);
  std::vector<cuda::RopeRow> w(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = 3 + (37 * i) % 90;
    const cuda::RopeRow a = alone.row_of(c, p, i, pos, nullptr);
    cudaError_t err = cudaErrorUnknown;
    ASSERT_TRUE(cuda::kv_attention_rope(nullptr, sh, a.st, a.pos0, a.k, a.v, a.out, alone.os,
                                        nullptr, &err));
    GEIST_CUDA_OK(err);
    w[static_cast<size_t>(i)] = batched.row_of(c, p, i, pos - shift, dshift.ptr());
  }
  ASSERT_TRUE(cuda::kv_attention_rope_rows_fit(sh, w.data(), n, dshift.ptr(), batched.os));
  GEIST_CUDA_OK(cuda::kv_attention_rope_rows(nullptr, sh, w.data(), n, dshift.ptr(), batched.os));
  GEIST_CUDA_OK(cudaDeviceSynchronize());
  expect_bits_equal(alone.q->download(), batched.q->download(), "q");
  expect_bits_equal(alone.k->download(), batched.k->download(), "k");
  for (int32_t i = 0; i < n; ++i) {
    const size_t s = static_cast<size_t>(i);
    EXPECT_TRUE(alone.kc[s]->download() == batched.kc[s]->download()) << "K rows of " << i;
    EXPECT_TRUE(alone.vc[s]->download() == batched.vc[s]->download()) << "V rows of " << i;
  }
  const std::vector<float> out = batched.out->download();
  expect_bits_equal(alone.out->download(), out, "attention");
  // Not a comparison of two no-ops: every row's output is finite and rows differ.
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < batched.qd; ++j) ASSERT_TRUE(std::isfinite(out[i * batched.os + j]));
  }
  if (n > 1) {
    EXPECT_NE(std::memcmp(out.data(), out.data() + batched.os, sizeof(float) * batched.qd), 0);
  }
}

TEST(CudaRopeAttendRows, OneLaunchBitwiseEqualsEachRowsOwnLaunch) {
  GEIST_REQUIRE_CUDA();
  // heads, kv heads, hd, n_rot, style, f16; rows
  check_rows({32, 8, 64, 64, RopeStyle::NORMAL, true}, 5, 1);  // llama-1b
  check_rows({8, 2, 256, 64, RopeStyle::NEOX, true}, 70, 2);   // qwen35-0.8b: two launches
  check_rows({4, 4, 128, 32, RopeStyle::NEOX, false}, 64, 3);  // group 1, one full launch
  check_rows({16, 1, 64, 64, RopeStyle::NEOX, false}, 1, 4);   // group 16, one row
}

// What the rows launch does not take is left to the per-row calls: nothing is enqueued.
TEST(CudaRopeAttendRows, OtherRowsAreDeclined) {
  GEIST_REQUIRE_CUDA();
  ASSERT_EQ(cuda::kv_attention_setup(), cudaSuccess);
  const Shape c{32, 8, 64, 64, RopeStyle::NORMAL, true};
  const int32_t n = 4;
  Batch b(c, n, 16, 7);
  RopeParams p;
  p.n_rot = 64;
  const AttentionShape sh{32, 8, 64, 64, 0.125f};
  std::vector<cuda::RopeRow> base(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) base[static_cast<size_t>(i)] = b.row_of(c, p, i, 3 + i, nullptr);
  ASSERT_TRUE(cuda::kv_attention_rope_rows_fit(sh, base.data(), n, nullptr, b.os));
  std::vector<std::vector<cuda::RopeRow>> bad(7, base);
  bad[0][2].k = bad[0][1].k;  // two rows of one cache
  bad[0][2].v = bad[0][1].v;
  bad[0][2].st.kv.k_dst = bad[0][1].st.kv.k_dst;
  bad[0][2].st.kv.v_dst = bad[0][1].st.kv.v_dst;
  bad[1][3].pos0 = -1;  // a position below 0 without a device position
  bad[1][3].st.pos0 = -1;
  bad[2][1].st.q.x += 1;            // not at row 0's stride
  bad[3][2].k.lo.enc = KvEnc::F32;  // another encoding than the others' (and its rows')
  bad[3][2].v.lo.enc = KvEnc::F32;
  bad[3][2].st.kv.f16 = false;
  bad[4][1].st.k.src = b.k->ptr();                   // a head norm in front (rope_kv's norm kernel)
  bad[5][0].pos0 = 4;                                // attention and rope at different positions
  for (cuda::RopeRow& w : bad[6]) w.out = w.st.q.x;  // outputs over the queries
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_FALSE(cuda::kv_attention_rope_rows_fit(sh, bad[i].data(), n, nullptr, b.os)) << i;
    EXPECT_EQ(cuda::kv_attention_rope_rows(nullptr, sh, bad[i].data(), n, nullptr, b.os),
              cudaErrorInvalidValue)
        << i;
  }
  // An out stride other than the rows', and no rows.
  EXPECT_FALSE(cuda::kv_attention_rope_rows_fit(sh, base.data(), n, nullptr, b.qd - 1));
  EXPECT_FALSE(cuda::kv_attention_rope_rows_fit(sh, base.data(), 0, nullptr, b.os));
}

// Streams with the fusions on and off (GEIST_CUDA_FUSE, read at creation): sessions of
// different prompt lengths (their stores made on the stream), then batched decode steps of
// rope_attend_rows, plain, captured and replayed; their rows, turned q / k and KV images must
// match bitwise, and a fused stream of plain caches must have replayed graphs.
struct RowsStreamRun {
  std::vector<float> out, qk;
  std::vector<uint8_t> image;
  cuda::CudaStepStats stats;
};

void run_batch(bool fuse, const std::vector<KvMode>& modes, RowsStreamRun* r) {
  if (fuse) {
    unsetenv("GEIST_CUDA_FUSE");
  } else {
    setenv("GEIST_CUDA_FUSE", "0", 1);
  }
  std::unique_ptr<Stream> s;
  const Status made = cuda::create_cuda_stream(&s);
  unsetenv("GEIST_CUDA_FUSE");
  ASSERT_TRUE(made.is_ok()) << made.message();
  const int32_t n_head = 8, n_head_kv = 2, hd = 256, steps = 10;
  const int32_t n = static_cast<int32_t>(modes.size());
  const int64_t qd = n_head * hd, kd = n_head_kv * hd;
  KvLayerSpec spec{static_cast<int32_t>(kd), static_cast<int32_t>(kd), hd, hd};
  spec.rope.style = RopeStyle::NEOX;
  spec.rope.n_rot = 64;
  spec.rope.freq_base = 10000000.0f;
  const AttentionShape sh{n_head, n_head_kv, hd, hd, 0.0625f};
  std::vector<std::unique_ptr<KvStore>> kv(static_cast<size_t>(n));
  std::vector<KvStore*> kvp(static_cast<size_t>(n));
  std::vector<int32_t> pos(static_cast<size_t>(n));
  const int32_t max_pos = 100;
  for (int32_t i = 0; i < n; ++i) {
    ASSERT_TRUE(
        s->create_kv(modes[static_cast<size_t>(i)], {spec}, max_pos, &kv[static_cast<size_t>(i)])
            .is_ok());
    kvp[static_cast<size_t>(i)] = kv[static_cast<size_t>(i)].get();
    // Row 0 (the step's position) is the last: the others are below 0 relative to it.
    pos[static_cast<size_t>(i)] = 45 - (13 * i) % 31;
  }
  DeviceVec<float> dq(static_cast<size_t>(qd * 64)), dk(static_cast<size_t>(kd * 64)),
      dv(static_cast<size_t>(kd * 64)), dout(static_cast<size_t>(qd * 64));
  uint32_t seed = 100;
  const auto upload = [&](int32_t rows) {
    const std::vector<float> q = randn(static_cast<size_t>(qd * rows), seed++, 1.0f);
    const std::vector<float> k = randn(static_cast<size_t>(kd * rows), seed++, 1.0f);
    const std::vector<float> v = randn(static_cast<size_t>(kd * rows), seed++, 1.0f);
    s->upload(dq.ptr(), q.data(), sizeof(float) * q.size());
    s->upload(dk.ptr(), k.data(), sizeof(float) * k.size());
    s->upload(dv.ptr(), v.data(), sizeof(float) * v.size());
  };
  for (int32_t i = 0; i < n; ++i) {  // the prompts, one session at a time (in pieces of 64)
    for (int32_t a = 0; a < pos[static_cast<size_t>(i)]; a += 64) {
      const int32_t m = std::min(64, pos[static_cast<size_t>(i)] - a);
      upload(m);
      do {
        s->begin_forward(nullptr, m, a);
        s->rope_attend(*kv[static_cast<size_t>(i)], 0, sh, spec.rope, nullptr, dq.ptr(), qd,
                       dk.ptr(), kd, dv.ptr(), kd, m, a, dout.ptr(), qd);
      } while (!s->end_forward());
    }
  }
  for (int32_t t = 0; t < steps; ++t) {
    upload(n);
    do {
      s->begin_forward(nullptr, n, pos[0], n);
      s->rope_attend_rows(0, sh, spec.rope, kvp.data(), pos.data(), n, dq.ptr(), qd, dk.ptr(), kd,
                          dv.ptr(), kd, dout.ptr(), qd);
    } while (!s->end_forward());
    std::vector<float> o(static_cast<size_t>(qd * n)), qk(static_cast<size_t>((qd + kd) * n));
    s->download(o.data(), dout.ptr(), sizeof(float) * o.size());
    s->download(qk.data(), dq.ptr(), sizeof(float) * static_cast<size_t>(qd * n));
    s->download(qk.data() + qd * n, dk.ptr(), sizeof(float) * static_cast<size_t>(kd * n));
    r->out.insert(r->out.end(), o.begin(), o.end());
    r->qk.insert(r->qk.end(), qk.begin(), qk.end());
    for (int32_t& p : pos) ++p;
  }
  ASSERT_TRUE(cuda::cuda_stream_status(*s).is_ok());
  for (int32_t i = 0; i < n; ++i) {
    std::vector<KvRegion> regs;
    kv[static_cast<size_t>(i)]->regions(pos[static_cast<size_t>(i)], &regs);
    for (const KvRegion& g : regs) {
      std::vector<uint8_t> b(g.nbytes);
      kv[static_cast<size_t>(i)]->download_region(g, pos[static_cast<size_t>(i)], b.data());
      r->image.insert(r->image.end(), b.begin(), b.end());
    }
  }
  ASSERT_TRUE(cuda::cuda_stream_stats(*s, &r->stats).is_ok());
}

TEST(CudaRopeAttendRows, StreamBatchedStepsBitwiseEqualUnfusedStream) {
  GEIST_REQUIRE_CUDA();
  const std::vector<KvMode> f16(6, KvMode::F16), f32(3, KvMode::F32);
  // A row the launch does not take (Q8): the per-row calls for all.
  const std::vector<KvMode> mixed = {KvMode::F16, KvMode::F16, KvMode::Q8, KvMode::F16,
                                     KvMode::F16};
  for (const std::vector<KvMode>* modes : {&f16, &f32, &mixed}) {
    SCOPED_TRACE(kv_mode_name((*modes)[2]));
    RowsStreamRun fused, plain;
    run_batch(true, *modes, &fused);
    run_batch(false, *modes, &plain);
    if (HasFatalFailure()) return;
    expect_bits_equal(plain.out, fused.out, "attention rows");
    expect_bits_equal(plain.qk, fused.qk, "turned q / k");
    EXPECT_TRUE(plain.image == fused.image) << "KV images differ";
    for (const float x : fused.out) ASSERT_TRUE(std::isfinite(x));
    if (modes != &mixed) {
      EXPECT_GT(fused.stats.replays, 0) << "no replayed graph step: positions never came from "
                                           "the device";
      EXPECT_EQ(fused.stats.capture_failures, 0);
    }
  }
}

}  // namespace
}  // namespace geist
