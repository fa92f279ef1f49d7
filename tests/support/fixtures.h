// Access to ../shared/fixtures for tests.
//
// Tests that need fixture data call GEIST_REQUIRE_FIXTURES() first. When the directory is
// missing the test is skipped, and the test main prints one loud line counting the skips.
// With GEIST_REQUIRE_FIXTURES=1 in the environment (set by .ci/run) a missing directory is a
// test failure instead.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace geist::test {

// Root of the fixtures: $GEIST_FIXTURES, else <repo>/../shared/fixtures.
std::string fixtures_dir();
// fixtures_dir() + "/" + rel.
std::string fixture_path(const std::string& rel);
bool fixtures_available();
bool fixtures_required();
void note_fixture_skip();
int fixture_skip_count();

// Reads a raw little-endian float32 file. Fails the current test on error.
std::vector<float> read_f32_file(const std::string& path);
std::string read_text_file(const std::string& path);

// A scratch file path of this process: gtest's temporary directory + "geist_<pid>_" + name, so
// that test processes running side by side (ctest -j, a suite's gtest shards) never share one.
std::string temp_path(const std::string& name);

}  // namespace geist::test

#define GEIST_REQUIRE_FIXTURES()                                                   \
  do {                                                                             \
    if (!::geist::test::fixtures_available()) {                                    \
      if (::geist::test::fixtures_required()) {                                    \
        FAIL() << "fixtures required (GEIST_REQUIRE_FIXTURES=1) but not found at " \
               << ::geist::test::fixtures_dir();                                   \
      }                                                                            \
      ::geist::test::note_fixture_skip();                                          \
      GTEST_SKIP() << "fixtures not found at " << ::geist::test::fixtures_dir();   \
    }                                                                              \
  } while (0)
