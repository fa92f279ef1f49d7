#include "server/tier_chain.h"

#include <cstdio>

#include "cache/disk_tier.h"
#include "cache/redis_tier.h"
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
  if (!cfg.redis_url.empty()) {
    geist_cache::RedisTierConfig rc;
    if (!geist_cache::parse_redis_url(cfg.redis_url, &rc.endpoint, err)) {
      *err = "--redis: " + *err;
      return false;
    }
    if (rc.endpoint.password.empty()) rc.endpoint.password = cfg.redis_password;
    rc.ttl_seconds = cfg.redis_ttl_s;
    // Keys are geist:v1:{m,p}:<entry key>; the entry key already binds the model, KV mode,
    // grid, numerics and cache_salt (cache/entry_codec.h).
    rc.prefix = "geist:v1:";
    rc.log = [](const std::string& line) {
      std::fprintf(stderr, "geist serve: %s\n", line.c_str());
    };
    std::fprintf(stderr, "geist serve: Redis tier at %s (not connected until first use)\n",
                 geist_cache::describe(rc.endpoint).c_str());
    out->push_back(std::make_unique<geist_cache::RedisTier>(std::move(rc)));
  }
  return true;
}

}  // namespace geist_server
