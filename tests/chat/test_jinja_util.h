// Helpers shared by the Jinja tests: the fixtures' case → context rule (render_reference.py's),
// and rendering a case with the pinned strftime_now instant.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja.h"

namespace geist::test {

// 2026-01-15 09:30:00, the instant render_reference.py's strftime_now renders.
constexpr int64_t kFixedNow = 1768469400;

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Sorted names (without the ".jinja") of the templates in dir.
inline std::vector<std::string> template_names(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 6 && n.compare(n.size() - 6, 6, ".jinja") == 0)
        names.push_back(n.substr(0, n.size() - 6));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The context render_reference.py builds: special tokens, case context, messages, tools,
// add_generation_prompt (default true).
inline jinja::Json case_context(const jinja::Json& spec, const std::string& name,
                                const jinja::Json& c) {
  const auto& toks = spec["special_tokens"];
  jinja::Json ctx = toks.contains(name) ? toks[name] : toks["default"];
  if (c.contains("context"))
    for (auto it = c["context"].begin(); it != c["context"].end(); ++it) ctx[it.key()] = it.value();
  ctx["messages"] = c["messages"];
  if (c.contains("tools")) ctx["tools"] = c["tools"];
  ctx["add_generation_prompt"] =
      c.contains("add_generation_prompt") ? c["add_generation_prompt"] : jinja::Json(true);
  return ctx;
}

inline jinja::RenderOptions pinned_options() {
  jinja::RenderOptions o;
  o.now_epoch_seconds = kFixedNow;
  return o;
}

}  // namespace geist::test
