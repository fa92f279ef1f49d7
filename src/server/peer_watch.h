// Whether the client of a request is still connected, for handlers that block until their
// answer is whole. cpp-httplib 0.11 hands a handler no socket and reports a closed connection
// only to content providers, so a non-streaming completion would run to its end for nobody.
#pragma once

#include <string>

namespace geist_server {

class PeerWatch {
 public:
  // Finds the request's connection among this process's sockets: the one whose local and
  // peer addresses are the request's (unique while its handler runs, which owns it). Finds
  // nothing (gone() stays false) on a system without /proc/self/fd.
  PeerWatch(const std::string& local_addr, int local_port, const std::string& remote_addr,
            int remote_port);
  bool found() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection: a non-consuming, non-blocking read
  // sees end-of-file or an error. Data waiting (a pipelined request) is not a close.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace geist_server
