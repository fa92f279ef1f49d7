// snapshot_id (SNAPSHOT_FORMAT.md §4) tells apart files that differ only in weight bytes inside
// its sample, and stays the same for the same bytes wherever they are loaded from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/snapshot.h"
#include "formats/gguf.h"
#include "snapshot/snapshot_util.h"

namespace geist::test {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The id of a GGUF held in memory (open_memory: tensor data points into `bytes`).
uint64_t id_of_bytes(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<GgufFile> f;
  const Status st = GgufFile::open_memory(bytes.data(), bytes.size(), &f);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return f ? compute_snapshot_id(*f) : 0;
}

// The id as a loaded model stamps it into its images: header bytes [32, 40) (§1).
uint64_t image_id(const ModelHandle& m) {
  SessionHandle s = make_session(m, 0, false);
  EXPECT_EQ(s.prefill({1, 300}), GEIST_OK);
  std::vector<uint8_t> img;
  EXPECT_EQ(s.snapshot(&img), GEIST_OK);
  uint64_t id = 0;
  if (img.size() >= 40) std::memcpy(&id, img.data() + 32, sizeof id);
  return id;
}

ModelHandle load_path(const std::string& path) {
  geist_model_params p;
  geist_model_params_default(&p);
  p.backend = test_backend();
  ModelHandle m;
  std::string err;
  EXPECT_EQ(ModelHandle::load(path, &m, &p, &err), GEIST_OK) << err;
  return m;
}

// Where a tensor's data starts in the file, and how long it is.
struct TensorSpan {
  size_t offset = 0;
  size_t nbytes = 0;
};

// Every tensor of the GGUF in `bytes`, in file order.
std::vector<TensorSpan> tensor_spans(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<GgufFile> f;
  EXPECT_TRUE(GgufFile::open_memory(bytes.data(), bytes.size(), &f).is_ok());
  std::vector<TensorSpan> out;
  if (!f) return out;
  for (const GgufTensorInfo& t : f->tensors()) {
    out.push_back({static_cast<size_t>(t.data - bytes.data()), static_cast<size_t>(t.nbytes)});
  }
  return out;
}

// Start of interior window i (1..8) of a tensor of n > 16384 bytes, from §4's definition.
size_t window_start(size_t n, size_t i) { return 4096 + i * (n - 8192 - 256) / 9; }

TEST(SnapshotIdV2, StableAcrossLoadsAndByteIdenticalCopies) {
  GEIST_REQUIRE_FIXTURES();
  for (const char* rel : {"models/stories260K.gguf", "models/tiny-qwen35-q8_0.gguf"}) {
    SCOPED_TRACE(rel);
    const std::string path = fixture_path(rel);
    std::unique_ptr<GgufFile> a, b;
    ASSERT_TRUE(GgufFile::open(path, &a).is_ok());
    ASSERT_TRUE(GgufFile::open(path, &b).is_ok());
    const uint64_t id = compute_snapshot_id(*a);
    EXPECT_EQ(compute_snapshot_id(*b), id) << "two mappings of one file";
    EXPECT_EQ(compute_snapshot_id(*a), id) << "the same mapping twice";
    const std::vector<uint8_t> bytes = read_bytes(path);
    EXPECT_EQ(id_of_bytes(bytes), id) << "the same bytes in memory";

    const std::string copy = test::temp_path("snapshot_id_copy.gguf");
    write_bytes(copy, bytes);
    ModelHandle m1 = load_path(path);
    ModelHandle m2 = load_path(path);
    ModelHandle mc = load_path(copy);
    ASSERT_TRUE(m1 && m2 && mc);
    const uint64_t img_id = image_id(m1);
    EXPECT_EQ(img_id, id) << "the id a loaded model writes into its images";
    EXPECT_EQ(image_id(m2), img_id) << "a second load";
    EXPECT_EQ(image_id(mc), img_id) << "a byte-identical copy";
    std::remove(copy.c_str());
  }
}

// One flipped bit anywhere in the sample (a tensor's head, an interior window, its tail, a
// whole small tensor) gives another id.
TEST(SnapshotIdV2, OneSampledWeightByteChangesTheId) {
  GEIST_REQUIRE_FIXTURES();
  const std::vector<uint8_t> orig = read_bytes(fixture_path("models/stories260K.gguf"));
  const uint64_t id = id_of_bytes(orig);
  const std::vector<TensorSpan> spans = tensor_spans(orig);
  ASSERT_FALSE(spans.empty());
  const TensorSpan big = *std::max_element(spans.begin(), spans.end(),
                                           [](auto& x, auto& y) { return x.nbytes < y.nbytes; });
  const TensorSpan small = *std::min_element(spans.begin(), spans.end(),
                                             [](auto& x, auto& y) { return x.nbytes < y.nbytes; });
  ASSERT_GT(big.nbytes, 16384u) << "the fixture needs a tensor with interior windows";
  ASSERT_GT(small.nbytes, 0u);
  ASSERT_LE(small.nbytes, 16384u) << "the fixture needs a tensor hashed whole";

  std::vector<size_t> where = {
      big.offset,                                     // first byte of the head
      big.offset + 4095,                              // last byte of the head
      big.offset + big.nbytes - 4096,                 // first byte of the tail
      big.offset + big.nbytes - 1,                    // last byte of the file's largest tensor
      small.offset + small.nbytes / 2,                // inside a tensor hashed whole
      spans.back().offset + spans.back().nbytes - 1,  // the last tensor's last byte
  };
  for (size_t i = 1; i <= 8; ++i) {
    where.push_back(big.offset + window_start(big.nbytes, i));
    where.push_back(big.offset + window_start(big.nbytes, i) + 255);
  }
  for (size_t at : where) {
    std::vector<uint8_t> edited = orig;
    edited[at] ^= 0x01;
    EXPECT_NE(id_of_bytes(edited), id) << "flipped a bit of the byte at file offset " << at;
  }
}

// A "fine-tune" of stories260K (one weight byte changed) refuses the original's image, and the
// original refuses its image, with GEIST_E_FORMAT naming the model id; the target session is
// left as it was.
TEST(SnapshotIdV2, WeightOnlyDifferenceRefusesTheImage) {
  GEIST_REQUIRE_FIXTURES();
  const std::string orig_path = fixture_path("models/stories260K.gguf");
  std::vector<uint8_t> bytes = read_bytes(orig_path);
  const std::vector<TensorSpan> spans = tensor_spans(bytes);
  ASSERT_FALSE(spans.empty());
  // The lowest mantissa byte of the first float of the first tensor: the model stays finite.
  bytes[spans.front().offset] ^= 0x01;
  const std::string tuned_path = test::temp_path("snapshot_id_tuned.gguf");
  write_bytes(tuned_path, bytes);

  ModelHandle orig = load_path(orig_path);
  ModelHandle tuned = load_path(tuned_path);
  ASSERT_TRUE(orig && tuned);
  const int32_t nv = orig.n_vocab();
  ASSERT_EQ(tuned.n_vocab(), nv);

  struct Direction {
    const ModelHandle* from;
    const ModelHandle* into;
  };
  for (const Direction d : {Direction{&orig, &tuned}, Direction{&tuned, &orig}}) {
    SessionHandle src = make_session(*d.from, 0, true);
    ASSERT_EQ(src.prefill({1, 300, 301}), GEIST_OK);
    std::vector<uint8_t> img;
    ASSERT_EQ(src.snapshot(&img), GEIST_OK);

    SessionHandle victim = make_session(*d.into, 0, true);
    ASSERT_EQ(victim.prefill({1, 400, 57, 90}), GEIST_OK);
    SessionHandle twin = make_session(*d.into, 0, true);
    ASSERT_EQ(twin.prefill({1, 400, 57, 90}), GEIST_OK);
    const Trace ref = run_steps(twin, nv, 16);

    EXPECT_EQ(victim.restore(img), GEIST_E_FORMAT);
    EXPECT_NE(std::string(victim.last_error()).find("model id"), std::string::npos)
        << "message: " << victim.last_error();
    EXPECT_EQ(victim.position(), 4);
    EXPECT_TRUE(same_continuation(ref, 0, run_steps(victim, nv, 16), nv))
        << "the refused restore changed the session";

    // The image itself is fine: its own model takes it.
    SessionHandle same = make_session(*d.from, 0, true);
    EXPECT_EQ(same.restore(img), GEIST_OK) << same.last_error();
  }
  std::remove(tuned_path.c_str());
}

}  // namespace
}  // namespace geist::test
