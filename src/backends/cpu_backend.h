// The CPU backends: kernels of src/kernels on the session's thread pool, state in host memory
// (CPU) or in host memory the engine cannot touch outside ops and upload/download
// (CPU_DEVICE_LOCAL, see backend.h).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace geist {

Status create_cpu_backend(bool device_local, std::unique_ptr<Backend>* out);

// For tests of the engine's handling of a failed device (CI has no GPU that could fail): after
// `after_copies` more copies between host and state memory (upload, download, KV regions; 0:
// now), every stream of `backend`, a CPU_DEVICE_LOCAL backend, behaves like a CUDA stream
// whose device failed: status() returns GEIST_E_BACKEND naming `what`, downloads fill their
// destination with 0xFF, uploads copy nothing (ops still run). The first call stands; not
// thread-safe against a concurrent one. GEIST_E_INVALID_ARG for any other backend or a
// negative count.
Status cpu_devlocal_fail(const Backend& backend, int64_t after_copies, const char* what);

}  // namespace geist
