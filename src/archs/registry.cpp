#include <string_view>

#include "archs/arch.h"
#include "archs/loaders.h"

namespace geist {

Status load_arch_model(const GgufFile& file, const Logger& log, std::unique_ptr<ArchModel>* out) {
  std::string_view arch;
  Status st = file.get_str("general.architecture", &arch);
  if (!st) return Status(GEIST_E_FORMAT, "general.architecture: " + st.message());

  if (arch == "llama") return load_llama(file, log, out);
  if (arch == "qwen35") return load_qwen35(file, log, out);
  // Further architectures register here, one line each.
  if (arch == "qwen35moe") {
    return Status(GEIST_E_UNSUPPORTED,
                  "architecture 'qwen35moe' (Qwen3.5 mixture-of-experts) is not supported yet");
  }
  return Status::error(GEIST_E_UNSUPPORTED, "architecture '%.*s' is not supported",
                       static_cast<int>(arch.size()), arch.data());
}

}  // namespace geist
