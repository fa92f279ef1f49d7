// The per-model pool of forward workspaces (archs/workspace.h).
#include "archs/workspace.h"

#include <new>
#include <utility>

namespace geist {

Status WorkspacePool::acquire(const Make& make, std::unique_ptr<ArchWorkspace>* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      *out = std::move(idle_.back());
      idle_.pop_back();
      return Status::ok();
    }
  }
  std::unique_ptr<ArchWorkspace> ws;
  GEIST_RETURN_IF_ERROR(make(&ws));
  std::lock_guard<std::mutex> lock(mu_);
  try {
    idle_.reserve(size_ + 1);  // room for every workspace to come back
  } catch (const std::bad_alloc&) {
    return Status(GEIST_E_OOM, "out of memory for the workspace pool");
  }
  ++size_;
  *out = std::move(ws);
  return Status::ok();
}

void WorkspacePool::give_back(std::unique_ptr<ArchWorkspace> ws) {
  if (!ws) return;
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(ws));  // within the capacity acquire reserved: cannot throw
}

void WorkspacePool::drop_idle() {
  std::lock_guard<std::mutex> lock(mu_);
  size_ -= idle_.size();
  idle_.clear();  // keeps the capacity the lent ones come back into
}

size_t WorkspacePool::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

WorkspaceLease& WorkspaceLease::operator=(WorkspaceLease&& o) noexcept {
  if (this != &o) {
    release();
    ws_ = o.ws_;
    pool_ = o.pool_;
    borrowed_ = std::move(o.borrowed_);
    o.ws_ = nullptr;
    o.pool_ = nullptr;
  }
  return *this;
}

Status WorkspaceLease::borrow(WorkspacePool& pool, const WorkspacePool::Make& make,
                              WorkspaceLease* out) {
  std::unique_ptr<ArchWorkspace> ws;
  GEIST_RETURN_IF_ERROR(pool.acquire(make, &ws));
  *out = WorkspaceLease();
  out->ws_ = ws.get();
  out->pool_ = &pool;
  out->borrowed_ = std::move(ws);
  return Status::ok();
}

void WorkspaceLease::release() {
  if (pool_ != nullptr) pool_->give_back(std::move(borrowed_));
  ws_ = nullptr;
  pool_ = nullptr;
  borrowed_.reset();
}

}  // namespace geist
