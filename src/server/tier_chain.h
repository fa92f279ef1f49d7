// The prefix cache's lower tiers, built from the server's flags, in order: disk
// (--cache-dir / --cache-disk), then Redis (--redis). docs/SERVER.md "Tiers".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/tier.h"

namespace geist_server {

struct ServerConfig;

// Appends the tiers `cfg` asks for to *out, top first; false with *err when one cannot start.
bool build_tier_chain(const ServerConfig& cfg, std::vector<std::unique_ptr<geist_cache::Tier>>* out,
                      std::string* err);

}  // namespace geist_server
