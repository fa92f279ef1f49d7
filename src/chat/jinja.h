// Jinja template engine for chat templates: renders what Python Jinja2 renders under Hugging
// Face transformers' settings (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, tojson = json.dumps(ensure_ascii=False, ...), raise_exception, strftime_now,
// {% generation %} as a plain block). Knows nothing of models or tokens.
//
// A template's source comes from a model file or a user, so it is untrusted: parsing and
// rendering are bounded by Limits (nesting depth, evaluation steps, output bytes, wall time) and
// every failure is a Status, never a crash, hang or unbounded allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace geist::jinja {

// Template variables and values handed in (messages, tools, ...). Ordered: json.dumps and
// `|items` keep insertion order, so key order must survive.
using Json = nlohmann::ordered_json;

struct Limits {
  size_t max_source_bytes = 1u << 20;   // a template longer than this is refused at parse
  int max_depth = 200;                  // nesting of expressions, blocks, macro calls
  uint64_t max_steps = 20'000'000;      // evaluation steps (nodes, loop iterations, calls)
  size_t max_output_bytes = 32u << 20;  // rendered text, and any one string value built
  double max_seconds = 10.0;            // wall time of one render
};

struct RenderOptions {
  // The instant strftime_now renders, as seconds since the Unix epoch read as local wall-clock
  // time (Python's datetime.now() is naive local time). < 0: the current time.
  int64_t now_epoch_seconds = -1;
  Limits limits;
};

class Template {
 public:
  ~Template();
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  // Parses `source`. GEIST_E_FORMAT with "line L: message" for a syntax error,
  // GEIST_E_INVALID_ARG past limits.max_source_bytes / max_depth.
  static Status parse(std::string_view source, const Limits& limits,
                      std::unique_ptr<Template>* out);

  // Renders with `context` (a JSON object: each key a template variable; raise_exception,
  // strftime_now, namespace, range, ... are built in). Thread-safe: a parsed template is
  // immutable. Errors (GEIST_E_FORMAT unless noted):
  // - raise_exception(msg): the message is exactly msg (what the template says);
  // - runtime errors as Jinja2 words them where it can ("'x' is undefined",
  //   "can only concatenate str (not \"list\") to str", ...);
  // - GEIST_E_INVALID_ARG when a limit of opts.limits was hit (the message names it).
  Status render(const Json& context, const RenderOptions& opts, std::string* out) const;

  struct Impl;

 private:
  explicit Template(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace geist::jinja
