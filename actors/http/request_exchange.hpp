#pragma once
/// One routed request's upstream side, from the moment its client connection has read it to
/// its end: the routing (`request_router`: which worker, retries, exclusions), its attempts
/// against workers (`proxy_stream` for the leg that answers, `upstream_exchange` for a
/// disaggregated request's prefill leg) in the shape its set asks for (`upstream_shape`:
/// aggregated, vLLM-NIXL, SGLang), the client's departure, and the access-log record. The
/// session (actors/http/ingress_session.cpp) reads requests and writes answers; it hands each
/// routed request here and hears back through `exchange_client` how it ended.
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/proxy_stream.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <optional>

#include "actors/http/request_router.hpp"
#include "actors/http/stream_migration.hpp"
#include "actors/http/upstream_exchange.hpp"
#include "actors/http/upstream_shape.hpp"

namespace kvr::ingress {

/// What a request's exchange needs of the client connection that owns it.
class exchange_client {
 public:
  virtual ~exchange_client() = default;
  /// Held by every pending operation, so the connection outlives them.
  [[nodiscard]] virtual std::shared_ptr<void> keep_alive() = 0;
  virtual void expire_after(std::chrono::seconds timeout) = 0;
  virtual void clear_deadline() = 0;
  /// Whether the connection stays open after this request (false once draining).
  [[nodiscard]] virtual bool keeps_connection() const = 0;
  /// Where the set's actors send their decision: posted back to the connection's thread.
  [[nodiscard]] virtual route_sink decision_sink() = 0;
  /// kvrouter answers the request itself (an error, a dry run, a prefill's verdict).
  virtual void answer(unsigned status, std::string body) = 0;
  /// A worker's answer went to the client: whole (the connection may go on), or cut.
  virtual void relayed(bool whole) = 0;
  /// The client left before its answer was complete: the request is over.
  virtual void client_left() = 0;
};

class request_exchange final : private proxy_stream::owner, private shape_host {
 public:
  request_exchange(http_ingress::impl& server, io_thread& thread, tcp::socket& client_socket, exchange_client& client);

  /// Takes `request` (read off `http_request`, which outlives the exchange's request) for a
  /// worker of `set`. A request refused at once (its limits, its `x-kvrouter-*` headers) is
  /// returned as the error to answer; then nothing started.
  [[nodiscard]] std::optional<api_error> begin(std::shared_ptr<const routing_table> table, const worker_set_route& set,
                                               routing_request request, const http::request<http::string_body>& http_request);
  /// Routes the request begin() took; what follows reaches the client through `exchange_client`.
  void route() { act(router_.route()); }
  /// The set's actors decided (posted to this thread).
  void on_decision(const route_decision& decision) { act(router_.on_decision(decision)); }
  /// The connection's deadline passed while the request is upstream.
  void on_deadline();
  /// The client went away (end of stream or reset) while its request is upstream.
  void client_went_away();
  /// The request ended; the next one starts fresh.
  void reset();

 private:
  enum class state : std::uint8_t { idle, routing, prefilling, proxying };

  // -- routing --------------------------------------------------------------------------------
  [[nodiscard]] std::expected<request_options, api_error> routing_options(const worker_set_route& set) const;
  [[nodiscard]] std::uint64_t session_key(const routing_request& request) const;
  void take_request_id(std::uint64_t id);
  [[nodiscard]] std::optional<api_error> beyond_limits(const routing_request& request) const;
  [[nodiscard]] bool splits_into_legs(const worker_set_route& set, const routing_request& request) const;
  void act(route_verdict verdict);

  // -- proxy_stream::owner --------------------------------------------------------------------
  std::shared_ptr<void> keep_alive() override { return client_.keep_alive(); }
  void expire_after(std::chrono::seconds timeout) override { client_.expire_after(timeout); }
  void on_first_bytes() override;
  void on_answer_received() override;
  bool answer_may_start(unsigned status) override { return shape_->answer_may_start(status); }
  void on_early_end(proxy_stream::early_end why, std::string detail) override;
  void on_late_end(proxy_stream::late_end why, unsigned status) override;

