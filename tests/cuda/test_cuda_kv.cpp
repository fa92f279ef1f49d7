// CudaKvStore in every KV mode vs KvCache (the CPU cache, the oracle): the same regions, bytes
// that decode to the CPU's values (and are in fact bitwise the CPU quantizer's), images moving
// both ways, and attention within f32 rounding of the CPU's scalar attention_kv_reference()
// reading the same bytes.
//
// Attention tolerance: the GPU uses an online softmax over key tiles (F16 / F32 rows of head
// size 64, 128 or 256: tiles of 64 on the tensor cores with bf16 hi/lo splits, about 16
// significant bits per factor, kv_attn_mma_cuda.cu; the other modes: tiles of 32 with FMAs) and,
// for Q8 / Q4 rows, scores and accumulates in the Hadamard-rotated domain (rotating the query
// and the result instead of every row); the CPU reference decodes each row (rotating it back)
// and uses a two-pass softmax. With |q|, |k|, |v| <= 1, head_dim <= 256 and scale
// 1/sqrt(head_dim), every output is a convex combination of decoded values (|x| <= ~2 after
// quantization) and each route's error is a few hundred ulp at most: 2e-5 absolute for F32 /
// F16 (as before), 1e-4 for the quantized modes, whose rotated values reach sqrt(32) times the
// inputs. A row that read a wrong position, head or block is off by 1e-2 or more.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
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

constexpr KvMode kAllModes[] = {KvMode::F32, KvMode::F16,   KvMode::Q8,
                                KvMode::Q4,  KvMode::KIVI4, KvMode::KIVI2};

using test::random_floats;

float attn_tol(KvMode m) { return m == KvMode::F32 || m == KvMode::F16 ? 2e-5f : 1e-4f; }

// One quantization step of the mode for inputs in [-1, 1] (keys relative to position 0's span
// [-2, 2]; Q8 / Q4 blocks are rotated, which can gather sqrt(32) of a block into one value):
// the most two decodings of the same inputs may differ by if one code was rounded the other way.
float decode_tol(KvMode m) {
  switch (m) {
    case KvMode::Q8:
      return 4.0f * 5.66f / 255.0f;
    case KvMode::Q4:
      return 4.0f * 5.66f / 15.0f;
    case KvMode::KIVI4:
      return 2.0f / 15.0f;
    case KvMode::KIVI2:
      return 2.0f / 3.0f;
    default:
      return 0.0f;
  }
}

class CudaKv : public test::CudaStreamTest {};

// Llama-3-style per-pair frequency divisors (32 pairs).
const float kFreqFactors[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1.5f, 2, 2.5f, 3, 4, 5, 6, 7,
                                8, 8, 8, 8, 8, 8, 8, 8, 8,    8, 8,    8, 8, 8, 8, 8};

// A layer of n_head_kv heads of hd with RoPE on its keys (q4 keys are relative to position 0's
// key turned by it): all channels NORMAL up to 64, half of them NEOX above (Qwen3.5-like).
KvLayerSpec roped_layer(int32_t n_head_kv, int32_t hd) {
  KvLayerSpec s{n_head_kv * hd, n_head_kv * hd, hd, hd};
  s.rope.n_rot = hd <= 64 ? hd : hd / 2;
  s.rope.style = hd <= 64 ? RopeStyle::NORMAL : RopeStyle::NEOX;
  s.rope.freq_base = hd <= 64 ? 10000.0f : 1e6f;
  s.rope.freq_factors = hd == 64 ? kFreqFactors : nullptr;
  return s;
}

// Layer 1 has no attention (a DeltaNet layer of a hybrid); layer 2 has different head sizes;
// layer 3 has stories260K's 8-wide heads (blocks of 8).
const std::vector<KvLayerSpec> kLayers = {
    roped_layer(2, 64),
    {0, 0, 0, 0},
    roped_layer(4, 128),
    roped_layer(4, 8),
};

