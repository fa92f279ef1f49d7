// Split GGUF sets: the layout GgufWriter::write_split writes (checked key by key against what
// llama-gguf-split writes: tools/gguf-split/gguf-split.cpp), opening a set through its first
// shard, and every way a set can be broken.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "support/fixtures.h"

namespace geist {
namespace {

std::vector<uint8_t> split_pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13);
  return v;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A directory of this process, removed at the end of the test.
struct Dir {
  std::string path = test::temp_path("split_dir");
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string prefix(const char* name) const { return path + "/" + name; }
};

// Five tensors of different types and sizes, metadata of several kinds.
void fill_writer(GgufWriter* w) {
  w->set_alignment(64);
  w->add_str("general.architecture", "llama");
  w->add_u32("llama.block_count", 2);
  w->add_arr_str("tokenizer.ggml.tokens", {"a", "b", "c"});
  w->add_tensor("token_embd.weight", GgmlType::F32, {4, 3}, split_pattern(48, 1));
  w->add_tensor("blk.0.attn_q.weight", GgmlType::Q8_0, {32, 2}, split_pattern(68, 2));
  w->add_tensor("blk.0.attn_norm.weight", GgmlType::F32, {4}, split_pattern(16, 3));
  w->add_tensor("blk.1.attn_q.weight", GgmlType::F16, {8, 2}, split_pattern(32, 4));
  w->add_tensor("output.weight", GgmlType::F32, {4, 3}, split_pattern(48, 5));
}

TEST(GgufSplit, PathsAsLlamaCpp) {
  EXPECT_EQ(gguf_split_path("/m/model", 0, 3), "/m/model-00001-of-00003.gguf");
  EXPECT_EQ(gguf_split_path("x", 11, 12), "x-00012-of-00012.gguf");
}

TEST(GgufSplit, LayoutMatchesLlamaGgufSplit) {
  Dir dir;
  GgufWriter w;
  fill_writer(&w);
  std::vector<std::string> paths;
  ASSERT_TRUE(w.write_split(dir.prefix("m"), 2, {}, &paths).is_ok());
  ASSERT_EQ(paths.size(), 3u);
  const size_t want_tensors[] = {2, 2, 1};
  for (uint32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(paths[s], gguf_split_path(dir.prefix("m"), s, 3));
    // Each shard on its own (open_memory does not follow the set).
    const std::vector<uint8_t> bytes = read_bytes(paths[s]);
    std::unique_ptr<GgufFile> f;
    ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok()) << paths[s];
    const GgufKv* no = f->find(kSplitNoKey);
    const GgufKv* count = f->find(kSplitCountKey);
    const GgufKv* total = f->find(kSplitTensorsCountKey);
    ASSERT_TRUE(no && count && total) << paths[s];
    // llama-gguf-split: gguf_set_val_u16 for split.no and split.count, _i32 for the total.
    EXPECT_EQ(no->type, GgufValueType::UINT16);
    EXPECT_EQ(count->type, GgufValueType::UINT16);
    EXPECT_EQ(total->type, GgufValueType::INT32);
    EXPECT_EQ(no->u64, s);
    EXPECT_EQ(count->u64, 3u);
    EXPECT_EQ(total->i64, 5);
    EXPECT_EQ(f->tensors().size(), want_tensors[s]);
    if (s == 0) {
      // All metadata in the first shard, the split keys after it.
      EXPECT_EQ(f->kvs().size(), 4u + 3u);
      EXPECT_EQ(f->alignment(), 64u);
      EXPECT_EQ(f->kvs()[f->kvs().size() - 3].key, kSplitNoKey);
    } else {
      EXPECT_EQ(f->kvs().size(), 3u);
      EXPECT_EQ(f->find("general.architecture"), nullptr);
    }
  }
}

TEST(GgufSplit, FirstShardOpensTheWholeSet) {
  Dir dir;
  GgufWriter w;
  fill_writer(&w);
  std::vector<uint8_t> whole_bytes;
  ASSERT_TRUE(w.to_bytes(&whole_bytes).is_ok());
  std::unique_ptr<GgufFile> whole;
  ASSERT_TRUE(GgufFile::open_memory(whole_bytes.data(), whole_bytes.size(), &whole).is_ok());
  std::vector<std::string> paths;
  ASSERT_TRUE(w.write_split(dir.prefix("m"), 2, {}, &paths).is_ok());

  std::unique_ptr<GgufFile> set;
  const Status st = GgufFile::open(paths[0], &set);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(set->n_files(), 3u);
  size_t total_size = 0;
  for (const std::string& p : paths) total_size += std::filesystem::file_size(p);
  EXPECT_EQ(set->file_size(), total_size);
  // The model's own metadata, without the layout keys.
  ASSERT_EQ(set->kvs().size(), whole->kvs().size());
  EXPECT_EQ(set->find(kSplitCountKey), nullptr);
  uint32_t blocks = 0;
  ASSERT_TRUE(set->get_u32("llama.block_count", &blocks).is_ok());
  EXPECT_EQ(blocks, 2u);
  // Every tensor, in order, with its bytes.
  ASSERT_EQ(set->tensors().size(), whole->tensors().size());
  for (size_t i = 0; i < whole->tensors().size(); ++i) {
    const GgufTensorInfo& a = whole->tensors()[i];
    const GgufTensorInfo* b = set->find_tensor(a.name);
    ASSERT_NE(b, nullptr) << a.name;
    EXPECT_EQ(set->tensors()[i].name, a.name);
    EXPECT_EQ(b->type, a.type);
    EXPECT_EQ(b->nbytes, a.nbytes);
    EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + b->nbytes),
              std::vector<uint8_t>(a.data, a.data + a.nbytes))
        << a.name;
  }

  // Written again from the opened set: the same shards, byte for byte.
  std::vector<std::string> again;
  ASSERT_TRUE(gguf_write_split(*set, dir.prefix("again"), 2, &again).is_ok());
  ASSERT_EQ(again.size(), 3u);
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(read_bytes(again[s]), read_bytes(paths[s])) << s;
}

