// The value model of the Jinja engine: Python's values as chat templates see them (None, bool,
// int, float, str, list/tuple, dict, callables, Jinja's Undefined), with Python's truthiness,
// equality, ordering, str() and repr(). Internal to src/chat.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja.h"

// GCC 12 warns falsely (-Wrestrict, GCC bug 105329) on `"literal" + std::string` temporaries.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace geist::jinja {

// A render-time error with the exception class name Python would show ("TypeError",
// "UndefinedError", "TemplateError" for raise_exception, ...). Thrown inside the engine only;
// Template::render catches it and maps it to a Status.
struct Error {
  std::string type;
  std::string message;
  bool limit = false;  // a Limits bound was hit (GEIST_E_INVALID_ARG)
};
[[noreturn]] void fail(const std::string& type, const std::string& message);
[[noreturn]] void fail_limit(const std::string& message);

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Func };

struct Value;
class Evaluator;
struct Args;
struct StrObj;
struct ListObj;
struct DictObj;
struct FuncObj;
using NativeFn = std::function<Value(Evaluator&, Args&)>;

// Lists and dicts nest at most this deep, so that every recursive walk (str(), ==, json.dumps,
// the destructors) is bounded; deeper is a RecursionError, as Python's limit would give.
constexpr uint32_t kMaxNesting = 400;

struct Object {
  virtual ~Object() = default;
  uint32_t depth = 0;   // containers: 1 + the deepest container inside
  bool has_ns = false;  // containers: a namespace() is reachable inside (cycle check)
};
struct Value {
  Kind kind = Kind::Undefined;
  union {
    bool b;
    int64_t i;
    double f;
  };
  std::shared_ptr<Object> obj;

  Value() : i(0) {}
  static Value none() {
    Value v;
    v.kind = Kind::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
  }
  static Value string(std::string s);
  static Value markup(std::string s);  // a Markup string
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict();
  static Value func(std::string name, NativeFn fn);
  static Value undefined(std::string hint, std::string exc = "UndefinedError");

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_markup() const;
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }

  const std::string& str() const;
  ListObj& lst() const;
  DictObj& dct() const;
  FuncObj& fn() const;
  const std::string& undef_hint() const;
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Int ? double(i) : b; }
  int64_t as_int() const { return kind == Kind::Int ? i : kind == Kind::Bool ? b : int64_t(f); }
};

struct StrObj : Object {
  std::string s;
  bool safe = false;  // markupsafe.Markup (from |safe, |escape): `+` HTML-escapes the other side
  explicit StrObj(std::string v, bool markup = false) : s(std::move(v)), safe(markup) {}
};
struct ListObj : Object {
  std::vector<Value> items;
  bool tuple = false;
  bool generator = false;  // the result of map/select/...: Python shows a generator
  bool group = false;      // groupby's (grouper, list) tuple: also .grouper and .list
};
struct DictObj : Object {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python 3.7+ dicts
  bool is_namespace = false;                   // namespace(): attributes may be assigned
  bool is_loop = false;                        // a for loop's `loop`
  const Value* find(std::string_view key) const;
  Value* find_mut(std::string_view key);
  const Value* find(const Value& key) const;
  void set(const Value& key, Value v);
  void push(Value key, Value v);  // appends (the key must be new)
};
// A for loop's `loop`: attributes computed on access from the shared item list.
// What the iterations of one for loop share: loop.changed's last arguments, and for a
// recursive loop the function behind loop(...).
struct LoopState {
  bool has_last = false;
  Value last;
  NativeFn recurse;  // empty unless the loop is `recursive`
};
struct LoopObj : DictObj {
  std::shared_ptr<const std::vector<Value>> seq;
  size_t index = 0;
  int loop_depth = 1;  // loop.depth: 1 + the recursive calls above
  std::shared_ptr<LoopState> state;
};
struct FuncObj : Object {
  std::string name;
  NativeFn fn;
  std::shared_ptr<Object> bound;  // the str/list/dict a method is bound to (cycle check)
  Kind bound_kind{};
};
struct UndefObj : Object {
  std::string hint;                    // the error's message, when it is used
  std::string exc = "UndefinedError";  // "SecurityError" for the sandbox's unsafe attributes
};

inline bool Value::is_markup() const {
  return kind == Kind::String && static_cast<StrObj*>(obj.get())->safe;
}
inline const std::string& Value::str() const { return static_cast<StrObj*>(obj.get())->s; }
inline ListObj& Value::lst() const { return *static_cast<ListObj*>(obj.get()); }
inline DictObj& Value::dct() const { return *static_cast<DictObj*>(obj.get()); }
inline FuncObj& Value::fn() const { return *static_cast<FuncObj*>(obj.get()); }
inline const std::string& Value::undef_hint() const {
  static const std::string unknown = "value is undefined";
  return obj ? static_cast<UndefObj*>(obj.get())->hint : unknown;
}

// Records `child` as held by container `parent` (depth, has_ns); RecursionError past kMaxNesting.
void note_child(Object& parent, const Value& child);
// Whether `target` is reachable from v (through namespaces and containers holding them).
bool reaches(const Value& v, const Object* target);

// Raises UndefinedError with the value's hint (for operations Jinja's Undefined refuses).
[[noreturn]] void fail_undefined(const Value& v);

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// Python's a < b; TypeError for unorderable types ("'<' not supported between ...").
bool less(const Value& a, const Value& b, const char* op = "<");
// Python's type(x).__name__ ("str", "int", "list", "dict", "NoneType", ...).
std::string type_name(const Value& v);
// Jinja's object_type_repr: "None" or "<type> object".
std::string object_type_repr(const Value& v);
// Python's str() and repr() (Undefined renders as "").
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string repr_string(std::string_view s);
std::string float_repr(double x);
// markupsafe.escape of a plain string: & < > " ' as entities.
std::string html_escape(std::string_view s);
// `like` a Markup string: the result of a str operation on it is Markup too.
Value string_like(const Value& like, std::string s);

// Conversion from and to the JSON handed in. Strings must be UTF-8.
Value from_json(const Json& j);

// json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
// indent: nullptr for none; otherwise the string one level adds.
struct DumpOptions {
  bool has_indent = false;
  std::string indent;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const DumpOptions& opt);

// Iteration as Python's iter(): list items, dict keys, string characters (UTF-8 code points);
// Undefined is empty. TypeError "'int' object is not iterable" otherwise.
std::vector<Value> iterate(const Value& v);
// Python's len(); TypeError "object of type 'int' has no len()".
int64_t length(const Value& v);
// UTF-8 code points of s, as byte offsets (size n+1, last = s.size()).
std::vector<size_t> code_points(std::string_view s);
// Appends code point cp as UTF-8 (U+FFFD for a surrogate or a value past U+10FFFF).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace geist::jinja
