/* geist — C ABI, chat (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h. Requests and results are JSON text (UTF-8), shaped as the
 * OpenAI chat API shapes them, so bindings need no struct mirrors.
 *
 * A chat template is a Jinja template rendered as Hugging Face transformers renders it
 * (docs/CHAT.md). It comes from the model file (tokenizer.chat_template, or a named one,
 * tokenizer.chat_template.NAME) or from the caller. A parsed template is immutable and may be
 * used from several threads at once; its last-error text is per template, so concurrent
 * failing calls should use one template per thread (or read the error from err_buf). */
#ifndef GEIST_GEIST_CHAT_H
#define GEIST_GEIST_CHAT_H

#include "geist/geist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* EXPERIMENTAL */
typedef struct geist_chat_template geist_chat_template;

/* EXPERIMENTAL. The model's chat template: `name` NULL or "" for tokenizer.chat_template, else
 * tokenizer.chat_template.NAME (e.g. "tool_use"). bos_token / eos_token are the model's token
 * texts. A model without a template gets ChatML, with a warning through the model's log
 * callback (*out_is_fallback, when not NULL, is set to 1 then, else 0).
 * Returns GEIST_OK, GEIST_E_INVALID_ARG (NULL argument), GEIST_E_NOT_FOUND (a named template
 * the model does not have), GEIST_E_FORMAT (the template does not parse: the message says
 * where), GEIST_E_OOM. On failure err_buf (when not NULL) receives the message. */
geist_status geist_chat_template_from_model(const geist_model* model, const char* name,
                                            geist_chat_template** out, int* out_is_fallback,
                                            char* err_buf, size_t err_cap);

/* EXPERIMENTAL. A template from source text (e.g. --chat-template FILE), with the bos / eos
 * token texts it sees (NULL: ""). Errors as geist_chat_template_from_model. */
geist_status geist_chat_template_create(const char* source, size_t source_len,
                                        const char* bos_token, const char* eos_token,
                                        geist_chat_template** out, char* err_buf, size_t err_cap);

/* EXPERIMENTAL. A template from source text that sees the model's bos / eos token texts (what
 * --chat-template FILE means for a loaded model). Errors as geist_chat_template_from_model. */
geist_status geist_chat_template_create_for_model(const geist_model* model, const char* source,
                                                  size_t source_len, geist_chat_template** out,
                                                  char* err_buf, size_t err_cap);

/* EXPERIMENTAL. NULL is a no-op. */
void geist_chat_template_free(geist_chat_template* tmpl);

/* EXPERIMENTAL. Message of the last failing call on this template ("" if none). */
const char* geist_chat_template_last_error(const geist_chat_template* tmpl);

/* EXPERIMENTAL. The template's source text (NUL-terminated, owned by the template). */
const char* geist_chat_template_source(const geist_chat_template* tmpl);

/* EXPERIMENTAL. Renders a conversation. request_json is an object:
 *   "messages": [...]                 OpenAI chat messages (content a string, a list of text
 *                                     parts or null; tool_calls with "arguments" as a JSON
 *                                     string or object; "developer" is rendered as "system")
 *   "tools": [...]                    optional, OpenAI tool definitions
 *   "add_generation_prompt": bool     optional, default true
 *   "chat_template_kwargs": {...}     optional extra template variables (enable_thinking, ...)
 *   "now": "2026-01-15T09:30:00"      optional: the instant strftime_now renders (default now)
 * Writes the prompt text (no NUL terminator) to out: buffer rules as geist_detokenize (cap too
 * small: GEIST_E_INVALID_ARG with *n_out the length needed; out may be NULL when cap is 0).
 * Returns GEIST_OK, GEIST_E_INVALID_ARG (NULL argument, request not valid JSON or not of the
 * shape above: the message names the field), GEIST_E_FORMAT (the template raised: the message
 * is the template's own, e.g. "Conversation roles must alternate user/assistant/..."),
 * GEIST_E_OOM. */
