#include "actors/http/request_exchange.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <iostream>

#include <fmt/format.h>
#include <xxhash.h>

#include "actors/http/http_fields.hpp"
#include "core/disagg/pd_requests.hpp"

namespace kvr::ingress {
namespace {

[[nodiscard]] double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

}  // namespace

request_exchange::request_exchange(http_ingress::impl& server, io_thread& thread, tcp::socket& client_socket,
                                   exchange_client& client)
    : server_(server),
      thread_(thread),
      client_(client),
      router_(thread, server.probe, {server.settings.max_retries, server.settings.max_routing_in_flight}),
      stream_(server, thread, client_socket, *this) {}

// -- routing ---------------------------------------------------------------------------------

std::optional<api_error> request_exchange::begin(std::shared_ptr<const routing_table> table, const worker_set_route& set,
                                                 routing_request request,
                                                 const http::request<http::string_body>& http_request) {
  http_request_ = &http_request;
  if (auto refused = beyond_limits(request)) return refused;
  auto options = routing_options(set);
  if (!options) return options.error();
  if (set.config.session_affinity_ttl_secs > 0) options->session = session_key(request);
  options->disaggregate = splits_into_legs(set, request);
  const std::uint64_t id = server_.next_request_id++;
  take_request_id(id);
  router_.start(std::move(table), set, std::make_shared<const routing_request>(std::move(request)), id, *options,
                [this] { return client_.decision_sink(); });
  start_access_record();
  state_ = state::routing;
  return std::nullopt;
}

/// `x-kvrouter-dry-run: 1`, `x-kvrouter-priority: high | normal | low` (normal if absent) and
/// `x-kvrouter-worker: NAME` (a worker of `set`).
std::expected<request_options, api_error> request_exchange::routing_options(const worker_set_route& set) const {
  const auto& request = *http_request_;
  request_options options;
  const auto dry_run = request.find(dry_run_header);
  options.dry_run = dry_run != request.end() && dry_run->value() == "1";
  if (const auto pinned = request.find(worker_header); pinned != request.end()) {
    const std::string_view name(pinned->value().data(), pinned->value().size());
    const auto it = std::find_if(set.workers.begin(), set.workers.end(), [&](const worker_target& w) { return w.name == name; });
    if (it == set.workers.end())
      return std::unexpected(api_error{
          api_errc::invalid_request,
          fmt::format("x-kvrouter-worker: the set of model {} has no worker \"{}\"", set.model, name.substr(0, 128)), {}});
    options.pinned_worker = static_cast<std::uint32_t>(it - set.workers.begin());
  }
  const auto given = request.find(priority_header);
  if (given == request.end()) return options;
  const std::string_view value(given->value().data(), given->value().size());
  const auto priority = parse_priority(value);
  if (!priority)
    return std::unexpected(api_error{
        api_errc::invalid_request, fmt::format("x-kvrouter-priority must be high, normal or low (got \"{}\")", value.substr(0, 64)),
        {}});
  options.priority = *priority;
  return options;
}

/// Session affinity's key: the session header's value, else the body's `user`; 0 = neither.
std::uint64_t request_exchange::session_key(const routing_request& request) const {
  std::string_view name = request.user;
  if (const auto header = http_request_->find(server_.settings.session_header); header != http_request_->end())
    name = std::string_view(header->value().data(), header->value().size());
  if (name.empty()) return 0;
  const std::uint64_t key = XXH3_64bits(name.data(), name.size());
  return key == 0 ? 1 : key;
}

/// The client's `X-Request-Id` if it is a sane one (1-128 visible ASCII characters), else one
/// of kvrouter's own, `kvr-TAG-N`; it goes to the worker and back to the client.
void request_exchange::take_request_id(std::uint64_t id) {
  const auto given = http_request_->find("x-request-id");
  client_sent_id_ = false;
  if (given != http_request_->end() && !given->value().empty() && given->value().size() <= 128 &&
      std::ranges::all_of(given->value(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    request_id_.assign(given->value().data(), given->value().size());
    client_sent_id_ = true;
    return;
  }
  request_id_ = fmt::format("kvr-{:010x}-{}", server_.instance_tag, id);
}

/// Work a request may ask of the router is bounded: its images, and its token-id prompt.
std::optional<api_error> request_exchange::beyond_limits(const routing_request& request) const {
  const std::size_t images = request.messages.image_urls.size();
  if (images > server_.settings.max_images_per_request)
    return api_error{api_errc::invalid_request,
                     fmt::format("the request has {} images, more than the {} this router accepts", images,
                                 server_.settings.max_images_per_request),
                     "messages"};
  if (request.prompt_token_ids.size() > server_.settings.max_prompt_tokens)
    return api_error{api_errc::invalid_request,
                     fmt::format("the prompt is {} tokens long, more than the {} this router accepts",
                                 request.prompt_token_ids.size(), server_.settings.max_prompt_tokens),
                     "prompt"};
  return std::nullopt;
}

/// Completions and chats of a disaggregated set run as two legs, and SGLang's `/generate`.
/// vLLM runs requests asking for several choices aggregated (as its own proxy does); an SGLang
/// decode worker serves nothing without a bootstrap room, so SGLang splits them too.
bool request_exchange::splits_into_legs(const worker_set_route& set, const routing_request& request) const {
  if (!set.disaggregation) return false;
  const bool generative = request.endpoint == api_endpoint::chat_completions || request.endpoint == api_endpoint::completions;
  if (set.disaggregation->protocol == pd_protocol::sglang) return generative || request.endpoint == api_endpoint::generate;
  return generative && !asks_for_several_choices(http_request_->body());
}

void request_exchange::act(route_verdict verdict) {
  switch (verdict.what) {
    case route_verdict::kind::wait: return;
    case route_verdict::kind::answer:
      if (client_gone_) {  // e.g. withdrawn from the queue
        log_access("client_left", 0, 0);
        return client_.client_left();
      }
      if (continuing_) return end_unfinished_stream(migration_refusal::no_worker, "no other worker could continue the answer");
      log_access(verdict.status == 200 ? "dry_run" : "router_error", verdict.status, verdict.body.size());
      return client_.answer(verdict.status, std::move(verdict.body));
    case route_verdict::kind::proxy:
      if (client_gone_) {  // the client left while the request was being routed
        router_.finished();
        log_access("client_left", 0, 0);
        return client_.client_left();
      }
      if (continuing_) return start_continuation_leg();
      if (router_.prefill_worker() != nullptr) {
        shape_ = router_.set().disaggregation->protocol == pd_protocol::sglang ? static_cast<upstream_shape*>(&sglang_)
                                                                               : &vllm_nixl_;
      } else {
        shape_ = &aggregated_;
        if (router_.set().disaggregation)
          server_.probe.pd_ran(router_.local_prefill() ? ingress_probe::pd_path::local : ingress_probe::pd_path::aggregated_fallback);
      }
      return shape_->start();
  }
}

// -- legs ------------------------------------------------------------------------------------

void request_exchange::start_answering_leg(const std::string* body) {
  state_ = state::proxying;
  decode_leg_ = body != nullptr;
  decode_first_bytes_seen_ = false;
  if (decode_leg_) decode_started_ = clock_type::now();
  proxy_leg leg{.body = body};
  // A request run whole on one worker of an aggregated set may be continued on another should
  // its stream break (docs/disaggregation.md says why not yet a disaggregated set's), and an
  // engine that answers it unavailable (502, 503, 504) is passed over like one that refused it.
  if (shape_ == &aggregated_ && !router_.pinned() && !router_.set().disaggregation) {
    migration_.arm(http_request_->body(), router_.request(), router_.set().config);
    if (migration_.armed()) leg = {.body = migration_.sent_body(), .filter = &migration_, .collect = migration_.whole()};
    leg.unavailable_is_failure = true;
  } else {
    migration_.reset();
  }
  stream_.start(router_.worker(), *http_request_, client_.keeps_connection(),
                {.request_id = request_id_,
                 .client_sent_id = client_sent_id_,
                 .decision_headers = !server_.settings.no_decision_headers,
                 .worker = router_.worker().name,
                 .overlap_blocks = router_.overlap_blocks()},
                leg);
}

void request_exchange::start_prefill_leg(std::string body, bool alone, leg_done done) {
  const worker_target& worker = *router_.prefill_worker();
  std::string head = upstream_request_head(worker, *http_request_, body.size(), request_id_, client_sent_id_,
                                           server_.settings.forward_authorization);
  if (alone) {
    state_ = state::prefilling;
    client_.clear_deadline();  // the leg has its own (--pd-timeout-secs)
  }
  prefill_started_ = clock_type::now();
  // Held here too: a leg failing at once may retry, and the retry replaces prefill_ while this
  // leg's start() is still on the stack.
  const auto leg = std::make_shared<upstream_exchange>(server_, thread_);
  prefill_ = leg;
  leg->start(worker, std::move(head), std::move(body), server_.settings.pd_timeout, client_.keep_alive(),
             [this, done = std::move(done)](leg_outcome outcome) {
               if (outcome.what == leg_outcome::kind::answered) server_.probe.pd_prefill_took(seconds_since(prefill_started_));
               done(std::move(outcome));
             });
}

void request_exchange::cancel_prefill_leg() {
  if (prefill_ && prefill_->running()) prefill_->cancel();
}

// -- proxy_stream::owner ---------------------------------------------------------------------

void request_exchange::on_first_bytes() {
  if (!first_bytes_) first_bytes_ = clock_type::now();
  if (decode_leg_ && !std::exchange(decode_first_bytes_seen_, true))
    server_.probe.pd_decode_first_bytes_after(seconds_since(decode_started_));
  router_.first_token();
}

void request_exchange::on_answer_received() {
  if (decode_leg_ && !std::exchange(decode_first_bytes_seen_, true))  // the whole answer in one read
    server_.probe.pd_decode_first_bytes_after(seconds_since(decode_started_));
  if (std::exchange(decode_leg_, false)) server_.probe.pd_decode_took(seconds_since(decode_started_));
  router_.finished();
}

void request_exchange::on_early_end(proxy_stream::early_end why, std::string detail) {
  cancel_prefill_leg();  // SGLang's concurrent prefill leg goes with its decode leg
  decode_leg_ = false;
  if (!client_gone_ && shape_->answering_leg_ended_early()) return;
  switch (why) {
    case proxy_stream::early_end::client_gone:
      log_access("client_left", 0, 0);
      return left_during_request();
    case proxy_stream::early_end::timed_out:
      server_.probe.upstream_timed_out();
      if (continuing_) return migrate(migration_counters::cause::timed_out);  // the client has part of the answer
      router_.finished();
      return answer_error({api_errc::worker_timeout, std::move(detail), {}}, "timed_out");
    case proxy_stream::early_end::worker_failed:
      if (client_gone_) {  // the worker's own failure, but nobody waits for a retry
        router_.blame_worker();
        log_access("client_left", 0, 0);
        return client_.client_left();
      }
      if (continuing_) return migrate(migration_counters::cause::worker_failed);
      state_ = state::routing;
      return act(router_.on_worker_failed(detail));
  }
}

void request_exchange::on_late_end(proxy_stream::late_end why, unsigned status) {
  cancel_prefill_leg();
  shape_->answering_leg_ended();  // the decode leg answered before a cut took effect
  decode_leg_ = false;
  if (why == proxy_stream::late_end::cut && migration_.armed() && !client_gone_ &&
      (stream_.client_chunked() || stream_.collecting())) {
    using cause = migration_counters::cause;
    const auto broke = stream_.last_cut();
    return migrate(broke == proxy_stream::cut_cause::timed_out     ? cause::timed_out
                   : broke == proxy_stream::cut_cause::error_event ? cause::error_event
                                                                   : cause::broken);
  }
  router_.finished();
  if (!first_bytes_) first_bytes_ = clock_type::now();  // the whole answer came in one read
  if (why == proxy_stream::late_end::completed && stream_.collecting()) return answer_whole("completed");
  log_access(why == proxy_stream::late_end::completed     ? "completed"
             : why == proxy_stream::late_end::client_gone ? "client_left"
                                                          : "cut",
             status, stream_.body_bytes());
  switch (why) {
    case proxy_stream::late_end::completed:
      server_.probe.responded(status);
      return client_.relayed(!client_gone_);
    case proxy_stream::late_end::client_gone: return client_.client_left();
    case proxy_stream::late_end::cut: return client_.relayed(false);
  }
}

// -- the request's fate ----------------------------------------------------------------------

void request_exchange::on_deadline() {
  if (state_ == state::proxying) stream_.on_deadline();  // a prefill leg has its own deadline
}

void request_exchange::client_went_away() {
  client_gone_ = true;
  if (state_ == state::routing) router_.withdraw();
  if (state_ == state::prefilling) return client_left_during_prefill();
  stream_.cancel();
}

void request_exchange::client_left_during_prefill() {
  cancel_prefill_leg();  // vLLM's prefill leg, nothing else running: the request ends here
  log_access("client_left", 0, 0);
  left_during_request();
}

void request_exchange::prefill_failed(std::string_view detail) {
  if (client_gone_) {
    log_access("client_left", 0, 0);
    return left_during_request();
  }
  state_ = state::routing;
  act(router_.on_prefill_failed(detail));
}

void request_exchange::finish_with(unsigned status, std::string body, std::string_view outcome) {
  router_.finished();
  log_access(outcome, status, body.size());
  client_.answer(status, std::move(body));
}

void request_exchange::answer_error(const api_error& error, std::string_view outcome) {
  std::string body = error_body(error);
  const auto status = static_cast<unsigned>(http_status(error.code));
  log_access(outcome, status, body.size());
  client_.answer(status, std::move(body));
}

void request_exchange::left_during_request() {
  router_.finished();
  client_.client_left();
}

void request_exchange::reset() {
  router_.reset();
  state_ = state::idle;
  client_gone_ = false;
  shape_ = &aggregated_;
  migration_.reset();
  continuing_ = false;
}

// -- migration -------------------------------------------------------------------------------

void request_exchange::migrate(migration_counters::cause why) {
  failed_worker_ = router_.worker().name;
  continuing_after_ = why;
  const worker_set_route& set = router_.set();
  auto next = migration_.plan({set.text_tokenizer.get(), set.chat.get(), set.chat_plain_fallback}, server_.settings.max_prompt_tokens);
  if (!next) {
    router_.blame_worker();
    return end_unfinished_stream(next.error(), fmt::format("worker {} failed mid-answer ({})", failed_worker_,
                                                           migration_counters::name(why)));
  }
  if (next->nothing_left()) {  // the answer was whole but for its end
    router_.finished();
    return end_client_stream(migration_.finished_events(), "completed");
  }
  auto continuation = std::make_shared<const routing_request>(migration_.continuation_request(router_.request().model));
  migration_.start_continuation(std::move(*next));
  continuing_ = true;
  state_ = state::routing;
  act(router_.migrate(std::move(continuation)));
}

void request_exchange::start_continuation_leg() {
  router_.set().migrations->started(continuing_after_, migration_.carried_tokens(), migration_.ids_from_text());
  std::cerr << fmt::format("kvrouter: request {} migrated from worker {} ({}) to worker {}, {} tokens carried over{} (migration {})\n",
                           request_id_, failed_worker_, migration_counters::name(continuing_after_), router_.worker().name,
                           migration_.carried_tokens(), migration_.ids_from_text() ? " (ids rebuilt from the text)" : "",
                           migration_.migrations());
  state_ = state::proxying;
  stream_.start(router_.worker(), *http_request_, client_.keeps_connection(),
                {.request_id = request_id_, .client_sent_id = client_sent_id_, .decision_headers = false},
                {.body = &migration_.continuation_body(),
                 .target = "/v1/completions",
                 .filter = &migration_,
                 .continuing = true,
                 .collect = migration_.whole()});
}

void request_exchange::end_unfinished_stream(migration_refusal why, std::string_view detail) {
  server_.probe.migration_refused(why);
  router_.finished();
  std::cerr << fmt::format("kvrouter: request {}: {}; not continued elsewhere: {}\n", request_id_, detail, to_string(why));
  if (migration_.whole())  // nothing of it reached the client: an error answer instead
    return answer_error({api_errc::worker_failed, fmt::format("{}; the answer could not be continued ({})", detail, to_string(why)), {}},
                        "cut");
  end_client_stream(migration_.error_events(fmt::format("{}; the answer could not be continued ({})", detail, to_string(why))),
                    "cut");
}

void request_exchange::end_client_stream(std::string events, std::string_view outcome) {
  if (migration_.whole()) {
    migration_.gather(events);
    return answer_whole(outcome);
  }
  log_access(outcome, 200, stream_.body_bytes() + events.size());
  if (outcome == "completed") server_.probe.responded(200);
  stream_.finish_client_stream(std::move(events), [this](bool written) { client_.relayed(written); });
}

void request_exchange::answer_whole(std::string_view outcome) {
  std::string body = migration_.whole_answer_body();
  log_access(outcome, 200, body.size());
  server_.probe.responded(200);
  stream_.answer_collected(std::move(body), [this](bool written) { client_.relayed(written); });
}

// -- the access log --------------------------------------------------------------------------

void request_exchange::start_access_record() {
  logged_ = server_.access == nullptr;
  if (logged_) return;  // no access log: no clocks read per request
  received_wall_ = std::chrono::system_clock::now();
  received_ = clock_type::now();
  first_bytes_.reset();
}

void request_exchange::log_access(std::string_view outcome, unsigned status, std::uint64_t bytes) {
  if (logged_) return;
  logged_ = true;
  auto ms = [](clock_type::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const bool proxied = router_.attempts() > 0;
  server_.access->write({.received = received_wall_,
                         .request_id = request_id_,
                         .model = router_.request().model,
                         .set = router_.set().name,
                         .worker = proxied ? std::string_view(router_.worker().name) : std::string_view(),
                         .prompt_tokens = router_.prompt_tokens(),
                         .overlap_blocks = router_.overlap_blocks(),
                         .attempts = router_.attempts(),
                         .migrations = migration_.migrations(),
                         .queue_wait_ms = ms(router_.queued_for()),
                         .ttft_ms = first_bytes_ ? ms(*first_bytes_ - received_) : -1.0,
                         .duration_ms = ms(clock_type::now() - received_),
                         .status = status,
                         .bytes = bytes,
                         .outcome = outcome});
}

}  // namespace kvr::ingress
