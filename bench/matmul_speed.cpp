// Single-call speed of geist::matmul for one weight type and shape, against the memory read
// bandwidth of the same buffer: shows whether decode-sized calls are memory-bound and what a
// prefill-sized call reaches in GFLOP/s. Not a test; prints numbers.
//   bench/matmul_speed TYPE N_IN N_OUT N_TOK THREADS REPS [rows|groups] [auto|decode|panels]
//   (e.g. q8_0 2048 8192 1 2 20)
// N_TOK may be a comma list (1,4,16: one line each, the same weights). The 7th argument picks
// the weight layout (kernels/matmul.h): the file's rows (default) or the GROUPS16 repack the CPU
// backend makes at load; the 8th the Q8 path's activation layout (matmul_q8_layout): what
// matmul() picks (default), the decode kernel's rows or the prefill kernel's panels forced, or
// `compare`: decode and panels calls alternated in one loop (a loaded machine slows both
// alike), best of REPS each and their ratio.
// RING_MB=M in the environment: each call reads the next of as many copies of the matrix as fit
// in M MiB (huge pages where granted, as the CPU backend's weights), so with M well above the L3
// the weights come from DRAM, as in a model's decode step; without it the one matrix is warm in
// cache after the first call.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd/matmul_simd.h"

using namespace geist;

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s TYPE N_IN N_OUT N_TOK THREADS REPS\n", argv[0]);
    return 2;
  }
  GgmlType type = GgmlType::F32;
  bool found = false;
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType t = static_cast<GgmlType>(id);
    if (quant_type_supported(t) && std::string(ggml_type_name(t)) == argv[1]) {
      type = t;
      found = true;
    }
  }
  if (!found) {
    std::fprintf(stderr, "unknown type %s\n", argv[1]);
    return 2;
  }
  const int64_t n_in = std::atoll(argv[2]), n_out = std::atoll(argv[3]);
  std::vector<int64_t> n_toks;
  for (const char* p = argv[4]; *p != '\0';) {
    char* end = nullptr;
    n_toks.push_back(std::strtoll(p, &end, 10));
    if (end == p || n_toks.back() < 1) {
      std::fprintf(stderr, "N_TOK must be a comma list of positive counts\n");
      return 2;
    }
    p = *end == ',' ? end + 1 : end;
  }
  const int64_t n_tok = *std::max_element(n_toks.begin(), n_toks.end());
  const int threads = std::atoi(argv[5]), reps = std::atoi(argv[6]);
  if (threads < 1 || reps < 1) {
    std::fprintf(stderr, "THREADS and REPS must be at least 1\n");
    return 2;
  }
  Q8Layout act_layout = Q8Layout::AUTO;
  bool compare = false;
  if (argc > 8) {
    const std::string a = argv[8];
    if (a == "compare") {
      compare = true;
    } else if (a == "decode") {
      act_layout = Q8Layout::ROWS;
    } else if (a == "panels") {
      act_layout = Q8Layout::PANELS;
    } else if (a != "auto") {
      std::fprintf(stderr, "the 8th argument is auto, decode, panels or compare\n");
      return 2;
    }
  }
  const size_t rb = ggml_row_size(type, n_in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(n_out));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    for (float& f : row) f = nd(rng);
    quantize_row(type, row.data(), w.data() + static_cast<size_t>(o) * rb, n_in);
  }
  std::vector<float> x(static_cast<size_t>(n_in * n_tok)), y(static_cast<size_t>(n_out * n_tok));
  for (float& f : x) f = nd(rng);
  ThreadPool pool(threads);
  std::vector<float> scratch(matmul_scratch_floats(n_in, threads));
  WeightMatrix wm{type, w.data(), n_in, n_out, rb};
  const bool groups = argc > 7 && std::string(argv[7]) == "groups";
  std::vector<uint8_t> grouped;
  if (groups) {
    if (!weight_groups16_useful(wm)) {
      std::fprintf(stderr, "GROUPS16 is not used for %s on this CPU\n", argv[1]);
      return 2;
    }
    grouped.resize(weight_groups16_bytes(wm));
    weight_to_groups16(wm, grouped.data(), &wm);
  }
  const char* ring_mb = std::getenv("RING_MB");
  const std::vector<uint8_t>& one = groups ? grouped : w;
  const size_t copy_bytes = (one.size() + 4095) / 4096 * 4096;
  const size_t n_copies =
      ring_mb ? std::max<size_t>(1, (std::strtoull(ring_mb, nullptr, 10) << 20) / copy_bytes) : 0;
  constexpr size_t kHuge = size_t{1} << 21;
  const size_t ring_bytes = (copy_bytes * n_copies + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<uint8_t, decltype(&std::free)> ring(
      n_copies ? static_cast<uint8_t*>(std::aligned_alloc(kHuge, ring_bytes)) : nullptr,
      &std::free);
  if (ring) {
    (void)madvise(ring.get(), ring_bytes, MADV_HUGEPAGE);
    for (size_t c = 0; c < n_copies; ++c)
      std::memcpy(ring.get() + c * copy_bytes, one.data(), one.size());
  }
  size_t next_copy = 0;
  auto call = [&](int64_t nt, Q8Layout layout) {
    WeightMatrix m = wm;
    if (ring) m.data = ring.get() + (next_copy++ % n_copies) * copy_bytes;
    const auto t0 = std::chrono::steady_clock::now();
    matmul_q8_layout(m, x.data(), n_in, nt, y.data(), n_out, scratch.data(), pool, layout);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (const int64_t nt : n_toks) {
    if (compare) {
      double best_rows = 1e30, best_panels = 1e30;
      for (int r = 0; r <= reps; ++r) {
        const double a = call(nt, Q8Layout::ROWS), b = call(nt, Q8Layout::PANELS);
        if (r > 0) best_rows = std::min(best_rows, a), best_panels = std::min(best_panels, b);
      }
      std::printf(
          "%s%s %lldx%lld x %lld tok, %d threads, target %s: best decode %.3f ms, panels "
          "%.3f ms, decode / panels %.2f\n",
          argv[1], groups ? " GROUPS16" : "", static_cast<long long>(n_out),
          static_cast<long long>(n_in), static_cast<long long>(nt), threads, simd::target_name(),
          best_rows * 1e3, best_panels * 1e3, best_rows / best_panels);
      continue;
    }
    std::vector<double> times;
    for (int r = 0; r <= reps; ++r) {
      const double s = call(nt, act_layout);
      if (r > 0) times.push_back(s);
    }
    std::sort(times.begin(), times.end());
    const double best = times.front(), med = times[times.size() / 2];
    std::printf(
        "%s%s%s %lldx%lld x %lld tok, %d threads, target %s: median %.3f ms (best %.3f), "
        "%.2f GB/s of weights, %.1f GFLOP/s\n",
        argv[1], groups ? " GROUPS16" : "",
        act_layout == Q8Layout::ROWS     ? " decode"
        : act_layout == Q8Layout::PANELS ? " panels"
                                         : "",
        static_cast<long long>(n_out), static_cast<long long>(n_in), static_cast<long long>(nt),
        threads, simd::target_name(), med * 1e3, best * 1e3,
        static_cast<double>(w.size()) / best / 1e9,
        2.0 * static_cast<double>(n_in * n_out * nt) / best / 1e9);
  }
  return 0;
}
