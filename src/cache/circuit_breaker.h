// A circuit breaker for a remote tier: after `failures` failures in a row it opens and callers
// stop trying for a backoff period (doubling on each failed probe, up to a cap); then one
// caller probes (half-open) and its outcome closes or reopens the circuit. Thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace geist_cache {

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  struct Config {
    int failures = 3;                              // in a row, to open
    std::chrono::milliseconds backoff{1000};       // first open period
    std::chrono::milliseconds backoff_max{30000};  // cap of the doubling
  };
  explicit CircuitBreaker(Config cfg) : cfg_(cfg), backoff_(cfg.backoff) {}

  // Whether a caller may try now. In the open state past the backoff, one caller is let through
  // as the probe; a probe that never reports is replaced after another backoff period.
  bool allow(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kClosed) return true;
    if (now < until_) return false;
    state_ = State::kHalfOpen;
    until_ = now + backoff_;
    return true;
  }
  // Whether the circuit is open with its backoff still running (no caller would be let through).
  bool blocked(Clock::time_point now) const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_ != State::kClosed && now < until_;
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_ == State::kClosed;
  }
  // Returns true when this call closed an open circuit.
  bool success() {
    std::lock_guard<std::mutex> lock(mu_);
    const bool was_open = state_ != State::kClosed;
    state_ = State::kClosed;
    failures_ = 0;
    backoff_ = cfg_.backoff;
    return was_open;
  }
  // Returns true when this call opened the circuit.
  bool failure(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    ++failures_;
    if (state_ == State::kHalfOpen) {
      backoff_ = std::min(backoff_ * 2, cfg_.backoff_max);
      state_ = State::kOpen;
      until_ = now + backoff_;
      return false;
    }
    if (state_ == State::kClosed && failures_ >= cfg_.failures) {
      state_ = State::kOpen;
      until_ = now + backoff_;
      ++opens_;
      return true;
    }
    return false;
  }
  int64_t opens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opens_;
  }

 private:
  enum class State { kClosed, kOpen, kHalfOpen };
  const Config cfg_;
  mutable std::mutex mu_;
  State state_ = State::kClosed;
  int failures_ = 0;
  int64_t opens_ = 0;
  std::chrono::milliseconds backoff_;
  Clock::time_point until_{};
};

}  // namespace geist_cache
