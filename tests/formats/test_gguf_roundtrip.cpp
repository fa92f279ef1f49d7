// GgufWriter output checked byte-for-byte against a file built by hand from the format
// description, and writer -> reader round trips for every value type.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "formats/gguf.h"
#include "formats/gguf_bytes.h"

namespace geist {
namespace {

using test::Bytes;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::string temp_path(const char* tag) {
  return std::string(GEIST_BINARY_DIR) + "/gguf_test_" + tag + "_" + std::to_string(getpid()) +
         ".gguf";
}

TEST(GgufWriter, BytesMatchHandBuiltFile) {
  GgufWriter w;
  w.add_str("general.architecture", "llama");
  w.add_u32("n", 7);
  w.add_tensor("t0", GgmlType::F32, {3}, pattern(12, 1));
  w.add_tensor("t1", GgmlType::Q8_0, {32, 2}, pattern(68, 2));
  std::vector<uint8_t> got;
  ASSERT_TRUE(w.to_bytes(&got).is_ok());

  Bytes want;
  want.u32(test::kGgufMagic).u32(3).u64(2).u64(2);
  want.str("general.architecture").u32(test::kStr).str("llama");
  want.str("n").u32(test::kU32).u32(7);
  want.str("t0").u32(1).i64(3).u32(0).u64(0);
  want.str("t1").u32(2).i64(32).i64(2).u32(8).u64(32);  // 12 bytes rounded up to 32
  want.pad_to(32).raw(pattern(12, 1)).pad_to(32).raw(pattern(68, 2));
  EXPECT_EQ(got, want.vec());
}

TEST(GgufWriter, NonDefaultAlignmentIsWrittenAndHonoured) {
  GgufWriter w;
  w.set_alignment(64);
  w.add_tensor("a", GgmlType::F16, {3}, pattern(6, 3));
  w.add_tensor("b", GgmlType::F16, {5}, pattern(10, 4));
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
  uint32_t a = 0;
  ASSERT_TRUE(f->get_u32("general.alignment", &a).is_ok());
  EXPECT_EQ(a, 64u);
  EXPECT_EQ(f->alignment(), 64u);
  for (const GgufTensorInfo& t : f->tensors()) {
    EXPECT_EQ((t.data - bytes.data()) % 64, 0) << t.name;
  }
  EXPECT_EQ(f->find_tensor("b")->offset, 64u);
  EXPECT_EQ(0, std::memcmp(f->find_tensor("b")->data, pattern(10, 4).data(), 10));
}

TEST(GgufWriter, DefaultAlignmentWritesNoAlignmentKey) {
  GgufWriter w;
  w.add_u32("x", 1);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
  EXPECT_EQ(f->find("general.alignment"), nullptr);
  EXPECT_EQ(f->kvs().size(), 1u);
}

TEST(GgufRoundTrip, EveryValueType) {
  GgufWriter w;
  w.add_u8("u8", 250);
  w.add_i8("i8", -120);
  w.add_u16("u16", 65000);
  w.add_i16("i16", -32000);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_u64("u64", 0xfedcba9876543210ull);
  w.add_i64("i64", std::numeric_limits<int64_t>::min());
  w.add_f32("f32", 0.15625f);
  w.add_f64("f64", -1e300);
  w.add_bool("bool_t", true);
  w.add_bool("bool_f", false);
  w.add_str("str", std::string("h\xc3\xa9llo\0x\xff", 9));  // NUL and invalid UTF-8 in a value
  w.add_str("empty", "");
  w.add_arr_i32("arr_i32", {1, -2, 2147483647});
  w.add_arr_f32("arr_f32", {0.5f, -3.25f});
  w.add_arr_str("arr_str", {"a", "", "long string"});
  w.add_arr_i32("arr_empty", {});
  std::vector<uint8_t> u16s = {1, 0, 0xff, 0xff};  // 1, 65535 little-endian
  w.add_arr_raw("arr_u16", GgufValueType::UINT16, 2, u16s);
  w.add_arr_raw("arr_bool", GgufValueType::BOOL, 3, {1, 0, 1});
  std::vector<uint8_t> f64s(16);
  const double d[2] = {1.5, -2.0};
  std::memcpy(f64s.data(), d, 16);
  w.add_arr_raw("arr_f64", GgufValueType::FLOAT64, 2, f64s);

  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::open_memory(bytes.data(), bytes.size(), &f);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->kvs().size(), 21u);
  EXPECT_TRUE(f->tensors().empty());

  EXPECT_EQ(f->find("u8")->type, GgufValueType::UINT8);
  EXPECT_EQ(f->find("u8")->u64, 250u);
  EXPECT_EQ(f->find("i8")->type, GgufValueType::INT8);
  EXPECT_EQ(f->find("i8")->i64, -120);
  EXPECT_EQ(f->find("u16")->u64, 65000u);
  EXPECT_EQ(f->find("i16")->i64, -32000);
  EXPECT_EQ(f->find("u32")->u64, 4000000000u);
  EXPECT_EQ(f->find("i32")->i64, -2000000000);
  EXPECT_EQ(f->find("u64")->u64, 0xfedcba9876543210ull);
  EXPECT_EQ(f->find("i64")->i64, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("f32")->f64, 0.15625);
  EXPECT_EQ(f->find("f64")->f64, -1e300);
  EXPECT_EQ(f->find("str")->str, std::string_view("h\xc3\xa9llo\0x\xff", 9));
  EXPECT_EQ(f->find("empty")->str, "");

