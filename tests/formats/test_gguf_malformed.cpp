// Malformed files must give GEIST_E_FORMAT with a message naming the problem, never a crash.
// Each buffer is copied into an allocation of exactly its size, so that under ASan any read
// past the end is caught.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "formats/gguf.h"
#include "formats/gguf_bytes.h"

namespace geist {
namespace {

using test::Bytes;
using test::FileSpec;
using test::kv_scalar;
using test::kv_str;
using test::small_valid_spec;
using test::TensorRec;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// Parses an exact-size heap copy of `bytes` (or of its first `n` bytes).
Status parse_copy(const std::vector<uint8_t>& bytes, size_t n, std::unique_ptr<GgufFile>* f) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
  if (n) std::memcpy(copy.get(), bytes.data(), n);
  Status st = GgufFile::open_memory(copy.get(), n, f);
  if (st.is_ok()) {
    // Touch everything the file exposes while the buffer is alive.
    uint64_t sum = 0;
    for (const GgufKv& kv : (*f)->kvs()) {
      for (char c : kv.key) sum += static_cast<uint8_t>(c);
      for (char c : kv.str) sum += static_cast<uint8_t>(c);
      for (std::string_view s : kv.arr_strs) sum += s.empty() ? 0 : static_cast<uint8_t>(s.back());
    }
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    }
    EXPECT_GE(sum, 0u);
  }
  f->reset();
  return st;
}

Status parse(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<GgufFile> f;
  return parse_copy(bytes, bytes.size(), &f);
}

// Expects FORMAT with a message containing `needle`.
void expect_format(const std::vector<uint8_t>& bytes, const std::string& needle) {
  Status st = parse(bytes);
  EXPECT_EQ(st.code(), GEIST_E_FORMAT) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message '" << st.message() << "' lacks '" << needle << "'";
}

TEST(GgufMalformed, SmallValidFileIsValid) {
  const std::vector<uint8_t> bytes = small_valid_spec().build();
  Status st = parse(bytes);
  ASSERT_TRUE(st.is_ok()) << st.message();
}

TEST(GgufMalformed, TruncationAtEveryOffset) {
  const std::vector<uint8_t> bytes = small_valid_spec().build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::unique_ptr<GgufFile> f;
    Status st = parse_copy(bytes, n, &f);
    EXPECT_EQ(st.code(), GEIST_E_FORMAT) << "truncated to " << n << " bytes: " << st.message();
  }
}

TEST(GgufMalformed, NullBufferIsTruncated) {
  std::unique_ptr<GgufFile> f;
  EXPECT_EQ(GgufFile::open_memory(nullptr, 100, &f).code(), GEIST_E_FORMAT);
}

TEST(GgufMalformed, WrongMagic) {
  FileSpec s = small_valid_spec();
  s.magic = 0x4c4d4747;  // "GGML"
  expect_format(s.build(), "magic");
}

TEST(GgufMalformed, BadVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    FileSpec s = small_valid_spec();
    s.version = v;
    expect_format(s.build(), "unsupported version " + std::to_string(v));
  }
}

TEST(GgufMalformed, AbsurdCounts) {
  for (uint64_t n : {kU64Max, uint64_t{1} << 60, uint64_t{1} << 32, uint64_t{1000}}) {
    FileSpec a = small_valid_spec();
    a.n_kv_override = static_cast<int64_t>(n >> 1);
    expect_format(a.build(), "cannot fit");
    FileSpec b = small_valid_spec();
    b.n_tensors_override = static_cast<int64_t>(n >> 1);
    expect_format(b.build(), "cannot fit");
  }
  // Claiming one record more than present runs into the next section or the end.
  FileSpec c = small_valid_spec();
  c.n_kv_override = 3;
  EXPECT_EQ(parse(c.build()).code(), GEIST_E_FORMAT);
}

TEST(GgufMalformed, AbsurdStringLengths) {
  for (uint64_t len : {kU64Max, uint64_t{1} << 40, uint64_t{10000}}) {
    FileSpec a = small_valid_spec();
    Bytes key;
    key.u64(len).raw({'a', 'b'});
    a.kvs.insert(a.kvs.begin(), key);
    expect_format(a.build(), "string length");
    FileSpec b = small_valid_spec();
    Bytes val;
    val.str("k").u32(test::kStr).u64(len);
    b.kvs.push_back(val);
    expect_format(b.build(), "'k'");
    FileSpec c = small_valid_spec();
    Bytes tname;
    tname.u64(len);
    c.tensors.clear();
    c.n_tensors_override = 1;
    c.kvs.push_back(tname);  // raw bytes placed where the tensor info starts
    c.n_kv_override = 2;
    expect_format(c.build(), "string length");
  }
}

