#include "tokenizer/tokenizer_base.h"

#include <algorithm>

namespace geist {
namespace {

// A piece of the input: either plain text still to be tokenized or an already chosen special
// token.
struct Fragment {
  int32_t token;          // -1 for text
  std::string_view text;  // into the caller's input when token == -1
};

bool is_special_attr(TokenAttr a) {
  return a == TokenAttr::CONTROL || a == TokenAttr::USER_DEFINED || a == TokenAttr::UNKNOWN;
}

// llama.cpp's clean_up_tokenization_spaces: " ?" -> "?" (also !.,), " ' " -> "'", and the
// space before the contractions 's 'm 're 've.
std::string clean_spaces(const std::string& in) {
  std::string a;  // modified by the second pass
  a.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
      a.pop_back();
    }
    a.push_back(x);
  }
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();  // the space before
      b.push_back(x);
      a[i + 1] = '\0';  // the space after; llama.cpp leaves a NUL that later checks see
      ++i;
      continue;
    }
    b.push_back(x);
  }
  std::string c;
  c.reserve(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const bool two = i + 2 < b.size();
      if (x1 == 's' || x1 == 'm' || (two && x1 == 'r' && b[i + 2] == 'e') ||
          (two && x1 == 'v' && b[i + 2] == 'e')) {
        c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

}  // namespace

TokenizerBase::TokenizerBase(Vocab vocab, const Logger& log) : vocab_(std::move(vocab)), log_(log) {
  for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
    if (is_special_attr(vocab_.types[id])) special_ids_.push_back(id);
  }
  // Longest first, so that a special token containing another one wins (llama.cpp's order);
  // ties by id keep the result independent of the sort implementation.
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
}

Status TokenizerBase::encode(std::string_view text, bool add_special, bool parse_special,
                             std::vector<int32_t>* out) const {
  if (!out) return Status(GEIST_E_INVALID_ARG, "encode: null output");
  out->clear();

  // Split the text at special-token texts, one token at a time in priority order, every
  // occurrence in every remaining text fragment (llama.cpp's partition, so that results match
  // its tokenizer exactly). User-defined tokens are always split out, as Hugging Face does;
  // control and unknown tokens only when parse_special is set.
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    if (!parse_special && vocab_.types[id] != TokenAttr::USER_DEFINED) continue;
    const std::string_view s = vocab_.tokens[id];
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.token < 0 && f.text.find(s) != std::string_view::npos) {
        found = true;
        break;
      }
    }
    if (!found) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t pos; (pos = rest.find(s)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({-1, rest.substr(0, pos)});
        next.push_back({id, {}});
        rest.remove_prefix(pos + s.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    frags.swap(next);
  }

  if (add_special && vocab_.add_bos) out->push_back(vocab_.bos);
  bool starts_text = true;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
      starts_text = true;
    } else {
      GEIST_RETURN_IF_ERROR(encode_fragment(f.text, starts_text, out));
      starts_text = false;
    }
  }
  if (add_special && vocab_.add_eos) out->push_back(vocab_.eos);
  if (add_special && vocab_.add_sep) out->push_back(vocab_.sep);
  return Status::ok();
}

Status TokenizerBase::token_to_piece(int32_t id, std::string* out) const {
  if (!out) return Status(GEIST_E_INVALID_ARG, "token_to_piece: null output");
  if (id < 0 || id >= vocab_.n_vocab()) {
    return Status::error(GEIST_E_INVALID_ARG, "token id %d is outside the vocabulary [0, %d)", id,
                         vocab_.n_vocab());
  }
  switch (vocab_.types[id]) {
    case TokenAttr::NORMAL:
    case TokenAttr::BYTE:
      *out = piece_bytes(id);
      break;
    case TokenAttr::USER_DEFINED:
      out->assign(vocab_.tokens[id]);
      break;
    default:  // control, unknown, unused, undefined: nothing in the text stream
      out->clear();
      break;
  }
  return Status::ok();
}

Status TokenizerBase::decode(const int32_t* ids, size_t n, std::string* out) const {
  if (!out) return Status(GEIST_E_INVALID_ARG, "decode: null output");
  if (n > 0 && !ids) return Status(GEIST_E_INVALID_ARG, "decode: null ids");
  std::string text;
  std::string piece;
  // encode put a space in front of the text (and after each special token, which decode
  // renders as nothing); only the first one can be told apart from a real space, so only
  // that one is removed, which makes decode(encode(x)) == x.
  bool at_start = adds_leading_space();
  for (size_t i = 0; i < n; ++i) {
    GEIST_RETURN_IF_ERROR(token_to_piece(ids[i], &piece));
    if (piece.empty()) continue;
    if (at_start && piece[0] == ' ') {
      text.append(piece, 1, std::string::npos);
    } else {
      text += piece;
    }
    at_start = false;
  }
  *out = vocab_.clean_spaces ? clean_spaces(text) : std::move(text);
  return Status::ok();
}

bool TokenizerBase::is_eog(int32_t id) const {
  return std::binary_search(vocab_.eog_ids.begin(), vocab_.eog_ids.end(), id);
}

}  // namespace geist