// KvCache::attend with the scalar reference kernel: the same pieces (KIVI split where a group
// fills, q4 where the window start moves), each written, viewed and attended.
void cpu_attend(KvCache& c, int32_t il, const AttentionShape& s, const float* q, int64_t qs,
                int32_t n, int32_t pos, const float* k, const float* v, int64_t kvs, float* out,
                ThreadPool& pool) {
  const bool kivi = c.mode() == KvMode::KIVI4 || c.mode() == KvMode::KIVI2;
  std::vector<float> scratch(attention_kv_scratch_floats(s, pos + n, pool.n_threads()));
  for (int32_t a = pos; a < pos + n;) {
    int32_t b = pos + n;
    const int32_t fill = a - a % kKvBlock + kKvBlock - 1;
    if (kivi && fill < b) b = a < fill ? fill : fill + 1;
    if (c.mode() == KvMode::Q4) b = std::min(b, std::max(63, (a + 1) / 32 * 32 + 31));
    const int64_t i = a - pos;
    c.write(il, a, b - a, k + i * kvs, kvs, v + i * kvs, kvs);
    KvSource ks, vs;
    c.view(il, b, &ks, &vs);
    attention_kv_reference(s, q + i * qs, qs, b - a, a, ks, vs, out + i * qs, qs, scratch.data(),
                           pool);
    a = b;
  }
}

// Every decoded value of layer il's K and V for positions [0, n).
std::vector<float> decode_all(const KvCache& c, int32_t il, int32_t n, int32_t nk, int32_t nv) {
  KvSource ks, vs;
  c.view(il, n, &ks, &vs);
  std::vector<float> out(static_cast<size_t>(n) * (nk + nv));
  for (int32_t p = 0; p < n; ++p) {
    kv_dequantize(ks, p, 0, nk, out.data() + static_cast<size_t>(p) * (nk + nv));
    kv_dequantize(vs, p, 0, nv, out.data() + static_cast<size_t>(p) * (nk + nv) + nk);
  }
  return out;
}

TEST_F(CudaKv, RegionsMatchKvCache) {
  for (const KvMode mode : kAllModes) {
    SCOPED_TRACE(kv_mode_name(mode));
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(mode, kLayers, 100, &dev).is_ok());
    std::unique_ptr<KvCache> host;
    ASSERT_TRUE(KvCache::create(mode, kLayers, 100, &host).is_ok());
    EXPECT_EQ(dev->mode(), mode);
    EXPECT_EQ(dev->max_seq_len(), 100);
    EXPECT_EQ(dev->bytes_per_token(), host->bytes_per_token());
    for (const int32_t n_pos : {0, 1, 31, 32, 37, 64, 100}) {
      std::vector<KvRegion> a, b;
      dev->regions(n_pos, &a);
      host->regions(n_pos, &b);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].layer, b[i].layer) << i;
        EXPECT_EQ(a[i].part, b[i].part) << i;
        EXPECT_EQ(a[i].nbytes, b[i].nbytes) << n_pos << " " << i;
      }
    }
  }
}

