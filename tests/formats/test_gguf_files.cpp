// The reader on files built by hand (v2, no padding) and on the real fixtures.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/gguf.h"
#include "formats/gguf_bytes.h"
#include "support/fixtures.h"

namespace geist {
namespace {

using test::Bytes;
using test::FileSpec;
using test::kv_scalar;
using test::kv_str;

Status parse(const std::vector<uint8_t>& b, std::unique_ptr<GgufFile>* f) {
  return GgufFile::open_memory(b.data(), b.size(), f);
}

TEST(GgufHandBuilt, Version2WithEveryValueType) {
  FileSpec spec;
  spec.version = 2;
  spec.kvs.push_back(kv_scalar<uint8_t>("k.u8", test::kU8, 200));
  spec.kvs.push_back(kv_scalar<int8_t>("k.i8", test::kI8, -100));
  spec.kvs.push_back(kv_scalar<uint16_t>("k.u16", test::kU16, 60000));
  spec.kvs.push_back(kv_scalar<int16_t>("k.i16", test::kI16, -30000));
  spec.kvs.push_back(kv_scalar<uint32_t>("k.u32", test::kU32, 3000000000u));
  spec.kvs.push_back(kv_scalar<int32_t>("k.i32", test::kI32, -7));
  spec.kvs.push_back(kv_scalar<float>("k.f32", test::kF32, 2.5f));
  spec.kvs.push_back(kv_scalar<uint8_t>("k.bool", test::kBool, 1));
  spec.kvs.push_back(kv_str("k.str", "caf\xc3\xa9"));
  spec.kvs.push_back(kv_scalar<uint64_t>("k.u64", test::kU64, 1ull << 63));
  spec.kvs.push_back(kv_scalar<int64_t>("k.i64", test::kI64, -(1ll << 62)));
  spec.kvs.push_back(kv_scalar<double>("k.f64", test::kF64, 0.1));
  Bytes arr;
  arr.str("k.arr_i16").u32(test::kArr).u32(test::kI16).u64(3);
  arr.put<int16_t>(-1).put<int16_t>(2).put<int16_t>(-300);
  spec.kvs.push_back(arr);
  Bytes sarr;
  sarr.str("k.arr_str").u32(test::kArr).u32(test::kStr).u64(2).str("x").str("yz");
  spec.kvs.push_back(sarr);
  spec.tensors.push_back({"w", {2, 3}, 1, 0});  // f16 [2 x 3] = 12 bytes
  spec.data_bytes = 12;
  const std::vector<uint8_t> bytes = spec.build();

  std::unique_ptr<GgufFile> f;
  Status st = parse(bytes, &f);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(f->version(), 2u);
  ASSERT_EQ(f->kvs().size(), 14u);
  EXPECT_EQ(f->kvs()[0].key, "k.u8");  // file order is kept
  EXPECT_EQ(f->find("k.u8")->u64, 200u);
  EXPECT_EQ(f->find("k.i8")->i64, -100);
  EXPECT_EQ(f->find("k.u16")->u64, 60000u);
  EXPECT_EQ(f->find("k.i16")->i64, -30000);
  EXPECT_EQ(f->find("k.u32")->u64, 3000000000u);
  EXPECT_EQ(f->find("k.i32")->i64, -7);
  EXPECT_EQ(f->find("k.f32")->f64, 2.5);
  EXPECT_EQ(f->find("k.bool")->type, GgufValueType::BOOL);
  EXPECT_EQ(f->find("k.bool")->u64, 1u);
  EXPECT_EQ(f->find("k.str")->str, "caf\xc3\xa9");
  EXPECT_EQ(f->find("k.u64")->u64, 1ull << 63);
  EXPECT_EQ(f->find("k.i64")->i64, -(1ll << 62));
  EXPECT_EQ(f->find("k.f64")->f64, 0.1);
  std::vector<int32_t> ai;
  ASSERT_TRUE(f->get_arr_i32("k.arr_i16", &ai).is_ok());
  EXPECT_EQ(ai, (std::vector<int32_t>{-1, 2, -300}));
  const std::vector<std::string_view>* as = nullptr;
  ASSERT_TRUE(f->get_arr_str("k.arr_str", &as).is_ok());
  EXPECT_EQ(*as, (std::vector<std::string_view>{"x", "yz"}));

  ASSERT_EQ(f->tensors().size(), 1u);
  const GgufTensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.type, GgmlType::F16);
  EXPECT_EQ(t.n_dims, 2u);
  EXPECT_EQ(t.ne[0], 2);
  EXPECT_EQ(t.ne[1], 3);
  EXPECT_EQ(t.ne[2], 1);
  EXPECT_EQ(t.nbytes, 12u);
  // Zero-copy: the data lies inside the caller's buffer, at the aligned end of the header.
  EXPECT_EQ(t.data, bytes.data() + bytes.size() - 12);
  EXPECT_EQ((t.data - bytes.data()) % 32, 0);
  EXPECT_EQ(f->find_tensor("w"), &t);
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
  // Views point into the buffer too.
  EXPECT_GE(f->find("k.str")->str.data(), reinterpret_cast<const char*>(bytes.data()));
  EXPECT_LT(f->find("k.str")->str.data(),
            reinterpret_cast<const char*>(bytes.data() + bytes.size()));
}

TEST(GgufHandBuilt, ZeroTensorsWithoutPadding) {
  FileSpec spec;
  spec.kvs.push_back(kv_str("general.architecture", "x"));
  spec.pad_header = false;
  const std::vector<uint8_t> bytes = spec.build();
  ASSERT_NE(bytes.size() % 32, 0u);  // really unpadded
  std::unique_ptr<GgufFile> f;
  Status st = parse(bytes, &f);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(f->tensors().empty());
  std::string_view arch;
  ASSERT_TRUE(f->get_str("general.architecture", &arch).is_ok());
  EXPECT_EQ(arch, "x");
}

TEST(GgufHandBuilt, EmptyKvAndTensorSections) {
  FileSpec spec;
  spec.pad_header = false;
  const std::vector<uint8_t> bytes = spec.build();
  EXPECT_EQ(bytes.size(), 24u);
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(parse(bytes, &f).is_ok());
  EXPECT_TRUE(f->kvs().empty());
}

TEST(GgufOpen, MissingFileDirectoryAndEmptyFile) {
  std::unique_ptr<GgufFile> f;
  EXPECT_EQ(GgufFile::open("/nonexistent/geist/model.gguf", &f).code(), GEIST_E_FILE_NOT_FOUND);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(GgufFile::open(GEIST_BINARY_DIR, &f).code(), GEIST_E_IO);
  const std::string empty = std::string(GEIST_BINARY_DIR) + "/gguf_test_empty.gguf";
  { std::ofstream(empty, std::ios::binary); }
  Status st = GgufFile::open(empty, &f);
  EXPECT_EQ(st.code(), GEIST_E_FORMAT);
  EXPECT_NE(st.message().find(empty), std::string::npos) << st.message();
  std::filesystem::remove(empty);
}

// release_pages is only a hint: a mapped file's bytes read back unchanged afterwards, and a
// caller-owned buffer (open_memory) is never touched (dropping its pages would zero it).
TEST(GgufOpen, ReleasedPagesReadBackUnchanged) {
  FileSpec spec;
  spec.tensors.push_back({"w", {5 * 4096}, 0, 0});  // f32, 80 KiB: whole pages inside
  spec.data_bytes = 5 * 4096 * 4;
  const std::vector<uint8_t> bytes = spec.build();
  const std::string path = std::string(GEIST_BINARY_DIR) + "/gguf_test_release.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open(path, &f).is_ok());
  const GgufTensorInfo* t = f->find_tensor("w");
  ASSERT_NE(t, nullptr);
  const std::vector<uint8_t> before(t->data, t->data + spec.data_bytes);
  f->release_pages(t->data, spec.data_bytes);
  f->release_pages(bytes.data(), bytes.size());  // not in this file: ignored
  EXPECT_EQ(std::memcmp(before.data(), t->data, before.size()), 0);
  EXPECT_EQ(before[4097], static_cast<uint8_t>(4097));
  std::filesystem::remove(path);

  std::vector<uint8_t> mem = bytes;
  ASSERT_TRUE(parse(mem, &f).is_ok());
  t = f->find_tensor("w");
  f->release_pages(t->data, spec.data_bytes);
  EXPECT_EQ(mem, bytes);
}

TEST(GgufFixtures, Stories260K) {
  GEIST_REQUIRE_FIXTURES();
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::open(test::fixture_path("models/stories260K.gguf"), &f);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::string_view arch;
  ASSERT_TRUE(f->get_str("general.architecture", &arch).is_ok());
  EXPECT_EQ(arch, "llama");
  // Hyper-parameters as stated in the fixtures README.
  const std::pair<const char*, uint32_t> hp[] = {
      {"llama.block_count", 5},          {"llama.embedding_length", 64},
      {"llama.attention.head_count", 8}, {"llama.attention.head_count_kv", 4},
      {"llama.rope.dimension_count", 8}, {"llama.feed_forward_length", 172},
  };
  for (const auto& [key, want] : hp) {
    uint32_t v = 0;
    ASSERT_TRUE(f->get_u32(key, &v).is_ok()) << key;
    EXPECT_EQ(v, want) << key;
  }
  const std::vector<std::string_view>* tokens = nullptr;
  ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
  EXPECT_EQ(tokens->size(), 512u);
  std::vector<float> scores;
  ASSERT_TRUE(f->get_arr_f32("tokenizer.ggml.scores", &scores).is_ok());
  EXPECT_EQ(scores.size(), 512u);

  // 5 layers x 9 tensors + token_embd + output_norm + output, all F32.
  EXPECT_EQ(f->tensors().size(), 48u);
  for (const GgufTensorInfo& t : f->tensors()) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->nbytes, 64u * 512u * 4u);
  ASSERT_NE(f->find_tensor("output.weight"), nullptr);
  EXPECT_NE(f->find_tensor("output.weight")->data, emb->data);
  const GgufTensorInfo* k = f->find_tensor("blk.4.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne[1], 32);  // 4 KV heads x head_dim 8
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->ne[0], 172);
}

