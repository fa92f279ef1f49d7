// Opening the GGUF files that the CLI writes (mkmodel, quantize), for the CLI tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "formats/gguf.h"

namespace geist::test {

// The parsed file, or null with the current test failed.
inline std::unique_ptr<GgufFile> open_gguf(const std::string& path) {
  std::unique_ptr<GgufFile> f;
  const Status st = GgufFile::open(path, &f);
  EXPECT_TRUE(st.is_ok()) << path << ": " << st.message();
  return f;
}

}  // namespace geist::test
