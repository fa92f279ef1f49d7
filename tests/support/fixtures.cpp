#include "support/fixtures.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace geist::test {
namespace {
int g_skip_count = 0;  // test-process bookkeeping only; not engine state
}

std::string fixtures_dir() {
  const char* env = std::getenv("GEIST_FIXTURES");
  if (env && *env) return env;
  return std::string(GEIST_SOURCE_DIR) + "/../shared/fixtures";
}

std::string fixture_path(const std::string& rel) { return fixtures_dir() + "/" + rel; }

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/geist_" + std::to_string(static_cast<long>(getpid())) + "_" +
         name;
}

bool fixtures_available() {
  struct stat st {};
  return stat(fixture_path("README.md").c_str(), &st) == 0;
}

bool fixtures_required() {
  const char* env = std::getenv("GEIST_REQUIRE_FIXTURES");
  return env && std::string(env) == "1";
}

void note_fixture_skip() { ++g_skip_count; }
int fixture_skip_count() { return g_skip_count; }

std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  if (!f.good()) return {};
  const std::streamsize size = f.tellg();
  f.seekg(0);
  std::vector<float> v(static_cast<size_t>(size) / sizeof(float));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace geist::test