// Rows written through attend() on the device decode to KvCache's values for the same rows
// within one quantization step, and are in fact the CPU's bytes exactly (the device quantizer
// is bitwise the CPU's); upload_region / download_region round-trip them.
TEST_F(CudaKv, StoredBytesEqualKvCacheAndRoundTrip) {
  for (const KvMode mode : kAllModes) {
    SCOPED_TRACE(kv_mode_name(mode));
    const int32_t max_seq = 80, n = 45;  // KIVI: one full group and 13 residual positions
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(mode, kLayers, max_seq, &dev).is_ok());
    std::unique_ptr<KvCache> host;
    ASSERT_TRUE(KvCache::create(mode, kLayers, max_seq, &host).is_ok());
    for (const int32_t il : {0, 2, 3}) {
      const KvLayerSpec& sp = kLayers[static_cast<size_t>(il)];
      const int32_t hd = sp.head_dim_k;
      const int32_t n_head_kv = sp.n_embd_k / hd;
      const AttentionShape s{n_head_kv * 2, n_head_kv, hd, hd, 0.125f};
      const int64_t kstride = sp.n_embd_k + 3;
      std::vector<float> k = random_floats(static_cast<size_t>(kstride * n), 30u + il);
      std::vector<float> v = random_floats(static_cast<size_t>(kstride * n), 40u + il);
      if (mode == KvMode::F16) {
        // Values across f16's range, including subnormal halves, ties and overflow to inf.
        k[0] = 1e-6f;
        k[1] = 65520.0f;
        k[2] = -3.0e-8f;
        k[3] = 1.0009765625f + 0.00048828125f;  // a tie between two halves
      }
      // Ties of the quantizers' rounding and a zero block in a later row.
      k[kstride * 5 + 1] = 0.5f;
      for (int32_t c = 0; c < 8; ++c) v[kstride * 7 + c] = 0.0f;
      const std::vector<float> q = random_floats(static_cast<size_t>(s.n_head * hd * n), 50u);
      DeviceVec<float> dk(k), dv(v), dq(q), dout(static_cast<size_t>(s.n_head * hd * n));
      // Two calls, so the second writes at a non-zero position (and KIVI fills a group in it).
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
    std::unique_ptr<KvCache> from_dev;  // the device's bytes, decoded by the CPU
    ASSERT_TRUE(KvCache::create(mode, kLayers, max_seq, &from_dev).is_ok());
    size_t diff_bytes = 0, total_bytes = 0;
    for (const KvRegion& r : regs) {
      SCOPED_TRACE("layer " + std::to_string(r.layer) + " part " + std::to_string(r.part));
      std::vector<uint8_t> want(r.nbytes), got(r.nbytes, 0xCD), again(r.nbytes, 0xCD);
      host->read_region(r, n, want.data());
      dev->download_region(r, n, got.data());
      for (size_t i = 0; i < want.size(); ++i) diff_bytes += got[i] != want[i];
      from_dev->write_region(r, n, got.data());
      fresh->upload_region(r, n, want.data());
      fresh->download_region(r, n, again.data());
      ASSERT_EQ(again, want);
    }
    for (const int32_t il : {0, 2, 3}) {
      const KvLayerSpec& sp = kLayers[static_cast<size_t>(il)];
      const std::vector<float> a = decode_all(*host, il, n, sp.n_embd_k, sp.n_embd_v);
      const std::vector<float> b = decode_all(*from_dev, il, n, sp.n_embd_k, sp.n_embd_v);
      int bad = 0;
      for (size_t i = 0; i < a.size() && bad < 5; ++i) {
        // Equal infinities (f16 overflow) compare equal; otherwise within one step.
        if (!(a[i] == b[i] || std::fabs(a[i] - b[i]) <= decode_tol(mode))) {
          ++bad;
          ADD_FAILURE() << "layer " << il << " value " << i << ": cpu " << a[i] << " gpu " << b[i];
        }
      }
    }
    EXPECT_EQ(diff_bytes, 0u) << "of " << total_bytes << " bytes differ from the CPU quantizer's";
  }
}

struct AttnCase {
  int32_t n_head, n_head_kv, head_dim;
  int32_t prefill;  // tokens of the first call; then `decode` single-token calls
  int32_t decode;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, size_t from,
                  int64_t qs, int32_t hd, float tol) {
  int bad = 0;
  for (size_t i = from; i < ref.size() && bad < 5; ++i) {
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      ++bad;
      ADD_FAILURE() << "out token " << i / qs << " head " << (i % qs) / hd << " dim " << i % hd
                    << ": gpu " << got[i] << " cpu " << ref[i];
    }
  }
}

