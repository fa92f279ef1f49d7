#include "chat_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace geist_cli {

namespace {

constexpr char kMagic[8] = {'G', 'E', 'I', 'S', 'T', 'C', 'H', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHead = 8 + 4 + 4 + 8;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

void put_le(std::string* b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

bool write_all(FILE* f, const void* p, size_t n) { return std::fwrite(p, 1, n, f) == n; }

}  // namespace

bool write_chat_file(const std::string& path, const std::string& json,
                     const std::vector<std::vector<uint8_t>>& images, std::string* err) {
  std::string head(kMagic, sizeof kMagic);
  put_le(&head, kVersion, 4);
  put_le(&head, images.size(), 4);
  put_le(&head, json.size(), 8);
  const std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) {
    *err = tmp + ": " + std::strerror(errno);
    return false;
  }
  bool ok =
      write_all(f.get(), head.data(), head.size()) && write_all(f.get(), json.data(), json.size());
  for (const std::vector<uint8_t>& img : images) {
    std::string len;
    put_le(&len, img.size(), 8);
    ok = ok && write_all(f.get(), len.data(), len.size()) &&
         write_all(f.get(), img.data(), img.size());
  }
  ok = ok && std::fflush(f.get()) == 0;
  const int write_errno = errno;
  ok = std::fclose(f.release()) == 0 && ok;
  if (!ok) {
    *err = tmp + ": write failed: " + std::strerror(write_errno);
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *err = path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool read_chat_file(const std::string& path, std::string* json,
                    std::vector<std::vector<uint8_t>>* images, std::string* err) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    *err = std::strerror(errno);
    return false;
  }
  std::vector<uint8_t> data;
  uint8_t buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) data.insert(data.end(), buf, buf + n);
  if (std::ferror(f.get())) {
    *err = "read failed";
    return false;
  }
  if (data.size() < kHead || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    *err = "not a geist chat file (no GEISTCHT header)";
    return false;
  }
  const uint64_t version = get_le(data.data() + 8, 4);
  if (version != kVersion) {
    *err = "chat file version " + std::to_string(version) + " (this geist reads 1)";
    return false;
  }
  const uint64_t n_images = get_le(data.data() + 12, 4);
  const uint64_t json_len = get_le(data.data() + 16, 8);
  if (json_len > data.size() - kHead) {
    *err = "truncated chat file (messages)";
    return false;
  }
  json->assign(reinterpret_cast<const char*>(data.data()) + kHead, json_len);
  size_t at = kHead + json_len;
  images->clear();
  for (uint64_t i = 0; i < n_images; ++i) {
    if (data.size() - at < 8) {
      *err = "truncated chat file (state " + std::to_string(i) + ")";
      return false;
    }
    const uint64_t len = get_le(data.data() + at, 8);
    at += 8;
    if (len > data.size() - at) {
      *err = "truncated chat file (state " + std::to_string(i) + ")";
      return false;
    }
    images->emplace_back(data.begin() + static_cast<std::ptrdiff_t>(at),
                         data.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  if (at != data.size()) {
    *err = "trailing bytes after the last state";
    return false;
  }
  return true;
}

}  // namespace geist_cli
