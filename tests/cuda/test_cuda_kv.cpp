// CudaKvStore (F32 / F16) vs KvCache: the same regions, the same bytes for the same rows, and
// attention within f32 rounding of the CPU's scalar attention_kv_reference().
//
// Attention tolerance: the GPU uses an online softmax over tiles of 128 positions and FMAs,
// the CPU a two-pass softmax and eight-way partial dot products, so they round differently;
// with |q|,|k|,|v| <= 1, head_dim <= 256 and scale 1/sqrt(head_dim), every output is a convex
// combination of v values and each route's error is a few hundred u at most: we allow 2e-5
// absolute (an output element that read a wrong row or head is off by ~0.1 or more).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_stream.h"
#include "base/thread_pool.h"
#include "cuda/cuda_test_util.h"
#include "kernels/attention_kv.h"
#include "kv/kv_cache.h"

namespace geist {
namespace {

using test::DeviceVec;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class CudaKv : public ::testing::Test {
 protected:
  void SetUp() override {
    GEIST_REQUIRE_CUDA();
    test::make_cuda_backend(&backend_, &stream_);
    ASSERT_TRUE(backend_ && stream_);
  }
  void TearDown() override {
    if (stream_) {
      const Status st = cuda::cuda_stream_status(*stream_);
      EXPECT_TRUE(st.is_ok()) << "stream recorded a CUDA failure: " << st.message();
    }
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
};

// Layer 1 has no attention (a DeltaNet layer of a hybrid); layer 2 has different head sizes.
const std::vector<KvLayerSpec> kLayers = {
    {2 * 64, 2 * 64, 64, 64},
    {0, 0, 0, 0},
    {4 * 128, 4 * 128, 128, 128},
};

TEST_F(CudaKv, RegionsMatchKvCache) {
  for (const KvMode mode : {KvMode::F32, KvMode::F16}) {
    SCOPED_TRACE(kv_mode_name(mode));
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(mode, kLayers, 100, &dev).is_ok());
    std::unique_ptr<KvCache> host;
    ASSERT_TRUE(KvCache::create(mode, kLayers, 100, &host).is_ok());
    EXPECT_EQ(dev->mode(), mode);
    EXPECT_EQ(dev->max_seq_len(), 100);
    EXPECT_EQ(dev->bytes_per_token(), host->bytes_per_token());
    for (const int32_t n_pos : {0, 1, 37, 100}) {
      std::vector<KvRegion> a, b;
      dev->regions(n_pos, &a);
      host->regions(n_pos, &b);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].layer, b[i].layer) << i;
        EXPECT_EQ(a[i].part, b[i].part) << i;
        EXPECT_EQ(a[i].nbytes, b[i].nbytes) << i;
      }
    }
  }
}

// Rows written through attend() on the device are byte for byte KvCache's rows (f16: the same
// round-to-nearest-even), and upload_region / download_region round-trip them.
TEST_F(CudaKv, StoredBytesEqualKvCacheAndRoundTrip) {
  for (const KvMode mode : {KvMode::F32, KvMode::F16}) {
    SCOPED_TRACE(kv_mode_name(mode));
    const int32_t max_seq = 64, n = 45;
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(mode, kLayers, max_seq, &dev).is_ok());
    std::unique_ptr<KvCache> host;
    ASSERT_TRUE(KvCache::create(mode, kLayers, max_seq, &host).is_ok());
    for (const int32_t il : {0, 2}) {
      const KvLayerSpec& sp = kLayers[static_cast<size_t>(il)];
      const int32_t hd = sp.head_dim_k;
      const int32_t n_head_kv = sp.n_embd_k / hd;
      const AttentionShape s{n_head_kv * 2, n_head_kv, hd, hd, 0.125f};
      const int64_t kstride = sp.n_embd_k + 3;
      std::vector<float> k = random_floats(static_cast<size_t>(kstride * n), 30u + il);
      std::vector<float> v = random_floats(static_cast<size_t>(kstride * n), 40u + il);
      // Values across f16's range, including subnormal halves, ties and overflow to inf.
      k[0] = 1e-6f;
      k[1] = 65520.0f;
      k[2] = -3.0e-8f;
      k[3] = 1.0009765625f + 0.00048828125f;  // a tie between two halves
      const std::vector<float> q = random_floats(static_cast<size_t>(s.n_head * hd * n), 50u);
      DeviceVec<float> dk(k), dv(v), dq(q), dout(static_cast<size_t>(s.n_head * hd * n));
      // Two calls, so the second writes at a non-zero position.
      dev->attend(il, s, dq.ptr(), s.n_head * hd, 20, 0, dk.ptr(), kstride, dv.ptr(), kstride,
                  dout.ptr(), s.n_head * hd);
      dev->attend(il, s, dq.ptr() + 20 * s.n_head * hd, s.n_head * hd, n - 20, 20,
                  dk.ptr() + 20 * kstride, kstride, dv.ptr() + 20 * kstride, kstride,
                  dout.ptr() + 20 * s.n_head * hd, s.n_head * hd);
      host->write(il, 0, n, k.data(), kstride, v.data(), kstride);
    }
    std::vector<KvRegion> regs;
    host->regions(n, &regs);
    std::unique_ptr<KvStore> fresh;
    ASSERT_TRUE(stream_->create_kv(mode, kLayers, max_seq, &fresh).is_ok());
    for (const KvRegion& r : regs) {
      SCOPED_TRACE("layer " + std::to_string(r.layer) + " part " + std::to_string(r.part));
      std::vector<uint8_t> want(r.nbytes), got(r.nbytes, 0xCD), again(r.nbytes, 0xCD);
      host->read_region(r, n, want.data());
      dev->download_region(r, n, got.data());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "byte " << i;
      }
      fresh->upload_region(r, n, want.data());
      fresh->download_region(r, n, again.data());
      ASSERT_EQ(again, want);
    }
  }
}