// Device writes and attention from an empty cache vs the CPU cache and reference kernel.
TEST_F(CudaKv, AttentionMatchesCpuReference) {
  const AttnCase cases[] = {
      {4, 4, 64, 1, 2},      // MHA, tiny
      {8, 2, 64, 37, 3},     // GQA 4:1, a KIVI group fills inside the prefill
      {16, 4, 128, 300, 2},  // many key tiles and query blocks
      {8, 2, 256, 130, 1},   // head_dim 256 (Qwen3.5)
      {6, 1, 32, 5, 40},     // MQA, single-token decode across tile and group edges
      {8, 4, 8, 50, 3},      // stories260K's heads (blocks of 8)
      {64, 1, 64, 9, 1},     // 64 query heads per kv head: two head chunks
      {4, 2, 48, 40, 2},     // stories-qwen35's heads of 48: Q8 / Q4 blocks span two heads
  };
  ThreadPool pool(8);
  for (const KvMode mode : kAllModes) {
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(std::string(kv_mode_name(mode)) + " heads " + std::to_string(c.n_head) + "/" +
                   std::to_string(c.n_head_kv) + " hd " + std::to_string(c.head_dim) + " prefill " +
                   std::to_string(c.prefill) + " decode " + std::to_string(c.decode));
      const int32_t total = c.prefill + c.decode;
      const int32_t n_kv = c.n_head_kv * c.head_dim;
      const std::vector<KvLayerSpec> layers = {roped_layer(c.n_head_kv, c.head_dim)};
      const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.head_dim,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      const int64_t qs = static_cast<int64_t>(c.n_head) * c.head_dim;
      const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 1);
      const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 2);
      const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 3);
      std::unique_ptr<KvStore> dev;
      ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
      DeviceVec<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(qs * total));
      std::unique_ptr<KvCache> host;
      ASSERT_TRUE(KvCache::create(mode, layers, total, &host).is_ok());
      std::vector<float> ref(static_cast<size_t>(qs * total));
      int32_t pos = 0;
      for (int32_t step = 0; step <= c.decode; ++step) {
        const int32_t n = step == 0 ? c.prefill : 1;
        dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                    dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
        cpu_attend(*host, 0, s, q.data() + pos * qs, qs, n, pos, k.data() + pos * n_kv,
                   v.data() + pos * n_kv, n_kv, ref.data() + pos * qs, pool);
        pos += n;
      }
      expect_close(dout.download(), ref, 0, qs, c.head_dim, attn_tol(mode));
    }
  }
}

// A CPU image uploaded into a fresh device store, then continued on the device (a prefill
// chunk and decode steps), matches the CPU continuing from its own cache: the device reads the
// CPU's bytes, including KIVI's residual window and the Q8 / Q4 key reference.
TEST_F(CudaKv, UploadedCpuImageContinuesLikeCpu) {
  const AttnCase cases[] = {{8, 2, 64, 30, 3}, {8, 4, 8, 40, 2}, {4, 2, 48, 20, 2}};
  const int32_t n0 = 45;  // positions the CPU wrote before the image
  ThreadPool pool(8);
  for (const KvMode mode : kAllModes) {
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(std::string(kv_mode_name(mode)) + " hd " + std::to_string(c.head_dim));
      const int32_t total = n0 + c.prefill + c.decode;
      const int32_t n_kv = c.n_head_kv * c.head_dim;
      const std::vector<KvLayerSpec> layers = {roped_layer(c.n_head_kv, c.head_dim)};
      const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.head_dim,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      const int64_t qs = static_cast<int64_t>(c.n_head) * c.head_dim;
      const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 11);
      const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 12);
      const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 13);
      std::unique_ptr<KvCache> host;
      ASSERT_TRUE(KvCache::create(mode, layers, total, &host).is_ok());
      std::vector<float> ref(static_cast<size_t>(qs * total));
      cpu_attend(*host, 0, s, q.data(), qs, n0, 0, k.data(), v.data(), n_kv, ref.data(), pool);
      std::unique_ptr<KvStore> dev;
      ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
      std::vector<KvRegion> regs;
      host->regions(n0, &regs);
      for (const KvRegion& r : regs) {
        std::vector<uint8_t> bytes(r.nbytes);
        host->read_region(r, n0, bytes.data());
        dev->upload_region(r, n0, bytes.data());
      }
      ASSERT_TRUE(dev->can_resume_at(n0));
      DeviceVec<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(qs * total));
      int32_t pos = n0;
      for (int32_t step = 0; step <= c.decode; ++step) {
        const int32_t n = step == 0 ? c.prefill : 1;
        dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                    dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
        cpu_attend(*host, 0, s, q.data() + pos * qs, qs, n, pos, k.data() + pos * n_kv,
                   v.data() + pos * n_kv, n_kv, ref.data() + pos * qs, pool);
        pos += n;
      }
      expect_close(dout.download(), ref, static_cast<size_t>(n0 * qs), qs, c.head_dim,
                   attn_tol(mode));
    }
  }
}