  uint32_t u32 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  bool b = false;
  std::string_view sv;
  EXPECT_TRUE(f->get_u32("u32", &u32).is_ok());
  EXPECT_EQ(u32, 4000000000u);
  EXPECT_TRUE(f->get_u32("u8", &u32).is_ok());
  EXPECT_EQ(u32, 250u);
  EXPECT_TRUE(f->get_i32("i32", &i32).is_ok());
  EXPECT_EQ(i32, -2000000000);
  EXPECT_TRUE(f->get_i32("i16", &i32).is_ok());
  EXPECT_EQ(i32, -32000);
  EXPECT_TRUE(f->get_u64("u64", &u64).is_ok());
  EXPECT_EQ(u64, 0xfedcba9876543210ull);
  EXPECT_TRUE(f->get_f32("f32", &f32).is_ok());
  EXPECT_EQ(f32, 0.15625f);
  EXPECT_TRUE(f->get_bool("bool_t", &b).is_ok());
  EXPECT_TRUE(b);
  EXPECT_TRUE(f->get_bool("bool_f", &b).is_ok());
  EXPECT_FALSE(b);
  EXPECT_TRUE(f->get_str("str", &sv).is_ok());
  EXPECT_EQ(sv.size(), 9u);

  std::vector<int32_t> ai;
  ASSERT_TRUE(f->get_arr_i32("arr_i32", &ai).is_ok());
  EXPECT_EQ(ai, (std::vector<int32_t>{1, -2, 2147483647}));
  ASSERT_TRUE(f->get_arr_i32("arr_u16", &ai).is_ok());
  EXPECT_EQ(ai, (std::vector<int32_t>{1, 65535}));
  ASSERT_TRUE(f->get_arr_i32("arr_empty", &ai).is_ok());
  EXPECT_TRUE(ai.empty());
  std::vector<float> af;
  ASSERT_TRUE(f->get_arr_f32("arr_f32", &af).is_ok());
  EXPECT_EQ(af, (std::vector<float>{0.5f, -3.25f}));
  ASSERT_TRUE(f->get_arr_f32("arr_f64", &af).is_ok());
  EXPECT_EQ(af, (std::vector<float>{1.5f, -2.0f}));
  const std::vector<std::string_view>* as = nullptr;
  ASSERT_TRUE(f->get_arr_str("arr_str", &as).is_ok());
  ASSERT_EQ(as->size(), 3u);
  EXPECT_EQ((*as)[0], "a");
  EXPECT_EQ((*as)[1], "");
  EXPECT_EQ((*as)[2], "long string");
  const GgufKv* ab = f->find("arr_bool");
  EXPECT_EQ(ab->arr_type, GgufValueType::BOOL);
  ASSERT_EQ(ab->arr_len, 3u);
  EXPECT_EQ(ab->arr_data[0], 1);
  EXPECT_EQ(ab->arr_data[1], 0);
}

// After release_string_arrays the views are gone (get_arr_str says so), the rest is intact.
TEST(GgufRoundTrip, ReleasedStringArraysAreRefusedAndTheRestStays) {
  GgufWriter w;
  w.add_arr_str("arr_str", {"a", "", "long string"});
  w.add_str("str", "kept");
  w.add_arr_f32("af", {1.0f, 2.0f});
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
  f->release_string_arrays();
  const std::vector<std::string_view>* as = nullptr;
  const Status st = f->get_arr_str("arr_str", &as);
  EXPECT_EQ(st.code(), GEIST_E_INVALID_STATE);
  EXPECT_NE(st.message().find("arr_str"), std::string::npos) << st.message();
  EXPECT_EQ(as, nullptr);
  EXPECT_EQ(f->find("arr_str")->arr_len, 3u);
  EXPECT_EQ(f->get_arr_str("missing", &as).code(), GEIST_E_NOT_FOUND);
  std::string_view sv;
  ASSERT_TRUE(f->get_str("str", &sv).is_ok());
  EXPECT_EQ(sv, "kept");
  std::vector<float> af;
  ASSERT_TRUE(f->get_arr_f32("af", &af).is_ok());
  EXPECT_EQ(af, (std::vector<float>{1.0f, 2.0f}));
}

TEST(GgufRoundTrip, GettersRejectWrongTypesAndRanges) {
  GgufWriter w;
  w.add_i32("neg", -1);
  w.add_u64("big", 1ull << 40);
  w.add_u32("u32max", 0xffffffffu);
  w.add_f64("huge", 1e300);
  w.add_str("s", "x");
  w.add_arr_f32("af", {1.0f});
  w.add_arr_raw("ai64", GgufValueType::INT64, 1, std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 0});
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.to_bytes(&bytes).is_ok());
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());

  uint32_t u32 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  bool b = false;
  std::string_view sv;
  std::vector<int32_t> ai;
  std::vector<float> af;
  const std::vector<std::string_view>* as = nullptr;
  EXPECT_EQ(f->get_u32("missing", &u32).code(), GEIST_E_NOT_FOUND);
  EXPECT_EQ(f->get_str("missing", &sv).code(), GEIST_E_NOT_FOUND);
  EXPECT_EQ(f->get_arr_str("missing", &as).code(), GEIST_E_NOT_FOUND);
  EXPECT_EQ(f->get_u32("neg", &u32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_u64("neg", &u64).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_u32("big", &u32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_i32("big", &i32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_i32("u32max", &i32).code(), GEIST_E_FORMAT);
  EXPECT_TRUE(f->get_u64("big", &u64).is_ok());
  EXPECT_EQ(u64, 1ull << 40);
  EXPECT_EQ(f->get_f32("huge", &f32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_f32("s", &f32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_u32("s", &u32).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_bool("neg", &b).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_str("neg", &sv).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_arr_i32("af", &ai).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_arr_i32("ai64", &ai).code(), GEIST_E_FORMAT);  // 2^32 does not fit
  EXPECT_EQ(f->get_arr_f32("s", &af).code(), GEIST_E_FORMAT);
  EXPECT_EQ(f->get_arr_str("af", &as).code(), GEIST_E_FORMAT);
  Status st = f->get_u32("big", &u32);
  EXPECT_NE(st.message().find("big"), std::string::npos) << st.message();
}

TEST(GgufRoundTrip, WriteFileStreamsDeferredTensors) {
  GgufWriter w;
  w.add_str("general.architecture", "test");
  w.add_tensor("inline", GgmlType::F32, {5}, pattern(20, 9));
  w.add_tensor_deferred("deferred", GgmlType::Q4_0, {64, 3});  // 2 blocks * 18 B * 3 rows
  w.add_tensor_deferred("empty", GgmlType::F32, {0});
  std::vector<size_t> filled;
  auto fill = [&](size_t index, uint8_t* dst, size_t nbytes) {
    filled.push_back(index);
    std::vector<uint8_t> p = pattern(nbytes, static_cast<uint8_t>(index));
    if (nbytes) std::memcpy(dst, p.data(), nbytes);
    return Status::ok();
  };
  std::vector<float> progress;
  const std::string path = temp_path("deferred");
  Status st = w.write_file(path, fill, [&](float p) { progress.push_back(p); });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(filled, (std::vector<size_t>{1, 2}));
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), 1.0f);

  std::unique_ptr<GgufFile> f;
  st = GgufFile::open(path, &f);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const GgufTensorInfo* t = f->find_tensor("deferred");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::Q4_0);
  EXPECT_EQ(t->nbytes, 108u);
  EXPECT_EQ(t->n_dims, 2u);
  EXPECT_EQ(t->ne[0], 64);
  EXPECT_EQ(t->ne[1], 3);
  EXPECT_EQ(t->n_elements(), 192);
  EXPECT_EQ(0, std::memcmp(t->data, pattern(108, 1).data(), 108));
  EXPECT_EQ(0, std::memcmp(f->find_tensor("inline")->data, pattern(20, 9).data(), 20));
  EXPECT_EQ(f->find_tensor("empty")->nbytes, 0u);

  // The same content through to_bytes gives the same file.
  std::vector<uint8_t> bytes;
  filled.clear();
  ASSERT_TRUE(w.to_bytes(&bytes, fill).is_ok());
  ASSERT_EQ(bytes.size(), f->file_size());
  FILE* fp = std::fopen(path.c_str(), "rb");
  ASSERT_NE(fp, nullptr);
  std::vector<uint8_t> disk(bytes.size());
  EXPECT_EQ(std::fread(disk.data(), 1, disk.size(), fp), disk.size());
  std::fclose(fp);
  EXPECT_EQ(disk, bytes);
  f.reset();
  std::remove(path.c_str());
}

TEST(GgufRoundTrip, FailedFillLeavesNoFile) {
  GgufWriter w;
  w.add_tensor_deferred("x", GgmlType::F32, {4});
  const std::string path = temp_path("fail");
  Status st = w.write_file(
      path, [](size_t, uint8_t*, size_t) { return Status(GEIST_E_IO, "source went away"); });
  EXPECT_EQ(st.code(), GEIST_E_IO);
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  // No temporary left behind next to it either.
  const std::string stem = std::filesystem::path(path).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(GEIST_BINARY_DIR)) {
    EXPECT_NE(e.path().filename().string().rfind(stem, 0), 0u) << e.path();
  }
}

TEST(GgufRoundTrip, WriteFileToMissingDirectoryIsIoError) {
  GgufWriter w;
  w.add_u32("x", 1);
  Status st = w.write_file("/nonexistent-dir-geist/x.gguf");
  EXPECT_EQ(st.code(), GEIST_E_IO);
}

}  // namespace
}  // namespace geist