TEST(GgufMalformed, AbsurdArrayLengths) {
  for (uint32_t elem : {test::kU8, test::kI32, test::kF64, test::kStr}) {
    for (uint64_t len : {kU64Max, kU64Max / 4 + 1, uint64_t{1} << 33}) {
      SCOPED_TRACE(std::to_string(elem) + " x " + std::to_string(len));
      FileSpec s = small_valid_spec();
      Bytes arr;
      arr.str("arr").u32(test::kArr).u32(elem).u64(len).zeros(16);
      s.kvs.push_back(arr);
      expect_format(s.build(), "'arr'");
    }
  }
}

TEST(GgufMalformed, InvalidValueTypes) {
  for (uint32_t type : {13u, 100u, 0xffffffffu}) {
    FileSpec a = small_valid_spec();
    a.kvs.push_back(kv_scalar<uint32_t>("bad", type, 0));
    expect_format(a.build(), "invalid value type " + std::to_string(type));
    FileSpec b = small_valid_spec();
    Bytes arr;
    arr.str("bad_arr").u32(test::kArr).u32(type).u64(1).u32(0);
    b.kvs.push_back(arr);
    expect_format(b.build(), "invalid value type");
  }
}

TEST(GgufMalformed, NestedArraysRejected) {
  FileSpec s = small_valid_spec();
  Bytes arr;
  arr.str("nested").u32(test::kArr).u32(test::kArr).u64(1).u32(test::kU8).u64(1).u8(0);
  s.kvs.push_back(arr);
  expect_format(s.build(), "nested");
}

TEST(GgufMalformed, BoolOutOfRange) {
  FileSpec s = small_valid_spec();
  s.kvs.push_back(kv_scalar<uint8_t>("flag", test::kBool, 2));
  expect_format(s.build(), "'flag'");
}

TEST(GgufMalformed, BadKeysAndNames) {
  FileSpec a = small_valid_spec();
  a.kvs.push_back(kv_scalar<uint32_t>(std::string_view("a\0b", 3), test::kU32, 1));
  expect_format(a.build(), "NUL");
  FileSpec b = small_valid_spec();
  b.kvs.push_back(kv_scalar<uint32_t>("", test::kU32, 1));
  expect_format(b.build(), "empty key");
  FileSpec c = small_valid_spec();
  c.tensors[1].name = std::string("b\0", 2);
  expect_format(c.build(), "NUL");
}

TEST(GgufMalformed, DuplicateKeysAndTensorNames) {
  FileSpec a = small_valid_spec();
  a.kvs.push_back(kv_scalar<uint32_t>("llama.block_count", test::kU32, 6));
  expect_format(a.build(), "duplicate key 'llama.block_count'");
  FileSpec b = small_valid_spec();
  b.tensors[1].name = "a";
  expect_format(b.build(), "duplicate tensor name 'a'");
}

TEST(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    FileSpec s = small_valid_spec();
    s.kvs.push_back(kv_scalar<uint32_t>("general.alignment", test::kU32, a));
    expect_format(s.build(), "general.alignment");
  }
  FileSpec t = small_valid_spec();
  t.kvs.push_back(kv_str("general.alignment", "32"));
  expect_format(t.build(), "general.alignment");
  FileSpec n = small_valid_spec();
  n.kvs.push_back(kv_scalar<int32_t>("general.alignment", test::kI32, -32));
  expect_format(n.build(), "general.alignment");
}

TEST(GgufMalformed, LargerAlignmentIsHonoured) {
  FileSpec s = small_valid_spec();
  s.kvs.push_back(kv_scalar<uint32_t>("general.alignment", test::kU32, 64));
  s.alignment = 64;
  s.tensors[1].offset = 64;
  s.data_bytes = 128;
  const std::vector<uint8_t> bytes = s.build();
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ((f->find_tensor("b")->data - bytes.data()) % 64, 0);
  // Offset 32 is aligned for the default but not for 64.
  s.tensors[1].offset = 32;
  expect_format(s.build(), "not a multiple of alignment 64");
}