// A query's output, and the stored bytes, must not depend on how the sequence was split into
// calls (splits chosen around KIVI's group edges at 31 / 32 and across key tiles).
TEST_F(CudaKv, AttentionIsBitwiseIndependentOfCallSplit) {
  const int32_t n_head = 8, n_head_kv = 2, hd = 64, total = 150;
  const int32_t n_kv = n_head_kv * hd;
  const int64_t qs = n_head * hd;
  const std::vector<KvLayerSpec> layers = {roped_layer(n_head_kv, hd)};
  const AttentionShape s{n_head, n_head_kv, hd, hd, 0.125f};
  const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 4);
  const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 5);
  const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 6);
  DeviceVec<float> dq(q), dk(k), dv(v);
  for (const KvMode mode : kAllModes) {
    SCOPED_TRACE(kv_mode_name(mode));
    std::vector<std::vector<float>> outs;
    std::vector<std::vector<uint8_t>> images;
    for (const std::vector<int32_t>& split :
         {std::vector<int32_t>{150}, std::vector<int32_t>{1, 127, 1, 21},
          std::vector<int32_t>{31, 1, 33, 85}, std::vector<int32_t>{5, 26, 2, 117}}) {
      std::unique_ptr<KvStore> dev;
      ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
      DeviceVec<float> dout(static_cast<size_t>(qs * total));
      int32_t pos = 0;
      for (const int32_t n : split) {
        dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                    dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
        pos += n;
      }
      outs.push_back(dout.download());
      std::vector<KvRegion> regs;
      dev->regions(total, &regs);
      std::vector<uint8_t> img;
      for (const KvRegion& r : regs) {
        std::vector<uint8_t> b(r.nbytes);
        dev->download_region(r, total, b.data());
        img.insert(img.end(), b.begin(), b.end());
      }
      images.push_back(img);
    }
    for (size_t j = 1; j < outs.size(); ++j) {
      EXPECT_EQ(images[j], images[0]) << "split " << j;
      for (size_t i = 0; i < outs[0].size(); ++i) {
        ASSERT_EQ(outs[j][i], outs[0][i]) << "split " << j << " element " << i;
      }
    }
  }
}

// One-token attends (decode steps: attn_dec_kernel, the warps of a block sharing each tile)
// give the rows of one long call (attn_mma_kernel) bitwise, for the head sizes of the tensor-core
// path, F32 and F16 rows, groups of 1, 4 and 16 query heads per kv head, and steps over five
// 64-key tiles (attn_dec_kernel copies the next tile while it computes one: both stages reused).
TEST_F(CudaKv, DecodeStepsEqualOneCallRowsBitwise) {
  struct Shape {
    int32_t n_head, n_head_kv, hd;
  };
  const int32_t total = 300, first = 60;  // steps at positions 60..299
  for (const Shape sh : {Shape{32, 8, 64}, Shape{4, 4, 128}, Shape{8, 2, 256}, Shape{16, 1, 64}}) {
    const int32_t n_kv = sh.n_head_kv * sh.hd;
    const int64_t qs = int64_t{sh.n_head} * sh.hd;
    const std::vector<KvLayerSpec> layers = {roped_layer(sh.n_head_kv, sh.hd)};
    const AttentionShape s{sh.n_head, sh.n_head_kv, sh.hd, sh.hd,
                           1.0f / std::sqrt(static_cast<float>(sh.hd))};
    DeviceVec<float> dq(random_floats(static_cast<size_t>(qs * total), 11));
    DeviceVec<float> dk(random_floats(static_cast<size_t>(n_kv) * total, 12));
    DeviceVec<float> dv(random_floats(static_cast<size_t>(n_kv) * total, 13));
    for (const KvMode mode : {KvMode::F32, KvMode::F16}) {
      SCOPED_TRACE(::testing::Message() << kv_mode_name(mode) << " heads " << sh.n_head << "/"
                                        << sh.n_head_kv << " hd " << sh.hd);
      std::vector<float> got[2];
      for (int steps = 0; steps < 2; ++steps) {
        std::unique_ptr<KvStore> dev;
        ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
        DeviceVec<float> dout(static_cast<size_t>(qs * total));
        const auto attend = [&](int32_t pos, int32_t n) {
          dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                      dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
        };
        if (steps == 0) {
          attend(0, total);
        } else {
          attend(0, first);
          for (int32_t p = first; p < total; ++p) attend(p, 1);
        }
        got[steps] = dout.download();
      }
      int64_t bad = 0;
      for (size_t i = 0; i < got[0].size(); ++i) {
        if (std::memcmp(&got[0][i], &got[1][i], sizeof(float)) != 0 && bad++ < 5) {
          ADD_FAILURE() << "token " << i / qs << " element " << i % qs << ": step " << got[1][i]
                        << " one call " << got[0][i];
        }
      }
      ASSERT_EQ(bad, 0);
    }
  }
}

