// Memory for a session's state buffers, optionally "device-local": the CPU_DEVICE_LOCAL test
// backend maps every block PROT_NONE outside an access span, so state memory is reachable only
// through the backend's ops and its upload/download path, as GPU memory is. Any other access
// (a snapshot reading KV rows through a stale pointer, say) faults at once instead of
// silently working on the CPU and failing only on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <vector>

namespace geist {

class StateArena {
 public:
  // device_local false: plain heap memory, always accessible.
  explicit StateArena(bool device_local) : device_local_(device_local) {}
  ~StateArena();
  StateArena(const StateArena&) = delete;
  StateArena& operator=(const StateArena&) = delete;

  bool device_local() const { return device_local_; }
  // Page-aligned zeroed block (device-local) or heap block; nullptr when out of memory.
  // Device-local blocks may only be made inside an access span (they are written at once).
  void* allocate(size_t n);
  void deallocate(void* p, size_t n);
  // Access spans nest; the outermost begin maps every block readable and writable, the
  // matching end maps them PROT_NONE again (device-local only; no-ops otherwise).
  void begin_access();
  void end_access();
  bool accessible() const { return !device_local_ || depth_ > 0; }

 private:
  void protect_all(int prot);
  bool device_local_;
  int depth_ = 0;
  std::map<void*, size_t> blocks_;  // device-local blocks: address -> mapped bytes
};

// std::allocator-compatible view of an arena (nullptr arena: the global heap), so that
// containers of state bytes keep their usual interface.
template <class T>
struct StateAllocator {
  using value_type = T;
  StateArena* arena = nullptr;
  StateAllocator() = default;
  explicit StateAllocator(StateArena* a) : arena(a) {}
  template <class U>
  StateAllocator(const StateAllocator<U>& o) : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    if (!arena) return std::allocator<T>().allocate(n);
    void* p = arena->allocate(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (!arena) return std::allocator<T>().deallocate(p, n);
    arena->deallocate(p, n * sizeof(T));
  }
  template <class U>
  bool operator==(const StateAllocator<U>& o) const {
    return arena == o.arena;
  }
};

using StateBytes = std::vector<uint8_t, StateAllocator<uint8_t>>;
using StateFloats = std::vector<float, StateAllocator<float>>;

// RAII access span.
class StateAccess {
 public:
  explicit StateAccess(StateArena* a) : a_(a) {
    if (a_) a_->begin_access();
  }
  ~StateAccess() {
    if (a_) a_->end_access();
  }
  StateAccess(const StateAccess&) = delete;
  StateAccess& operator=(const StateAccess&) = delete;

 private:
  StateArena* a_;
};

}  // namespace geist
