// GET /metrics: the engine's counters and the requests' latencies in Prometheus' text format.
#include <fmt/format.h>

#include "server_state.hpp"

namespace zoo::server {

// Prometheus' text format: counters, gauges, histograms.
std::string OpenAiServer::Impl::metrics_text() const {
  const auto c = worker->counters();
  std::string out;
  const auto add = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  add("zoo_http_requests_total", "counter", "HTTP requests received", requests_total.load());
  add("zoo_http_request_errors_total", "counter", "HTTP requests answered with an error before generating",
      requests_failed.load());
  add("zoo_requests_finished_total", "counter", "Generation requests answered in full", metrics.finished.load());
  add("zoo_requests_failed_total", "counter", "Generation requests that failed while running", metrics.failed.load());
  add("zoo_requests_cancelled_total", "counter", "Generation requests whose client went away", metrics.cancelled.load());
  add("zoo_requests_running", "gauge", "Sequences decoding", c.running);
  add("zoo_requests_waiting", "gauge", "Sequences waiting for a slot or KV pages (the queue)", c.waiting);
  add("zoo_prompt_tokens_total", "counter", "Prompt tokens computed (recomputed after preemption included)",
      c.prompt_tokens);
  add("zoo_generation_tokens_total", "counter", "Tokens generated", c.generated_tokens);
  add("zoo_engine_steps_total", "counter", "Forward steps", c.steps);
  add("zoo_engine_step_seconds_total", "counter", "Seconds in engine steps", c.step_seconds);
  add("zoo_engine_host_seconds_total", "counter",
      "Of those, the host's scheduling before and picks after each forward pass (the device waits)", c.host_seconds);
  add("zoo_engine_submit_seconds_total", "counter",
      "Of those, preparing and launching each forward pass (the device runs what is launched meanwhile)",
      c.submit_seconds);
  add("zoo_engine_device_seconds_total", "counter",
      "Of those, the device's own time from each step's first copy to its last (CUDA; 0 where not "
      "measured)",
      c.device_seconds);
  add("zoo_preemptions_total", "counter", "Sequences preempted (recomputed later) when KV pages ran out",
      c.preemptions);
  add("zoo_kv_pages_used", "gauge", "KV cache pages in use (the fullest group)", c.pages_used);
  add("zoo_kv_pages_total", "gauge", "KV cache pages in the pool", c.pages_capacity);
  add("zoo_prefix_cache_queries_total", "counter", "Admissions that looked for a cached prefix", c.prefix_queries);
  add("zoo_prefix_cache_hits_total", "counter", "Admissions that reused a cached prefix", c.prefix_hits);
  add("zoo_prefix_cache_hit_tokens_total", "counter", "Prompt tokens the prefix cache supplied", c.prefix_hit_tokens);
  if (audio) {
    add("zoo_speech_requests_finished_total", "counter", "Speech requests answered in full", speech.finished.load());
    add("zoo_speech_requests_failed_total", "counter", "Speech requests that failed", speech.failed.load());
    add("zoo_speech_requests_cancelled_total", "counter", "Speech requests whose client went away",
        speech.cancelled.load());
    add("zoo_speech_audio_samples_total", "counter", "Audio samples decoded for speech requests",
        speech.audio_samples.load());
    add("zoo_speech_reference_cache_hits_total", "counter", "Reference audio found already encoded",
        references.hits());
  }
  out += metrics.ttft.text("zoo_time_to_first_token_seconds", "From the request's arrival to its first token");
  out += metrics.itl.text("zoo_inter_token_latency_seconds", "Between two tokens of one sequence");
  out += metrics.e2e.text("zoo_request_latency_seconds", "From the request's arrival to its last token");
  return out;
}

}  // namespace zoo::server