// The prefill shape the benchmarks use (llama-1b: 32 query heads, 8 kv heads, head_dim 64,
// 2048 tokens in one call): sampled rows vs the CPU reference, and the kernel's time.
TEST_F(CudaKv, LongPrefillMatchesCpuOnSampledRows) {
  const int32_t n_head = 32, n_head_kv = 8, hd = 64, total = 2048;
  const int32_t n_kv = n_head_kv * hd;
  const int64_t qs = int64_t{n_head} * hd;
  const std::vector<KvLayerSpec> layers = {roped_layer(n_head_kv, hd)};
  const AttentionShape s{n_head, n_head_kv, hd, hd, 0.125f};
  const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 7);
  const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 8);
  const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 9);
  DeviceVec<float> dq(q), dk(k), dv(v), dout(static_cast<size_t>(qs * total));
  ThreadPool pool(8);
  for (const KvMode mode : {KvMode::F16, KvMode::Q8, KvMode::Q4, KvMode::KIVI4}) {
    SCOPED_TRACE(kv_mode_name(mode));
    std::unique_ptr<KvStore> dev;
    ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
    cudaEvent_t e0, e1;
    GEIST_CUDA_OK(cudaEventCreate(&e0));
    GEIST_CUDA_OK(cudaEventCreate(&e1));
    cudaStream_t cs = nullptr;  // the legacy stream: the store's stream is timed through it
    GEIST_CUDA_OK(cudaDeviceSynchronize());
    GEIST_CUDA_OK(cudaEventRecord(e0, cs));
    dev->attend(0, s, dq.ptr(), qs, total, 0, dk.ptr(), n_kv, dv.ptr(), n_kv, dout.ptr(), qs);
    GEIST_CUDA_OK(cudaDeviceSynchronize());
    GEIST_CUDA_OK(cudaEventRecord(e1, cs));
    GEIST_CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    GEIST_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf(
        "[ kv attn ] %s prefill %d tokens, 32/8 heads, hd 64: %.3f ms (write + attention)\n",
        kv_mode_name(mode), total, ms);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    const std::vector<float> got = dout.download();
    std::unique_ptr<KvCache> host;
    ASSERT_TRUE(KvCache::create(mode, layers, total, &host).is_ok());
    std::vector<float> ref(static_cast<size_t>(qs * total));
    // The cache as every sampled query saw it: for KIVI, the view right after its position.
    const bool kivi = mode == KvMode::KIVI4 || mode == KvMode::KIVI2;
    host->write(0, 0, total, k.data(), n_kv, v.data(), n_kv);
    std::vector<float> scratch(attention_kv_scratch_floats(s, total, pool.n_threads()));
    for (const int32_t t : {0, 1, 31, 700, 1023, 2046, 2047}) {
      if (kivi && (t + 1) % kKvBlock != 0 && t + 1 != total) continue;  // only where view matches
      // q4: only where the query's window is among the last kQ4Window positions written.
      if (mode == KvMode::Q4 && kv_q4_window_start(t + 1) < total - kQ4Window) continue;
      KvSource ks, vs;
      host->view(0, t + 1, &ks, &vs);
      attention_kv_reference(s, q.data() + t * qs, qs, 1, t, ks, vs, ref.data() + t * qs, qs,
                             scratch.data(), pool);
      std::vector<float> g(got.begin() + t * qs, got.begin() + (t + 1) * qs);
      std::vector<float> r(ref.begin() + t * qs, ref.begin() + (t + 1) * qs);
      SCOPED_TRACE("token " + std::to_string(t));
      expect_close(g, r, 0, qs, hd, attn_tol(mode));
    }
  }
}

