// Snapshot image writer and validating parser (docs/SNAPSHOT_FORMAT.md).
#include "engine/snapshot.h"

#include <xxhash.h>

#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "engine/sampler.h"

namespace geist {

static_assert(std::endian::native == std::endian::little,
              "snapshot images are little-endian and written with memcpy");

namespace {

constexpr uint8_t kMagic[8] = {'G', 'E', 'I', 'S', 'T', 'S', 'N', 'P'};
constexpr uint32_t kNoLayer = 0xFFFFFFFFu;
constexpr uint32_t kNoToken = 0xFFFFFFFFu;
constexpr size_t kChecksumOffset = 24;
constexpr uint32_t kKnownFlags =
    kSnapFlagLogitsPending | kSnapFlagForwardOwed | kSnapFlagHasPin | kSnapFlagNested;

struct Section {
  uint32_t kind = 0;
  uint32_t layer = kNoLayer;
  uint64_t length = 0;
};

template <class T>
void put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

// The state regions an image of kv_len positions carries, in section order: zero-length
// regions are omitted, and a nested (PIN) image leaves KV parts 0 and 1 to the outer image,
// whose bytes over [0, pin kv_len) are the same (they are never rewritten while the history
// extends the pin).
void image_regions(const ArchState& st, int32_t kv_len, bool nested,
                   std::vector<StateRegion>* out) {
  std::vector<StateRegion> all;
  st.state_regions(kv_len, &all);
  out->clear();
  for (const StateRegion& r : all) {
    if (r.nbytes == 0) continue;
    if (nested && (r.kind == kStateKvPart0 || r.kind == kStateKvPart0 + 1)) continue;
#ifdef GEIST_SNAPSHOT_MUTATION_DROP_DELTANET
    // Test-only mutation build: proves the suite notices a missing DeltaNet state.
    if (r.kind == kStateConv || r.kind == kStateRecurrent) continue;
#endif
    out->push_back(r);
  }
}

uint64_t image_checksum(const uint8_t* p, size_t size) {
  XXH3_state_t* st = XXH3_createState();
  GEIST_CHECK(st != nullptr, "xxhash: out of memory");
  XXH3_64bits_reset(st);
  const uint8_t zeros[8] = {};
  XXH3_64bits_update(st, p, kChecksumOffset);
  XXH3_64bits_update(st, zeros, sizeof zeros);
  XXH3_64bits_update(st, p + kChecksumOffset + 8, size - kChecksumOffset - 8);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

int32_t kv_len_of(int32_t n_tokens, bool owed) { return owed ? n_tokens - 1 : n_tokens; }

void sections_of(const SnapshotSource& s, const std::vector<StateRegion>& regions,
                 std::vector<Section>* out) {
  out->clear();
  out->push_back({kSnapSampler, kNoLayer, kSnapshotSamplerBytes});
  if (s.n_tokens > 0) out->push_back({kSnapTokens, kNoLayer, 4ull * uint64_t(s.n_tokens)});
  if (s.logits_pending) out->push_back({kSnapLogits, kNoLayer, 4ull * uint64_t(s.n_vocab)});
  for (const StateRegion& r : regions) {
    out->push_back({r.kind, static_cast<uint32_t>(r.layer), r.nbytes});
  }
  if (s.pin != nullptr) out->push_back({kSnapPin, kNoLayer, s.pin_size});
}

bool kind_is_state(uint32_t k) {
  return (k >= kStateKvPart0 && k < kStateKvPart0 + 5) || k == kStateConv || k == kStateRecurrent;
}

// A GEIST_E_FORMAT status naming the image kind and the failed check.
[[gnu::format(printf, 3, 4)]] Status check_failed(const char* what, const char* check,
                                                  const char* fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return Status::error(GEIST_E_FORMAT, "%s: %s check failed: %s", what, check, msg);
}

}  // namespace

Status snapshot_image_size(const SnapshotSource& s, size_t* out_size) {
  std::vector<StateRegion> regions;
  image_regions(*s.state, kv_len_of(s.n_tokens, s.forward_owed), s.nested, &regions);
  std::vector<Section> secs;
  sections_of(s, regions, &secs);
  const size_t header = kSnapshotHeaderBytes + kSnapshotEntryBytes * secs.size();
  if (header > kSnapshotMaxHeaderSize) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "snapshot: %zu sections exceed the format's %zu KiB section table (at "
                         "most %zu sections)",
                         secs.size(), kSnapshotMaxHeaderSize / 1024,
                         (kSnapshotMaxHeaderSize - kSnapshotHeaderBytes) / kSnapshotEntryBytes);
  }
  uint64_t total = header;
  for (const Section& sec : secs) total += sec.length;
  *out_size = static_cast<size_t>(total);
  return Status::ok();
}