TEST(GgufFixtures, Qwen35ModelsLoadWithTheirTypes) {
  GEIST_REQUIRE_FIXTURES();
  const std::pair<const char*, GgmlType> files[] = {
      {"models/tiny-qwen35-f32.gguf", GgmlType::F32},
      {"models/tiny-qwen35-f16.gguf", GgmlType::F16},
      {"models/tiny-qwen35-q8_0.gguf", GgmlType::Q8_0},
  };
  for (const auto& [rel, type] : files) {
    SCOPED_TRACE(rel);
    std::unique_ptr<GgufFile> f;
    Status st = GgufFile::open(test::fixture_path(rel), &f);
    ASSERT_TRUE(st.is_ok()) << st.message();
    std::string_view arch;
    ASSERT_TRUE(f->get_str("general.architecture", &arch).is_ok());
    EXPECT_EQ(arch, "qwen35");
    uint32_t v = 0;
    ASSERT_TRUE(f->get_u32("qwen35.block_count", &v).is_ok());
    EXPECT_EQ(v, 8u);
    ASSERT_TRUE(f->get_u32("qwen35.embedding_length", &v).is_ok());
    EXPECT_EQ(v, 128u);
    ASSERT_TRUE(f->get_u32("qwen35.full_attention_interval", &v).is_ok());
    EXPECT_EQ(v, 4u);
    size_t n_of_type = 0;
    for (const GgufTensorInfo& t : f->tensors()) n_of_type += t.type == type;
    EXPECT_GT(n_of_type, 0u);
  }
}

TEST(GgufFixtures, EveryVocabFileLoads) {
  GEIST_REQUIRE_FIXTURES();
  size_t n_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::fixture_path("tokenizer"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) != 0 || e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(name);
    ++n_files;
    std::unique_ptr<GgufFile> f;
    Status st = GgufFile::open(e.path().string(), &f);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(f->tensors().empty());
    const std::vector<std::string_view>* tokens = nullptr;
    ASSERT_TRUE(f->get_arr_str("tokenizer.ggml.tokens", &tokens).is_ok());
    EXPECT_FALSE(tokens->empty());
    std::string_view model;
    EXPECT_TRUE(f->get_str("tokenizer.ggml.model", &model).is_ok());
    if (name == "ggml-vocab-llama-spm.gguf") {
      EXPECT_EQ(tokens->size(), 32000u);
    }
  }
  EXPECT_EQ(n_files, 10u);  // the README lists ten vocab files
}

}  // namespace
}  // namespace geist
