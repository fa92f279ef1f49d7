// geist_quantize (geist_util.h): the C entry point of engine/quantize.
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <string>

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
  try {
    if (in_path == nullptr || out_path == nullptr || type == nullptr) {
      set_error(err_buf, err_cap, "geist_quantize: in_path, out_path and type must not be NULL");
      return GEIST_E_INVALID_ARG;
    }
    std::function<void(float)> progress;
    if (progress_fn != nullptr) {
      // The writer cannot stop half-way, so the callback's return value is not a cancel.
      progress = [&](float f) { (void)progress_fn(progress_user, f); };
    }
    const geist::Status st =
        geist::quantize_file(in_path, out_path, type, /*n_threads=*/0, progress);
    if (!st.is_ok()) set_error(err_buf, err_cap, st.message());
    return st.code();
  } catch (const std::bad_alloc&) {
    set_error(err_buf, err_cap, "geist_quantize: out of memory");
    return GEIST_E_OOM;
  } catch (const std::exception& e) {
    set_error(err_buf, err_cap, std::string("geist_quantize: internal error: ") + e.what());
    return GEIST_E_INTERNAL;
  } catch (...) {
    set_error(err_buf, err_cap, "geist_quantize: internal error");
    return GEIST_E_INTERNAL;
  }
}
