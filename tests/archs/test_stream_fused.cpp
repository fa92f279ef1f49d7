// Stream's fused ops (backend.h, "fused ops") by default make exactly the plain calls their
// definitions name, in that order and with those arguments: the CPU streams rely on it for
// their bits (they override none of them). A stream that records its plain calls runs each
// fused op once; the expected call lists are written from backend.h's definitions.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace geist {
namespace stream_fused_test {  // a namespace of its own: test_archs is a unity build
namespace {

float g_mem[4096];  // the addresses the ops are given (never read or written)

// An address as "@offset" into g_mem (nullptr as "null").
std::string at(const void* p) {
  if (p == nullptr) return "null";
  return "@" + std::to_string(static_cast<const float*>(p) - g_mem);
}

template <class... A>
std::string call(const char* op, A... a) {
  std::string s = op;
  ((s += " " + std::string(a)), ...);
  return s;
}
std::string num(double v) { return std::to_string(v); }

class RecordingKv final : public KvStore {
 public:
  explicit RecordingKv(std::vector<std::string>* log) : log_(log) {}
  KvMode mode() const override { return KvMode::F32; }
  int32_t max_seq_len() const override { return 64; }
  void attend(int32_t il, const AttentionShape& s, const float* q, int64_t q_stride, int32_t n,
              int32_t pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
              float* out, int64_t out_stride) override {
    log_->push_back(call("attend", num(il), num(s.n_head), at(q), num(q_stride), num(n), num(pos),
                         at(k), num(k_stride), at(v), num(v_stride), at(out), num(out_stride)));
  }
  bool can_resume_at(int32_t) const override { return true; }
  int64_t bytes_per_token() const override { return 0; }
  void regions(int32_t, std::vector<KvRegion>*) const override {}
  void download_region(const KvRegion&, int32_t, uint8_t*) const override {}
  void upload_region(const KvRegion&, int32_t, const uint8_t*) override {}

 private:
  std::vector<std::string>* log_;
};

class RecordingStream final : public Stream {
 public:
  std::vector<std::string> log;

  void set_pool(ThreadPool*) override {}
  Status alloc(size_t, std::unique_ptr<Buffer>*) override { return Status::ok(); }
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void fill_zero(void*, size_t) override {}
  Status create_kv(KvMode, const std::vector<KvLayerSpec>&, int32_t,
                   std::unique_ptr<KvStore>*) override {
    return Status::ok();
  }
  void get_rows(const WeightMatrix&, const int32_t*, int32_t, float*) override {}
  void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int32_t n_tok, float* y,
              int64_t y_stride) override {
    log.push_back(
        call("matmul", num(w.n_out), at(x), num(x_stride), num(n_tok), at(y), num(y_stride)));
  }
  void matmul_to_host(const WeightMatrix&, const float*, int64_t, int32_t, float*,
                      int64_t) override {}
  void rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
                int32_t n_rows, int64_t n, float eps) override {
    log.push_back(call("rms_norm", at(x), num(x_stride), at(w), at(y), num(y_stride), num(n_rows),
                       num(n), num(eps)));
  }
  void rope(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head, int32_t head_dim,
            int32_t pos0, const RopeParams& p) override {
    log.push_back(call("rope", at(x), num(x_stride), num(n_tok), num(n_head), num(head_dim),
                       num(pos0), num(p.n_rot)));
  }
  void add(float* y, const float* x, int64_t n) override {
    log.push_back(call("add", at(y), at(x), num(n)));
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    log.push_back(call("swiglu", at(gate), at(up), at(out), num(n)));
  }
  void sigmoid_mul(float*, int64_t, const float*, int64_t, int32_t, int64_t) override {}
  void deltanet_gates(float* beta, float* g, int32_t n_tok, int32_t n_heads, const float* a,
                      const float* dt_bias) override {
    log.push_back(
        call("deltanet_gates", at(beta), at(g), num(n_tok), num(n_heads), at(a), at(dt_bias)));
  }
  void conv1d_silu(const float* x, int64_t x_stride, int32_t n_tok, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride) override {
    log.push_back(call("conv1d_silu", at(x), num(x_stride), num(n_tok), num(n_ch), at(w),
                       num(kernel), at(state), at(out), num(out_stride)));
  }
  void l2_norm_heads(float* x, int64_t x_stride, int32_t n_tok, int32_t n_heads, int32_t d,
                     float eps, float scale) override {
    log.push_back(call("l2_norm_heads", at(x), num(x_stride), num(n_tok), num(n_heads), num(d),
                       num(eps), num(scale)));
  }
  void gated_delta_rule(const GatedDeltaArgs& a, int32_t chunk) override {
    log.push_back(call("gated_delta_rule", num(static_cast<double>(a.n_tokens)), at(a.q),
                       at(a.state), at(a.out), num(chunk)));
  }
  void rms_norm_gated(const float* x, const float* z, const float* w, int32_t n_rows, int32_t d,
                      float eps, float* out) override {
    log.push_back(
        call("rms_norm_gated", at(x), at(z), at(w), num(n_rows), num(d), num(eps), at(out)));
  }
};

