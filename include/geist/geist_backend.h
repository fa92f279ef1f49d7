/* geist — C ABI, compute backends (EXPERIMENTAL: may change in any release).
 * Same conventions as geist.h.
 *
 * geist_model_params.backend (an int32_t, so that geist.h's STABLE struct does not depend on
 * this header) takes one of these values; the weights are uploaded once at load and every
 * session of the model keeps its state and runs there. A backend this build or machine lacks
 * makes geist_model_load fail with GEIST_E_UNSUPPORTED, a value outside the enum with
 * GEIST_E_INVALID_ARG. Snapshot images are backend-neutral (geist_snapshot.h). */
#ifndef GEIST_GEIST_BACKEND_H
#define GEIST_GEIST_BACKEND_H

#include "geist/geist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* EXPERIMENTAL. Where a model's weights and its sessions' state live and compute runs. */
typedef enum geist_backend {
  GEIST_BACKEND_AUTO = 0,            /* CUDA when built in and a device is present, else CPU */
  GEIST_BACKEND_CPU = 1,             /* host memory, SIMD kernels on the session's threads */
  GEIST_BACKEND_CUDA = 2,            /* one NVIDIA GPU (builds configured with GEIST_CUDA) */
  GEIST_BACKEND_CPU_DEVICE_LOCAL = 3 /* CPU kernels; state reachable only through the backend's
                                        upload/download path, as on a GPU (for testing) */
} geist_backend;

#ifdef __cplusplus
}
#endif

#endif /* GEIST_GEIST_BACKEND_H */
