// geist_mkmodel (geist_util.h): the C entry point of engine/mkmodel.
#include <cstdio>
#include <functional>
#include <string>

#include "api/handles.h"
#include "engine/mkmodel.h"
#include "geist/geist_util.h"

namespace {

void set_error(char* err_buf, size_t err_cap, const std::string& msg) {
  if (err_buf == nullptr || err_cap == 0) return;
  std::snprintf(err_buf, err_cap, "%s", msg.c_str());
}

}  // namespace

extern "C" geist_status geist_mkmodel(const char* preset, const char* type, const char* out_path,
                                      uint64_t seed, geist_progress_fn progress_fn,
                                      void* progress_user, char* err_buf, size_t err_cap) {
  set_error(err_buf, err_cap, "");
  auto sink = [&](const std::string& msg) { set_error(err_buf, err_cap, msg); };
  return geist::api::guarded(
      [&]() -> geist::Status {
        if (preset == nullptr || type == nullptr || out_path == nullptr) {
          return geist::Status(GEIST_E_INVALID_ARG,
                               "geist_mkmodel: preset, type and out_path must not be NULL");
        }
        const geist::MkModelPreset* p = geist::find_mkmodel_preset(preset);
        if (p == nullptr) {
          return geist::Status(GEIST_E_INVALID_ARG,
                               std::string("unknown preset '") + preset +
                                   "' (expected one of: " + geist::mkmodel_preset_list() + ")");
        }
        std::function<void(float)> progress;
        if (progress_fn != nullptr) {
          // The writer cannot stop half-way, so the callback's return value is not a cancel.
          progress = [&](float f) { (void)progress_fn(progress_user, f); };
        }
        return geist::mkmodel_write(*p, type, out_path, seed, progress);
      },
      sink);
}
