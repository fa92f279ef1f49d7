// C ABI: library-wide functions and models (geist.h, geist_util.h). Sessions: session_c.cpp.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/handles.h"
#include "backends/backend.h"
#include "geist/geist.h"
#include "geist/geist_util.h"
#include "kernels/numerics.h"
#include "kernels/simd/matmul_simd.h"

using geist::Status;
using geist::api::guarded;

namespace {

void copy_to_err_buf(const std::string& msg, char* buf, size_t cap) noexcept {
  if (buf == nullptr || cap == 0) return;
  const size_t n = std::min(msg.size(), cap - 1);
  std::memcpy(buf, msg.data(), n);
  buf[n] = '\0';
}

// Runs a model call: failures land in the calling thread's error slot of the model.
template <class F>
geist_status model_call(const geist_model* model, F&& f) noexcept {
  if (model == nullptr || !model->model) return GEIST_E_INVALID_ARG;
  return guarded(f, [model](const std::string& m) { model->set_error(m); });
}

}  // namespace

extern "C" {

const char* geist_status_string(geist_status status) {
  // A C caller may pass any int; reading the enum as its bytes keeps an
  // out-of-range code defined behaviour in C++ (UBSan's enum check).
  static_assert(sizeof(geist_status) == sizeof(int));
  int code = 0;
  std::memcpy(&code, &status, sizeof code);
  switch (code) {
    case GEIST_OK:
      return "GEIST_OK: success";
    case GEIST_E_OOM:
      return "GEIST_E_OOM: out of memory";
    case GEIST_E_INVALID_ARG:
      return "GEIST_E_INVALID_ARG: invalid argument";
    case GEIST_E_INTERNAL:
      return "GEIST_E_INTERNAL: internal error (a bug in geist)";
    case GEIST_E_FILE_NOT_FOUND:
      return "GEIST_E_FILE_NOT_FOUND: file not found";
    case GEIST_E_IO:
      return "GEIST_E_IO: I/O error";
    case GEIST_E_FORMAT:
      return "GEIST_E_FORMAT: malformed input";
    case GEIST_E_UNSUPPORTED:
      return "GEIST_E_UNSUPPORTED: not supported";
    case GEIST_E_NOT_FOUND:
      return "GEIST_E_NOT_FOUND: not found";
    case GEIST_E_BACKEND:
      return "GEIST_E_BACKEND: compute backend failure";
    case GEIST_E_INVALID_STATE:
      return "GEIST_E_INVALID_STATE: not allowed in the current state";
    case GEIST_E_TOO_MANY_TOKENS:
      return "GEIST_E_TOO_MANY_TOKENS: max_seq_len would be exceeded";
    case GEIST_E_CANCELLED:
      return "GEIST_E_CANCELLED: cancelled by the caller";
  }
  return "GEIST_E_UNKNOWN: unknown status code";
}

// Kept equal to project(geist VERSION ...) in CMakeLists.txt.
const char* geist_version(void) { return GEIST_VERSION_STRING; }

void geist_model_params_default(geist_model_params* params) {
  if (params == nullptr) return;
  *params = geist_model_params{};
  params->struct_size = sizeof(geist_model_params);
}

geist_status geist_model_load(const char* path, const geist_model_params* params,
                              geist_model** out_model, char* err_buf, size_t err_cap) {
  std::string err;
  auto sink = [&err](const std::string& m) { err = m; };
  const geist_status st = guarded(
      [&]() -> Status {
        if (out_model == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_model is NULL");
        *out_model = nullptr;
        if (path == nullptr) return Status::error(GEIST_E_INVALID_ARG, "path is NULL");
        geist_model_params p;
        geist_model_params_default(&p);
        if (params != nullptr) {
          // Callers built against 0.1 pass the struct without `backend` (AUTO then), those
          // built against 0.2 without `vocab_only` (0 then).
          const size_t v1 = offsetof(geist_model_params, backend);
          const size_t v2 = offsetof(geist_model_params, vocab_only);
          if (params->struct_size != sizeof(geist_model_params) && params->struct_size != v1 &&
              params->struct_size != v2) {
            return Status::error(GEIST_E_INVALID_ARG,
                                 "geist_model_params.struct_size is %u, expected %zu (initialise "
                                 "with geist_model_params_default)",
                                 params->struct_size, sizeof(geist_model_params));
          }
          std::memcpy(&p, params, params->struct_size);
          p.struct_size = sizeof(geist_model_params);
        }
        if (geist::backend_kind_name(static_cast<geist::BackendKind>(p.backend))[0] == '?') {
          return Status::error(GEIST_E_INVALID_ARG, "geist_model_params.backend %d is unknown",
                               p.backend);
        }
        auto handle = std::make_unique<geist_model>();
        Status s = geist::Model::load(path, p, &handle->model);
        if (!s.is_ok()) {
          geist::Logger{p.log_fn, p.log_user}.log(GEIST_LOG_ERROR, "%s", s.message().c_str());
          return s;
        }
        *out_model = handle.release();
        return Status::ok();
      },
      sink);
  if (st != GEIST_OK) copy_to_err_buf(err, err_buf, err_cap);
  return st;
}

void geist_model_free(geist_model* model) {
  if (model == nullptr) return;
  const int live = model->n_sessions.load();
  if (live != 0) {
    // Freeing would leave those sessions dangling; leaking is the lesser harm.
    if (model->model) {
      model->model->logger().log(GEIST_LOG_ERROR,
                                 "geist_model_free: %d session(s) still alive; the model is "
                                 "leaked instead of freed",
                                 live);
    }
    return;
  }
  delete model;
}

const char* geist_model_last_error(const geist_model* model) {
  return model == nullptr ? "" : model->last_error();
}

int32_t geist_model_n_vocab(const geist_model* model) {
  return model && model->model ? model->model->n_vocab() : 0;
}

int32_t geist_model_n_ctx_train(const geist_model* model) {
  return model && model->model ? std::max(model->model->info().n_ctx_train, 0) : 0;
}

geist_token geist_model_token_bos(const geist_model* model) {
  return model && model->model ? model->model->tokenizer().bos() : -1;
}

geist_token geist_model_token_eos(const geist_model* model) {
  return model && model->model ? model->model->tokenizer().eos() : -1;
}

int geist_model_token_is_eog(const geist_model* model, geist_token token) {
  if (model == nullptr || !model->model || token < 0 || token >= model->model->n_vocab()) {
    return 0;
  }
  return model->model->tokenizer().is_eog(token) ? 1 : 0;
}

geist_status geist_tokenize(geist_model* model, const char* text, size_t text_len, int add_special,
                            int parse_special, geist_token* out, size_t cap, size_t* n_out) {
  return model_call(model, [&]() -> Status {
    if (n_out == nullptr) return Status::error(GEIST_E_INVALID_ARG, "n_out is NULL");
    if (text == nullptr && text_len > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "text is NULL but text_len is %zu", text_len);
    }
    if (out == nullptr && cap > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
    }
    std::vector<int32_t> ids;
    GEIST_RETURN_IF_ERROR(model->model->tokenizer().encode(
        std::string_view(text ? text : "", text_len), add_special != 0, parse_special != 0, &ids));
    *n_out = ids.size();
    if (ids.size() > cap) {
      return Status::error(GEIST_E_INVALID_ARG, "output holds %zu tokens but %zu are needed", cap,
                           ids.size());
    }
    std::copy(ids.begin(), ids.end(), out);
    return Status::ok();
  });
}

geist_status geist_detokenize(geist_model* model, const geist_token* tokens, size_t n_tokens,
                              char* out, size_t cap, size_t* n_out) {
  return model_call(model, [&]() -> Status {
    if (n_out == nullptr) return Status::error(GEIST_E_INVALID_ARG, "n_out is NULL");
    if (tokens == nullptr && n_tokens > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "tokens is NULL but n_tokens is %zu", n_tokens);
    }
    if (out == nullptr && cap > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
    }
    const int32_t n_vocab = model->model->n_vocab();
    for (size_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= n_vocab) {
        return Status::error(GEIST_E_INVALID_ARG,
                             "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i],
                             i, n_vocab);
      }
    }
    std::string text;
    GEIST_RETURN_IF_ERROR(model->model->tokenizer().decode(tokens, n_tokens, &text));
    return geist::api::write_string(text, out, cap, n_out);
  });
}

