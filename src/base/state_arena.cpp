#include "base/state_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include "base/status.h"

namespace geist {

namespace {
size_t page_round(size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}
}  // namespace

StateArena::~StateArena() {
  for (const auto& [p, n] : blocks_) munmap(p, n);
}

void* StateArena::allocate(size_t n) {
  if (!device_local_) return ::operator new(n, std::nothrow);
  GEIST_CHECK(depth_ > 0, "device-local state allocated outside an access span");
  const size_t len = page_round(n == 0 ? 1 : n);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  blocks_[p] = len;
  return p;
}

void StateArena::deallocate(void* p, size_t n) {
  if (!device_local_) {
    ::operator delete(p);
    return;
  }
  auto it = blocks_.find(p);
  GEIST_CHECK(it != blocks_.end(), "device-local block freed twice or never allocated");
  munmap(p, it->second);
  blocks_.erase(it);
}

void StateArena::protect_all(int prot) {
  for (const auto& [p, n] : blocks_) {
    GEIST_CHECK(mprotect(p, n, prot) == 0, "mprotect of a device-local state block failed");
  }
}

void StateArena::begin_access() {
  if (device_local_ && depth_++ == 0) protect_all(PROT_READ | PROT_WRITE);
}

void StateArena::end_access() {
  if (!device_local_) return;
  GEIST_CHECK(depth_ > 0, "device-local access span ended twice");
  if (--depth_ == 0) protect_all(PROT_NONE);
}

}  // namespace geist
