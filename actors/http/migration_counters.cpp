#include "actors/http/migration_counters.hpp"

#include <fmt/format.h>

namespace kvr::ingress {

std::string_view migration_counters::name(cause c) {
  switch (c) {
    case cause::broken: return "broken";
    case cause::timed_out: return "timed_out";
    case cause::error_event: return "error_event";
    case cause::worker_failed: return "worker_failed";
    case cause::count: break;
  }
  return "unknown";
}

void migration_counters::started(cause why, std::uint32_t carried_tokens, bool ids_from_text) {
  if (ids_from_text) from_text_.fetch_add(1, std::memory_order_relaxed);
  started_[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  std::size_t bucket = 0;
  while (bucket < carried_buckets_.size() && carried_tokens > carried_buckets_[bucket]) ++bucket;
  carried_[bucket].fetch_add(1, std::memory_order_relaxed);
  carried_sum_.fetch_add(carried_tokens, std::memory_order_relaxed);
}

void migration_counters::write_started_help(std::string& out) {
  out += "# HELP kvrouter_migrations_total Streamed answers continued on another worker after theirs failed mid-way, by what broke.\n"
         "# TYPE kvrouter_migrations_total counter\n";
}

void migration_counters::write_started(std::string& out, std::string_view set, std::string_view model) const {
  for (std::size_t c = 0; c < started_.size(); ++c)
    out += fmt::format("kvrouter_migrations_total{{set=\"{}\",model=\"{}\",reason=\"{}\"}} {}\n", set, model,
                       name(static_cast<cause>(c)), started_[c].load(std::memory_order_relaxed));
}

void migration_counters::write_carried_help(std::string& out) {
  out += "# HELP kvrouter_migration_carried_tokens Generated tokens a continuation carried over to its new worker.\n"
         "# TYPE kvrouter_migration_carried_tokens histogram\n";
}

void migration_counters::write_carried(std::string& out, std::string_view set, std::string_view model) const {
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < carried_.size(); ++b) {
    cumulative += carried_[b].load(std::memory_order_relaxed);
    const std::string le = b < carried_buckets_.size() ? std::to_string(carried_buckets_[b]) : std::string("+Inf");
    out += fmt::format("kvrouter_migration_carried_tokens_bucket{{set=\"{}\",model=\"{}\",le=\"{}\"}} {}\n", set, model, le, cumulative);
  }
  out += fmt::format("kvrouter_migration_carried_tokens_sum{{set=\"{}\",model=\"{}\"}} {}\n", set, model,
                     carried_sum_.load(std::memory_order_relaxed));
  out += fmt::format("kvrouter_migration_carried_tokens_count{{set=\"{}\",model=\"{}\"}} {}\n", set, model, cumulative);
}

void migration_counters::write_from_text_help(std::string& out) {
  out += "# HELP kvrouter_migration_ids_from_text_total Continuations whose token ids kvrouter rebuilt from the answer's text (the engine reported none).\n"
         "# TYPE kvrouter_migration_ids_from_text_total counter\n";
}

void migration_counters::write_from_text(std::string& out, std::string_view set, std::string_view model) const {
  out += fmt::format("kvrouter_migration_ids_from_text_total{{set=\"{}\",model=\"{}\"}} {}\n", set, model,
                     from_text_.load(std::memory_order_relaxed));
}

}  // namespace kvr::ingress
