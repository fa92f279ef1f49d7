// Unit tests of the engine's semantics: whitespace control, undefined, loops, filters, tests,
// tojson, operators, slicing, macros, namespace, set blocks, methods and errors. Every expected
// string in test_jinja_cases.inc was rendered by Python Jinja2 3.1.2 with Hugging Face's
// settings (render_reference.py's environment), not by this engine.
#include <gtest/gtest.h>

#include <set>

#include "test_jinja_util.h"

namespace geist::test {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* context;   // JSON object
  const char* expected;  // kCases: the rendering; kErrors: Jinja2's "Type: message"
};

#include "test_jinja_cases.inc"

Status render(const std::string& src, const jinja::Json& ctx, std::string* out) {
  std::unique_ptr<jinja::Template> t;
  GEIST_RETURN_IF_ERROR(jinja::Template::parse(src, jinja::Limits{}, &t));
  return t->render(ctx, pinned_options(), out);
}

TEST(JinjaSemantics, RendersAsJinja2) {
  int n = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string("case ") + c.name + ": " + c.source);
    std::string out;
    Status st = render(c.source, jinja::Json::parse(c.context), &out);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(out, c.expected);
    ++n;
  }
  std::printf("jinja semantics: %d renderings compared with Jinja2's\n", n);
}

TEST(JinjaSemantics, FailsWhereJinja2RaisesWithItsWords) {
  // Syntax errors are worded by our parser ("line L: ..."); Jinja2 checks unknown filters and
  // tests when it compiles, we when the expression runs. For the rest the message must carry
  // Jinja2's words.
  const std::set<std::string> own_words = {"err_syntax_endfor", "err_syntax_expr",
                                           "err_syntax_string", "err_unknown_filter",
                                           "err_unknown_test"};
  for (const Case& c : kErrors) {
    SCOPED_TRACE(std::string("case ") + c.name + ": " + c.source);
    std::string out;
    Status st = render(c.source, jinja::Json::parse(c.context), &out);
    ASSERT_FALSE(st.is_ok()) << "rendered: " << out;
    EXPECT_EQ(st.code(), GEIST_E_FORMAT) << st.message();
    std::string want = c.expected;
    if (own_words.count(c.name)) continue;
    const std::string te = "TemplateError: ";
    if (want.compare(0, te.size(), te) == 0) {
      EXPECT_EQ(st.message(), want.substr(te.size()));  // raise_exception: the template's words
    } else {
      std::string msg = want.substr(want.find(": ") + 2);
      EXPECT_NE(st.message().find(msg), std::string::npos)
          << "ours: " << st.message() << "\nJinja2: " << want;
    }
  }
}

TEST(JinjaSemantics, SyntaxErrorsNameTheLine) {
  std::string out;
  Status st = render("line one\n{{ ok }}\n{% if %}", {}, &out);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), GEIST_E_FORMAT);
  EXPECT_EQ(st.message().rfind("line 3: ", 0), 0u) << st.message();
}

TEST(JinjaSemantics, StrftimeNowUsesThePinnedInstantOrTheClock) {
  std::unique_ptr<jinja::Template> t;
  ASSERT_TRUE(jinja::Template::parse("{{ strftime_now('%d %b %Y %H:%M:%S') }}", {}, &t).is_ok());
  std::string out;
  ASSERT_TRUE(t->render({}, pinned_options(), &out).is_ok());
  EXPECT_EQ(out, "15 Jan 2026 09:30:00");  // Python: datetime(2026,1,15,9,30).strftime(...)
  jinja::RenderOptions now;
  ASSERT_TRUE(t->render({}, now, &out).is_ok());
  EXPECT_EQ(out.size(), 20u);
}

TEST(JinjaSemantics, TemplateIsReusableAndContextKeyOrderIsKept) {
  std::unique_ptr<jinja::Template> t;
  ASSERT_TRUE(
      jinja::Template::parse("{{ d|tojson }}{% for k in d %}{{ k }}{% endfor %}", {}, &t).is_ok());
  jinja::Json ctx = jinja::Json::parse(R"({"d": {"z": 1, "a": 2, "m": 3}})");
  for (int k = 0; k < 3; ++k) {
    std::string out;
    ASSERT_TRUE(t->render(ctx, pinned_options(), &out).is_ok());
    EXPECT_EQ(out, R"({"z": 1, "a": 2, "m": 3}zam)");
  }
}

}  // namespace
}  // namespace geist::test
