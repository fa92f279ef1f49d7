// The verbs of the geist CLI. Each takes the words after the verb and returns the exit code.
#pragma once

#include <string>

#include "cli_args.h"
#include "geist/geist.hpp"

namespace geist_cli {

const VerbSpec& run_spec();
const VerbSpec& logits_spec();
const VerbSpec& tokenize_spec();
const VerbSpec& info_spec();
const VerbSpec& mkmodel_spec();
const VerbSpec& quantize_spec();
const VerbSpec& bench_spec();
const VerbSpec& demo_spec();
const VerbSpec& bench_snapshot_spec();
const VerbSpec& bench_tier_spec();
const VerbSpec& template_spec();
const VerbSpec& chat_spec();
const VerbSpec& serve_spec();

int cmd_run(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_mkmodel(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_bench(int argc, char** argv);
// geist bench --parallel (cmd_bench_parallel.cpp).
int bench_parallel(const char* verb, const std::string& list, const geist::ModelHandle& m,
                   const geist_session_params& sp, int32_t n_prompt, int32_t n_gen, int32_t reps,
                   bool json, const std::string& name);
int cmd_demo(int argc, char** argv);
int cmd_bench_snapshot(int argc, char** argv);
int cmd_bench_tier(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_serve(int argc, char** argv);

}  // namespace geist_cli