// F16 / F32 caches with heads of 64, 128 or 256 run on the tensor cores (kv_attn_mma_cuda.cu):
// groups that leave padding rows in a block (6 heads per kv head), more than one block of
// queries, single-token calls among prefill chunks of odd lengths. Every split gives the same
// bits, and every row stays within attn_tol of the CPU reference (the bf16 hi/lo products
// keep ~16 significant bits of q and p, and F16 values exactly: a few 1e-6 on these inputs).
TEST_F(CudaKv, TensorCoreAttentionIsSplitIndependentAndMatchesCpu) {
  struct Case {
    int32_t n_head, n_head_kv, hd;
  };
  const int32_t total = 200;
  ThreadPool pool(8);
  // 32/8 heads: the 200-token call has enough blocks for one block per row's channels, the
  // shorter calls split the channels over 4 blocks (kv_attn_mma_cuda.cu, launch).
  for (const Case c : {Case{12, 2, 128}, Case{8, 2, 256}, Case{4, 4, 64}, Case{32, 8, 64}}) {
    for (const KvMode mode : {KvMode::F16, KvMode::F32}) {
      SCOPED_TRACE(std::string(kv_mode_name(mode)) + " hd " + std::to_string(c.hd));
      const int32_t n_kv = c.n_head_kv * c.hd;
      const int64_t qs = int64_t{c.n_head} * c.hd;
      const std::vector<KvLayerSpec> layers = {roped_layer(c.n_head_kv, c.hd)};
      const AttentionShape s{c.n_head, c.n_head_kv, c.hd, c.hd,
                             1.0f / std::sqrt(static_cast<float>(c.hd))};
      const std::vector<float> q = random_floats(static_cast<size_t>(qs * total), 21);
      const std::vector<float> k = random_floats(static_cast<size_t>(n_kv) * total, 22);
      const std::vector<float> v = random_floats(static_cast<size_t>(n_kv) * total, 23);
      DeviceVec<float> dq(q), dk(k), dv(v);
      std::vector<std::vector<float>> outs;
      for (const std::vector<int32_t>& split :
           {std::vector<int32_t>{200}, std::vector<int32_t>{1, 70, 1, 1, 127},
            std::vector<int32_t>{64, 65, 71}}) {
        std::unique_ptr<KvStore> dev;
        ASSERT_TRUE(stream_->create_kv(mode, layers, total, &dev).is_ok());
        DeviceVec<float> dout(static_cast<size_t>(qs * total));
        int32_t pos = 0;
        for (const int32_t n : split) {
          dev->attend(0, s, dq.ptr() + pos * qs, qs, n, pos, dk.ptr() + pos * n_kv, n_kv,
                      dv.ptr() + pos * n_kv, n_kv, dout.ptr() + pos * qs, qs);
          pos += n;
        }
        outs.push_back(dout.download());
      }
      for (size_t j = 1; j < outs.size(); ++j) {
        for (size_t i = 0; i < outs[0].size(); ++i) {
          ASSERT_EQ(outs[j][i], outs[0][i]) << "split " << j << " element " << i;
        }
      }
      std::unique_ptr<KvCache> host;
      ASSERT_TRUE(KvCache::create(mode, layers, total, &host).is_ok());
      std::vector<float> ref(static_cast<size_t>(qs * total));
      cpu_attend(*host, 0, s, q.data(), qs, total, 0, k.data(), v.data(), n_kv, ref.data(), pool);
      expect_close(outs[0], ref, 0, qs, c.hd, attn_tol(mode));
      double worst = 0.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(outs[0][i] - ref[i])));
      }
      std::printf("[ kv attn ] tensor cores %s hd %d: max |gpu - cpu| %.3g\n", kv_mode_name(mode),
                  c.hd, worst);
    }
  }
}

TEST_F(CudaKv, CreateRejectsBadArguments) {
  std::unique_ptr<KvStore> kv;
  EXPECT_EQ(stream_->create_kv(KvMode::F32, kLayers, 0, &kv).code(), GEIST_E_INVALID_ARG);
  EXPECT_EQ(stream_->create_kv(KvMode::F32, {{64, 0, 64, 64}}, 8, &kv).code(), GEIST_E_INVALID_ARG);
  EXPECT_EQ(stream_->create_kv(static_cast<KvMode>(9), kLayers, 8, &kv).code(),
            GEIST_E_INVALID_ARG);
  // Q8 / Q4 blocks of 32 spanning two 48-wide heads (stories-qwen35) and KIVI's unrotated
  // blocks: every mode takes any head width.
  for (const KvMode m : kAllModes) {
    EXPECT_TRUE(stream_->create_kv(m, {{2 * 48, 2 * 48, 48, 48}}, 8, &kv).is_ok())
        << kv_mode_name(m);
  }
}

}  // namespace
}  // namespace geist
