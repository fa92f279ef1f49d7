// GET /metrics: Prometheus text exposition of the server's counters.
#include <httplib.h>

#include <sstream>

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