geist_status geist_chat_render(geist_chat_template* tmpl, const char* request_json,
                               size_t request_len, char* out, size_t cap, size_t* n_out);

/* ---------------------------------------------------------------------------------------- */
/* Output: stop strings, reasoning and tool calls                                           */

/* EXPERIMENTAL. Turns generated text, fed piece by piece as it streams, into OpenAI message
 * deltas: stop strings are applied first (a stop string that spans pieces is found; its text
 * and anything after it are never emitted), then reasoning (<think>...</think>) and tool calls
 * are split out in the format of the template's model family (Qwen3.5 / Qwen3-Coder XML,
 * Hermes / Qwen2.5 / Qwen3 JSON, Llama 3.x JSON). Text that may be the start of a marker or a
 * stop string is held back until it is decided. One parser per generation; not thread-safe. */
typedef struct geist_chat_parser geist_chat_parser;

/* EXPERIMENTAL. tmpl: the template the prompt was rendered with (its source picks the format);
 * NULL: plain text (stop strings only, e.g. for completions). prompt: the rendered prompt
 * (NULL / 0: none); when it ends inside an opened reasoning block (e.g. "<think>\n"), the
 * output starts as reasoning. options_json (NULL / 0: {}):
 *   "tools": [...]        the request's tool definitions (parameter types for XML formats)
 *   "stop": "..." | [...] stop strings
 *   "parse_tool_calls": bool (default true when tools are given)
 *   "parse_reasoning": bool  (default true)
 * Returns GEIST_OK, GEIST_E_INVALID_ARG (NULL out, bad options: the message names the field,
 * written to err_buf when not NULL), GEIST_E_OOM. */
geist_status geist_chat_parser_create(const geist_chat_template* tmpl, const char* prompt,
                                      size_t prompt_len, const char* options_json,
                                      size_t options_len, geist_chat_parser** out, char* err_buf,
                                      size_t err_cap);

/* EXPERIMENTAL. NULL is a no-op. */
void geist_chat_parser_free(geist_chat_parser* parser);

/* EXPERIMENTAL. Feeds generated text (any split, also inside a UTF-8 sequence). *out_json
 * receives a JSON array of the deltas that became final (possibly []), each an OpenAI
 * chat-completions streaming "delta" object:
 *   {"content": "..."}  {"reasoning_content": "..."}
 *   {"tool_calls": [{"index": 0, "id": "call_...", "type": "function",
 *                    "function": {"name": "...", "arguments": ""}}]}     (a call begins)
 *   {"tool_calls": [{"index": 0, "function": {"arguments": "..."}}]}    (more of its arguments)
 * A call's arguments arrive in fragments as the model writes them; concatenated they are the
 * message's "arguments" string. Nothing sent is taken back. The pointer is owned by the parser and
 * valid until its next call. *out_stopped is set to 1 once a stop string matched (feed nothing
 * more: the rest is discarded), else 0. Returns GEIST_OK, GEIST_E_INVALID_ARG (NULL argument),
 * GEIST_E_INVALID_STATE (after finish). */
geist_status geist_chat_parser_feed(geist_chat_parser* parser, const char* text, size_t len,
                                    const char** out_json, int* out_stopped);

/* EXPERIMENTAL. Ends the stream: *out_deltas gets the remaining deltas (as feed), *out_message
 * the whole assistant message {"role": "assistant", "content": "..." | null,
 * "reasoning_content": "..." (when any), "tool_calls": [{"id", "type": "function",
 * "function": {"name", "arguments"}}] (when any)}. Malformed model output is never an error: a
 * call that had not begun (no name read) is content; one that had keeps its arguments closed
 * into valid JSON where its text broke, and the rest is content. Both pointers are owned by the
 * parser and valid until it is freed. GEIST_E_INVALID_STATE when called twice. */
geist_status geist_chat_parser_finish(geist_chat_parser* parser, const char** out_deltas,
                                      const char** out_message);

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_CHAT_H */
