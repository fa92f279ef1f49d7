// Small helpers shared by the cache and tier tests: token runs, filled images, deadlines.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "cache/tier.h"
#include "geist/geist.h"

namespace geist_test {

// n tokens start, start + 1, ...
inline std::vector<geist_token> seq(size_t n, int start = 1) {
  std::vector<geist_token> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

// An image of n bytes, each `fill`.
inline std::vector<uint8_t> img(size_t n, uint8_t fill) { return std::vector<uint8_t>(n, fill); }

// A deadline no test step should reach (5 s from now).
inline geist_cache::Deadline later() {
  return std::chrono::steady_clock::now() + std::chrono::seconds(5);
}

// A tier list of one.
inline std::vector<std::unique_ptr<geist_cache::Tier>> one(std::unique_ptr<geist_cache::Tier> t) {
  std::vector<std::unique_ptr<geist_cache::Tier>> v;
  v.push_back(std::move(t));
  return v;
}

}  // namespace geist_test
