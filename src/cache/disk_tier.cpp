#include "cache/disk_tier.h"

#include "cache/image_buffer.h"
#include "cache/le_bytes.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace geist_cache {

namespace {

constexpr char kFileMagic[8] = {'G', 'E', 'I', 'S', 'T', 'D', 'F', '1'};
constexpr uint32_t kFileVersion = 1;
constexpr size_t kFileHeader = 24;  // magic, version, key_len, payload_len
constexpr size_t kFileChecksum = 16;
constexpr const char* kSuffix = ".gobj";
constexpr const char* kTmpSuffix = ".gobj.tmp";
constexpr size_t kMaxFileName = 240;

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool write_all(int fd, struct iovec* iov, int n) {
  while (n > 0) {
    const ssize_t w = ::writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    size_t left = static_cast<size_t>(w);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

// The header of a file of `key` that is `size` bytes long: its payload length when magic,
// version, key and lengths check (the checksum is checked by the callers).
bool parse_header(const uint8_t* head, size_t size, const std::string& key, uint64_t* len) {
  if (size < kFileHeader + key.size() + kFileChecksum) return false;
  if (std::memcmp(head, kFileMagic, 8) != 0 || get_u32(head + 8) != kFileVersion) return false;
  const uint64_t key_len = get_u32(head + 12);
  *len = get_u64(head + 16);
  if (key_len != key.size() || *len > size ||
      kFileHeader + key_len + *len + kFileChecksum != size) {
    return false;
  }
  return std::memcmp(head + kFileHeader, key.data(), key.size()) == 0;
}

bool read_exact(int fd, uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, dst + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

enum class ReadResult { ok, gone, bad };

// Reads and verifies the file of `key`, the payload straight into *out (one copy).
ReadResult read_object(const std::string& path, const std::string& key, std::vector<uint8_t>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? ReadResult::gone : ReadResult::bad;
  struct stat sb;
  std::vector<uint8_t> head(kFileHeader + key.size());
  uint8_t sum[kFileChecksum];
  uint64_t len = 0;
  bool ok = ::fstat(fd, &sb) == 0 && sb.st_size >= 0 && read_exact(fd, head.data(), head.size()) &&
            parse_header(head.data(), static_cast<size_t>(sb.st_size), key, &len);
  if (ok) {
    fresh_buffer(out, len);
    ok = read_exact(fd, out->data(), len) && read_exact(fd, sum, sizeof sum);
  }
  ::close(fd);
  if (!ok) return ReadResult::bad;
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, head.data(), head.size());
  XXH3_128bits_update(&state, out->data(), out->size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return get_u64(sum) == h.low64 && get_u64(sum + 8) == h.high64 ? ReadResult::ok : ReadResult::bad;
}

bool valid_name_char(unsigned char c) {
  return std::isalnum(c) || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool disk_file_payload(const uint8_t* f, size_t size, const std::string& key, size_t* payload_off,
                       size_t* payload_len) {
  uint64_t len = 0;
  if (f == nullptr || !parse_header(f, size, key, &len)) return false;
  const XXH128_hash_t h = XXH3_128bits(f, size - kFileChecksum);
  const uint8_t* sum = f + size - kFileChecksum;
  if (get_u64(sum) != h.low64 || get_u64(sum + 8) != h.high64) return false;
  *payload_off = kFileHeader + key.size();
  *payload_len = len;
  return true;
}

std::string encode_file_name(const std::string& key) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    if (valid_name_char(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out + kSuffix;
}

bool decode_file_name(const std::string& name, std::string* key) {
  if (!ends_with(name, kSuffix)) return false;
  const size_t n = name.size() - std::strlen(kSuffix);
  if (n == 0) return false;
  std::string k;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c == '%') {
      if (i + 2 >= n) return false;
      auto val = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      const int hi = val(name[i + 1]), lo = val(name[i + 2]);
      if (hi < 0 || lo < 0) return false;
      const unsigned char d = static_cast<unsigned char>(hi * 16 + lo);
      if (valid_name_char(d)) return false;  // not what encode_file_name writes
      k.push_back(static_cast<char>(d));
      i += 2;
    } else if (valid_name_char(c)) {
      k.push_back(static_cast<char>(c));
    } else {
      return false;
    }
  }
  *key = std::move(k);
  return true;
}

DiskTier::DiskTier(const DiskTierConfig& cfg) : cfg_(cfg) {
  st_.budget = static_cast<int64_t>(cfg.budget_bytes);
}

std::unique_ptr<DiskTier> DiskTier::open(const DiskTierConfig& cfg, std::string* err) {
  if (cfg.dir.empty()) {
    *err = "the cache directory is empty";
    return nullptr;
  }
  // mkdir -p
  for (size_t i = 1; i <= cfg.dir.size(); ++i) {
    if (i == cfg.dir.size() || cfg.dir[i] == '/') {
      const std::string part = cfg.dir.substr(0, i);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
        *err = "cannot create '" + part + "': " + std::strerror(errno);
        return nullptr;
      }
    }
  }
  struct stat sb;
  if (::stat(cfg.dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode) ||
      ::access(cfg.dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    *err = "'" + cfg.dir + "' is not a readable and writable directory";
    return nullptr;
  }
  std::unique_ptr<DiskTier> t(new DiskTier(cfg));
  t->scan();
  t->thread_ = std::thread([p = t.get()] { p->writer(); });
  return t;
}

DiskTier::~DiskTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string DiskTier::path_of(const std::string& key) const {
  const std::string name = encode_file_name(key);
  if (name.size() > kMaxFileName) return "";
  return cfg_.dir + "/" + name;
}

void DiskTier::scan() {
  DIR* d = ::opendir(cfg_.dir.c_str());
  if (d == nullptr) return;
  struct Found {
    std::string key;
    int64_t bytes;
    struct timespec mtime;
  };
  std::vector<Found> found;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = cfg_.dir + "/" + name;
    if (ends_with(name, kTmpSuffix)) {  // a write a crash interrupted
      ::unlink(path.c_str());
      continue;
    }
    std::string key;
    if (!ends_with(name, kSuffix)) continue;  // not ours: left alone
    struct stat sb;
    if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (!decode_file_name(name, &key)) {
      ::unlink(path.c_str());
      ++st_.corrupt;
      continue;
    }
    found.push_back({key, static_cast<int64_t>(sb.st_size), sb.st_mtim});
  }
  ::closedir(d);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  std::lock_guard<std::mutex> lock(mu_);
  for (const Found& f : found) index_locked(f.key, f.bytes);  // newest ends up first
  while (bytes_ > static_cast<int64_t>(cfg_.budget_bytes) && !lru_.empty()) {
    const std::string victim = lru_.back();
    ::unlink(path_of(victim).c_str());
    unindex_locked(victim);
  }
}

void DiskTier::index_locked(const std::string& key, int64_t file_bytes) {
  unindex_locked(key);
  lru_.push_front(key);
  index_[key] = Item{file_bytes, lru_.begin()};
  bytes_ += file_bytes;
}

void DiskTier::unindex_locked(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second.file_bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

bool DiskTier::paused_locked() const { return std::chrono::steady_clock::now() < paused_until_; }

bool DiskTier::put(const std::string& key, Image object) {
  std::lock_guard<std::mutex> lock(mu_);
  ++st_.puts;
  const size_t file_bytes = kFileHeader + key.size() + object->size() + kFileChecksum;
  if (path_of(key).empty() || file_bytes > cfg_.budget_bytes) {
    ++st_.dropped;  // a key no file can be named by, or an object larger than the budget
    return false;
  }
  if (index_.count(key) != 0 || pending_.count(key) != 0) return true;  // content-addressed
  if (stop_ || paused_locked() || queue_bytes_ + object->size() > cfg_.queue_bytes) {
    ++st_.dropped;
    return false;
  }
  queue_bytes_ += object->size();
  pending_[key] = object;
  queue_.emplace_back(key, std::move(object));
  cv_.notify_all();
  return true;
}

bool DiskTier::write_file(const std::string& key, const std::vector<uint8_t>& object,
                          std::string* err) {
  const std::string path = path_of(key),
                    tmp = path.substr(0, path.size() - std::strlen(kSuffix)) + kTmpSuffix;
  uint8_t head[kFileHeader];
  std::memcpy(head, kFileMagic, 8);
  put_u32(head + 8, kFileVersion);
  put_u32(head + 12, static_cast<uint32_t>(key.size()));
  put_u64(head + 16, object.size());
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, head, sizeof head);
  XXH3_128bits_update(&state, key.data(), key.size());
  XXH3_128bits_update(&state, object.data(), object.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  uint8_t sum[kFileChecksum];
  put_u64(sum, h.low64);
  put_u64(sum + 8, h.high64);
  // Writes paused because the directory vanished resume once it is back.
  ::mkdir(cfg_.dir.c_str(), 0755);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = std::strerror(errno);
    return false;
  }
  struct iovec iov[4] = {{head, sizeof head},
                         {const_cast<char*>(key.data()), key.size()},
                         {const_cast<uint8_t*>(object.data()), object.size()},
                         {sum, sizeof sum}};
  bool ok = write_all(fd, iov, 4) && ::fsync(fd) == 0;
  if (!ok) *err = std::strerror(errno);
  if (::close(fd) != 0 && ok) {
    ok = false;
    *err = std::strerror(errno);
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    *err = std::strerror(errno);
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return false;
  }
  const int dfd = ::open(cfg_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself durable
    ::close(dfd);
  }
  return true;
}

void DiskTier::writer() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    auto [key, object] = std::move(queue_.front());
    queue_.pop_front();
    queue_bytes_ -= object->size();
    auto pit = pending_.find(key);
    if (pit == pending_.end() || pit->second != object) {  // erased meanwhile
      if (queue_.empty()) idle_cv_.notify_all();
      continue;
    }
    if (paused_locked()) {
      ++st_.dropped;
    } else {
      const int64_t file_bytes =
          static_cast<int64_t>(kFileHeader + key.size() + object->size() + kFileChecksum);
      std::vector<std::string> victims;
      while (!lru_.empty() && bytes_ + file_bytes > static_cast<int64_t>(cfg_.budget_bytes)) {
        victims.push_back(lru_.back());
        unindex_locked(lru_.back());
      }
      writing_ = true;
      lock.unlock();
      for (const std::string& v : victims) ::unlink(path_of(v).c_str());
      std::string err;
      const bool ok = write_file(key, *object, &err);
      lock.lock();
      writing_ = false;
      if (ok) {
        // An erase while it was written wins: the file goes.
        if (pending_.count(key) != 0 && pending_[key] == object) {
          index_locked(key, file_bytes);
        } else {
          ::unlink(path_of(key).c_str());
        }
      } else {
        ++st_.put_errors;
        paused_until_ =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg_.retry_after_ms);
      }
    }
    if (auto it = pending_.find(key); it != pending_.end() && it->second == object) {
      pending_.erase(it);
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void DiskTier::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

Image DiskTier::get(const std::string& key, Deadline deadline) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.gets;
    if (auto it = pending_.find(key); it != pending_.end()) {
      ++st_.hits;
      return it->second;
    }
    if (index_.count(key) == 0) return nullptr;
    if (std::chrono::steady_clock::now() >= deadline) {
      ++st_.timeouts;
      return nullptr;
    }
    path = path_of(key);
  }
  std::vector<uint8_t> payload;
  const ReadResult r = read_object(path, key, &payload);
  if (r != ReadResult::ok) {
    std::lock_guard<std::mutex> lock(mu_);
    unindex_locked(key);
    if (r == ReadResult::bad) {  // evicted meanwhile is a plain miss; anything else: a bad file
      ++st_.corrupt;
      ::unlink(path.c_str());
    }
    return nullptr;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recency survives a restart
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.hits;
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
  }
  return std::make_shared<const std::vector<uint8_t>>(std::move(payload));
}

std::vector<bool> DiskTier::contains(const std::vector<std::string>& keys, Deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = index_.count(keys[i]) != 0 || pending_.count(keys[i]) != 0;
  }
  return out;
}

void DiskTier::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(key);  // its queued write is skipped
  if (index_.count(key) != 0) {
    unindex_locked(key);
    ::unlink(path_of(key).c_str());
  }
}

TierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = st_;
  s.objects = static_cast<int64_t>(index_.size());
  s.bytes = bytes_;
  s.available = !paused_locked();
  return s;
}

}  // namespace geist_cache
