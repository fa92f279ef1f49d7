// geist bench / bench-snapshot --json: the keys issue 6 names, sane statistics, and a model
// name that needs escaping survives the JSON round trip. The timings themselves are not
// asserted (benchmarks, not timed tests): only their internal consistency.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

// The number stored under "key" (the first occurrence); fails the test when absent.
double json_number(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = json.find(needle);
  EXPECT_NE(at, std::string::npos) << "no key '" << key << "' in " << json;
  if (at == std::string::npos) return -1.0;
  const char* begin = json.c_str() + at + needle.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  EXPECT_NE(end, begin) << "key '" << key << "' is not a number in " << json;
  return v;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// A copy of stories260K whose file name holds a quote and a backslash.
std::string odd_named_model(const TempDir& dir) {
  const std::string src = fixture_path("models/stories260K.gguf");
  const std::string dst = dir.file("we\"ird\\name.gguf");
  std::filesystem::copy_file(src, dst);
  return dst;
}

TEST(CliBench, JsonHasTheIssueKeysAndEscapesTheModelName) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const std::string model = odd_named_model(dir);
  const CliResult r = run_geist(
      {"bench", "-m", model, "-p", "16", "-n", "8", "-r", "3", "-t", "1", "--json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 1u) << "one JSON object on stdout, got: " << r.out;
  const std::string& j = out[0];
  EXPECT_EQ(json_string(j, "model"), "we\"ird\\name.gguf");
  EXPECT_EQ(json_number(j, "threads"), 1.0);
  EXPECT_EQ(json_number(j, "n_prompt"), 16.0);
  EXPECT_EQ(json_number(j, "n_gen"), 8.0);
  for (const char* k : {"prefill_tps", "decode_tps"}) {
    const std::string key = k;
    const double med = json_number(j, key);
    const double lo = json_number(j, key + "_min");
    const double hi = json_number(j, key + "_max");
    EXPECT_GT(lo, 0.0) << key;
    EXPECT_LE(lo, med) << key;
    EXPECT_LE(med, hi) << key;
  }
}

TEST(CliBenchSnapshot, JsonRowsEscapeTheModelName) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const std::string model = odd_named_model(dir);
  const CliResult r = run_geist({"bench-snapshot", "-m", model, "--kv-mode", "f16,q8", "--prefix",
                                 "32", "--suffix", "4", "-r", "1", "-t", "1", "--json"},
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 2u) << "one JSON object per case, got: " << r.out;
  for (const std::string& j : out) {
    EXPECT_EQ(json_string(j, "model"), "we\"ird\\name.gguf") << j;
    EXPECT_EQ(json_number(j, "prefix"), 32.0);
    EXPECT_GT(json_number(j, "image_bytes"), 0.0);
  }
}

// bench-tier starts its own redis-server, measures every path through the server's cache layer
// and says so in one JSON object per prefix; the bytes on disk are the image plus the file's and
// the entry's framing (larger, never smaller).
TEST(CliBench, TierJsonHasEveryPathAndItsBytes) {
  GEIST_REQUIRE_FIXTURES();
  if (std::system("command -v redis-server >/dev/null 2>&1") != 0) {
    if (fixtures_required()) FAIL() << "redis-server required (GEIST_REQUIRE_FIXTURES=1)";
    GTEST_SKIP() << "*** redis-server not on PATH (scripts/install_deps.sh): bench-tier untested";
  }
  TempDir dir;
  const std::string model = odd_named_model(dir);
  const std::string tier_dir = dir.file("tiers");
  const CliResult r = run_geist({"bench-tier", "-m", model, "--prefix", "64", "--suffix", "4", "-r",
                                 "1", "-t", "1", "--dir", tier_dir, "--json"},
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 1u) << "one JSON object per prefix, got: " << r.out;
  const std::string& j = out[0];
  EXPECT_EQ(json_string(j, "model"), "we\"ird\\name.gguf");
  EXPECT_EQ(json_number(j, "prefix"), 64.0);
  const double image = json_number(j, "image_bytes");
  EXPECT_GT(image, 0.0);
  for (const char* path : {"\"ram\"", "\"disk\"", "\"disk_dropped\"", "\"redis\""}) {
    const size_t at = j.find(path);
    ASSERT_NE(at, std::string::npos) << path << " missing in " << j;
    const double bytes = json_number(j.substr(at), "bytes");
    EXPECT_GE(bytes, image) << path;
    for (const char* k : {"fetch_s", "restore_s", "ttft_s"}) {
      EXPECT_NE(j.find(k, at), std::string::npos) << path << " " << k;
    }
  }
  EXPECT_GT(json_number(j.substr(j.find("\"disk\"")), "bytes"), image);
  for (const char* k : {"memcpy_warm_s", "xxh3_s", "file_cached_s", "redis_get_s"}) {
    EXPECT_NE(j.find(k), std::string::npos) << k;
  }
}

}  // namespace
}  // namespace geist::test
