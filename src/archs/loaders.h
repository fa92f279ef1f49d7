// One loader per architecture; registry.cpp maps general.architecture to them.
#pragma once

#include <memory>

#include "archs/arch.h"

namespace geist {

// The returned model holds views into `file`, which must outlive it. Errors as
// load_arch_model.
// The model takes ownership of `backend` and uploads its weights there.
Status load_llama(const GgufFile& file, std::unique_ptr<Backend> backend, const Logger& log,
                  std::unique_ptr<ArchModel>* out);
Status load_qwen35(const GgufFile& file, std::unique_ptr<Backend> backend, const Logger& log,
                   std::unique_ptr<ArchModel>* out);

}  // namespace geist
