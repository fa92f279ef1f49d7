// C ABI: session snapshots, snapshot files and pinned prefixes (geist_util.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "api/handles.h"
#include "geist/geist_snapshot.h"

using geist::Status;
using geist::api::guarded;

namespace {

template <class F>
geist_status session_call(const geist_session* s, F&& f) noexcept {
  if (s == nullptr || !s->session) return GEIST_E_INVALID_ARG;
  return guarded(f, [s](const std::string& m) { s->set_error(m); });
}

Status io_error(const char* what, const std::string& path, int err) {
  return Status::error(GEIST_E_IO, "%s %s: %s", what, path.c_str(), std::strerror(err));
}

// Writes all of data to fd, retrying short writes and EINTR.
bool write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// temp file in the target's directory, fsync, rename over the target, fsync the directory:
// a crash at any point leaves either the old file or the complete new one.
Status write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmpl = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error("cannot create a temporary file next to", path, errno);
  if (!write_all(fd, bytes.data(), bytes.size()) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    return io_error("cannot write", tmpl, err);
  }
  if (::close(fd) != 0 || ::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    return io_error("cannot replace", path, err);
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {  // best effort: the rename itself already happened atomically
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status read_file(const std::string& path, std::vector<uint8_t>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status::error(GEIST_E_FILE_NOT_FOUND, "snapshot file %s does not exist", path.c_str());
    }
    return io_error("cannot open", path, errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    return Status::error(GEIST_E_IO, "%s is not a readable regular file (%s)", path.c_str(),
                         std::strerror(err));
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t r = ::read(fd, out->data() + done, out->size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : EIO;
      ::close(fd);
      return io_error("cannot read", path, err);
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace

extern "C" {

geist_status geist_session_snapshot_size(geist_session* session, size_t* out_size) {
  return session_call(session, [&]() -> Status {
    if (out_size == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_size is NULL");
    return session->session->snapshot_size(out_size);
  });
}

geist_status geist_session_snapshot(geist_session* session, void* buf, size_t cap,
                                    size_t* out_written) {
  return session_call(session, [&]() -> Status {
    if (out_written == nullptr) return Status::error(GEIST_E_INVALID_ARG, "out_written is NULL");
    return session->session->snapshot(static_cast<uint8_t*>(buf), cap, out_written);
  });
}

geist_status geist_session_restore(geist_session* session, const void* buf, size_t size) {
  return session_call(session, [&]() -> Status {
    return session->session->restore(static_cast<const uint8_t*>(buf), size);
  });
}

geist_status geist_session_restore_trusted(geist_session* session, const void* buf, size_t size) {
  return session_call(session, [&]() -> Status {
    return session->session->restore(static_cast<const uint8_t*>(buf), size, false);
  });
}

geist_status geist_session_save_file(geist_session* session, const char* path) {
  return session_call(session, [&]() -> Status {
    if (path == nullptr) return Status::error(GEIST_E_INVALID_ARG, "path is NULL");
    size_t size = 0;
    GEIST_RETURN_IF_ERROR(session->session->snapshot_size(&size));
    std::vector<uint8_t> bytes(size);
    size_t written = 0;
    GEIST_RETURN_IF_ERROR(session->session->snapshot(bytes.data(), size, &written));
    return write_file_atomic(path, bytes);
  });
}

geist_status geist_session_load_file(geist_session* session, const char* path) {
  return session_call(session, [&]() -> Status {
    if (path == nullptr) return Status::error(GEIST_E_INVALID_ARG, "path is NULL");
    std::vector<uint8_t> bytes;
    GEIST_RETURN_IF_ERROR(read_file(path, &bytes));
    return session->session->restore(bytes.data(), bytes.size()).with_prefix(path);
  });
}

geist_status geist_session_pin_prefix(geist_session* session) {
  return session_call(session, [&]() -> Status { return session->session->pin_prefix(); });
}

geist_status geist_session_reset_to_prefix(geist_session* session) {
  return session_call(session, [&]() -> Status { return session->session->reset_to_prefix(); });
}

int32_t geist_session_pin_len(const geist_session* session) {
  if (session == nullptr || !session->session) return -1;
  return session->session->pin_len();
}

}  // extern "C"
