// A forward's activation scratch (the rows of one micro-batch between its ops) and the
// per-model pool that lends it. The activations do not outlive a forward call, so they need
// not be a session's: on the CPU backends a model keeps a pool of workspaces and lends one to
// each forward (ArchModel::forward, forward_batch), so an idle session costs its KV cache and
// recurrent state and nothing more. A device stream's kernels run asynchronously and its
// recorded graphs (CUDA decode steps) hold the scratch addresses of their session, so there
// each state owns a workspace of its own (ArchState::own_workspace); the forward takes its
// activations from the workspace either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "base/status.h"

namespace geist {

// An architecture's activation buffers for `rows` rows of a micro-batch (a derived type made by
// ArchModel::create_workspace). A forward writes every byte it reads of them first, so
// nothing passes through a workspace from one forward (or session) to the next.
class ArchWorkspace {
 public:
  virtual ~ArchWorkspace() = default;
  int32_t rows = 0;  // rows of a micro-batch its buffers hold
  // A pooled workspace's own stream, the one its buffers were allocated on (destroyed after
  // them: a base member outlives the derived type's buffers); nullptr for a state's own
  // workspace, whose buffers come from the state's stream. Its ops run on the forward's stream;
  // the forward opens this one's access span too (CPU_DEVICE_LOCAL maps the buffers then).
  std::unique_ptr<Stream> stream;
};

// Workspaces lent one per forward call. Thread-safe: concurrent forwards get different
// workspaces, sequential ones reuse the same one (the most recently returned is lent first).
// It grows to the largest number of forwards that ran at once and keeps them until
// drop_idle() or its destruction.
class WorkspacePool {
 public:
  using Make = std::function<Status(std::unique_ptr<ArchWorkspace>*)>;
  // An idle workspace, or a new one from `make` (called without the lock held) when every one
  // is lent. make's failure (GEIST_E_OOM) is returned and nothing is lent.
  Status acquire(const Make& make, std::unique_ptr<ArchWorkspace>* out);
  // Returns a workspace acquire() lent. Never fails (acquire reserved its slot).
  void give_back(std::unique_ptr<ArchWorkspace> ws);
  // Frees the idle workspaces; lent ones come back to the pool as usual.
  void drop_idle();
  // Workspaces that exist now, idle or lent.
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ArchWorkspace>> idle_;  // capacity >= size_, so give_back fits
  size_t size_ = 0;
};

// The workspace of one forward call: borrowed from a pool (returned when the lease ends) or a
// state's own. Move-only.
class WorkspaceLease {
 public:
  WorkspaceLease() = default;
  ~WorkspaceLease() { release(); }
  WorkspaceLease(WorkspaceLease&& o) noexcept
      : ws_(o.ws_), pool_(o.pool_), borrowed_(std::move(o.borrowed_)) {
    o.ws_ = nullptr;
    o.pool_ = nullptr;
  }
  WorkspaceLease& operator=(WorkspaceLease&& o) noexcept;
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;

  // Borrows one from `pool` (make: as WorkspacePool::acquire).
  static Status borrow(WorkspacePool& pool, const WorkspacePool::Make& make, WorkspaceLease* out);
  // A state's own workspace (nothing to return).
  static WorkspaceLease own(ArchWorkspace* ws) {
    WorkspaceLease l;
    l.ws_ = ws;
    return l;
  }
  ArchWorkspace& operator*() const { return *ws_; }
  ArchWorkspace* operator->() const { return ws_; }
  ArchWorkspace* get() const { return ws_; }

 private:
  void release();
  ArchWorkspace* ws_ = nullptr;
  WorkspacePool* pool_ = nullptr;
  std::unique_ptr<ArchWorkspace> borrowed_;
};

}  // namespace geist
