// A Tier in memory for tests: holds objects in a map and counts what it is asked.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cache/tier.h"

namespace geist_test {

using geist_cache::Deadline;
using geist_cache::Image;
using geist_cache::TierStats;

class MemTier : public geist_cache::Tier {
 public:
  const char* name() const override { return "mem"; }
  bool put(const std::string& key, Image object) override {
    std::lock_guard<std::mutex> l(mu);
    ++st.puts;
    objects[key] = std::move(object);
    return true;
  }
  Image get(const std::string& key, Deadline) override {
    std::lock_guard<std::mutex> l(mu);
    ++st.gets;
    auto it = objects.find(key);
    if (it == objects.end()) return nullptr;
    ++st.hits;
    return it->second;
  }
  std::vector<bool> contains(const std::vector<std::string>& keys, Deadline) override {
    std::lock_guard<std::mutex> l(mu);
    ++contains_calls;
    std::vector<bool> out;
    for (const auto& k : keys) out.push_back(objects.count(k) != 0);
    return out;
  }
  void erase(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu);
    objects.erase(key);
  }
  TierStats stats() const override {
    std::lock_guard<std::mutex> l(mu);
    return st;
  }
  mutable std::mutex mu;
  std::map<std::string, Image> objects;
  TierStats st;
  int contains_calls = 0;
};

}  // namespace geist_test