TEST(GgufSplit, OneShardIsAPlainFile) {
  Dir dir;
  GgufWriter w;
  fill_writer(&w);
  std::vector<std::string> paths;
  ASSERT_TRUE(w.write_split(dir.prefix("one"), 100, {}, &paths).is_ok());
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0], dir.prefix("one") + "-00001-of-00001.gguf");
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open(paths[0], &f).is_ok());
  EXPECT_EQ(f->tensors().size(), 5u);
  EXPECT_EQ(f->n_files(), 1u);
}

void expect_open_error(const std::string& path, geist_status code, const std::string& needle) {
  std::unique_ptr<GgufFile> f;
  const Status st = GgufFile::open(path, &f);
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message should mention '" << needle << "': " << st.message();
  EXPECT_EQ(f, nullptr);
}

TEST(GgufSplit, BrokenSetsAreNamed) {
  Dir dir;
  GgufWriter w;
  fill_writer(&w);
  std::vector<std::string> paths;
  ASSERT_TRUE(w.write_split(dir.prefix("m"), 2, {}, &paths).is_ok());

  // Not the first shard.
  expect_open_error(paths[1], GEIST_E_INVALID_ARG, "open the first shard (...-00001-of-00003");
  // A first shard renamed away from the split_pattern: the others cannot be found.
  const std::string renamed = dir.prefix("renamed.gguf");
  std::filesystem::copy_file(paths[0], renamed);
  expect_open_error(renamed, GEIST_E_FORMAT, "does not end in -00001-of-00003.gguf");
  // A missing shard is named.
  const std::string moved = dir.prefix("moved.gguf");
  std::filesystem::rename(paths[2], moved);
  expect_open_error(paths[0], GEIST_E_FILE_NOT_FOUND, "m-00003-of-00003.gguf");
  expect_open_error(paths[0], GEIST_E_FILE_NOT_FOUND, "shard 3 of 3");
  std::filesystem::rename(moved, paths[2]);

  // A shard of another set in its place (split.no 1 of 2 where 2 of 3 is expected).
  GgufWriter other;
  fill_writer(&other);
  std::vector<std::string> other_paths;
  ASSERT_TRUE(other.write_split(dir.prefix("other"), 3, {}, &other_paths).is_ok());
  ASSERT_EQ(other_paths.size(), 2u);
  std::filesystem::copy_file(paths[1], moved);
  std::filesystem::copy_file(other_paths[1], paths[1],
                             std::filesystem::copy_options::overwrite_existing);
  expect_open_error(paths[0], GEIST_E_FORMAT, "do not match its name");
  std::filesystem::copy_file(moved, paths[1], std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(moved);

  // A tensor in two shards, and a total that disagrees with split.tensors.count.
  auto write_shard = [](const std::string& path, uint16_t no, uint16_t count, int32_t total,
                        const char* tensor) {
    GgufWriter s;
    s.add_u16(kSplitNoKey, no);
    s.add_u16(kSplitCountKey, count);
    s.add_i32(kSplitTensorsCountKey, total);
    s.add_tensor(tensor, GgmlType::F32, {4}, split_pattern(16, 9));
    ASSERT_TRUE(s.write_file(path).is_ok());
  };
  const std::string d = dir.prefix("d");
  write_shard(gguf_split_path(d, 0, 2), 0, 2, 2, "x");
  write_shard(gguf_split_path(d, 1, 2), 1, 2, 2, "x");
  expect_open_error(gguf_split_path(d, 0, 2), GEIST_E_FORMAT, "tensor 'x' is also in");
  write_shard(gguf_split_path(d, 1, 2), 1, 2, 2, "y");
  std::unique_ptr<GgufFile> ok;
  EXPECT_TRUE(GgufFile::open(gguf_split_path(d, 0, 2), &ok).is_ok());
  write_shard(gguf_split_path(d, 0, 2), 0, 2, 3, "x");
  expect_open_error(gguf_split_path(d, 0, 2), GEIST_E_FORMAT, "split.tensors.count is 3");
}

}  // namespace
}  // namespace geist