Status snapshot_write(const SnapshotSource& s, uint8_t* dst, size_t size) {
  if (const Status st = s.state->status(); !st.is_ok()) {
    std::memset(dst, 0, 8);  // no image: not even an earlier one left in the buffer
    return st;
  }
  const int32_t kv_len = kv_len_of(s.n_tokens, s.forward_owed);
  std::vector<StateRegion> regions;
  image_regions(*s.state, kv_len, s.nested, &regions);
  std::vector<Section> secs;
  sections_of(s, regions, &secs);
  const size_t header = kSnapshotHeaderBytes + kSnapshotEntryBytes * secs.size();
  GEIST_CHECK(header <= kSnapshotMaxHeaderSize, "snapshot: section table too large");

  std::memset(dst, 0, header);
  std::memcpy(dst, kMagic, 8);
  put<uint32_t>(dst, 8, kSnapshotVersion);
  put<uint32_t>(dst, 12, static_cast<uint32_t>(header));
  put<uint64_t>(dst, 16, size);
  put<uint64_t>(dst, 32, s.snapshot_id);
  put<uint32_t>(dst, 40, static_cast<uint32_t>(s.state->kv_mode()));
  put<uint32_t>(dst, 44, static_cast<uint32_t>(s.max_seq_len));
  put<uint32_t>(dst, 48, static_cast<uint32_t>(s.n_tokens));
  put<uint32_t>(dst, 52, static_cast<uint32_t>(kv_len));
  put<uint32_t>(dst, 56, static_cast<uint32_t>(s.n_vocab));
  put<uint32_t>(dst, 60, static_cast<uint32_t>(secs.size()));
  uint32_t flags = 0;
  if (s.logits_pending) flags |= kSnapFlagLogitsPending;
  if (s.forward_owed) flags |= kSnapFlagForwardOwed;
  if (s.pin != nullptr) flags |= kSnapFlagHasPin;
  if (s.nested) flags |= kSnapFlagNested;
  put<uint32_t>(dst, 64, flags);
  put<uint32_t>(dst, 68,
                s.forward_owed ? static_cast<uint32_t>(s.tokens[s.n_tokens - 1]) : kNoToken);
  put<uint32_t>(dst, 72, s.pin != nullptr ? static_cast<uint32_t>(s.pin_len) : 0u);
  put<uint32_t>(dst, 76, static_cast<uint32_t>(s.n_generated));

  uint64_t off = header;
  size_t region = 0;
  for (size_t i = 0; i < secs.size(); ++i) {
    const Section& sec = secs[i];
    uint8_t* e = dst + kSnapshotHeaderBytes + kSnapshotEntryBytes * i;
    put<uint32_t>(e, 0, sec.kind);
    put<uint32_t>(e, 4, sec.layer);
    put<uint64_t>(e, 8, off);
    put<uint64_t>(e, 16, sec.length);
    uint8_t* p = dst + off;
    switch (sec.kind) {
      case kSnapSampler: {
        const geist_sampler_params& sp = *s.sampler;
        std::memset(p, 0, kSnapshotSamplerBytes);
        put<float>(p, 0, sp.temperature);
        put<int32_t>(p, 4, sp.top_k);
        put<float>(p, 8, sp.top_p);
        put<float>(p, 12, sp.min_p);
        put<float>(p, 16, sp.repeat_penalty);
        put<float>(p, 20, sp.presence_penalty);
        put<int32_t>(p, 24, sp.penalty_last_n);
        put<float>(p, 28, sp.frequency_penalty);
        put<uint64_t>(p, 32, sp.seed);
        for (int w = 0; w < 4; ++w) put<uint64_t>(p, 40 + 8 * size_t(w), s.rng->s[w]);
        break;
      }
      case kSnapTokens:
        std::memcpy(p, s.tokens, sec.length);
        break;
      case kSnapLogits:
        std::memcpy(p, s.logits, sec.length);
        break;
      case kSnapPin:
        std::memcpy(p, s.pin, sec.length);
        break;
      default:
        s.state->download_region(regions[region++], kv_len, p);
        break;
    }
    off += sec.length;
  }
  GEIST_CHECK(off == size, "snapshot: size differs from snapshot_image_size");
  // A device that failed during the downloads filled its regions with 0xFF: no image then.
  const Status st = s.state->status();
  if (!st.is_ok()) {
    std::memset(dst, 0, 8);
    return st;
  }
  put<uint64_t>(dst, kChecksumOffset, image_checksum(dst, size));
  return Status::ok();
}

