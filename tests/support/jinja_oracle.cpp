#include "support/jinja_oracle.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/fixtures.h"

namespace geist::test {

std::map<std::string, OracleResult> render_with_jinja2(const std::string& name,
                                                       const std::string& template_source,
                                                       const nlohmann::ordered_json& cases) {
  namespace fs = std::filesystem;
  const fs::path dir = temp_path("jinja_oracle_" + name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "tpl");
  std::ofstream(dir / "tpl" / (name + ".jinja"), std::ios::binary) << template_source;
  std::ofstream(dir / "cases.json", std::ios::binary) << cases.dump();
  const std::string cmd = "/usr/bin/python3 '" + fixture_path("templates/render_reference.py") +
                          "' '" + (dir / "tpl").string() + "' '" + (dir / "out").string() + "' '" +
                          (dir / "cases.json").string() + "' '" + name + "' >/dev/null";
  std::map<std::string, OracleResult> out;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "the Jinja2 oracle failed to run (python3-jinja2 missing?): " << cmd;
    return out;
  }
  for (const auto& c : cases["cases"]) {
    const std::string case_name = c["name"].get<std::string>();
    const fs::path base = dir / "out" / "expected" / name / case_name;
    OracleResult r;
    if (fs::exists(base.string() + ".txt")) {
      r.ok = true;
      r.text = read_text_file(base.string() + ".txt");
    } else {
      r.text = read_text_file(base.string() + ".err");
    }
    out[case_name] = r;
  }
  fs::remove_all(dir, ec);
  return out;
}

}  // namespace geist::test
