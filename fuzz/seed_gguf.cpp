// Writes a few small valid GGUF files into the directory given as argv[1]: seeds for
// fuzz_gguf that cover every value type, arrays, several tensor types and alignments, and
// the shards of a split set.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace {

std::vector<uint8_t> bytes_of(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

bool write(const geist::GgufWriter& w, const std::string& path) {
  const geist::Status st = w.write_file(path);
  if (!st.is_ok()) std::fprintf(stderr, "%s: %s\n", path.c_str(), st.message().c_str());
  return st.is_ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;

  geist::GgufWriter all_types;
  all_types.add_str("general.architecture", "llama");
  all_types.add_u8("u8", 1);
  all_types.add_i8("i8", -1);
  all_types.add_u16("u16", 2);
  all_types.add_i16("i16", -2);
  all_types.add_u32("llama.block_count", 2);
  all_types.add_i32("i32", -3);
  all_types.add_u64("u64", 4);
  all_types.add_i64("i64", -4);
  all_types.add_f32("f32", 0.5f);
  all_types.add_f64("f64", 0.25);
  all_types.add_bool("bool", true);
  all_types.add_arr_i32("arr_i32", {1, 2, 3});
  all_types.add_arr_f32("arr_f32", {1.0f, -1.0f});
  all_types.add_arr_str("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  all_types.add_arr_raw("arr_u8", geist::GgufValueType::UINT8, 3, {1, 2, 3});
  all_types.add_tensor("token_embd.weight", geist::GgmlType::F32, {4, 4}, bytes_of(64));
  all_types.add_tensor("blk.0.attn_q.weight", geist::GgmlType::Q8_0, {32, 2}, bytes_of(68));
  all_types.add_tensor("output_norm.weight", geist::GgmlType::F16, {4}, bytes_of(8));
  ok &= write(all_types, dir + "/seed_all_types.gguf");

  geist::GgufWriter aligned;
  aligned.set_alignment(64);
  aligned.add_str("general.name", "aligned");
  aligned.add_tensor("a", geist::GgmlType::Q4_K, {256}, bytes_of(144));
  aligned.add_tensor("b", geist::GgmlType::I32, {3, 1, 1, 2}, bytes_of(24));
  ok &= write(aligned, dir + "/seed_aligned.gguf");

  geist::GgufWriter vocab_only;  // no tensors, so no padding at the end
  vocab_only.add_str("tokenizer.ggml.model", "gpt2");
  vocab_only.add_arr_str("tokenizer.ggml.merges", {"a b", "ab c"});
  ok &= write(vocab_only, dir + "/seed_vocab_only.gguf");

  // Shards of a split set (split.* keys; the later shards hold no other metadata).
  std::vector<std::string> shard_paths;
  const geist::Status split_st = all_types.write_split(dir + "/seed_split", 2, {}, &shard_paths);
  if (!split_st.is_ok()) std::fprintf(stderr, "seed_split: %s\n", split_st.message().c_str());
  ok &= split_st.is_ok();

  return ok ? 0 : 1;
}
