#include <string_view>

#include "archs/arch.h"
#include "archs/loaders.h"

namespace geist {

Status load_arch_model(const GgufFile& file, BackendKind kind, const Logger& log,
                       std::unique_ptr<ArchModel>* out) {
  std::string_view arch;
  Status st = file.get_str("general.architecture", &arch);
  if (!st) return Status(GEIST_E_FORMAT, "general.architecture: " + st.message());

  const bool known = arch == "llama" || arch == "qwen35";
  std::unique_ptr<Backend> backend;
  if (known) GEIST_RETURN_IF_ERROR(create_backend(kind, &backend));
  if (arch == "llama") return load_llama(file, std::move(backend), log, out);
  if (arch == "qwen35") return load_qwen35(file, std::move(backend), log, out);
  // Further architectures register here, one line each.
  if (arch == "qwen35moe") {
    return Status(GEIST_E_UNSUPPORTED,
                  "architecture 'qwen35moe' (Qwen3.5 mixture-of-experts) is not supported yet");
  }
  return Status::error(GEIST_E_UNSUPPORTED, "architecture '%.*s' is not supported",
                       static_cast<int>(arch.size()), arch.data());
}

}  // namespace geist