  // -- shape_host -----------------------------------------------------------------------------
  const std::string& client_body() const override { return http_request_->body(); }
  const disaggregation_card& disaggregation() const override { return *router_.set().disaggregation; }
  ingress_probe& probe() const override { return server_.probe; }
  const std::string& prefill_name() const override { return router_.prefill_worker()->name; }
  const std::string& prefill_host() const override { return router_.prefill_worker()->host; }
  std::uint16_t prefill_bootstrap_port() const override { return router_.prefill_worker()->bootstrap_port; }
  std::int64_t prefill_timeout_seconds() const override { return server_.settings.pd_timeout.count(); }
  std::uint64_t next_bootstrap_room() override { return thread_.bootstrap_rooms() >> 1; }  // 63 bits, as SGLang's rooms
  void start_prefill_leg(std::string body, bool alone, leg_done done) override;
  void cancel_prefill_leg() override;
  void start_answering_leg(const std::string* body) override;
  bool answering_leg_answered() const override { return stream_.answered(); }
  bool answering_leg_running() const override { return state_ == state::proxying; }
  bool prefill_leg_running() const override { return prefill_ && prefill_->running(); }
  void resume_answering_leg() override { stream_.resume(); }
  void cancel_answering_leg() override { stream_.cancel(); }
  void prefill_done() override { router_.prefill_done(); }
  void prefill_failed(std::string_view detail) override;
  void run_aggregated() override { router_.run_aggregated(); }
  void finish_with(unsigned status, std::string body, std::string_view outcome) override;
  void client_left_during_prefill() override;

  // -- migration (docs/migration.md) ----------------------------------------------------------
  /// The answering leg's worker broke off (`why`) after the client had part of the answer:
  /// continue it on another worker, or end the client's stream.
  void migrate(migration_counters::cause why);
  void start_continuation_leg();
  /// The answer cannot go on: the client's stream ends with an error event (counted by `why`).
  void end_unfinished_stream(migration_refusal why, std::string_view detail);
  /// The client's stream ends with `events` as its last bytes (`outcome` for the access log).
  void end_client_stream(std::string events, std::string_view outcome);
  /// A whole answer gathered from its stream (and its continuations) goes to the client.
  void answer_whole(std::string_view outcome);

  // -- the request's end ----------------------------------------------------------------------
  void answer_error(const api_error& error, std::string_view outcome);
  /// The client left before any answer: release, no blame.
  void left_during_request();
  void start_access_record();
  /// The request ended (`outcome`, with `status` as the client got it, 0 = it left, and
  /// `bytes` of answer body).
  void log_access(std::string_view outcome, unsigned status, std::uint64_t bytes);

  http_ingress::impl& server_;
  io_thread& thread_;
  exchange_client& client_;
  request_router router_;
  proxy_stream stream_;
  aggregated_shape aggregated_{*this};
  vllm_nixl_shape vllm_nixl_{*this};
  sglang_shape sglang_{*this};
  upstream_shape* shape_ = &aggregated_;
  stream_migration migration_;
  bool continuing_ = false;  ///< the request runs as a migration's continuation
  migration_counters::cause continuing_after_ = migration_counters::cause::broken;
  std::string failed_worker_;  ///< the worker the last migration left (for its log line)

  state state_ = state::idle;
  const http::request<http::string_body>* http_request_ = nullptr;
  std::string request_id_;       ///< the routed request's id (the client's, or generated)
  bool client_sent_id_ = false;  ///< it came with the request (so it is forwarded as it was)
  bool client_gone_ = false;     ///< the client left while its request was routed or proxied
  bool logged_ = true;           ///< the access-log line is written (or not wanted)
  std::chrono::system_clock::time_point received_wall_;
  clock_type::time_point received_;
  std::optional<clock_type::time_point> first_bytes_;
  std::shared_ptr<upstream_exchange> prefill_;  ///< a disaggregated request's prefill leg (one per leg)
  clock_type::time_point prefill_started_;
  bool decode_leg_ = false;               ///< the stream is a disaggregated request's decode leg
  bool decode_first_bytes_seen_ = false;  ///< its TTFT was recorded
  clock_type::time_point decode_started_;
};

}  // namespace kvr::ingress
