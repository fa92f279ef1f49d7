// geist chat: an interactive multi-turn chat through the model's chat template.
//
// Each turn renders the whole conversation and prefills only what the session does not hold
// yet: the longest common prefix of the session's tokens and the new prompt is kept. Where the
// template re-renders history differently (Qwen3.5 drops old reasoning), the session goes back
// to the deepest checkpoint (one is taken after every prompt's prefill) that is still a prefix
// of the new prompt, instead of prefilling everything again.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_common.h"
#include "chat_file.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "geist/geist.hpp"
#include "geist/geist_chat.hpp"

namespace geist_cli {

namespace {

using Json = nlohmann::ordered_json;

volatile std::sig_atomic_t g_interrupted = 0;  // set by SIGINT; the CLI's one signal flag

void on_sigint(int) { g_interrupted = 1; }

void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns with EINTR
  sigaction(SIGINT, &sa, nullptr);
}

struct Checkpoint {
  std::vector<geist_token> tokens;  // the session's history when the image was taken
  std::vector<uint8_t> image;
};

constexpr size_t kMaxCheckpoints = 8;

bool is_prefix(const std::vector<geist_token>& a, const std::vector<geist_token>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

struct Chat {
  Chat(const VerbSpec& s, const ModelHandle& m, SessionHandle& sess, const ChatTemplate& t)
      : spec(s), model(m), session(sess), tmpl(t) {}
  const VerbSpec& spec;
  const ModelHandle& model;
  SessionHandle& session;
  const ChatTemplate& tmpl;
  Json messages = Json::array();
  std::string system;
  bool no_think = false;
  int32_t n_predict = -1;
  std::deque<Checkpoint> checkpoints;
  bool tty = false;

  // Brings the session to hold `prompt` and leaves its last logits pending. *reused: tokens
  // of the prompt that were not prefilled again.
  bool prefill(const std::vector<geist_token>& prompt, size_t* reused) {
    std::vector<geist_token> held;
    if (session.tokens(&held) != GEIST_OK) return false;
    if (!is_prefix(held, prompt)) {
      // Back to the deepest checkpoint that is a prefix (an image holds its pending logits),
      // else to nothing.
      const Checkpoint* best = nullptr;
      for (const Checkpoint& c : checkpoints) {
        if (is_prefix(c.tokens, prompt) &&
            (best == nullptr || c.tokens.size() > best->tokens.size())) {
          best = &c;
        }
      }
      const geist_status st = best != nullptr ? session.restore(best->image) : session.reset();
      if (st != GEIST_OK) {
        cli_error(spec.name, "cannot rewind the session: %s", session.last_error());
        return false;
      }
      held = best != nullptr ? best->tokens : std::vector<geist_token>{};
    }
    *reused = held.size();
    if (session.prefill(prompt.data() + held.size(), prompt.size() - held.size()) != GEIST_OK) {
      cli_error(spec.name, "prefill failed: %s", session.last_error());
      return false;
    }
    Checkpoint c;
    c.tokens = prompt;
    if (session.snapshot(&c.image) == GEIST_OK) {
      checkpoints.push_back(std::move(c));
      if (checkpoints.size() > kMaxCheckpoints) checkpoints.pop_front();
    }
    return true;
  }

  void print_delta(const Json& d, bool* in_reasoning) {
    if (d.contains("reasoning_content")) {
      if (!*in_reasoning) std::fputs(tty ? "\x1b[2m" : "<think>\n", stdout);
      *in_reasoning = true;
      std::fputs(d["reasoning_content"].get<std::string>().c_str(), stdout);
    } else if (d.contains("content")) {
      if (*in_reasoning) std::fputs(tty ? "\x1b[0m\n" : "\n</think>\n", stdout);
      *in_reasoning = false;
      std::fputs(d["content"].get<std::string>().c_str(), stdout);
    } else if (d.contains("tool_calls")) {
      const Json& fn = d["tool_calls"][0]["function"];
      if (fn.contains("name"))
        std::printf("\n[tool call %s] ", fn["name"].get<std::string>().c_str());
      std::fputs(fn["arguments"].get<std::string>().c_str(), stdout);
    }
    std::fflush(stdout);
  }

  void print_deltas(const char* json, bool* in_reasoning) {
    const Json arr = Json::parse(json, nullptr, false);
    if (!arr.is_array()) return;
    for (const Json& d : arr) print_delta(d, in_reasoning);
  }

  // One user turn: render, prefill what is new, stream the reply, append it to messages.
  bool turn(const std::string& user_text) {
    Json user = {{"role", "user"}, {"content", user_text}};
    messages.push_back(user);
    Json req = {{"messages", messages}, {"add_generation_prompt", true}};
    if (no_think) req["chat_template_kwargs"] = {{"enable_thinking", false}};
    std::string prompt_text;
    std::vector<geist_token> prompt;
    if (!render_chat(spec.name, tmpl, req.dump(), &prompt_text) ||
        !tokenize_prompt(spec.name, model, prompt_text, &prompt)) {
      messages.erase(messages.size() - 1);
      return false;
    }
    if (static_cast<int32_t>(prompt.size()) >= session.max_seq_len()) {
      cli_error(spec.name, "the conversation (%zu tokens) does not fit the context (%d): /reset",
                prompt.size(), session.max_seq_len());
      messages.erase(messages.size() - 1);
      return false;
    }
    const double t0 = now_seconds();
    size_t reused = 0;
    if (!prefill(prompt, &reused)) {
      messages.erase(messages.size() - 1);
      return false;
    }
    const double t1 = now_seconds();

    ChatParser parser;
    std::string err;
    if (ChatParser::create(tmpl, prompt_text, "", &parser, &err) != GEIST_OK) {
      cli_error(spec.name, "%s", err.c_str());
      messages.erase(messages.size() - 1);
      return false;
    }
    std::string piece;
    bool in_reasoning = false;
    int32_t n_gen = 0;
    const char* why = "end of turn";
    g_interrupted = 0;
    while (n_predict < 0 || n_gen < n_predict) {
      if (g_interrupted) {
        why = "interrupted";
        break;
      }
      geist_token tok = 0;
      const geist_status st = session.decode(&tok);
      if (st == GEIST_E_TOO_MANY_TOKENS) {
        why = "context full";
        break;
      }
      if (st != GEIST_OK) {
        cli_error(spec.name, "decode failed: %s", session.last_error());
        messages.erase(messages.size() - 1);
        return false;
      }
      if (model.token_is_eog(tok)) break;
      ++n_gen;
      if (model.token_to_piece(tok, &piece) != GEIST_OK) continue;
      const char* deltas = nullptr;
      bool stopped = false;
      if (parser.feed(piece.data(), piece.size(), &deltas, &stopped) == GEIST_OK) {
        print_deltas(deltas, &in_reasoning);
      }
    }
    if (n_gen == n_predict) why = "length";
    const char* deltas = nullptr;
    const char* message = nullptr;
    if (parser.finish(&deltas, &message) == GEIST_OK) {
      print_deltas(deltas, &in_reasoning);
      if (in_reasoning) std::fputs(tty ? "\x1b[0m" : "\n</think>", stdout);
      Json reply = Json::parse(message, nullptr, false);
      if (reply.is_object()) {
        if (reply.contains("content") && reply["content"].is_null()) reply["content"] = "";
        messages.push_back(std::move(reply));
      }
    }
    const double t2 = now_seconds();
    std::printf("\n");
    std::fflush(stdout);
    const size_t fresh = prompt.size() - reused;
    std::fprintf(stderr,
                 "[prompt %zu tokens: %zu reused, %zu prefilled (%.1f tok/s); reply %d tokens "
                 "(%.1f tok/s), %s]\n",
                 prompt.size(), reused, fresh, t1 > t0 ? fresh / (t1 - t0) : 0.0, n_gen,
                 t2 > t1 ? n_gen / (t2 - t1) : 0.0, why);
    return true;
  }

  void reset() {
    messages = Json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    checkpoints.clear();
    (void)session.reset();
  }

  // The file holds the current state first, then the checkpoints, so that the next turn
  // rewinds after a load exactly as it would have without one.
  void save(const std::string& path) {
    std::vector<std::vector<uint8_t>> images(1);
    if (session.snapshot(&images[0]) != GEIST_OK) {
      cli_error(spec.name, "cannot snapshot: %s", session.last_error());
      return;
    }
    Json states = Json::array();
    for (const Checkpoint& c : checkpoints) {
      states.push_back(c.tokens.size());
      images.push_back(c.image);
    }
    const Json head = {{"messages", messages}, {"checkpoint_tokens", states}};
    std::string err;
    if (!write_chat_file(path, head.dump(), images, &err)) {
      cli_error(spec.name, "cannot save: %s", err.c_str());
      return;
    }
    size_t bytes = 0;
    for (const auto& img : images) bytes += img.size();
    std::fprintf(stderr, "[saved %zu messages and %zu states (%zu bytes) to %s]\n", messages.size(),
                 images.size(), bytes, path.c_str());
  }

  // Validates every state by restoring it (the checkpoints first, the current state last), so
  // a refused file changes nothing but the session's state, which is put back.
  void load(const std::string& path) {
    std::string json, err;
    std::vector<std::vector<uint8_t>> images;
    if (!read_chat_file(path, &json, &images, &err)) {
      cli_error(spec.name, "cannot load %s: %s (the chat is unchanged)", path.c_str(), err.c_str());
      return;
    }
    const Json head = Json::parse(json, nullptr, false);
    if (!head.is_object() || !head.contains("messages") || !head["messages"].is_array() ||
        images.empty()) {
      cli_error(spec.name, "cannot load %s: not a chat saved by geist chat", path.c_str());
      return;
    }
    std::vector<uint8_t> before;
    if (session.snapshot(&before) != GEIST_OK) before.clear();
    std::deque<Checkpoint> loaded;
    bool ok = true;
    for (size_t i = 1; i < images.size() && ok; ++i) {
      Checkpoint c;
      ok = session.restore(images[i]) == GEIST_OK && session.tokens(&c.tokens) == GEIST_OK;
      c.image = std::move(images[i]);
      loaded.push_back(std::move(c));
    }
    ok = ok && session.restore(images[0]) == GEIST_OK;
    if (!ok) {
      cli_error(spec.name, "cannot load %s: %s (the chat is unchanged)", path.c_str(),
                session.last_error());
      if (!before.empty()) (void)session.restore(before);
      return;
    }
    messages = head["messages"];
    checkpoints = std::move(loaded);
    std::fprintf(stderr, "[loaded %zu messages, %d tokens of state from %s]\n", messages.size(),
                 session.position(), path.c_str());
  }
};

// Reads one line (a trailing backslash continues it). false at end of input.
bool read_line(bool tty, std::string* out) {
  out->clear();
  if (tty) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
  }
  char buf[4096];
  for (;;) {
    errno = 0;
    if (std::fgets(buf, sizeof buf, stdin) == nullptr) {
      if (errno == EINTR && g_interrupted) {
        clearerr(stdin);
        g_interrupted = 0;
        std::fputs("\n(/exit or Ctrl-D quits)\n", stdout);
        out->clear();
        return true;
      }
      return !out->empty();
    }
    *out += buf;
    if (!out->empty() && out->back() == '\n') {
      out->pop_back();
      if (!out->empty() && out->back() == '\\') {
        out->back() = '\n';
        continue;
      }
      return true;
    }
  }
}

}  // namespace