geist_status geist_token_to_piece(geist_model* model, geist_token token, char* out, size_t cap,
                                  size_t* n_out) {
  return model_call(model, [&]() -> Status {
    if (n_out == nullptr) return Status::error(GEIST_E_INVALID_ARG, "n_out is NULL");
    if (out == nullptr && cap > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
    }
    if (token < 0 || token >= model->model->n_vocab()) {
      return Status::error(GEIST_E_INVALID_ARG, "token %d is outside the vocabulary [0, %d)", token,
                           model->model->n_vocab());
    }
    std::string piece;
    GEIST_RETURN_IF_ERROR(model->model->tokenizer().token_to_piece(token, &piece));
    return geist::api::write_string(piece, out, cap, n_out);
  });
}

geist_status geist_model_describe(geist_model* model, char* out, size_t cap, size_t* n_out) {
  return model_call(model, [&]() -> Status {
    if (n_out == nullptr) return Status::error(GEIST_E_INVALID_ARG, "n_out is NULL");
    if (out == nullptr && cap > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
    }
    return geist::api::write_string(model->model->describe(), out, cap, n_out);
  });
}

geist_status geist_model_identity(geist_model* model, char* out, size_t cap, size_t* n_out) {
  return model_call(model, [&]() -> Status {
    if (n_out == nullptr) return Status::error(GEIST_E_INVALID_ARG, "n_out is NULL");
    if (out == nullptr && cap > 0) {
      return Status::error(GEIST_E_INVALID_ARG, "out is NULL but cap is %zu", cap);
    }
    GEIST_RETURN_IF_ERROR(model->model->require_weights("geist_model_identity"));
    char id[32];
    std::snprintf(id, sizeof id, "%016llx",
                  static_cast<unsigned long long>(model->model->snapshot_id()));
    // The backend's own description names the device for GPUs (kernels differ per
    // architecture); the SIMD target names the CPU kernels every backend uses for some ops.
    const geist::Backend& be = model->model->arch().backend();
    const std::string backend = be.kind() == geist::BackendKind::CUDA
                                    ? be.description()
                                    : geist::backend_kind_name(be.kind());
    const std::string s = std::string("snapshot_id=") + id + ";backend=" + backend +
                          ";cpu_kernels=" + geist::simd::target_name() +
                          ";numerics=" + std::to_string(geist::kNumericsRevision);
    return geist::api::write_string(s, out, cap, n_out);
  });
}

