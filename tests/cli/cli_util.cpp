#include "cli/cli_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "support/fixtures.h"

namespace geist::test {
namespace {

std::string shell_quote(const std::string& s) {
  // Built with append() only: GCC 12 misreports operator+ on short literals (-Wrestrict).
  std::string q;
  q.reserve(s.size() + 8);
  q.append(1, '\'');
  for (char c : s) {
    if (c == '\'') {
      q.append("'\\''");
    } else {
      q.append(1, c);
    }
  }
  q.append(1, '\'');
  return q;
}

}  // namespace

namespace {

CliResult run_with_stdin(const std::vector<std::string>& args, const std::string& stdin_path,
                         const std::string& work_dir) {
  std::string cmd = shell_quote(std::string(GEIST_BINARY_DIR) + "/bin/geist");
  for (const std::string& a : args) cmd.append(" ").append(shell_quote(a));
  const std::string out_path = work_dir + "/cli_stdout.txt";
  const std::string err_path = work_dir + "/cli_stderr.txt";
  cmd.append(" >").append(shell_quote(out_path));
  cmd.append(" 2>").append(shell_quote(err_path)).append(" <").append(shell_quote(stdin_path));
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_text_file(out_path);
  r.err = read_text_file(err_path);
  return r;
}

}  // namespace

CliResult run_geist(const std::vector<std::string>& args, const std::string& work_dir) {
  return run_with_stdin(args, "/dev/null", work_dir);
}

CliResult run_geist_input(const std::vector<std::string>& args, const std::string& input,
                          const std::string& work_dir) {
  const std::string in_path = work_dir + "/cli_stdin.txt";
  FILE* f = std::fopen(in_path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << in_path;
  if (f == nullptr) return CliResult{};
  std::fwrite(input.data(), 1, input.size(), f);
  std::fclose(f);
  return run_with_stdin(args, in_path, work_dir);
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "geist_cli_XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  EXPECT_NE(p, nullptr) << "mkdtemp failed";
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

// Position just after `"key"` and the following ':' (npos if absent).
size_t find_value(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  if (k == std::string::npos) return std::string::npos;
  size_t i = json.find(':', k + key.size() + 2);
  if (i == std::string::npos) return i;
  ++i;
  while (i < json.size() && std::isspace(static_cast<unsigned char>(json[i]))) ++i;
  return i;
}

void append_utf8(std::string* s, unsigned cp) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string json_string(const std::string& json, const std::string& key) {
  size_t i = find_value(json, key);
  std::string s;
  if (i == std::string::npos || json[i] != '"') {
    ADD_FAILURE() << "JSON has no string '" << key << "'";
    return s;
  }
  for (++i; i < json.size() && json[i] != '"'; ++i) {
    if (json[i] != '\\') {
      s.push_back(json[i]);
      continue;
    }
    const char e = json[++i];
    if (e == 'n') {
      s.push_back('\n');
    } else if (e == 't') {
      s.push_back('\t');
    } else if (e == 'u') {
      append_utf8(&s, static_cast<unsigned>(std::stoul(json.substr(i + 1, 4), nullptr, 16)));
      i += 4;
    } else {
      s.push_back(e);
    }
  }
  return s;
}

std::vector<int> parse_ids(const std::string& text) {
  std::istringstream ss(text);
  std::vector<int> v;
  int x;
  while (ss >> x) v.push_back(x);
  return v;
}

std::string join_ids(const std::vector<int>& ids, char sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s.push_back(sep);
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace geist::test
