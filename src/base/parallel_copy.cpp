#include "base/parallel_copy.h"

#include <algorithm>
#include <cstring>

namespace geist {

namespace {
constexpr size_t kSplitAlign = 4096;
}  // namespace

int parallel_copy_threads(size_t total, int n_threads) {
  if (n_threads <= 1) return 1;
  const size_t by_size = total / kParallelCopyMinBytes;
  return static_cast<int>(std::clamp<size_t>(by_size, 1, static_cast<size_t>(n_threads)));
}

size_t parallel_copy_split(size_t total, int ti, int nt) {
  if (ti <= 0) return 0;
  if (ti >= nt) return total;
  // total * ti / nt without overflow for any size_t total and int nt.
  const size_t q = total / static_cast<size_t>(nt), r = total % static_cast<size_t>(nt);
  const size_t at =
      q * static_cast<size_t>(ti) + r * static_cast<size_t>(ti) / static_cast<size_t>(nt);
  return at / kSplitAlign * kSplitAlign;
}

void copy_piece(const CopyRange* c, size_t n, size_t lo, size_t hi) {
  size_t base = 0;  // where c[i] starts in the concatenation
  for (size_t i = 0; i < n && base < hi; base += c[i].n, ++i) {
    const size_t b = std::max(lo, base), e = std::min(hi, base + c[i].n);
    if (b < e) std::memcpy(c[i].dst + (b - base), c[i].src + (b - base), e - b);
  }
}

void parallel_copy(const CopyRange* c, size_t n, ThreadPool* pool) {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += c[i].n;
  const int nt = pool != nullptr ? parallel_copy_threads(total, pool->n_threads()) : 1;
  if (nt <= 1) {
    copy_piece(c, n, 0, total);
    return;
  }
  pool->run([&](int ti, int) {
    if (ti >= nt) return;
    copy_piece(c, n, parallel_copy_split(total, ti, nt), parallel_copy_split(total, ti + 1, nt));
  });
}

}  // namespace geist
