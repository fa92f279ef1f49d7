#include "chat/stop.h"

#include <algorithm>

namespace geist::chat {

size_t utf8_incomplete_tail(std::string_view text) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t len = 1;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
    }
    return len > back ? back : 0;
  }
  return 0;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(std::move(stops[i]));
    index_.push_back(static_cast<int>(i));
  }
}

std::string_view StopMatcher::matched() const {
  if (matched_ < 0) return {};
  for (size_t i = 0; i < index_.size(); ++i) {
    if (index_[i] == matched_) return stops_[i];
  }
  return {};
}

bool StopMatcher::feed(std::string_view piece, std::string* out) {
  if (stopped()) return false;
  held_.append(piece);
  // Earliest match; held_ never contains a whole stop string from before, so any match
  // overlaps the new piece.
  size_t best = std::string::npos, best_len = 0;
  int best_i = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t p = held_.find(stops_[i]);
    if (p == std::string::npos) continue;
    if (p < best || (p == best && stops_[i].size() > best_len)) {
      best = p;
      best_len = stops_[i].size();
      best_i = static_cast<int>(i);
    }
  }
  if (best_i >= 0) {
    out->append(held_, 0, best);
    held_.clear();
    matched_ = index_[best_i];
    return true;
  }
  // Hold the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, held_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  const size_t emit = held_.size() - hold;
  out->append(held_, 0, emit);
  held_.erase(0, emit);
  return false;
}

void StopMatcher::finish(std::string* out) {
  if (stopped()) return;
  out->append(held_);
  held_.clear();
}

}  // namespace geist::chat