const VerbSpec& chat_spec() {
  static const VerbSpec spec = {
      "chat", "-m FILE [-s SYSTEM] [--no-think] [options]",
      "Interactive multi-turn chat through the model's chat template; replies stream to stdout,\n"
      "a stats line per turn to stderr (prompt tokens reused from the session, speeds). Commands:\n"
      "/save FILE (messages and session state in one file), /load FILE (resume without\n"
      "re-prefilling), /reset, /exit. Ctrl-C stops a reply; a trailing \\ continues a line.",
      concat_opts(
          {
              {"-m", "--model", "FILE", "GGUF model (required)"},
              {"-s", "--system", "TEXT", "system prompt"},
              {nullptr, "--no-think", nullptr, "render with enable_thinking=false"},
              {nullptr, "--chat-template", "FILE", "a Jinja template instead of the model's"},
              {nullptr, "--template-name", "NAME", "a named template of the model (e.g. tool_use)"},
              {"-n", "--n-predict", "N", "most tokens per reply (default -1: until end of turn)"},
              {nullptr, "--load", "FILE", "resume a chat saved with /save"},
          },
          session_opt_specs())};
  return spec;
}

int cmd_chat(int argc, char** argv) {
  const VerbSpec& spec = chat_spec();
  Args args;
  if (int rc = parse_verb_args(spec, argc, argv, &args); rc >= 0) return rc;
  if (!args.has("--model")) {
    cli_error(spec.name, "missing -m FILE (the model to chat with)");
    return kExitUsage;
  }
  geist_session_params sp;
  geist_session_params_default(&sp);
  int32_t n_predict = -1;
  if (!args.get_i32("--n-predict", &n_predict) || !parse_session_opts(spec.name, args, &sp)) {
    return kExitUsage;
  }

  ModelHandle m;
  if (!load_model(args, args.str("--model"), &m)) return kExitFailure;
  ChatTemplate t;
  if (!load_chat_template(spec.name, args, m, &t)) return kExitFailure;
  SessionHandle sess;
  if (!create_session(spec.name, m, sp, &sess)) return kExitFailure;
  Chat chat(spec, m, sess, t);
  chat.no_think = args.has("--no-think");
  chat.n_predict = n_predict;
  chat.system = args.has("--system") ? args.str("--system") : "";
  chat.tty = stderr_is_terminal();
  chat.reset();
  if (args.has("--load")) chat.load(args.str("--load"));
  install_sigint();

  std::string line;
  while (read_line(chat.tty, &line)) {
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      chat.reset();
      std::fprintf(stderr, "[conversation reset]\n");
    } else if (line.rfind("/save ", 0) == 0) {
      chat.save(line.substr(6));
    } else if (line.rfind("/load ", 0) == 0) {
      chat.load(line.substr(6));
    } else if (line[0] == '/' && line.find(' ') == std::string::npos) {
      std::fprintf(stderr, "[unknown command %s: /save FILE, /load FILE, /reset, /exit]\n",
                   line.c_str());
    } else {
      chat.turn(line);
    }
  }
  return 0;
}

}  // namespace geist_cli
