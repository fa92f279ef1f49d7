#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace geist_server {

namespace {

// The numeric address and port of a socket address, as cpp-httplib writes them.
bool addr_port(const sockaddr_storage& a, std::string* addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    if (inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(v6->sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

}  // namespace

PeerWatch::PeerWatch(const std::string& local_addr, int local_port, const std::string& remote_addr,
                     int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  int match = -1, n_match = 0;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t lp = sizeof peer, ls = sizeof self;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &lp) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &ls) != 0) {
      continue;
    }
    std::string pa, sa;
    int pp = 0, sp = 0;
    if (!addr_port(peer, &pa, &pp) || !addr_port(self, &sa, &sp)) continue;
    if (pp != remote_port || sp != local_port || pa != remote_addr) continue;
    if (!local_addr.empty() && sa != local_addr) continue;
    match = static_cast<int>(fd);
    ++n_match;
  }
  closedir(d);
  if (n_match == 1) fd_ = match;
}

bool PeerWatch::gone() const {
  if (fd_ < 0) return false;
  char c = 0;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace geist_server
