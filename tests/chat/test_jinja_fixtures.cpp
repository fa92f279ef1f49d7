// Every fixture template × every case of cases.json, rendered and compared byte for byte with
// what Python Jinja2 (render_reference.py) wrote; where Jinja2 raised (.err), we must fail too,
// and for raise_exception ("TemplateError: MSG") with the same message. A case with neither
// file fails: no fixture case is ever skipped.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/fixtures.h"
#include "test_jinja_util.h"

namespace geist::test {
namespace {

TEST(JinjaFixtures, EveryTemplateEveryCaseMatchesJinja2) {
  GEIST_REQUIRE_FIXTURES();
  const std::string dir = fixture_path("templates");
  jinja::Json spec = jinja::Json::parse(slurp(dir + "/cases.json"));
  std::vector<std::string> names = template_names(dir);
  ASSERT_FALSE(names.empty()) << "no templates in " << dir;
  int total = 0, passed = 0, errs = 0;
  for (const auto& name : names) {
    SCOPED_TRACE("template " + name);
    std::unique_ptr<jinja::Template> t;
    Status st = jinja::Template::parse(slurp(dir + "/" + name + ".jinja"), jinja::Limits{}, &t);
    for (const auto& c : spec["cases"]) {
      const std::string cname = c["name"].get<std::string>();
      SCOPED_TRACE("case " + cname);
      const std::string base = dir + "/expected/" + name + "/" + cname;
      const bool want_err = file_exists(base + ".err");
      ++total;
      if (!want_err && !file_exists(base + ".txt")) {
        // A case without its expectation would be skipped silently: that is a broken fixture.
        ADD_FAILURE() << "no expected result: neither " << base << ".txt nor .err";
        continue;
      }
      errs += want_err;
      ASSERT_TRUE(st.is_ok()) << "parse: " << st.message();
      std::string out;
      Status r = t->render(case_context(spec, name, c), pinned_options(), &out);
      if (want_err) {
        std::string err = slurp(base + ".err");
        while (!err.empty() && err.back() == '\n') err.pop_back();
        EXPECT_FALSE(r.is_ok()) << "expected error " << err << ", rendered:\n" << out;
        if (r.is_ok()) continue;
        const std::string prefix = "TemplateError: ";
        if (err.compare(0, prefix.size(), prefix) == 0) {
          EXPECT_EQ(r.message(), err.substr(prefix.size()));
          if (r.message() != err.substr(prefix.size())) continue;
        }
        ++passed;
      } else {
        EXPECT_TRUE(r.is_ok()) << r.message();
        if (!r.is_ok()) continue;
        std::string want = slurp(base + ".txt");
        EXPECT_EQ(out, want);
        if (out == want) ++passed;
      }
    }
  }
  std::printf("jinja fixtures: %d of %d template x case renderings match Jinja2 (%d are errors)\n",
              passed, total, errs);
  EXPECT_EQ(passed, total);
}

}  // namespace
}  // namespace geist::test
