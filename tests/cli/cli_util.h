// Runs the built geist binary and reads the fixtures' JSON, for the CLI tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/json_fields.h"

namespace geist::test {

struct CliResult {
  int exit_code = -1;  // the process's exit status; -1 if it did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs GEIST_BINARY_DIR/bin/geist with `args` (no shell interpretation of the arguments);
// stdout and stderr are captured through files in `work_dir`.
CliResult run_geist(const std::vector<std::string>& args, const std::string& work_dir);
// The same with `input` as standard input (through a file in work_dir).
CliResult run_geist_input(const std::vector<std::string>& args, const std::string& input,
                          const std::string& work_dir);

// A fresh directory removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The string stored under "key" (\", \\, \n, \t and \uXXXX below U+0800 decoded).
std::string json_string(const std::string& json, const std::string& key);

// Parses "1 2 3" (whitespace separated integers).
std::vector<int> parse_ids(const std::string& text);

std::string join_ids(const std::vector<int>& ids, char sep);

}  // namespace geist::test
