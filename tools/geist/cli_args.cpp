#include "cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "geist/geist.hpp"

namespace geist_cli {
namespace {

// Options every verb accepts.
const OptSpec kCommonOpts[] = {
    {nullptr, "--backend", "B",
     "where weights, state and compute live: auto (default: cuda when available), cpu, cuda, "
     "cpu-devlocal"},
};

const OptSpec* find_opt(const VerbSpec& spec, const std::string& name) {
  for (const OptSpec& o : spec.opts) {
    if ((o.short_name != nullptr && name == o.short_name) || name == o.long_name) return &o;
  }
  for (const OptSpec& o : kCommonOpts) {
    if (name == o.long_name) return &o;
  }
  return nullptr;
}

bool bad_value(const std::string& verb, const std::string& opt, const std::string& value,
               const char* expected) {
  cli_error(verb, "invalid value '%s' for %s: expected %s", value.c_str(), opt.c_str(), expected);
  return false;
}

}  // namespace

void cli_error(const std::string& verb, const char* fmt, ...) {
  std::fprintf(stderr, "geist%s%s: ", verb.empty() ? "" : " ", verb.c_str());
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

bool Args::get_i32(const std::string& long_name, int32_t* out) const {
  auto it = values_.find(long_name);
  if (it == values_.end()) return true;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < INT32_MIN || x > INT32_MAX) {
    return bad_value(verb, long_name, v, "an integer");
  }
  *out = static_cast<int32_t>(x);
  return true;
}

bool Args::get_u64(const std::string& long_name, uint64_t* out) const {
  auto it = values_.find(long_name);
  if (it == values_.end()) return true;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end != '\0' || errno != 0) {
    return bad_value(verb, long_name, v, "a non-negative integer");
  }
  *out = x;
  return true;
}

bool Args::get_f32(const std::string& long_name, float* out) const {
  auto it = values_.find(long_name);
  if (it == values_.end()) return true;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const float x = std::strtof(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(x)) {
    return bad_value(verb, long_name, v, "a number");
  }
  *out = x;
  return true;
}

ParseResult parse_args(const VerbSpec& spec, int argc, char** argv, Args* out) {
  out->verb = spec.name;
  out->values_.clear();
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "-h" || word == "--help") return ParseResult::HELP;
    std::string value;
    bool inline_value = false;
    if (word.rfind("--", 0) == 0) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) {
        value = word.substr(eq + 1);
        word.resize(eq);
        inline_value = true;
      }
    }
    const OptSpec* o = find_opt(spec, word);
    if (o == nullptr) {
      if (word.empty() || word[0] != '-') {
        cli_error(spec.name, "unexpected argument '%s' (see 'geist %s --help')", word.c_str(),
                  spec.name);
      } else {
        cli_error(spec.name, "unknown option '%s' (see 'geist %s --help')", word.c_str(),
                  spec.name);
      }
      return ParseResult::ERROR;
    }
    if (o->metavar == nullptr) {
      if (inline_value) {
        cli_error(spec.name, "option %s takes no value", o->long_name);
        return ParseResult::ERROR;
      }
    } else if (!inline_value) {
      if (i + 1 >= argc) {
        cli_error(spec.name, "option %s needs a value (%s)", word.c_str(), o->metavar);
        return ParseResult::ERROR;
      }
      value = argv[++i];
    }
    out->values_[o->long_name] = value;
  }
  if (out->has("--backend")) {
    const std::string& b = out->str("--backend");
    int32_t backend = 0;
    if (!geist::backend_from_name(b, &backend)) {
      bad_value(spec.name, "--backend", b, "auto, cpu, cuda or cpu-devlocal");
      return ParseResult::ERROR;
    }
  }
  return ParseResult::OK;
}

int parse_verb_args(const VerbSpec& spec, int argc, char** argv, Args* out) {
  switch (parse_args(spec, argc, argv, out)) {
    case ParseResult::HELP:
      print_verb_usage(spec, stdout);
      return 0;
    case ParseResult::ERROR:
      return kExitUsage;
    case ParseResult::OK:
      break;
  }
  return -1;
}

void print_verb_usage(const VerbSpec& spec, FILE* f) {
  std::fprintf(f, "usage: geist %s %s\n\n%s\n\noptions:\n", spec.name, spec.synopsis, spec.summary);
  for (const OptSpec& o : spec.opts) {
    std::string names = o.short_name != nullptr ? std::string(o.short_name) + ", " : "    ";
    names += o.long_name;
    if (o.metavar != nullptr) names += std::string(" ") + o.metavar;
    std::fprintf(f, "  %-26s %s\n", names.c_str(), o.help);
  }
  for (const OptSpec& o : kCommonOpts) {
    const std::string names = std::string("    ") + o.long_name + " " + o.metavar;
    std::fprintf(f, "  %-26s %s\n", names.c_str(), o.help);
  }
  std::fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
}

}  // namespace geist_cli
