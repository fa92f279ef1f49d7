// The CUDA backend (one NVIDIA device). backend.cpp reaches it through these two functions
// under GEIST_HAVE_CUDA; everything else lives behind the Backend / Stream interfaces.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "base/status.h"

namespace geist {

// GEIST_E_UNSUPPORTED when the driver or a device is missing, GEIST_E_BACKEND-style errors
// for other CUDA failures; never aborts.
Status create_cuda_backend(std::unique_ptr<Backend>* out);
// Number of CUDA devices; 0 when the driver or device is missing (never aborts).
int cuda_device_count_impl();

}  // namespace geist