struct AttnCase {
  int32_t n_head, n_head_kv, head_dim;
  int32_t prefill;  // tokens of the first call; then `decode` single-token calls
  int32_t decode;
};

TEST_F(CudaKv, AttentionMatchesCpuReference) {
  const AttnCase cases[] = {
      {4, 4, 64, 1, 2},      // MHA, tiny
      {8, 2, 64, 37, 3},     // GQA 4:1
      {16, 4, 128, 300, 2},  // more than two 128-position tiles
      {8, 2, 256, 130, 1},   // head_dim 256 (Qwen3.5): two output dims per thread
      {6, 1, 32, 5, 140},    // MQA, a long single-token decode across a tile edge
  };
  ThreadPool pool(1);
  for (const KvMode mode : {KvMode::F32, KvMode::F16}) {
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(std::string(kv_mode_name(mode)) + " heads " + std::to_string(c.n_head) + "/" +
                   std::to_string(c.n_head_kv) + " hd " + std::to_string(c.head_dim) + " prefill " +
                   std::to_string(c.prefill) + " decode " + std::to_string(c.decode));
      const int32_t total = c.prefill + c.decode;
      const int32_t n_kv = c.n_head_kv * c.head_dim;
      const std::vector<KvLayerSpec> layers = {{n_kv, n_kv, c.head_dim, c.head_dim}};
      const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.head_dim,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      const int64_t qs = static_cast<int64_t>(c.n_head) * c.head_dim;
      const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 1);
      const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 2);
      const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 3);
      std::unique_ptr<KvStore> dev;
      ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
      DeviceVec<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(qs * total));
      int32_t pos = 0;
      for (int32_t step = 0; step <= c.decode; ++step) {
        const int32_t n = step == 0 ? c.prefill : 1;
        dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                    dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
        pos += n;
      }
      const std::vector<float> got = dout.download();

      // Oracle: the same rows in a KvCache, attention by the scalar reference kernel.
      std::unique_ptr<KvCache> host;
      ASSERT_TRUE(KvCache::create(mode, layers, total, &host).is_ok());
      host->write(0, 0, total, k.data(), n_kv, v.data(), n_kv);
      KvSource ks, vs;
      host->view(0, total, &ks, &vs);
      std::vector<float> ref(static_cast<size_t>(qs * total));
      std::vector<float> scratch(attention_kv_scratch_floats(s, total, 1));
      attention_kv_reference(s, q.data(), qs, total, 0, ks, vs, ref.data(), qs, scratch.data(),
                             pool);
      int bad = 0;
      for (size_t i = 0; i < ref.size() && bad < 5; ++i) {
        if (!(std::fabs(got[i] - ref[i]) <= 2e-5f)) {
          ++bad;
          ADD_FAILURE() << "out token " << i / qs << " head " << (i % qs) / c.head_dim << " dim "
                        << i % c.head_dim << ": gpu " << got[i] << " cpu " << ref[i];
        }
      }
    }
  }
}

// A query's output must not depend on how the sequence was split into calls.
TEST_F(CudaKv, AttentionIsBitwiseIndependentOfCallSplit) {
  const int32_t n_head = 8, n_head_kv = 2, hd = 64, total = 150;
  const int32_t n_kv = n_head_kv * hd;
  const int64_t qs = n_head * hd;
  const std::vector<KvLayerSpec> layers = {{n_kv, n_kv, hd, hd}};
  const AttentionShape s{n_head, n_head_kv, hd, hd, 0.125f};
  const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 4);
  const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 5);
  const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 6);
  DeviceVec<float> dq(q), dk(k), dv(v);
  std::vector<std::vector<float>> outs;
  for (const std::vector<int32_t>& split :
       {std::vector<int32_t>{150}, std::vector<int32_t>{1, 127, 1, 21}}) {
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(KvMode::F16, layers, total, &dev).is_ok());
    DeviceVec<float> dout(static_cast<size_t>(qs * total));
    int32_t pos = 0;
    for (const int32_t n : split) {
      dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                  dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
      pos += n;
    }
    outs.push_back(dout.download());
  }
  for (size_t i = 0; i < outs[0].size(); ++i) ASSERT_EQ(outs[0][i], outs[1][i]) << i;
}

TEST_F(CudaKv, CreateRejectsBadArguments) {
  std::unique_ptr<KvStore> kv;
  EXPECT_EQ(stream_->create_kv(KvMode::F32, kLayers, 0, &kv).code(), GEIST_E_INVALID_ARG);
  EXPECT_EQ(stream_->create_kv(KvMode::F32, {{64, 0, 64, 64}}, 8, &kv).code(), GEIST_E_INVALID_ARG);
  for (const KvMode m : {KvMode::Q8, KvMode::Q4, KvMode::KIVI4, KvMode::KIVI2}) {
    const Status st = stream_->create_kv(m, kLayers, 8, &kv);
    EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED) << kv_mode_name(m);
    EXPECT_NE(st.message().find(kv_mode_name(m)), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace geist
