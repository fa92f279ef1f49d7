#include "tokenizer/token_table.h"

#include <functional>
#include <limits>

#include "base/status.h"

namespace geist {
namespace {

uint64_t hash_text(std::string_view s) { return std::hash<std::string_view>{}(s); }

// Smallest power of two that keeps the load factor at or below 1/2 for n entries, so that
// linear probing stays short (a few slots on average, hits and misses alike).
size_t slots_for(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  return cap;
}

}  // namespace

size_t TokenTable::find_slot(std::string_view s, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return i;
    if (slot.hash == tag && (*this)[slot.id] == s) return i;
  }
}

int32_t TokenTable::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  return slots_[find_slot(s, hash_text(s))].id;
}

bool TokenTable::push_back(std::string_view s, int32_t* existing) {
  GEIST_CHECK(chars_.size() + s.size() <= std::numeric_limits<uint32_t>::max(),
              "TokenTable texts fit 32-bit offsets");
  GEIST_CHECK(ends_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "TokenTable ids fit int32");
  if (2 * (ends_.size() + 1) > slots_.size()) rehash(slots_for(ends_.size() + 1));
  const uint64_t h = hash_text(s);
  Slot& slot = slots_[find_slot(s, h)];
  if (slot.id >= 0) {
    if (existing) *existing = slot.id;
    return false;
  }
  slot.id = size();
  slot.hash = static_cast<uint32_t>(h >> 32);
  chars_.append(s);
  ends_.push_back(static_cast<uint32_t>(chars_.size()));
  return true;
}

void TokenTable::rehash(size_t n_slots) {
  slots_.assign(n_slots, Slot{-1, 0});
  const size_t mask = n_slots - 1;
  for (int32_t id = 0; id < size(); ++id) {
    const uint64_t h = hash_text((*this)[id]);
    size_t i = static_cast<size_t>(h) & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;  // texts are unique: no comparison needed
    slots_[i] = Slot{id, static_cast<uint32_t>(h >> 32)};
  }
}

void TokenTable::reserve(size_t n, size_t bytes) {
  chars_.reserve(bytes);
  ends_.reserve(n);
  if (2 * n > slots_.size()) rehash(slots_for(n));
}

void TokenTable::clear() {
  // Swapping with empty containers gives the memory back; clear() alone would keep it.
  std::string().swap(chars_);
  std::vector<uint32_t>().swap(ends_);
  std::vector<Slot>().swap(slots_);
}

size_t TokenTable::memory_bytes() const {
  return chars_.capacity() + ends_.capacity() * sizeof(uint32_t) + slots_.capacity() * sizeof(Slot);
}

void StringList::push_back(std::string_view s) {
  GEIST_CHECK(chars_.size() + s.size() <= std::numeric_limits<uint32_t>::max(),
              "StringList texts fit 32-bit offsets");
  GEIST_CHECK(ends_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "StringList indices fit int32");
  chars_.append(s);
  ends_.push_back(static_cast<uint32_t>(chars_.size()));
}

void StringList::reserve(size_t n, size_t bytes) {
  chars_.reserve(bytes);
  ends_.reserve(n);
}

void StringList::clear() {
  std::string().swap(chars_);
  std::vector<uint32_t>().swap(ends_);
}

size_t StringList::memory_bytes() const {
  return chars_.capacity() + ends_.capacity() * sizeof(uint32_t);
}

uint64_t MergeTable::hash(int32_t left, int32_t right) {
  // Both halves through one 64-bit multiply; the high bits mix all input bits, so the slot
  // index is taken from the top (Fibonacci hashing).
  const uint64_t k =
      (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  uint64_t h = k * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return h * 0xBF58476D1CE4E5B9ull;
}

size_t MergeTable::find_slot(int32_t left, int32_t right) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(hash(left, right) >> 32) & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.left < 0 || (slot.left == left && slot.right == right)) return i;
  }
}

MergeTable::Rule MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty() || left < 0 || right < 0) return Rule{-1, -1};
  const Slot& slot = slots_[find_slot(left, right)];
  return slot.left < 0 ? Rule{-1, -1} : slot.rule;
}

bool MergeTable::insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
  GEIST_CHECK(left >= 0 && right >= 0, "merge keys are non-negative");
  if (2 * (static_cast<size_t>(size_) + 1) > slots_.size()) rehash(slots_for(size_ + 1));
  Slot& slot = slots_[find_slot(left, right)];
  if (slot.left >= 0) return false;
  slot = Slot{left, right, Rule{rank, result}};
  ++size_;
  return true;
}

void MergeTable::rehash(size_t n_slots) {
  std::vector<Slot> old(n_slots, Slot{-1, -1, Rule{-1, -1}});
  old.swap(slots_);
  const size_t mask = n_slots - 1;
  for (const Slot& s : old) {
    if (s.left < 0) continue;
    size_t i = static_cast<size_t>(hash(s.left, s.right) >> 32) & mask;
    while (slots_[i].left >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void MergeTable::reserve(size_t n) {
  if (2 * n > slots_.size()) rehash(slots_for(n));
}

size_t MergeTable::memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

}  // namespace geist
