// Stop strings over streamed text: what may be emitted now, what must wait, where to stop.
// Knows nothing of tokens; fed the decoded text pieces in order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace geist::chat {

// Bytes at the end of `text` that begin a UTF-8 sequence the text does not complete (0..3).
// A streamer holds them back so that every piece it sends is whole UTF-8 (JSON and SSE need
// that); a byte that cannot start or continue a sequence counts as complete.
size_t utf8_incomplete_tail(std::string_view text);

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored (they would match everywhere).
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `piece` to the text seen so far and appends to *out the text that is safe to emit:
  // everything except a suffix that could still be the start of a stop string. On a match
  // returns true and *out ends just before the stop string, which is never emitted; the match
  // is the earliest in the text (the longest stop string when several start there). After a
  // match, feed and finish emit nothing more. Not thread-safe (one matcher per stream).
  bool feed(std::string_view piece, std::string* out);
  // The end of the stream: appends the held-back text (no stop string matched in it).
  void finish(std::string* out);

  bool stopped() const { return matched_ >= 0; }
  // Index into the constructor's `stops` of the stop string that matched, or -1.
  int matched_index() const { return matched_; }
  // The stop string that matched, or "" if none did.
  std::string_view matched() const;

 private:
  std::vector<std::string> stops_;
  std::vector<int> index_;  // [stops_.size()] index of stops_[i] in the constructor's list
  std::string held_;        // text not yet emitted; shorter than the longest stop string
  int matched_ = -1;
};

}  // namespace geist::chat
