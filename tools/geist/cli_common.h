// Helpers shared by the CLI verbs; everything goes through the public C API.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_args.h"
#include "geist/geist.hpp"

namespace geist_cli {

// The public C++ wrappers (include/geist/geist.hpp) own the handles.
using geist::ModelHandle;
using geist::SessionHandle;

// Loads `path` on the backend named by args' --backend (default auto); shows progress on
// stderr only when stderr is a terminal. Prints "geist VERB: cannot load model 'path':
// <reason>" and returns false on failure.
// vocab_only: load only the tokenizer (geist_model_params.vocab_only), for verbs that never
// run the weights; any architecture and a file without tensors then load.
bool load_model(const Args& args, const std::string& path, ModelHandle* out,
                bool vocab_only = false);

// Parses "1,2,3" (commas and/or spaces). Prints the offending item and returns false on error.
bool parse_token_list(const std::string& verb, const std::string& text,
                      std::vector<geist_token>* out);

bool read_text_file(const std::string& verb, const std::string& path, std::string* out);

bool tokenize_text(const std::string& verb, const ModelHandle& model, const std::string& text,
                   bool add_special, bool parse_special, std::vector<geist_token>* out);

// Creates a session of `model`. Prints "geist VERB: cannot create session: <reason>" and
// returns false on failure.
bool create_session(const std::string& verb, const ModelHandle& model,
                    const geist_session_params& params, SessionHandle* out);

// The session options run and chat share: -t, --ctx, --kv-mode and the sampler's (--temp,
// --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty, --repeat-last-n, --seed).
std::vector<OptSpec> session_opt_specs();
// Reads them into *sp (absent options keep sp's values). Prints the problem and returns false
// on a malformed or negative value; ranges are the library's to check.
bool parse_session_opts(const std::string& verb, const Args& args, geist_session_params* sp);
// spec options followed by more (a verb's own list, then session_opt_specs()).
std::vector<OptSpec> concat_opts(std::vector<OptSpec> a, const std::vector<OptSpec>& b);

// Parses a --kv-mode value (geist::kv_mode_from_name) into a geist_kv_mode. Prints
// "geist VERB: unknown --kv-mode 'x' (expected one of ...)" and returns false for anything else.
bool parse_kv_mode(const std::string& verb, const std::string& name, int32_t* out);

// Writes s to stdout as a JSON string literal (quotes, backslashes and control bytes escaped).
void json_string(const std::string& s);

// Seconds on a monotonic clock.
double now_seconds();

// Median, min and max of a benchmark's timed runs (zeros for none).
struct BenchStats {
  double median = 0, min = 0, max = 0;
};
BenchStats summarize(std::vector<double> v);

bool stderr_is_terminal();

// Writes a byte stream to a FILE, holding back a trailing incomplete UTF-8 sequence until the
// bytes that complete it arrive (token pieces may split a character). Bytes that cannot become
// valid UTF-8 are passed through rather than held forever.
class Utf8Stream {
 public:
  explicit Utf8Stream(FILE* f) : f_(f) {}
  void write(const char* data, size_t n);
  void finish();  // writes whatever is still held

 private:
  FILE* f_;
  std::string pending_;
};

// Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 sequence.
size_t utf8_complete_prefix(const std::string& s);

}  // namespace geist_cli
