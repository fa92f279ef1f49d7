// Flat lookup tables for large vocabularies. A 248k-token vocabulary with as many merges
// costs ~0.45 KiB per entry as std::string + node-based hash maps; these keep every text in
// one buffer and index it with open addressing (a few tens of bytes per entry), and key BPE
// merges by token-id pairs instead of "left right" strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace geist {

// Strings numbered 0..size()-1 in insertion order, each findable by its text. Texts are
// unique: a duplicate is refused, so an index never changes once given out.
class TokenTable {
 public:
  int32_t size() const { return static_cast<int32_t>(ends_.size()); }
  bool empty() const { return ends_.empty(); }
  // Text of entry `id` (0 <= id < size()); valid until the table is changed.
  std::string_view operator[](int32_t id) const {
    const uint32_t begin = id == 0 ? 0 : ends_[id - 1];
    return std::string_view(chars_.data() + begin, ends_[id] - begin);
  }
  // Index of `s`, -1 if absent.
  int32_t find(std::string_view s) const;
  // Appends `s` as entry size() and returns true; if it is already present returns false,
  // leaves the table as it was and sets *existing (when given) to its index. The texts in
  // all may not exceed UINT32_MAX bytes (callers check input sizes first).
  bool push_back(std::string_view s, int32_t* existing = nullptr);
  // Room for n entries of `bytes` text in all without reallocating.
  void reserve(size_t n, size_t bytes);
  void clear();
  // Heap bytes owned (capacity, not size): what this table adds to resident memory.
  size_t memory_bytes() const;

 private:
  struct Slot {
    int32_t id;     // -1: empty
    uint32_t hash;  // high bits of the text's hash, to skip most text comparisons
  };
  void rehash(size_t n_slots);
  size_t find_slot(std::string_view s, uint64_t h) const;  // slot holding s, or the empty one

  std::string chars_;           // all texts back to back, no separators
  std::vector<uint32_t> ends_;  // [size()] end offset of each text in chars_
  std::vector<Slot> slots_;     // [power of two >= 2 * size()] open addressing, linear probing
};

// Strings numbered 0..size()-1 in insertion order, duplicates allowed; no lookup by text.
class StringList {
 public:
  int32_t size() const { return static_cast<int32_t>(ends_.size()); }
  bool empty() const { return ends_.empty(); }
  std::string_view operator[](int32_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(chars_.data() + begin, ends_[i] - begin);
  }
  // The texts in all may not exceed UINT32_MAX bytes (callers check input sizes first).
  void push_back(std::string_view s);
  void reserve(size_t n, size_t bytes);
  void clear();  // also gives the memory back
  size_t memory_bytes() const;

 private:
  std::string chars_;           // all texts back to back
  std::vector<uint32_t> ends_;  // [size()] end offset of each text in chars_
};

// BPE merge rules keyed by the pair of symbol keys they join (a symbol key is a token id, or
// an id for a merge part that is not a token; see BpeTokenizer). Each rule gives its rank
// (position in tokenizer.ggml.merges) and the key of the joined text (-1: neither a token
// nor a part of any rule, so it never merges again).
class MergeTable {
 public:
  struct Rule {
    int32_t rank;    // -1 when the pair has no rule
    int32_t result;  // key of left + right
  };
  int32_t size() const { return size_; }
  Rule find(int32_t left, int32_t right) const;
  // Adds a rule unless the pair already has one (the first rule listed wins, as in the
  // string-keyed table this replaces). Keys must be >= 0. Returns whether it was added.
  bool insert(int32_t left, int32_t right, int32_t rank, int32_t result);
  void reserve(size_t n);
  size_t memory_bytes() const;

 private:
  struct Slot {
    int32_t left;  // -1: empty
    int32_t right;
    Rule rule;
  };
  static uint64_t hash(int32_t left, int32_t right);
  void rehash(size_t n_slots);
  size_t find_slot(int32_t left, int32_t right) const;

  int32_t size_ = 0;
  std::vector<Slot> slots_;  // [power of two >= 2 * size_] open addressing, linear probing
};

}  // namespace geist
