// Python Jinja2 as an oracle: renders conversations through a template with the fixtures'
// render_reference.py (Hugging Face transformers' settings; strftime_now pinned to
// 2026-01-15 09:30:00). Needs /usr/bin/python3 with python3-jinja2 (scripts/install_deps.sh).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace geist::test {

struct OracleResult {
  bool ok = false;   // rendered (else the template raised)
  std::string text;  // the rendering, or "ErrorType: message\n"
};

// Renders every case of `cases` (the fixtures' cases.json shape: {"special_tokens": {...},
// "cases": [...]}) through `template_source`, named `name` for special_tokens' lookup.
// Fails the current test (and returns an empty map) when Python cannot run.
std::map<std::string, OracleResult> render_with_jinja2(const std::string& name,
                                                       const std::string& template_source,
                                                       const nlohmann::ordered_json& cases);

}  // namespace geist::test
