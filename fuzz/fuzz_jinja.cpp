// libFuzzer entry point for the Jinja engine: any input, taken as a chat template, must parse
// and render a small fixed conversation (tools, tool calls, reasoning) or fail with a Status,
// within tight limits; never crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja.h"

namespace {

const geist::jinja::Json& conversation() {
  static const geist::jinja::Json ctx = geist::jinja::Json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "enable_thinking": false,
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo? 日本"}]},
      {"role": "assistant", "content": "", "reasoning_content": "think\n",
       "tool_calls": [{"id": "call0", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Oslo", "n": 2}}}]},
      {"role": "tool", "tool_call_id": "call0", "content": "{\"t\": 3.5}"},
      {"role": "assistant", "content": "It is 3.5 \"C\"."}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}]
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  geist::jinja::Limits limits;
  limits.max_source_bytes = 64 << 10;
  limits.max_depth = 64;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_seconds = 2.0;
  std::string_view src(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<geist::jinja::Template> t;
  geist::Status st = geist::jinja::Template::parse(src, limits, &t);
  if (!st.is_ok()) {
    if (st.message().empty() || t) std::abort();
    return 0;
  }
  geist::jinja::RenderOptions opts;
  opts.limits = limits;
  opts.now_epoch_seconds = 1768469400;
  std::string out;
  st = t->render(conversation(), opts, &out);
  if (!st.is_ok() && !out.empty()) std::abort();  // a failed render leaves no partial output
  if (out.size() > limits.max_output_bytes) std::abort();
  return 0;
}
