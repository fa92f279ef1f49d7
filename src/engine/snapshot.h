// Session snapshot images (docs/SNAPSHOT_FORMAT.md is the byte-level specification): the
// writer, the validating parser and the model identity. Independent of Session so that the
// format can be fuzzed and tested on its own; engine/snapshot_session.cpp binds it to Session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "archs/arch.h"
#include "base/status.h"
#include "engine/rng.h"
#include "formats/gguf.h"
#include "geist/geist.h"

namespace geist {

constexpr uint32_t kSnapshotVersion = 1;
constexpr size_t kSnapshotHeaderBytes = 96;
constexpr size_t kSnapshotEntryBytes = 24;
// Header + section table cap: 2726 sections, room for a KIVI image (4 sections per attention
// layer) of models far deeper than Llama-3.1-405B's 126 layers. Still bounded so that a reader
// can reject a corrupt n_sections before walking the table (SNAPSHOT_FORMAT.md §1).
constexpr size_t kSnapshotMaxHeaderSize = 65536;
constexpr size_t kSnapshotSamplerBytes = 72;

// Header flags.
constexpr uint32_t kSnapFlagLogitsPending = 1u << 0;
constexpr uint32_t kSnapFlagForwardOwed = 1u << 1;
constexpr uint32_t kSnapFlagHasPin = 1u << 2;
constexpr uint32_t kSnapFlagNested = 1u << 3;  // a PIN image: KV parts 0 and 1 omitted

// Section kinds besides the state region kinds of archs/arch.h.
constexpr uint32_t kSnapSampler = 1;
constexpr uint32_t kSnapTokens = 2;
constexpr uint32_t kSnapLogits = 3;
constexpr uint32_t kSnapPin = 64;

// XXH3-64 over the GGUF's metadata, tensor descriptions and a fixed sample of each tensor's
// bytes (SNAPSHOT_FORMAT.md §4). Reads up to ~10 KiB of tensor data per tensor through
// GgufTensorInfo::data, so call it while the file is open, best before a backend releases the
// pages behind its copy of the weights (touching them again would make them resident).
uint64_t compute_snapshot_id(const GgufFile& file);

// Everything an image is written from. Pointers must stay valid during the call.
struct SnapshotSource {
  uint64_t snapshot_id = 0;
  int32_t n_vocab = 0;
  int32_t max_seq_len = 0;
  const ArchState* state = nullptr;
  const int32_t* tokens = nullptr;  // [n_tokens] history
  int32_t n_tokens = 0;
  const float* logits = nullptr;  // [n_vocab] pending logits, read when logits_pending
  bool logits_pending = false;
  bool forward_owed = false;  // tokens[n_tokens - 1] has not been run
  int32_t n_generated = 0;    // last history tokens sampled since the last prompt input
  const geist_sampler_params* sampler = nullptr;
  const Rng* rng = nullptr;
  const uint8_t* pin = nullptr;  // [pin_size] nested image of the pinned state, or null
  size_t pin_size = 0;
  int32_t pin_len = 0;  // tokens of the pinned prefix
  bool nested = false;  // writing a PIN image (KV parts 0 and 1 are the outer image's)
};

// Exact image size. GEIST_E_UNSUPPORTED when the header and section table would exceed
// kSnapshotMaxHeaderSize (64 KiB).
Status snapshot_image_size(const SnapshotSource& src, size_t* out_size);
// Writes exactly `size` bytes (from snapshot_image_size) to dst. The state's status
// (ArchState::status) when its device failed before or while the regions were read: dst then
// holds no image (its magic is zero, so snapshot_parse refuses it). size >= the header.
Status snapshot_write(const SnapshotSource& src, uint8_t* dst, size_t size);

// What an image may be restored into.
struct SnapshotTarget {
  uint64_t snapshot_id = 0;
  int32_t n_vocab = 0;
  int32_t max_seq_len = 0;
  const ArchState* state = nullptr;  // shapes and KV mode of the target
};

struct SnapshotRegion {
  StateRegion region;
  const uint8_t* data = nullptr;  // [region.nbytes] inside the image
};

// A validated image; pointers point into the caller's buffer (no alignment assumed).
struct ParsedSnapshot {
  uint32_t flags = 0;
  int32_t n_tokens = 0;
  int32_t kv_len = 0;
  int32_t pin_len = 0;
  int32_t n_generated = 0;
  geist_sampler_params sampler{};
  Rng rng{};
  const uint8_t* tokens = nullptr;  // int32 LE [n_tokens]
  const uint8_t* logits = nullptr;  // f32 LE [n_vocab] when kSnapFlagLogitsPending
  std::vector<SnapshotRegion> regions;
  const uint8_t* pin = nullptr;  // nested image [pin_size], validated
  size_t pin_size = 0;
};

// Validates every check of SNAPSHOT_FORMAT.md §5 without touching any session.
// GEIST_E_INVALID_ARG for a null or short buffer, GEIST_E_FORMAT naming the failed check.
// verify_checksum false skips check 4 (the XXH3 pass over the whole image, as long as the copy
// that follows) for bytes whose integrity the caller has established; every structural check
// still runs, so nothing is ever read outside the buffer.
Status snapshot_parse(const uint8_t* buf, size_t size, const SnapshotTarget& target, bool nested,
                      ParsedSnapshot* out, bool verify_checksum = true);

}  // namespace geist
