// A weight type geist cannot compute is refused at load with a message that names the tensor,
// its type and the supported types; a type id geist does not know (NVFP4 = 40, ...) is refused
// naming the id. Made from a llama-quantize fixture by rewriting one tensor's type id in place:
// Q3_K -> IQ3_S (both 110 bytes per 256 elements, so the file stays well-formed) and -> 40.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "archs/arch.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "support/fixtures.h"

namespace geist {
namespace {

constexpr char kTensor[] = "blk.0.ffn_down.weight";  // Q3_K in stories-qwen35-Q2_K.gguf

// The file's bytes with kTensor's type id replaced (its tensor info: u64 name length, name,
// u32 n_dims, u64 ne[n_dims], u32 type).
std::vector<uint8_t> with_type_id(uint32_t type_id) {
  const std::string bytes =
      test::read_text_file(test::fixture_path("quant/stories-qwen35-Q2_K.gguf"));
  std::vector<uint8_t> b(bytes.begin(), bytes.end());
  std::string key(8, '\0');
  const uint64_t len = std::strlen(kTensor);
  std::memcpy(key.data(), &len, 8);
  const size_t at = bytes.find(key + kTensor);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return {};
  const size_t dims_at = at + 8 + len;
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, b.data() + dims_at, 4);
  EXPECT_EQ(n_dims, 2u);
  const size_t type_at = dims_at + 4 + 8 * n_dims;
  uint32_t old = 0;
  std::memcpy(&old, b.data() + type_at, 4);
  EXPECT_EQ(old, static_cast<uint32_t>(GgmlType::Q3_K));
  std::memcpy(b.data() + type_at, &type_id, 4);
  return b;
}

Status load(const std::vector<uint8_t>& bytes, std::unique_ptr<GgufFile>* file,
            std::unique_ptr<ArchModel>* model) {
  GEIST_RETURN_IF_ERROR(GgufFile::open_memory(bytes.data(), bytes.size(), file));
  return load_arch_model(**file, BackendKind::CPU, Logger{}, model);
}

TEST(QuantRefusals, UnsupportedTypeNamesTensorTypeAndSupportedList) {
  GEIST_REQUIRE_FIXTURES();
  const std::vector<uint8_t> bytes = with_type_id(static_cast<uint32_t>(GgmlType::IQ3_S));
  ASSERT_FALSE(bytes.empty());
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<ArchModel> model;
  const Status st = load(bytes, &file, &model);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED) << st.message();
  const std::string msg = st.message();
  EXPECT_NE(msg.find(kTensor), std::string::npos) << msg;
  EXPECT_NE(msg.find("iq3_s"), std::string::npos) << msg;
  EXPECT_NE(msg.find(quant_supported_types()), std::string::npos) << msg;
  std::printf("refusal: %s\n", msg.c_str());
}

TEST(QuantRefusals, UnknownTypeIdNamesTheId) {
  GEIST_REQUIRE_FIXTURES();
  for (uint32_t id : {40u, 4u, 255u, 100000u}) {  // NVFP4, a removed id, unknown ones
    SCOPED_TRACE(id);
    const std::vector<uint8_t> bytes = with_type_id(id);
    ASSERT_FALSE(bytes.empty());
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ArchModel> model;
    const Status st = load(bytes, &file, &model);
    ASSERT_FALSE(st.is_ok());
    EXPECT_EQ(st.code(), GEIST_E_FORMAT) << st.message();
    const std::string msg = st.message();
    EXPECT_NE(msg.find("type id " + std::to_string(id)), std::string::npos) << msg;
    EXPECT_NE(msg.find(kTensor), std::string::npos) << msg;
    if (id == 40) std::printf("refusal: %s\n", msg.c_str());
  }
}

}  // namespace
}  // namespace geist
