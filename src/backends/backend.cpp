#include "backends/backend.h"

#include <cstring>

#include "backends/cpu_backend.h"
#include "kernels/ops.h"
#ifdef GEIST_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace geist {

namespace {
struct KindName {
  BackendKind kind;
  const char* name;
};
constexpr KindName kNames[] = {{BackendKind::AUTO, "auto"},
                               {BackendKind::CPU, "cpu"},
                               {BackendKind::CUDA, "cuda"},
                               {BackendKind::CPU_DEVICE_LOCAL, "cpu-devlocal"}};
}  // namespace

const char* backend_kind_name(BackendKind k) {
  for (const KindName& e : kNames) {
    if (e.kind == k) return e.name;
  }
  return "?";
}

bool backend_kind_from_name(const char* name, BackendKind* out) {
  for (const KindName& e : kNames) {
    if (std::strcmp(name, e.name) == 0) {
      *out = e.kind;
      return true;
    }
  }
  return false;
}

void Stream::matmul_argmax_to_host(const WeightMatrix& w, const float* x, int32_t n_tok,
                                   float* host_y, int32_t* host_ids) {
  matmul_to_host(w, x, w.n_in, n_tok, host_y, w.n_out);  // host backends: done when it returns
  for (int32_t t = 0; t < n_tok; ++t) {
    host_ids[t] = static_cast<int32_t>(argmax_first(host_y + int64_t{t} * w.n_out, w.n_out));
  }
}

bool cuda_built() {
#ifdef GEIST_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef GEIST_HAVE_CUDA
  return cuda_device_count_impl();
#else
  return 0;
#endif
}

Status create_backend(BackendKind kind, std::unique_ptr<Backend>* out) {
  if (kind == BackendKind::AUTO)
    kind = cuda_device_count() > 0 ? BackendKind::CUDA : BackendKind::CPU;
  switch (kind) {
    case BackendKind::CPU:
      return create_cpu_backend(false, out);
    case BackendKind::CPU_DEVICE_LOCAL:
      return create_cpu_backend(true, out);
    case BackendKind::CUDA:
#ifdef GEIST_HAVE_CUDA
      if (cuda_device_count() == 0) {
        return Status(GEIST_E_UNSUPPORTED, "backend cuda: no CUDA device is available");
      }
      return create_cuda_backend(out);
#else
      return Status(GEIST_E_UNSUPPORTED,
                    "backend cuda: this build has no CUDA backend (configure with -DGEIST_CUDA=ON "
                    "on a machine with nvcc)");
#endif
    default:
      break;
  }
  return Status::error(GEIST_E_INVALID_ARG, "unknown backend %d", static_cast<int32_t>(kind));
}

}  // namespace geist
