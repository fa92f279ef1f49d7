// Hostile templates (a template comes from a model file): each bound of Limits turns runaway
// parsing or rendering into an error Status quickly, never a crash, hang or unbounded memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "support/sanitized.h"
#include "test_jinja_util.h"

namespace geist::test {
namespace {

struct Outcome {
  Status status;
  double seconds;
};

// CPU seconds, not wall time: the test machine may be shared, and what a limit bounds is the
// work done.
Outcome run(const std::string& src, jinja::Limits limits = {}) {
  std::clock_t t0 = std::clock();
  std::unique_ptr<jinja::Template> t;
  Status st = jinja::Template::parse(src, limits, &t);
  if (st.is_ok()) {
    jinja::RenderOptions o = pinned_options();
    o.limits = limits;
    std::string out;
    st = t->render(jinja::Json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"), o,
                   &out);
  }
  double s = double(std::clock() - t0) / CLOCKS_PER_SEC;
  return {st, s};
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  for (int k = 0; k < n; ++k) r += s;
  return r;
}

// Under ASan + UBSan or emulation (slow_run(): GEIST_SANITIZED=1 from scripts/test.sh,
// GEIST_EMULATED=1 from scripts/test_arm64.sh) code runs 10x slower or more: the CPU-time bound
// scales, and the wall-time limit is raised so that the limit a case is about (steps, sizes) is
// still the one that trips.

// Refused (any error), within `max_s` seconds; `code`/`word` when given must match.
void expect_refused(const std::string& what, const std::string& src, geist_status code,
                    const std::string& word, jinja::Limits limits = {}, double max_s = 3.0) {
  SCOPED_TRACE(what);
  if (slow_run()) {
    max_s *= 10;
    if (limits.max_seconds == jinja::Limits{}.max_seconds) limits.max_seconds *= 10;
  }
  Outcome r = run(src, limits);
  ASSERT_FALSE(r.status.is_ok()) << "rendered without error";
  EXPECT_EQ(r.status.code(), code) << r.status.message();
  if (!word.empty()) {
    EXPECT_NE(r.status.message().find(word), std::string::npos) << r.status.message();
  }
  EXPECT_LT(r.seconds, max_s) << r.status.message();
}

TEST(JinjaHostile, DeepNestingIsRefusedAtParse) {
  expect_refused("parentheses", "{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}",
                 GEIST_E_INVALID_ARG, "max_depth");
  expect_refused("unary minus", "{{ " + repeat("-", 100000) + "1 }}", GEIST_E_INVALID_ARG,
                 "max_depth");
  expect_refused("lists", "{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}",
                 GEIST_E_INVALID_ARG, "max_depth");
  expect_refused("ifs", repeat("{% if 1 %}", 20000) + repeat("{% endif %}", 20000),
                 GEIST_E_INVALID_ARG, "max_depth");
  expect_refused("filters", "{{ 1" + repeat("|abs", 100000) + " }}", GEIST_E_INVALID_ARG,
                 "max_depth");
  expect_refused("nots", "{{ " + repeat("not ", 100000) + "1 }}", GEIST_E_INVALID_ARG, "max_depth");
}

TEST(JinjaHostile, SourceSizeIsBounded) {
  jinja::Limits l;
  l.max_source_bytes = 1000;
  expect_refused("big source", std::string(2000, 'x'), GEIST_E_INVALID_ARG, "max_source_bytes", l);
}

TEST(JinjaHostile, HugeRangesAndLoopsAreBounded) {
  // Jinja2's sandbox refuses ranges over 100000 items (OverflowError), as we do.
  expect_refused("range(10**9)", "{% for i in range(10**9) %}{% endfor %}", GEIST_E_FORMAT,
                 "MAX_RANGE");
  // A smaller step budget than the default: the bound trips the same way, sooner (the
  // sanitizer stage runs it too).
  jinja::Limits l;
  l.max_steps = 2'000'000;
  expect_refused("nested loops",
                 "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 GEIST_E_INVALID_ARG, "max_steps", l);
}

TEST(JinjaHostile, RecursiveMacrosAreBounded) {
  expect_refused("self call", "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}",
                 GEIST_E_INVALID_ARG, "nesting");
  expect_refused(
      "mutual",
      "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
      GEIST_E_INVALID_ARG, "nesting");
  expect_refused(
      "fan out",
      "{% macro r(n) %}{% if n > 0 %}{{ r(n-1) }}{{ r(n-1) }}{% endif %}{% endmacro %}{{ r(60) }}",
      GEIST_E_INVALID_ARG, "");
}

// Found by fuzz_jinja: '' * n looped forever (the doubling never grew an empty string).
// Python Jinja2 renders all three as "".
TEST(JinjaHostile, EmptyStringRepetitionEnds) {
  const Outcome r = run("{{ '' * 5 }}{{ 'ab' * 0 }}{{ 'ab' * -3 }}");
  EXPECT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_LT(r.seconds, slow_run() ? 10.0 : 1.0);
}

TEST(JinjaHostile, BigStringsAndListsAreBounded) {
  expect_refused("str * 10**12", "{{ 'x' * 10**12 }}", GEIST_E_INVALID_ARG, "max_output_bytes");
  expect_refused("list * 10**12", "{{ ([1] * 10**12)|length }}", GEIST_E_INVALID_ARG,
                 "max_output_bytes");
  expect_refused("doubling",
                 "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ "
                 "ns.s %}{% endfor %}",
                 GEIST_E_INVALID_ARG, "max_output_bytes");
  expect_refused("list doubling",
                 "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + "
                 "ns.l %}{% endfor %}",
                 GEIST_E_INVALID_ARG, "max_output_bytes");
  expect_refused("huge indent", "{{ 'a\nb'|indent(10**12) }}", GEIST_E_INVALID_ARG, "");
  expect_refused("many indents", "{{ ('a\n' * 1000)|indent(100000) }}", GEIST_E_INVALID_ARG, "");
  expect_refused("center", "{{ 'a'|center(10**12) }}", GEIST_E_INVALID_ARG, "");
  expect_refused("output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
                 GEIST_E_INVALID_ARG, "max_output_bytes");
  expect_refused("many live strings",
                 "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + "
                 "['y' * 100000] %}{% endfor %}",
                 GEIST_E_INVALID_ARG, "");
  expect_refused("format width", "{{ '%999999999s' % 'x' }}", GEIST_E_INVALID_ARG, "");
}

TEST(JinjaHostile, DeepValuesAndCyclesAreRefused) {
  expect_refused("nested list",
                 "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] "
                 "%}{% endfor %}{{ ns.x }}",
                 GEIST_E_FORMAT, "RecursionError");
  expect_refused("namespace cycle", "{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}",
                 GEIST_E_FORMAT, "RecursionError");
  expect_refused("cycle through a method",
                 "{% set ns = namespace() %}{% set d = {'n': ns} %}{% set ns.f = d.get %}",
                 GEIST_E_FORMAT, "RecursionError");
}

TEST(JinjaHostile, WallTimeIsBounded) {
  jinja::Limits l;
  l.max_steps = uint64_t(1) << 62;
  l.max_seconds = 0.3;
  expect_refused("slow loop",
                 "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 GEIST_E_INVALID_ARG, "max_seconds", l, 2.0);
}

TEST(JinjaHostile, StepBoundCanBeTightened) {
  jinja::Limits l;
  l.max_steps = 1000;
  expect_refused("steps", "{% for i in range(10000) %}{{ i }}{% endfor %}", GEIST_E_INVALID_ARG,
                 "max_steps", l);
}

}  // namespace
}  // namespace geist::test