float* p(int64_t off) { return g_mem + off; }

TEST(StreamFused, AddRmsNormIsAddThenNorm) {
  RecordingStream s;
  s.add_rms_norm(p(0), p(100), p(200), p(300), 8, 3, 8, 1e-5f);
  EXPECT_EQ(s.log, (std::vector<std::string>{
                       call("add", at(p(0)), at(p(100)), num(24)),
                       call("rms_norm", at(p(0)), num(8), at(p(200)), at(p(300)), num(8), num(3),
                            num(8), num(1e-5f)),
                   }));
}

TEST(StreamFused, MatmulManyAndMatmulSwigluAreTheMatmulsInOrder) {
  RecordingStream s;
  WeightMatrix a, b, c;
  a.n_out = 16;
  b.n_out = 4;
  c.n_out = 9;
  const MatmulDst outs[] = {{&a, p(100), 16}, {&b, p(200), 5}, {&c, p(300), 9}};
  s.matmul_many(outs, 3, p(0), 12, 2);
  s.matmul_swiglu(a, a, p(0), 12, 2, p(400), p(500), p(400));
  EXPECT_EQ(s.log, (std::vector<std::string>{
                       call("matmul", num(16), at(p(0)), num(12), num(2), at(p(100)), num(16)),
                       call("matmul", num(4), at(p(0)), num(12), num(2), at(p(200)), num(5)),
                       call("matmul", num(9), at(p(0)), num(12), num(2), at(p(300)), num(9)),
                       call("matmul", num(16), at(p(0)), num(12), num(2), at(p(400)), num(16)),
                       call("matmul", num(16), at(p(0)), num(12), num(2), at(p(500)), num(16)),
                       call("swiglu", at(p(400)), at(p(500)), at(p(400)), num(32)),
                   }));
}

TEST(StreamFused, DeltaNetPrepIsGatesConvThenTheTwoNorms) {
  RecordingStream s;
  DeltaNetPrepArgs a;
  a.n_tok = 1;
  a.beta = p(10);
  a.g = p(20);
  a.gate_heads = 4;
  a.a = p(30);
  a.dt_bias = p(40);
  a.x = p(100);
  a.x_stride = 40;
  a.n_ch = 40;
  a.w = p(200);
  a.kernel = 4;
  a.state = p(400);
  a.out = p(600);
  a.out_stride = 40;
  a.l2_heads = 2;
  a.d = 8;
  a.eps = 1e-6f;
  a.q_scale = 0.25f;
  s.deltanet_prep(a);
  a.beta = nullptr;  // no gates
  a.n_tok = 3;
  s.deltanet_prep(a);
  const std::vector<std::string> tail = {
      call("l2_norm_heads", at(p(600)), num(40), num(1), num(2), num(8), num(1e-6f), num(0.25f)),
      call("l2_norm_heads", at(p(616)), num(40), num(1), num(2), num(8), num(1e-6f), num(1.0f)),
  };
  EXPECT_EQ(
      s.log,
      (std::vector<std::string>{
          call("deltanet_gates", at(p(10)), at(p(20)), num(1), num(4), at(p(30)), at(p(40))),
          call("conv1d_silu", at(p(100)), num(40), num(1), num(40), at(p(200)), num(4), at(p(400)),
               at(p(600)), num(40)),
          tail[0],
          tail[1],
          call("conv1d_silu", at(p(100)), num(40), num(3), num(40), at(p(200)), num(4), at(p(400)),
               at(p(600)), num(40)),
          call("l2_norm_heads", at(p(600)), num(40), num(3), num(2), num(8), num(1e-6f),
               num(0.25f)),
          call("l2_norm_heads", at(p(616)), num(40), num(3), num(2), num(8), num(1e-6f), num(1.0f)),
      }));
}

