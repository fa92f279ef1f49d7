#include "engine/quantize.h"

#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/quant.h"

namespace geist {
namespace {

constexpr char kFileTypeKey[] = "general.file_type";
constexpr char kAlignmentKey[] = "general.alignment";

// llama.cpp's llama_ftype values (llama.h). The K-quant targets are the _S mixes (MOSTLY_Q4_K_S,
// ...), not _M: _M raises attn_v and half of ffn_down to Q6_K, which we do not do.
constexpr QuantizeTarget kTargets[] = {
    {"f32", GgmlType::F32, 0},        {"f16", GgmlType::F16, 1},
    {"bf16", GgmlType::BF16, 32},     {"q8_0", GgmlType::Q8_0, 7},
    {"q4_0", GgmlType::Q4_0, 2},      {"q4_1", GgmlType::Q4_1, 3},
    {"q5_0", GgmlType::Q5_0, 8},      {"q5_1", GgmlType::Q5_1, 9},
    {"q2_k", GgmlType::Q2_K, 10},     {"q3_k", GgmlType::Q3_K, 11},
    {"q4_k", GgmlType::Q4_K, 14},     {"q5_k", GgmlType::Q5_K, 16},
    {"q6_k", GgmlType::Q6_K, 18},     {"iq4_nl", GgmlType::IQ4_NL, 25},
    {"iq4_xs", GgmlType::IQ4_XS, 30},
};

// The type a matrix of a 256-block target gets when its rows are whole 32-blocks only
// (quantize.h): llama-quantize's fallbacks for the newer targets, Q8_0 for q4_k / q6_k.
GgmlType narrow_row_fallback(GgmlType want) {
  switch (want) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      return GgmlType::Q4_0;
    case GgmlType::Q5_K:
      return GgmlType::Q5_1;
    case GgmlType::IQ4_XS:
      return GgmlType::IQ4_NL;
    default:
      return GgmlType::Q8_0;
  }
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// True when both paths name the same existing file (hard links and symlinks included).
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

Status parse_quantize_type(std::string_view name, QuantizeTarget* out) {
  for (const QuantizeTarget& t : kTargets) {
    if (name != t.name) continue;
    if (!quant_type_writable(t.type)) {
      return Status::error(GEIST_E_UNSUPPORTED, "quantize: this build cannot write %s tensors",
                           t.name);
    }
    *out = t;
    return Status::ok();
  }
  return Status::error(GEIST_E_INVALID_ARG, "unknown quantization type '%.*s' (expected %s)",
                       static_cast<int>(name.size()), name.data(), quantize_type_list().c_str());
}

std::string quantize_type_list() {
  std::string s;
  for (const QuantizeTarget& t : kTargets) {
    if (!quant_type_writable(t.type)) continue;
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

GgmlType quantize_tensor_type(const GgufTensorInfo& t, GgmlType target) {
  if (t.n_dims < 2 || t.ne[0] <= 0 || !ends_with(t.name, ".weight") ||
      ends_with(t.name, "ssm_conv1d.weight")) {
    return t.type;
  }
  GgmlType want = target;
  const bool low_bit = target == GgmlType::Q4_0 || target == GgmlType::Q4_1 ||
                       target == GgmlType::Q4_K || target == GgmlType::Q2_K ||
                       target == GgmlType::Q3_K || target == GgmlType::IQ4_NL ||
                       target == GgmlType::IQ4_XS;
  if (low_bit && (t.name == "token_embd.weight" || t.name == "output.weight")) {
    want = GgmlType::Q8_0;
  }
  const bool super_block = ggml_type_traits(want).block_size == 256;
  if (super_block && ggml_row_size(want, t.ne[0]) == 0) want = narrow_row_fallback(want);
  if (ggml_row_size(want, t.ne[0]) == 0) return t.type;  // rows are not whole blocks
  return want;
}

Status quantize_file(const std::string& in_path, const std::string& out_path, std::string_view type,
                     int n_threads, const std::function<void(float)>& progress) {
  QuantizeTarget target{};
  GEIST_RETURN_IF_ERROR(parse_quantize_type(type, &target));
  std::unique_ptr<GgufFile> in;
  GEIST_RETURN_IF_ERROR(GgufFile::open(in_path, &in).with_prefix(in_path));
  if (in_path == out_path || same_file(in_path, out_path)) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "quantize: the output '%s' is the input file; write to another path",
                         out_path.c_str());
  }

  GgufWriter w;
  if (in->alignment() > (1u << 31)) {
    return Status::error(GEIST_E_UNSUPPORTED, "quantize: general.alignment %llu is too large",
                         static_cast<unsigned long long>(in->alignment()));
  }
  w.set_alignment(static_cast<uint32_t>(in->alignment()));
  bool have_file_type = false;
  for (const GgufKv& kv : in->kvs()) {
    if (kv.key == kAlignmentKey) continue;  // written by set_alignment
    if (kv.key == kFileTypeKey) {
      // Keeps the key where the input had it; llama.cpp writes it as u32.
      w.add_u32(kFileTypeKey, target.file_type);
      have_file_type = true;
      continue;
    }
    w.add_kv(kv);
  }
  if (!have_file_type) w.add_u32(kFileTypeKey, target.file_type);

  // Decide every tensor's type before anything is written, so that a tensor we cannot convert
  // fails the call before an output file exists.
  const std::vector<GgufTensorInfo>& tensors = in->tensors();
  std::vector<GgmlType> out_types;  // [n_tensors] type of each tensor in the output
  out_types.reserve(tensors.size());
  for (const GgufTensorInfo& t : tensors) {
    const GgmlType to = quantize_tensor_type(t, target.type);
    if (to != t.type && !quant_type_supported(t.type)) {
      return Status::error(GEIST_E_UNSUPPORTED,
                           "quantize: tensor '%.*s' has type %s, which geist cannot dequantize",
                           static_cast<int>(t.name.size()), t.name.data(), ggml_type_name(t.type));
    }
    out_types.push_back(to);
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);  // [n_dims], ne[0] contiguous
    w.add_tensor_deferred(std::string(t.name), to, std::move(ne));
  }

  ThreadPool pool(n_threads);
  auto fill = [&](size_t index, uint8_t* dst, size_t nbytes) -> Status {
    GEIST_CHECK(index < tensors.size(), "quantize: fill index out of range");
    const GgufTensorInfo& t = tensors[index];
    const GgmlType to = out_types[index];
    if (to == t.type) {
      GEIST_CHECK(nbytes == t.nbytes, "quantize: copied tensor changed size");
      if (nbytes) std::memcpy(dst, t.data, nbytes);
    } else {
      const int64_t ne0 = t.ne[0];
      const int64_t rows = t.n_elements() / ne0;
      const size_t in_row = ggml_row_size(t.type, ne0);
      const size_t out_row = ggml_row_size(to, ne0);
      GEIST_CHECK(out_row * static_cast<size_t>(rows) == nbytes,
                  "quantize: converted tensor size mismatch");
      GEIST_CHECK(in_row * static_cast<size_t>(rows) == t.nbytes,
                  "quantize: input tensor size mismatch");
      pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(ne0));  // [ne0] one row in f32
        for (int64_t r = begin; r < end; ++r) {
          dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_row, row.data(), ne0);
          quantize_row(to, row.data(), dst + static_cast<size_t>(r) * out_row, ne0);
        }
      });
    }
    // The input's pages are not needed again; keep resident memory at about one tensor.
    in->release_pages(t.data, t.nbytes);
    return Status::ok();
  };
  return w.write_file(out_path, fill, progress);
}

}  // namespace geist
