// Template::parse / render: the engine's boundary. Every error inside (syntax, runtime, limits,
// allocation) becomes a Status here; nothing is thrown past it.
#include "chat/jinja.h"

#include <ctime>
#include <new>

#include "chat/jinja_eval.h"

namespace geist::jinja {

struct Template::Impl {
  std::vector<NodeP> body;
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::~Template() = default;

Status Template::parse(std::string_view source, const Limits& limits,
                       std::unique_ptr<Template>* out) {
  out->reset();
  if (source.size() > limits.max_source_bytes)
    return Status::error(GEIST_E_INVALID_ARG,
                         "template of %zu bytes is past max_source_bytes (%zu)", source.size(),
                         limits.max_source_bytes);
  try {
    auto impl = std::make_unique<Impl>();
    impl->body = parse_template(lex(source), limits.max_depth);
    out->reset(new Template(std::move(impl)));
    return Status::ok();
  } catch (const SyntaxError& e) {
    return Status::error(GEIST_E_FORMAT, "line %d: %s", e.line, e.message.c_str());
  } catch (const Error& e) {
    return Status(e.limit ? GEIST_E_INVALID_ARG : GEIST_E_FORMAT, e.message);
  } catch (const std::bad_alloc&) {
    return Status::error(GEIST_E_INVALID_ARG, "template parse ran out of memory");
  } catch (const std::exception& e) {
    return Status::error(GEIST_E_FORMAT, "template parse failed: %s", e.what());
  }
}

Status Template::render(const Json& context, const RenderOptions& opts, std::string* out) const {
  out->clear();
  try {
    std::string text;
    Evaluator ev(opts, &text);
    ev.render(impl_->body, context);
    *out = std::move(text);
    return Status::ok();
  } catch (const Error& e) {
    if (e.limit) return Status(GEIST_E_INVALID_ARG, e.message);
    // raise_exception's message is the template's own words; others carry Python's class name.
    if (e.type == "TemplateError") return Status(GEIST_E_FORMAT, e.message);
    return Status(GEIST_E_FORMAT, e.type + ": " + e.message);
  } catch (const std::bad_alloc&) {
    return Status::error(GEIST_E_INVALID_ARG, "template render ran out of memory");
  } catch (const std::exception& e) {
    return Status::error(GEIST_E_FORMAT, "template render failed: %s", e.what());
  }
}

// ---- globals ----

void Evaluator::install_globals() {
  globals_.clear();
  globals_.emplace_back("raise_exception",
                        Value::func("raise_exception", [](Evaluator&, Args& a) -> Value {
                          fail("TemplateError", to_str(a.get(0, "message")));
                        }));
  globals_.emplace_back(
      "strftime_now", Value::func("strftime_now", [](Evaluator& ev, Args& a) {
        Value fmt = a.get(0, "format");
        if (!fmt.is_string())
          fail("TypeError", "strftime() argument 1 must be str, not " + type_name(fmt));
        std::tm tm{};
        int64_t t = ev.options().now_epoch_seconds;
        if (t >= 0) {
          time_t tt = time_t(t);
          gmtime_r(&tt, &tm);
        } else {
          time_t now = std::time(nullptr);
          localtime_r(&now, &tm);
        }
        std::string f = fmt.str();
        if (f.size() > 1024) fail("ValueError", "format too long");
        std::string buf(f.size() * 16 + 64, '\0');
        size_t n = f.empty() ? 0 : std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
        buf.resize(n);
        return Value::string(buf);
      }));
  globals_.emplace_back(
      "range", Value::func("range", [](Evaluator& ev, Args& a) {
        for (auto& v : a.pos)
          if (v.kind != Kind::Int && v.kind != Kind::Bool) {
            if (v.is_undefined()) fail_undefined(v);
            fail("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer");
          }
        int64_t start = 0, stop = 0, step = 1;
        if (a.pos.size() == 1) {
          stop = a.pos[0].as_int();
        } else if (a.pos.size() == 2 || a.pos.size() == 3) {
          start = a.pos[0].as_int();
          stop = a.pos[1].as_int();
          if (a.pos.size() == 3) step = a.pos[2].as_int();
        } else {
          fail("TypeError",
               "range expected at most 3 arguments, got " + std::to_string(a.pos.size()));
        }
        if (step == 0) fail("ValueError", "range() arg 3 must not be zero");
        __int128 span = step > 0 ? (__int128(stop) - start + step - 1) / step
                                 : (__int128(start) - stop - step - 1) / -step;
        if (span < 0) span = 0;
        if (span > 100000)
          fail("OverflowError",
               "Range too big. The sandbox blocks ranges larger than MAX_RANGE "
               "(100000).");
        ev.charge(size_t(span) * 16);
        std::vector<Value> out;
        out.reserve(size_t(span));
        for (int64_t k = 0; k < int64_t(span); ++k) out.push_back(Value::integer(start + k * step));
        return Value::list(std::move(out));
      }));
  auto make_dict = [](bool ns) {
    return [ns](Evaluator&, Args& a) {
      Value d = Value::dict();
      d.dct().is_namespace = ns;
      for (auto& p : a.pos) {
        if (p.kind == Kind::Dict) {
          for (auto& kv : p.dct().items) d.dct().set(kv.first, kv.second);
        } else {
          for (auto& item : iterate(p)) {
            std::vector<Value> kv = iterate(item);
            if (kv.size() != 2)
              fail("ValueError", "dictionary update sequence element has wrong length");
            d.dct().set(kv[0], kv[1]);
          }
        }
      }
      for (auto& kv : a.kw) d.dct().set(Value::string(kv.first), kv.second);
      return d;
    };
  };
  globals_.emplace_back("namespace", Value::func("namespace", make_dict(true)));
  globals_.emplace_back("dict", Value::func("dict", make_dict(false)));
  globals_.emplace_back("joiner", Value::func("joiner", [](Evaluator&, Args& a) {
                          std::string sep = to_str(a.get(0, "sep", Value::string(", ")));
                          auto used = std::make_shared<bool>(false);
                          return Value::func("joiner", [sep, used](Evaluator&, Args&) {
                            if (!*used) {
                              *used = true;
                              return Value::string("");
                            }
                            return Value::string(sep);
                          });
                        }));
}

}  // namespace geist::jinja
