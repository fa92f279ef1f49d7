// The CPU backends: kernels of src/kernels on the session's thread pool, state in host memory
// (CPU) or in host memory the engine cannot touch outside ops and upload/download
// (CPU_DEVICE_LOCAL, see backend.h).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace geist {

Status create_cpu_backend(bool device_local, std::unique_ptr<Backend>* out);

}  // namespace geist
