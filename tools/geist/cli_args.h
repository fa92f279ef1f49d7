// Command-line parsing for the geist CLI: each verb declares its options; the parser checks
// names and values and reports what was wrong in a message naming the option.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace geist_cli {

// Exit codes: 0 success, 1 runtime failure (bad file, engine error), 2 usage error.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct OptSpec {
  const char* short_name;  // "-m" or nullptr
  const char* long_name;   // "--model"; the key the value is stored under
  const char* metavar;     // "FILE"; nullptr for a flag without value
  const char* help;
};

struct VerbSpec {
  const char* name;      // "run"
  const char* synopsis;  // "-m FILE (-p TEXT | --tokens IDS) [options]"
  const char* summary;   // one line
  std::vector<OptSpec> opts;
};

class Args {
 public:
  bool has(const std::string& long_name) const { return values_.count(long_name) != 0; }
  // The raw value ("" for flags); requires has(long_name).
  const std::string& str(const std::string& long_name) const { return values_.at(long_name); }

  // Typed getters: leave *out unchanged when the option is absent; on a malformed value print
  // "geist VERB: invalid value 'x' for --opt: expected ..." to stderr and return false.
  bool get_i32(const std::string& long_name, int32_t* out) const;
  bool get_u64(const std::string& long_name, uint64_t* out) const;
  bool get_f32(const std::string& long_name, float* out) const;

  std::string verb;
  std::map<std::string, std::string> values_;
};

enum class ParseResult { OK, HELP, ERROR };

// Parses argv[0, argc) (the words after the verb). Accepts "--opt VALUE", "--opt=VALUE" and
// "-o VALUE". Prints the problem to stderr on ERROR.
ParseResult parse_args(const VerbSpec& spec, int argc, char** argv, Args* out);

// parse_args plus the usual handling: returns -1 when the verb should go on, else the exit
// code to return (0 after printing help, kExitUsage after an error).
int parse_verb_args(const VerbSpec& spec, int argc, char** argv, Args* out);

void print_verb_usage(const VerbSpec& spec, FILE* f);

// Prints "geist VERB: <message>" to stderr.
[[gnu::format(printf, 2, 3)]] void cli_error(const std::string& verb, const char* fmt, ...);

}  // namespace geist_cli