Status snapshot_parse(const uint8_t* buf, size_t size, const SnapshotTarget& t, bool nested,
                      ParsedSnapshot* out, bool verify_checksum) {
  const char* what = nested ? "snapshot pin image" : "snapshot";
  // 1. buffer
  if (buf == nullptr) return Status::error(GEIST_E_INVALID_ARG, "%s: buffer is NULL", what);
  if (size < kSnapshotHeaderBytes) {
    return Status::error(GEIST_E_INVALID_ARG,
                         "%s: buffer of %zu bytes is shorter than the %zu-byte header", what, size,
                         kSnapshotHeaderBytes);
  }
  // 2. magic, version, header size
  if (std::memcmp(buf, kMagic, 8) != 0)
    return check_failed(what, "magic", "not a geist snapshot image");
  const uint32_t version = get<uint32_t>(buf, 8);
  if (version != kSnapshotVersion) {
    return check_failed(what, "version", "format version %u, this build reads %u", version,
                        kSnapshotVersion);
  }
  const uint32_t header_size = get<uint32_t>(buf, 12);
  const uint32_t n_sections = get<uint32_t>(buf, 60);
  if (n_sections > (kSnapshotMaxHeaderSize - kSnapshotHeaderBytes) / kSnapshotEntryBytes ||
      header_size != kSnapshotHeaderBytes + kSnapshotEntryBytes * n_sections ||
      header_size > size) {
    return check_failed(what, "header size", "header_size %u with %u sections in %zu bytes",
                        header_size, n_sections, size);
  }
  // 3. exact size
  const uint64_t image_size = get<uint64_t>(buf, 16);
  if (image_size != size) {
    return check_failed(what, "size", "image_size field %llu but %zu bytes given",
                        static_cast<unsigned long long>(image_size), size);
  }
  // 4. checksum
  const uint64_t checksum = get<uint64_t>(buf, kChecksumOffset);
  if (verify_checksum && checksum != image_checksum(buf, size))
    return check_failed(what, "checksum", "%s", "image is corrupt");
  // 5. model identity
  if (get<uint64_t>(buf, 32) != t.snapshot_id) {
    return check_failed(what, "model id", "snapshot_id %016llx, the session's model has %016llx",
                        static_cast<unsigned long long>(get<uint64_t>(buf, 32)),
                        static_cast<unsigned long long>(t.snapshot_id));
  }
  if (get<uint32_t>(buf, 56) != static_cast<uint32_t>(t.n_vocab)) {
    return check_failed(what, "n_vocab", "%u, the model has %d", get<uint32_t>(buf, 56), t.n_vocab);
  }
  // 6. KV mode
  const uint32_t kv_mode = get<uint32_t>(buf, 40);
  const KvMode target_mode = t.state->kv_mode();
  if (kv_mode != static_cast<uint32_t>(target_mode)) {
    return check_failed(what, "KV mode", "image holds KV mode %u, the session uses %s (%d)",
                        kv_mode, kv_mode_name(target_mode), static_cast<int>(target_mode));
  }
  // 7. counts and flags
  const uint32_t n_tokens = get<uint32_t>(buf, 48);
  const uint32_t kv_len = get<uint32_t>(buf, 52);
  const uint32_t flags = get<uint32_t>(buf, 64);
  const uint32_t owed_token = get<uint32_t>(buf, 68);
  const uint32_t pin_len = get<uint32_t>(buf, 72);
  if (n_tokens > static_cast<uint32_t>(t.max_seq_len)) {
    return check_failed(what, "capacity", "image holds %u tokens, the session's max_seq_len is %d",
                        n_tokens, t.max_seq_len);
  }
  const uint32_t n_generated = get<uint32_t>(buf, 76);
  if (n_generated > n_tokens) {
    return check_failed(what, "n_generated", "%u generated tokens, the history holds %u",
                        n_generated, n_tokens);
  }
  for (size_t i = 80; i < 96; ++i) {
    if (buf[i] != 0) return check_failed(what, "reserved", "header byte %zu is not zero", i);
  }
  if ((flags & ~kKnownFlags) != 0)
    return check_failed(what, "flags", "unknown flag bits 0x%x", flags);
  const bool pending = flags & kSnapFlagLogitsPending;
  const bool owed = flags & kSnapFlagForwardOwed;
  const bool has_pin = flags & kSnapFlagHasPin;
  if (bool(flags & kSnapFlagNested) != nested) {
    return check_failed(what, "flags", "%s",
                        nested ? "pin image lacks the nested flag" : "nested flag set");
  }
  if (nested && has_pin) return check_failed(what, "flags", "%s", "a pin image holds a pin");
  if (n_tokens == 0 ? (pending || owed) : (pending == owed)) {
    return check_failed(what, "flags",
                        "flags 0x%x do not fit %u tokens (exactly one of pending logits and "
                        "owed forward with tokens, neither without)",
                        flags, n_tokens);
  }
  if (kv_len != (owed ? n_tokens - 1 : n_tokens)) {
    return check_failed(what, "kv_len", "kv_len %u with %u tokens and flags 0x%x", kv_len, n_tokens,
                        flags);
  }
  if (owed ? owed_token >= static_cast<uint32_t>(t.n_vocab) : owed_token != kNoToken) {
    return check_failed(what, "owed token", "owed token %u (vocabulary %d, flags 0x%x)", owed_token,
                        t.n_vocab, flags);
  }
  if (has_pin ? (pin_len > n_tokens) : (pin_len != 0)) {
    return check_failed(what, "pin_len", "pin_len %u with %u tokens", pin_len, n_tokens);
  }

  // 8. section table
  std::vector<StateRegion> regions;
  image_regions(*t.state, static_cast<int32_t>(kv_len), nested, &regions);
  std::vector<Section> want;
  want.push_back({kSnapSampler, kNoLayer, kSnapshotSamplerBytes});
  if (n_tokens > 0) want.push_back({kSnapTokens, kNoLayer, 4ull * n_tokens});
  if (pending) want.push_back({kSnapLogits, kNoLayer, 4ull * uint64_t(t.n_vocab)});
  for (const StateRegion& r : regions) want.push_back({r.kind, uint32_t(r.layer), r.nbytes});
  if (has_pin) want.push_back({kSnapPin, kNoLayer, 0});  // length checked by the nested parse
  if (want.size() != n_sections) {
    return check_failed(what, "section table", "%u sections, the model and header imply %zu",
                        n_sections, want.size());
  }
  ParsedSnapshot p;
  p.regions.reserve(regions.size());
  uint64_t off = header_size;
  for (size_t i = 0; i < want.size(); ++i) {
    const uint8_t* e = buf + kSnapshotHeaderBytes + kSnapshotEntryBytes * i;
    const uint32_t kind = get<uint32_t>(e, 0);
    const uint32_t layer = get<uint32_t>(e, 4);
    const uint64_t s_off = get<uint64_t>(e, 8);
    const uint64_t len = get<uint64_t>(e, 16);
    if (kind != want[i].kind || layer != want[i].layer) {
      return check_failed(
          what, "section table", "section %zu is kind %u layer %d, expected kind %u layer %d", i,
          kind, static_cast<int32_t>(layer), want[i].kind, static_cast<int32_t>(want[i].layer));
    }
    if (s_off != off)
      return check_failed(what, "section table", "section %zu is not contiguous", i);
    const bool pin_sec = kind == kSnapPin;
    if (pin_sec ? (len < kSnapshotHeaderBytes) : (len != want[i].length)) {
      return check_failed(what, "section length",
                          "section %zu (kind %u, layer %d) has %llu bytes, expected "
                          "%llu",
                          i, kind, static_cast<int32_t>(layer),
                          static_cast<unsigned long long>(len),
                          static_cast<unsigned long long>(want[i].length));
    }
    if (len > size - off)
      return check_failed(what, "section length", "section %zu runs past the end", i);
    const uint8_t* d = buf + off;
    if (kind == kSnapTokens) {
      p.tokens = d;
    } else if (kind == kSnapLogits) {
      p.logits = d;
    } else if (pin_sec) {
      p.pin = d;
      p.pin_size = static_cast<size_t>(len);
    } else if (kind_is_state(kind)) {
      p.regions.push_back({regions[p.regions.size()], d});
    }
    off += len;
  }
  if (off != size)
    return check_failed(what, "size", "%llu bytes of sections after the table, image has %zu",
                        static_cast<unsigned long long>(off - header_size), size - header_size);

  // 9. payloads: sampler settings, RNG, token ids, pin
  const uint8_t* sp = buf + header_size;
  geist_sampler_params sampler{};
  sampler.struct_size = sizeof(geist_sampler_params);
  sampler.temperature = get<float>(sp, 0);
  sampler.top_k = get<int32_t>(sp, 4);
  sampler.top_p = get<float>(sp, 8);
  sampler.min_p = get<float>(sp, 12);
  sampler.repeat_penalty = get<float>(sp, 16);
  sampler.presence_penalty = get<float>(sp, 20);
  sampler.penalty_last_n = get<int32_t>(sp, 24);
  sampler.seed = get<uint64_t>(sp, 32);
  sampler.frequency_penalty = get<float>(sp, 28);
  Status sv = validate_sampler_params(sampler);
  if (!sv.is_ok()) return check_failed(what, "sampler", "%s", sv.message().c_str());
  uint64_t any = 0;
  for (int w = 0; w < 4; ++w) {
    p.rng.s[w] = get<uint64_t>(sp, 40 + 8 * size_t(w));
    any |= p.rng.s[w];
  }
  if (any == 0) return check_failed(what, "RNG", "%s", "the generator state is all zero (invalid)");
  for (uint32_t i = 0; i < n_tokens; ++i) {
    const int32_t tok = get<int32_t>(p.tokens, 4 * size_t(i));
    if (tok < 0 || tok >= t.n_vocab) {
      return check_failed(what, "token ids",
                          "token %d at position %u is outside the vocabulary [0, %d)", tok, i,
                          t.n_vocab);
    }
  }
  if (owed &&
      static_cast<uint32_t>(get<int32_t>(p.tokens, 4 * size_t(n_tokens - 1))) != owed_token) {
    return check_failed(what, "owed token", "%s", "owed_token differs from the last history token");
  }
  if (has_pin) {
    ParsedSnapshot pin;
    GEIST_RETURN_IF_ERROR(snapshot_parse(p.pin, p.pin_size, t, true, &pin, verify_checksum));
    if (static_cast<uint32_t>(pin.n_tokens) != pin_len ||
        pin.kv_len > static_cast<int32_t>(kv_len) ||
        (pin_len > 0 && std::memcmp(pin.tokens, p.tokens, 4 * size_t(pin_len)) != 0)) {
      return check_failed(what, "pin",
                          "the pin image (%d tokens) is not a prefix of the history (%u tokens, "
                          "pin_len %u)",
                          pin.n_tokens, n_tokens, pin_len);
    }
  }
  p.flags = flags;
  p.n_tokens = static_cast<int32_t>(n_tokens);
  p.kv_len = static_cast<int32_t>(kv_len);
  p.pin_len = static_cast<int32_t>(pin_len);
  p.n_generated = static_cast<int32_t>(n_generated);
  p.sampler = sampler;
  *out = std::move(p);
  return Status::ok();
}

}  // namespace geist
