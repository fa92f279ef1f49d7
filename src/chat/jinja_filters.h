// The Jinja filters' shared pieces (jinja_filters.cpp, jinja_filters_seq.cpp). Internal to
// src/chat.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_eval.h"

namespace geist::jinja {

// A list marked as what Jinja2 returns as a generator (tojson refuses it).
Value generator(std::vector<Value> items);
// Jinja's make_attrgetter: "a.b.0" looked up part by part with getitem.
Value get_attr_path(Evaluator& ev, Value item, const Value& attr);
// v lowercased when it is a string and !case_sensitive (Jinja's ignore_case).
Value lowered(const Value& v, bool case_sensitive);
// Python's sorted() by an optional attribute path, case-insensitively unless cs.
std::vector<Value> sorted(Evaluator& ev, std::vector<Value> items, bool reverse, bool cs,
                          const Value& attr);

}  // namespace geist::jinja