geist_status geist_model_time_copies(geist_model* model, size_t n_bytes, double* upload_s,
                                     double* download_s) {
  return model_call(model, [&]() -> Status {
    if (upload_s == nullptr || download_s == nullptr) {
      return Status::error(GEIST_E_INVALID_ARG, "upload_s or download_s is NULL");
    }
    GEIST_RETURN_IF_ERROR(model->model->require_weights("geist_model_time_copies"));
    std::unique_ptr<geist::Stream> stream;
    GEIST_RETURN_IF_ERROR(model->model->arch().backend().new_stream(&stream));
    std::unique_ptr<geist::Buffer> dev;
    GEIST_RETURN_IF_ERROR(stream->alloc(std::max<size_t>(n_bytes, 4), &dev));
    // Host buffers written first so page faults are not timed.
    std::vector<uint8_t> src(n_bytes, 0x5a), dst(n_bytes, 0);
    uint8_t tail[4];
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    stream->upload(dev->data(), src.data(), n_bytes);
    stream->download(tail, dev->data(), 4);  // waits for the upload on asynchronous backends
    *upload_s = std::chrono::duration<double>(clock::now() - t0).count();
    t0 = clock::now();
    stream->download(dst.data(), dev->data(), n_bytes);
    *download_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (n_bytes > 0 && dst[n_bytes - 1] != 0x5a) {
      return Status(GEIST_E_BACKEND, "copy timing: the data did not survive the round trip");
    }
    return Status::ok();
  });
}

}  // extern "C"