TEST(GgufMalformed, BadDims) {
  for (std::vector<int64_t> ne : {std::vector<int64_t>{}, std::vector<int64_t>{1, 1, 1, 1, 1}}) {
    FileSpec s = small_valid_spec();
    s.tensors[0].ne = ne;
    expect_format(s.build(), "n_dims " + std::to_string(ne.size()));
  }
  FileSpec neg = small_valid_spec();
  neg.tensors[1].ne = {8, -2};
  expect_format(neg.build(), "negative");
  FileSpec overflow = small_valid_spec();
  overflow.tensors[1].ne = {int64_t{1} << 40, int64_t{1} << 40};
  expect_format(overflow.build(), "overflows");
  FileSpec bytes_overflow = small_valid_spec();
  bytes_overflow.tensors[1].ne = {int64_t{1} << 62, 1};  // 2^62 elements * 4 bytes
  expect_format(bytes_overflow.build(), "overflows");
  FileSpec block = small_valid_spec();
  block.tensors[1].type = 8;  // q8_0
  block.tensors[1].ne = {33, 1};
  expect_format(block.build(), "block size");
}

TEST(GgufMalformed, UnknownTensorType) {
  for (uint32_t type : {4u, 31u, 40u, 0xffffffffu}) {
    FileSpec s = small_valid_spec();
    s.tensors[1].type = type;
    const std::vector<uint8_t> bytes = s.build();
    expect_format(bytes, "tensor 'b'");
    expect_format(bytes, "type id " + std::to_string(type));
  }
}

TEST(GgufMalformed, TensorsOutOfRange) {
  FileSpec past = small_valid_spec();
  past.tensors[1].offset = 64;  // [64, 128) but only 96 data bytes
  expect_format(past.build(), "outside the data section");
  FileSpec far = small_valid_spec();
  far.tensors[1].offset = kU64Max - 31;  // aligned, and offset + nbytes overflows
  expect_format(far.build(), "outside the data section");
  FileSpec big = small_valid_spec();
  big.tensors[1].ne = {8, 1000};
  expect_format(big.build(), "tensor 'b'");
  // Tensors but the file ends before the data section starts.
  FileSpec nopad = small_valid_spec();
  nopad.pad_header = false;
  nopad.data_bytes = 0;
  expect_format(nopad.build(), "beyond the end");
}

TEST(GgufMalformed, OverlappingTensors) {
  FileSpec s = small_valid_spec();
  s.tensors[1].offset = 0;
  expect_format(s.build(), "overlap");
  // An empty tensor between two overlapping ones must not hide the overlap.
  FileSpec e = small_valid_spec();
  e.tensors[0].ne = {16};                  // [0, 64)
  e.tensors[1].offset = 32;                // [32, 96)
  e.tensors.push_back({"z", {0}, 0, 32});  // empty, at 32
  expect_format(e.build(), "overlap");
  // Adjacent tensors and empty tensors anywhere in range are fine.
  FileSpec ok = small_valid_spec();
  ok.tensors.push_back({"z", {0}, 0, 0});
  EXPECT_TRUE(parse(ok.build()).is_ok());
}

TEST(GgufMalformed, MisalignedOffset) {
  FileSpec s = small_valid_spec();
  s.tensors[1].offset = 16;
  expect_format(s.build(), "not a multiple of alignment 32");
}

TEST(GgufMalformed, RandomByteFlipsNeverCrash) {
  // A richer file than small_valid_spec so that flips hit arrays and strings too.
  FileSpec s = small_valid_spec();
  Bytes sarr;
  sarr.str("toks").u32(test::kArr).u32(test::kStr).u64(3).str("ab").str("").str("cde");
  s.kvs.push_back(sarr);
  Bytes iarr;
  iarr.str("ids").u32(test::kArr).u32(test::kI32).u64(2).u32(7).u32(9);
  s.kvs.push_back(iarr);
  s.kvs.push_back(kv_scalar<uint32_t>("general.alignment", test::kU32, 32));
  const std::vector<uint8_t> valid = s.build();
  ASSERT_TRUE(parse(valid).is_ok());

  std::mt19937_64 rng(12345);
  size_t n_ok = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> b = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0:
          b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          b[at] = static_cast<uint8_t>(rng());
          break;
        default:
          b[at] = (rng() & 1) ? 0xff : 0x00;
          break;
      }
    }
    Status st = parse(b);
    ASSERT_TRUE(st.is_ok() || st.code() == GEIST_E_FORMAT) << st.code() << " " << st.message();
    n_ok += st.is_ok();
  }
  // Flips inside tensor data leave the file valid, so both outcomes must occur.
  EXPECT_GT(n_ok, 0u);
  EXPECT_LT(n_ok, 20000u);
}

}  // namespace
}  // namespace geist
