#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli_args.h"

namespace geist_cli {
namespace {

int print_load_progress(void* /*user*/, float fraction) {
  std::fprintf(stderr, "\rloading model %3d%%", static_cast<int>(fraction * 100.0f + 0.5f));
  std::fflush(stderr);
  return 0;
}

}  // namespace

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void json_string(const std::string& s) {
  std::putchar('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      std::printf("\\%c", c);
    } else if (c < 0x20) {
      std::printf("\\u%04x", c);
    } else {
      std::putchar(c);
    }
  }
  std::putchar('"');
}

BenchStats summarize(std::vector<double> v) {
  BenchStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

bool load_model(const Args& args, const std::string& path, ModelHandle* out, bool vocab_only) {
  const std::string& verb = args.verb;
  geist_model_params params;
  geist_model_params_default(&params);
  params.vocab_only = vocab_only ? 1 : 0;
  if (args.has("--backend")) {
    // Validated by parse_args; anything else stays GEIST_BACKEND_AUTO.
    (void)geist::backend_from_name(args.str("--backend"), &params.backend);
  }
  const bool tty = stderr_is_terminal();
  if (tty) params.progress_fn = print_load_progress;
  std::string err;
  const geist_status st = ModelHandle::load(path, out, &params, &err);
  if (tty) std::fprintf(stderr, "\r%-24s\r", "");
  if (st != GEIST_OK) {
    // The library's message usually names the path already; do not say it twice.
    if (!err.empty() && err.find(path) != std::string::npos) {
      cli_error(verb, "cannot load model: %s", err.c_str());
    } else {
      cli_error(verb, "cannot load model '%s': %s", path.c_str(),
                !err.empty() ? err.c_str() : geist_status_string(st));
    }
    return false;
  }
  return true;
}

bool create_session(const std::string& verb, const ModelHandle& model,
                    const geist_session_params& params, SessionHandle* out) {
  if (SessionHandle::create(model, out, &params) != GEIST_OK) {
    cli_error(verb, "cannot create session: %s", model.last_error());
    return false;
  }
  return true;
}

bool parse_token_list(const std::string& verb, const std::string& text,
                      std::vector<geist_token>* out) {
  out->clear();
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || text[i] == ' ' || text[i] == '\t' || text[i] == '\n') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] != ',' && text[j] != ' ' && text[j] != '\t' &&
           text[j] != '\n') {
      ++j;
    }
    const std::string item = text.substr(i, j - i);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
      cli_error(verb, "invalid token id '%s' in --tokens: expected a non-negative integer",
                item.c_str());
      return false;
    }
    out->push_back(static_cast<geist_token>(v));
    i = j;
  }
  if (out->empty()) {
    cli_error(verb, "--tokens lists no token ids");
    return false;
  }
  return true;
}

bool read_text_file(const std::string& verb, const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    cli_error(verb, "cannot read file '%s': %s", path.c_str(), std::strerror(errno));
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) {
    cli_error(verb, "cannot read file '%s'", path.c_str());
    return false;
  }
  *out = ss.str();
  return true;
}

bool tokenize_text(const std::string& verb, const ModelHandle& model, const std::string& text,
                   bool add_special, bool parse_special, std::vector<geist_token>* out) {
  if (model.tokenize(text, add_special, parse_special, out) != GEIST_OK) {
    cli_error(verb, "tokenization failed: %s", model.last_error());
    return false;
  }
  return true;
}

size_t utf8_complete_prefix(const std::string& s) {
  const size_t n = s.size();
  // Find the last lead byte among the final four bytes.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return back >= need ? n : n - back;
  }
  return n;  // only continuation bytes at the end: not a sequence we could complete
}

void Utf8Stream::write(const char* data, size_t n) {
  pending_.append(data, n);
  const size_t cut = utf8_complete_prefix(pending_);
  if (cut > 0) {
    std::fwrite(pending_.data(), 1, cut, f_);
    pending_.erase(0, cut);
  }
  std::fflush(f_);
}

void Utf8Stream::finish() {
  if (!pending_.empty()) std::fwrite(pending_.data(), 1, pending_.size(), f_);
  pending_.clear();
  std::fflush(f_);
}

bool parse_kv_mode(const std::string& verb, const std::string& name, int32_t* out) {
  if (geist::kv_mode_from_name(name, out)) return true;
  cli_error(verb, "unknown --kv-mode '%s' (expected one of f32, f16, q8, q4, kivi4, kivi2)",
            name.c_str());
  return false;
}

std::vector<OptSpec> session_opt_specs() {
  return {
      {"-t", "--threads", "T", "compute threads (default: all cores)"},
      {nullptr, "--temp", "F", "temperature (default 0.8; 0: greedy)"},
      {nullptr, "--top-k", "K", "top-k (default 40; 0: off)"},
      {nullptr, "--top-p", "F", "top-p (default 0.95; 1: off)"},
      {nullptr, "--min-p", "F", "min-p (default 0.05; 0: off)"},
      {nullptr, "--repeat-penalty", "F", "repetition penalty (default 1.0: off)"},
      {nullptr, "--presence-penalty", "F",
       "presence penalty over the generated tokens (default 0.0: off)"},
      {nullptr, "--frequency-penalty", "F",
       "frequency penalty over the generated tokens (default 0.0: off)"},
      {nullptr, "--repeat-last-n", "N", "penalty window in tokens (default 64; -1: all)"},
      {nullptr, "--seed", "S", "sampling seed (default 0)"},
      {nullptr, "--ctx", "N", "context size in tokens (default: min(training context, 4096))"},
      {nullptr, "--kv-mode", "M",
       "KV cache: f32, f16 (default), q8, q4, kivi4, kivi2 (f32 is exact)"},
  };
}

bool parse_session_opts(const std::string& verb, const Args& args, geist_session_params* sp) {
  geist_sampler_params& s = sp->sampler;
  if (!args.get_i32("--threads", &sp->n_threads) || !args.get_i32("--ctx", &sp->max_seq_len) ||
      !args.get_i32("--repeat-last-n", &s.penalty_last_n) || !args.get_i32("--top-k", &s.top_k) ||
      !args.get_f32("--temp", &s.temperature) || !args.get_f32("--top-p", &s.top_p) ||
      !args.get_f32("--min-p", &s.min_p) || !args.get_f32("--repeat-penalty", &s.repeat_penalty) ||
      !args.get_f32("--presence-penalty", &s.presence_penalty) ||
      !args.get_f32("--frequency-penalty", &s.frequency_penalty) ||
      !args.get_u64("--seed", &s.seed)) {
    return false;
  }
  if (sp->n_threads < 0 || sp->max_seq_len < 0) {
    cli_error(verb, "--threads and --ctx must not be negative");
    return false;
  }
  return !args.has("--kv-mode") || parse_kv_mode(verb, args.str("--kv-mode"), &sp->kv_mode);
}

std::vector<OptSpec> concat_opts(std::vector<OptSpec> a, const std::vector<OptSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace geist_cli
