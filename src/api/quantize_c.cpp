// geist_quantize (geist_util.h): the C entry point of engine/quantize.
#include <cstdio>
#include <functional>
#include <string>

#include "api/handles.h"
#include "engine/quantize.h"
#include "geist/geist_util.h"

namespace {

void set_error(char* err_buf, size_t err_cap, const std::string& msg) {
  if (err_buf == nullptr || err_cap == 0) return;
  std::snprintf(err_buf, err_cap, "%s", msg.c_str());
}

}  // namespace

extern "C" geist_status geist_quantize(const char* in_path, const char* out_path, const char* type,
                                       geist_progress_fn progress_fn, void* progress_user,
                                       char* err_buf, size_t err_cap) {
  set_error(err_buf, err_cap, "");
  auto sink = [&](const std::string& msg) { set_error(err_buf, err_cap, msg); };
  return geist::api::guarded(
      [&]() -> geist::Status {
        if (in_path == nullptr || out_path == nullptr || type == nullptr) {
          return geist::Status(GEIST_E_INVALID_ARG,
                               "geist_quantize: in_path, out_path and type must not be NULL");
        }
        std::function<void(float)> progress;
        if (progress_fn != nullptr) {
          // The writer cannot stop half-way, so the callback's return value is not a cancel.
          progress = [&](float f) { (void)progress_fn(progress_user, f); };
        }
        return geist::quantize_file(in_path, out_path, type, /*n_threads=*/0, progress);
      },
      sink);
}
