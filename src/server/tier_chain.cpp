#include "server/tier_chain.h"

#include "cache/disk_tier.h"
#include "server/server.h"

namespace geist_server {

bool build_tier_chain(const ServerConfig& cfg, std::vector<std::unique_ptr<geist_cache::Tier>>* out,
                      std::string* err) {
  if (!cfg.cache_dir.empty()) {
    geist_cache::DiskTierConfig dc;
    dc.dir = cfg.cache_dir;
    dc.budget_bytes = cfg.cache_disk_bytes;
    auto disk = geist_cache::DiskTier::open(dc, err);
    if (!disk) {
      *err = "--cache-dir: " + *err;
      return false;
    }
    out->push_back(std::move(disk));
  }
  // The Redis tier (--redis) goes here, below the disk.
  return true;
}

}  // namespace geist_server
