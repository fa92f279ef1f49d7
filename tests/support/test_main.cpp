// Shared gtest main: prints one loud line when fixture tests were skipped.
#include <cstdio>

#include "support/fixtures.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const int skipped = geist::test::fixture_skip_count();
  if (skipped > 0) {
    std::fprintf(stderr,
                 "\n*** WARNING: SKIPPED %d FIXTURE TEST(S): fixtures not found at %s "
                 "(set GEIST_FIXTURES) ***\n\n",
                 skipped, geist::test::fixtures_dir().c_str());
  }
  return rc;
}
