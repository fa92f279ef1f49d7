// Fields of the fixtures' flat JSON files ("key": [1, 2, ...]), for the suites that compare
// against token lists recorded by llama.cpp or Python. Not a general JSON parser.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace geist::test {

// The integer array stored under "key" (its first occurrence as a key, i.e. followed by ':').
// Fails the current test (and returns what was read so far, or nothing) when the key is
// missing, its value is not an array, the array is not closed or an element is not an integer.
inline std::vector<int32_t> json_int_array(const std::string& json, const std::string& key) {
  std::vector<int32_t> out;
  const std::string quoted = "\"" + key + "\"";
  size_t i = std::string::npos;
  for (size_t k = json.find(quoted); k != std::string::npos; k = json.find(quoted, k + 1)) {
    size_t c = k + quoted.size();
    while (c < json.size() && std::isspace(static_cast<unsigned char>(json[c]))) ++c;
    if (c < json.size() && json[c] == ':') {
      i = c + 1;
      break;
    }
  }
  if (i == std::string::npos) {
    ADD_FAILURE() << "JSON has no key '" << key << "'";
    return out;
  }
  while (i < json.size() && std::isspace(static_cast<unsigned char>(json[i]))) ++i;
  if (i >= json.size() || json[i] != '[') {
    ADD_FAILURE() << "JSON value of '" << key << "' is not an array";
    return out;
  }
  const size_t end = json.find(']', i);
  if (end == std::string::npos) {
    ADD_FAILURE() << "JSON array '" << key << "' is not closed";
    return out;
  }
  for (++i; i < end;) {
    const char ch = json[i];
    if (std::isspace(static_cast<unsigned char>(ch)) || ch == ',') {
      ++i;
      continue;
    }
    char* stop = nullptr;
    const long v = std::strtol(json.c_str() + i, &stop, 10);
    const size_t used = static_cast<size_t>(stop - (json.c_str() + i));
    if (used == 0 || i + used > end || v < INT32_MIN || v > INT32_MAX) {
      ADD_FAILURE() << "JSON array '" << key << "' has a non-integer element at offset " << i;
      return out;
    }
    out.push_back(static_cast<int32_t>(v));
    i += used;
  }
  return out;
}

}  // namespace geist::test
