// GET /metrics: Prometheus text exposition of the server's counters.
#include <httplib.h>

#include <sstream>
#include <vector>

#include "server/server.h"

namespace geist_server {

void handle_metrics(Server& s, const httplib::Request&, httplib::Response& res) {
  const geist_serving::SchedulerStats st = s.scheduler().stats();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, double v,
                    const char* labels = "") {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << labels << ' ' << v << '\n';
  };
  o.precision(17);
  metric("geist_http_requests_total", "counter", "HTTP requests received", s.http_requests.load());
  metric("geist_http_errors_total", "counter", "HTTP responses with an error status (4xx, 5xx)",
         s.http_errors.load());
  metric("geist_requests_rejected_total", "counter",
         "generation requests refused because the "
         "queue was full (503)",
         s.rejected_queue_full.load());
  o << "# HELP geist_requests_total generation requests finished, by outcome\n"
       "# TYPE geist_requests_total counter\n"
    << "geist_requests_total{outcome=\"ok\"} " << st.requests_done << '\n'
    << "geist_requests_total{outcome=\"cancelled\"} " << st.requests_cancelled << '\n'
    << "geist_requests_total{outcome=\"error\"} " << st.requests_error << '\n';
  metric("geist_prompt_tokens_total", "counter", "prompt tokens of finished requests",
         st.prompt_tokens);
  metric("geist_cached_tokens_total", "counter", "prompt tokens restored from the prefix cache",
         st.cached_tokens);
  metric("geist_generated_tokens_total", "counter", "tokens generated", st.generated_tokens);
  metric("geist_active_sequences", "gauge", "sequences serving a request", st.active);
  metric("geist_sequences", "gauge", "sequences (--parallel)", s.cfg().sched.n_parallel);
  metric("geist_queue_depth", "gauge", "requests waiting for a sequence", st.queue_depth);
  metric("geist_cache_bytes", "gauge", "bytes of snapshot images in the prefix cache",
         st.cache.bytes);
  metric("geist_cache_budget_bytes", "gauge", "prefix cache RAM budget", st.cache.budget);
  metric("geist_cache_entries", "gauge", "snapshot images in the prefix cache", st.cache.entries);
  metric("geist_cache_lookups_total", "counter", "prefix cache lookups", st.cache.lookups);
  metric("geist_cache_hits_total", "counter", "prefix cache lookups that restored a state",
         st.cache.hits);
  metric("geist_cache_evictions_total", "counter", "prefix cache evictions", st.cache.evictions);
  metric("geist_cache_hit_rate", "gauge", "hits / lookups of the prefix cache",
         st.cache.lookups > 0 ? static_cast<double>(st.cache.hits) / st.cache.lookups : 0.0);
  metric("geist_batch_forwards_total", "counter",
         "batched forwards run by the scheduler (one per step with work)", st.batch_forwards);
  metric("geist_batch_sequences_total", "counter", "sequences carried by the batched forwards",
         st.batch_sequences);
  metric("geist_batch_decode_rows_total", "counter",
         "decoding sequences carried by the batched forwards (each with its owed forward, if any)",
         st.batch_decode_rows);
  metric("geist_batch_prefill_tokens_total", "counter",
         "prompt tokens prefilled in the batched forwards", st.batch_prefill_tokens);
  metric("geist_batch_max_sequences", "gauge", "the most sequences carried by one forward",
         st.batch_max_sequences);
  metric("geist_prompt_tokens_kept_total", "counter",
         "prompt tokens reused in place from a sequence's own session (no restore; also counted "
         "as cached)",
         st.rewound_tokens);
  if (geist_cache::PrefixCache* cache = s.scheduler().cache(); cache && cache->has_tiers()) {
    metric("geist_cache_tier_lookups_total", "counter",
           "RAM misses looked up in the tiers (disk, Redis)", st.cache.tier_lookups);
    metric("geist_cache_tier_hits_total", "counter", "tier lookups that found a usable prefix",
           st.cache.tier_hits);
    metric("geist_cache_tier_hit_tokens_total", "counter", "tokens of the prefixes tiers found",
           st.cache.tier_hit_tokens);
    metric("geist_cache_spill_dropped_total", "counter",
           "entries not written to the tiers: the write-through queue was full",
           st.cache.spill_dropped);
    metric("geist_cache_restore_rejected_total", "counter",
           "cached images the engine refused to restore (a full prefill instead)",
           st.cache.restore_rejected);
    // One family per counter, a sample per tier.
    const std::vector<geist_cache::TierReport> tiers = cache->tier_stats();
    auto family = [&](const char* name, const char* type, const char* help, auto get) {
      o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
      for (const auto& t : tiers) o << name << "{tier=\"" << t.name << "\"} " << get(t) << '\n';
    };
    using R = geist_cache::TierReport;
    family("geist_tier_objects", "gauge", "objects a tier holds",
           [](const R& t) { return t.stats.objects; });
    family("geist_tier_bytes", "gauge", "bytes a tier holds",
           [](const R& t) { return t.stats.bytes; });
    family("geist_tier_budget_bytes", "gauge", "a tier's budget",
           [](const R& t) { return t.stats.budget; });
    family("geist_tier_gets_total", "counter", "reads from a tier",
           [](const R& t) { return t.stats.gets; });
    family("geist_tier_hits_total", "counter", "reads that returned a verified object",
           [](const R& t) { return t.stats.hits; });
    family("geist_tier_corrupt_total", "counter",
           "objects that failed verification (torn, truncated, checksum, wrong key or namespace), "
           "deleted",
           [](const R& t) { return t.stats.corrupt + t.rejected; });
    family("geist_tier_timeouts_total", "counter", "reads that missed their deadline",
           [](const R& t) { return t.stats.timeouts; });
    family("geist_tier_puts_total", "counter", "writes asked of a tier",
           [](const R& t) { return t.stats.puts; });
    family("geist_tier_put_errors_total", "counter",
           "writes that failed (disk full, I/O error, ...): writes pause for a while",
           [](const R& t) { return t.stats.put_errors; });
    family("geist_tier_dropped_total", "counter",
           "writes dropped: the tier's queue was full, writes were paused or the object exceeds "
           "the budget",
           [](const R& t) { return t.stats.dropped; });
    family("geist_tier_available", "gauge", "1: the tier takes writes; 0: paused / circuit open",
           [](const R& t) { return t.stats.available ? 1 : 0; });
  }
  int64_t parked = 0;
  for (const std::string& id : s.sessions.ids()) {
    if (auto ss = s.sessions.get(id)) {
      std::lock_guard<std::mutex> lock(ss->mu);
      parked += ss->parked ? 1 : 0;
    }
  }
  metric("geist_sessions", "gauge", "named sessions", static_cast<double>(s.sessions.ids().size()));
  metric("geist_sessions_parked", "gauge", "named sessions parked out of RAM into the tiers",
         static_cast<double>(parked));
  metric("geist_sessions_parked_total", "counter", "sessions parked (--park-after)",
         static_cast<double>(s.sessions.parked_total.load()));
  metric("geist_sessions_from_tier_total", "counter",
         "sessions unknown to this server taken from a tier's record (a restart, another replica)",
         static_cast<double>(s.sessions.found_in_tier.load()));
  o << "# HELP geist_sessions_resumed_total parked sessions brought back, by how\n"
       "# TYPE geist_sessions_resumed_total counter\n"
    << "geist_sessions_resumed_total{from=\"tier\"} " << s.sessions.resumed_from_tier.load() << '\n'
    << "geist_sessions_resumed_total{from=\"prefill\"} " << s.sessions.resumed_by_prefill.load()
    << '\n';
  o << "# HELP geist_ttft_seconds time from a request's arrival to its first token\n"
       "# TYPE geist_ttft_seconds histogram\n";
  int64_t cum = 0;
  for (size_t i = 0; i < geist_serving::kTtftBoundsMs.size(); ++i) {
    cum += st.ttft_bucket[i];
    o << "geist_ttft_seconds_bucket{le=\"" << geist_serving::kTtftBoundsMs[i] / 1000.0 << "\"} "
      << cum << '\n';
  }
  cum += st.ttft_bucket.back();
  o << "geist_ttft_seconds_bucket{le=\"+Inf\"} " << cum << '\n'
    << "geist_ttft_seconds_sum " << st.ttft_sum_ms / 1000.0 << '\n'
    << "geist_ttft_seconds_count " << st.ttft_count << '\n';
  res.set_content(o.str(), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace geist_server