TEST(StreamFused, GatedDeltaRuleNormIsTheRuleThenTheGatedNormOfItsOutput) {
  RecordingStream s;
  GatedDeltaArgs a;
  a.n_tokens = 1;
  a.n_k_heads = 2;
  a.n_v_heads = 4;
  a.d_k = 8;
  a.d_v = 16;
  a.q = p(0);
  a.state = p(1000);
  a.out = p(2000);
  a.out_stride = 64;
  s.gated_delta_rule_norm(a, 64, p(3000), p(3500), 1e-6f);
  EXPECT_EQ(s.log,
            (std::vector<std::string>{
                call("gated_delta_rule", num(1), at(p(0)), at(p(1000)), at(p(2000)), num(64)),
                call("rms_norm_gated", at(p(2000)), at(p(3000)), at(p(3500)), num(4), num(16),
                     num(1e-6f), at(p(2000))),
            }));
}

TEST(StreamFused, RopeAttendIsTheNormsTheRopesThenTheAttention) {
  RecordingStream s;
  RecordingKv kv(&s.log);
  const AttentionShape sh{4, 2, 8, 8, 0.35f};
  RopeParams rp;
  rp.n_rot = 8;
  HeadNorms hn;
  hn.q_src = p(0);
  hn.q_src_stride = 16;
  hn.q_w = p(500);
  hn.k_src = p(300);
  hn.k_src_stride = 8;
  hn.k_w = p(510);
  hn.eps = 1e-6f;
  s.rope_attend(kv, 3, sh, rp, &hn, p(100), 32, p(300), 16, p(400), 16, 2, 7, p(600), 32);
  KvStore* kvs[] = {&kv, &kv};
  const int32_t pos[] = {5, 9};
  s.rope_attend_rows(1, sh, rp, kvs, pos, 2, p(100), 32, p(300), 16, p(400), 16, p(600), 32);
  EXPECT_EQ(s.log, (std::vector<std::string>{
                       call("rms_norm", at(p(0)), num(16), at(p(500)), at(p(100)), num(8), num(8),
                            num(8), num(1e-6f)),
                       call("rms_norm", at(p(300)), num(8), at(p(510)), at(p(300)), num(8), num(4),
                            num(8), num(1e-6f)),
                       call("rope", at(p(100)), num(32), num(2), num(4), num(8), num(7), num(8)),
                       call("rope", at(p(300)), num(16), num(2), num(2), num(8), num(7), num(8)),
                       call("attend", num(3), num(4), at(p(100)), num(32), num(2), num(7),
                            at(p(300)), num(16), at(p(400)), num(16), at(p(600)), num(32)),
                       call("rope", at(p(100)), num(32), num(1), num(4), num(8), num(5), num(8)),
                       call("rope", at(p(300)), num(16), num(1), num(2), num(8), num(5), num(8)),
                       call("attend", num(1), num(4), at(p(100)), num(32), num(1), num(5),
                            at(p(300)), num(16), at(p(400)), num(16), at(p(600)), num(32)),
                       call("rope", at(p(132)), num(32), num(1), num(4), num(8), num(9), num(8)),
                       call("rope", at(p(316)), num(16), num(1), num(2), num(8), num(9), num(8)),
                       call("attend", num(1), num(4), at(p(132)), num(32), num(1), num(9),
                            at(p(316)), num(16), at(p(416)), num(16), at(p(632)), num(32)),
                   }));
}

TEST(StreamFused, L2NormHeadsPairIsQThenK) {
  RecordingStream s;
  s.l2_norm_heads_pair(p(0), 0.5f, p(64), 2.0f, 192, 3, 4, 16, 1e-6f);
  EXPECT_EQ(
      s.log,
      (std::vector<std::string>{
          call("l2_norm_heads", at(p(0)), num(192), num(3), num(4), num(16), num(1e-6f), num(0.5f)),
          call("l2_norm_heads", at(p(64)), num(192), num(3), num(4), num(16), num(1e-6f),
               num(2.0f)),
      }));
}

}  // namespace
}  // namespace stream_fused_test
}  // namespace geist
