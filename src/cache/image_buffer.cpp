#include "cache/image_buffer.h"

#include <sys/mman.h>

namespace geist_cache {

namespace {
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;  // x86-64 / arm64 with 4 KiB pages
}  // namespace

void advise_huge_pages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  if (p == nullptr || n < 2 * kHugePage) return;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kHugePage - 1) & ~(kHugePage - 1), hi = (b + n) & ~(kHugePage - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

void fresh_buffer(std::vector<uint8_t>* v, size_t n) {
  std::vector<uint8_t> fresh;
  fresh.reserve(n);  // allocated, not yet touched (a large one is a fresh mapping)
  advise_huge_pages(fresh.data(), n);
  fresh.resize(n);  // the first touch: 2 MiB at a time where granted
  v->swap(fresh);
}

}  // namespace geist_cache
