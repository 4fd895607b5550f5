#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <limits>

#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

namespace kvr::ingress {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using error_code = boost::system::error_code;

constexpr beast::string_view dry_run_header = "x-kvrouter-dry-run";
constexpr std::size_t client_read_size = 16384;

/// Which hasher of the set's pool takes a request. A chat goes by its first bytes (its system
/// prompt and first turn), so every turn of a conversation meets the hasher whose segment cache
/// already holds the earlier messages; other prompts spread round-robin.
std::size_t hasher_for(const routing_request& request, std::uint64_t request_id, std::size_t hashers) {
  const std::string& messages = request.chat.messages_json;
  if (messages.empty()) return request_id % hashers;
  return XXH3_64bits(messages.data(), std::min<std::size_t>(messages.size(), 256)) % hashers;
}

/// Fields that describe one hop's connection, never forwarded (RFC 9110 §7.6.1), plus those
/// kvrouter writes itself (framing, Host) and its own dry-run switch.
bool is_request_field_replaced(const http::fields::value_type& field) {
  switch (field.name()) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::transfer_encoding:
    case http::field::te:
    case http::field::upgrade:
    case http::field::proxy_authorization:
    case http::field::host:
    case http::field::content_length:
    case http::field::expect:  // the whole body goes along at once: no 100 Continue to wait for
      return true;
    default:
      return beast::iequals(field.name_string(), dry_run_header);
  }
}

bool is_response_field_replaced(http::field name) {
  return name == http::field::connection || name == http::field::keep_alive ||
         name == http::field::transfer_encoding || name == http::field::content_length;
}

void append_field(std::string& out, beast::string_view name, beast::string_view value) {
  out.append(name.data(), name.size());
  out += ": ";
  out.append(value.data(), value.size());
  out += "\r\n";
}

/// How a routed request ended.
enum class request_outcome : std::uint8_t { completed, client_disconnected, worker_error };

/// The answer a client gets when routing chose no worker.
api_error routing_error(route_failure failure) {
  switch (failure) {
    case route_failure::every_worker_failed: return {api_errc::worker_failed, "every available worker failed this request", {}};
    case route_failure::set_retired:
      return {api_errc::no_worker_available, "the worker set was reconfigured before this request was routed; retry", {}};
    case route_failure::no_healthy_worker:
    case route_failure::none: break;
  }
  return {api_errc::no_worker_available, "no healthy worker is available for this model", {}};
}

class session;

/// Where an actor's routing decision goes: posted to the session's I/O thread. A job an actor
/// drops unanswered (its worker set was retired meanwhile) is answered too, with an error, so
/// the client is not left waiting and the session ends on its own thread, never on the actor's.
class decision_sink {
 public:
  explicit decision_sink(std::shared_ptr<session> session);
  decision_sink(const decision_sink&) = delete;
  decision_sink& operator=(const decision_sink&) = delete;
  ~decision_sink();
  void deliver(route_decision decision);

 private:
  std::shared_ptr<session> session_;
};

/// One client connection. Lives on one I/O thread; every handler runs there.
///
/// Its shape keeps system calls and allocations per request at what a proxy must do: one read
/// of the client is always pending (it reads the next request and, meanwhile, notices a client
/// that goes away), request and response heads are written by hand in one gather write each,
/// and deadlines are fields the thread sweeps rather than timers re-armed per operation.
class session final : public std::enable_shared_from_this<session>, public timed {
 public:
  session(http_ingress::impl& server, io_thread& thread, tcp::socket socket)
      : server_(server), thread_(thread), client_(std::move(socket)) {
    registration_ = thread_.connections.insert(thread_.connections.end(), this);
    ++server_.counters.connections;
    ++server_.counters.open_connections;
  }
  ~session() override {
    thread_.connections.erase(registration_);
    --server_.counters.open_connections;
  }

  void start() { begin_request(); }

  void on_deadline() override {
    deadline = clock_type::time_point::max();
    switch (state_) {
      case state::reading_request:  // an idle keep-alive connection, or a client too slow
      case state::answering:
        return close();
      case state::proxying:
        if (writing_client_) return close_client();  // the client does not take the answer
        timed_out_ = true;
        if (upstream_) upstream_->socket.close();  // the pending upstream operation fails now
        return;
      case state::routing:
      case state::closed:
        return;
    }
  }

 private:
  enum class state : std::uint8_t { reading_request, routing, proxying, answering, closed };

  void expire_after(std::chrono::seconds timeout) { deadline = clock_type::now() + timeout; }

  // -- reading requests ----------------------------------------------------------------------
  void begin_request() {
    state_ = state::reading_request;
    continue_sent_ = false;
    parser_.emplace();
    parser_->header_limit(server_.settings.max_header_bytes);
    parser_->body_limit(server_.settings.max_body_bytes);
    parser_->eager(true);
    expire_after(server_.settings.client_timeout);  // the whole request, keep-alive idle time included
    parse_buffered();
  }

  /// Feeds what the client sent to the parser; reads more until a request is complete.
  void parse_buffered() {
    error_code ec;
    while (buffer_.size() > 0 && !parser_->is_done()) {
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);  // only while no read is pending (see watch_client)
      if (ec == http::error::need_more) break;
      if (ec) return on_request_error(ec);
    }
    if (parser_->is_done()) return on_request();
    if (parser_->is_header_done() && !continue_sent_ && expects_continue()) send_continue();
    read_client();
  }

  /// A client that sent `Expect: 100-continue` waits for a go-ahead before its body (curl
  /// waits a second for bodies over 1 MiB): the headers passed the limits, so give it.
  [[nodiscard]] bool expects_continue() const {
    const auto& header = parser_->get();
    const auto expect = header.find(http::field::expect);
    return expect != header.end() && beast::iequals(expect->value(), "100-continue") && header.version() >= 11;
  }

  /// Written while the read of the body is pending. The answer cannot overlap it: the client
  /// sends its body only after these bytes, and a socket this idle takes them at once.
  void send_continue() {
    continue_sent_ = true;
    static constexpr std::string_view go_ahead = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(client_, asio::buffer(go_ahead.data(), go_ahead.size()),
                      [self = shared_from_this()](error_code, std::size_t) {});  // a failure shows on the read
  }

  void read_client() {
    if (reading_client_) return;
    reading_client_ = true;
    client_.async_read_some(buffer_.prepare(client_read_size),
                            [self = shared_from_this()](error_code ec, std::size_t n) { self->on_client_read(ec, n); });
  }

  void on_client_read(error_code ec, std::size_t n) {
    reading_client_ = false;
    if (state_ == state::closed) return;
    if (!ec) buffer_.commit(n);
    if (state_ == state::reading_request) {
      if (ec) return close();  // end of stream, reset, or closed by the deadline sweep
      return parse_buffered();
    }
    // Busy with a request: bytes are a pipelined request (kept for later; no longer watching),
    // an error is a client that went away.
    if (ec) client_went_away();
  }

  void on_request_error(error_code ec) {
    keep_alive_ = false;
    if (ec == http::error::body_limit)
      return send_error({api_errc::body_too_large,
                         fmt::format("the request body exceeds {} bytes", server_.settings.max_body_bytes), {}});
    if (ec == http::error::header_limit)
      return send_error({api_errc::invalid_request, "the request headers are too large", {}});
    send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", ec.message()), {}});
  }

  void on_request() {
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    deadline = clock_type::time_point::max();
    dispatch();
  }

  void dispatch() {
    const std::string_view target(request_.target().data(), request_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = request_.method() == http::verb::get;
    const bool post = request_.method() == http::verb::post;
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (!post) return send_error({api_errc::method_not_allowed, "use POST", {}});
      return handle_completion(path == "/v1/chat/completions" ? api_endpoint::chat_completions : api_endpoint::completions);
    }
    if (!get) return send_error({api_errc::method_not_allowed, "use GET", {}});
    if (path == "/health") return send(http::status::ok, R"({"status":"ok"})", "application/json");
    if (path == "/ready") return handle_ready();
    if (path == "/v1/models") return handle_models();
    if (path == "/v1/router/sets") return send(http::status::ok, server_.current_table()->sets_json, "application/json");
    if (path == "/metrics") return send(http::status::ok, server_.metrics_text(), "text/plain; version=0.0.4");
    return send_error({api_errc::not_found, fmt::format("no route for {}", path), {}});
  }

  void handle_ready() {
    auto table = server_.current_table();
    for (const worker_set_route& set : table->sets)
      for (const auto& worker : set.snapshot->load()->workers)
        if (worker.healthy) return send(http::status::ok, R"({"status":"ready"})", "application/json");
    send(http::status::service_unavailable, R"({"status":"no routable worker"})", "application/json");
  }

  void handle_models() {
    nlohmann::json data = nlohmann::json::array();
    for (const worker_set_route& set : server_.current_table()->sets)
      data.push_back({{"id", set.model}, {"object", "model"}, {"created", 0}, {"owned_by", "kvrouter"}});
    send(http::status::ok, nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump(), "application/json");
  }

  // -- routing -------------------------------------------------------------------------------
  void handle_completion(api_endpoint endpoint) {
    std::string& body = request_.body();
    const std::size_t size = body.size();
    body.reserve(size + request_parser::padding);
    auto parsed = thread_.json.parse(endpoint, std::string_view(body.data(), size), body.capacity());
    if (!parsed) return send_error(parsed.error());
    table_ = server_.current_table();
    set_ = table_->find(parsed->model);
    if (set_ == nullptr)
      return send_error({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", parsed->model), "model"});
    routing_ = std::make_shared<const routing_request>(std::move(*parsed));
    request_id_ = server_.next_request_id++;
    const auto dry_run = request_.find(dry_run_header);
    dry_run_ = dry_run != request_.end() && dry_run->value() == "1";
    excluded_.clear();
    attempts_ = 0;
    state_ = state::routing;
    watch_client();
    route();
  }

  void route() {
    routed_locally_ = decides_without_state(set_->config) && !dry_run_;
    if (routed_locally_) return route_locally();
    if (set_->routing_in_flight->fetch_add(1) >= server_.settings.max_routing_in_flight) {
      set_->routing_in_flight->fetch_sub(1);
      ++server_.counters.overloaded;
      return send_error({api_errc::overloaded, "the router is overloaded; retry shortly", {}});
    }
    auto job = std::make_shared<route_job>();
    job->request_id = request_id_;
    job->request = routing_;
    job->excluded_workers = excluded_;
    job->dry_run = dry_run_;
    job->reply = [answer = std::make_shared<decision_sink>(shared_from_this())](route_decision decision) {
      answer->deliver(std::move(decision));
    };
    // Only prompts the set's hashers can hash take the extra hop (core/prompt/prompt_plan).
    job->plan = set_->hashers.empty() ? prompt_plan{} : plan_prompt(*routing_, set_->prompts);
    if (job->plan.needs_hasher())
      caf::anon_send(set_->hashers[hasher_for(*routing_, request_id_, set_->hashers.size())], std::move(job));
    else
      caf::anon_send(set_->scorer, std::move(job));
  }

  /// Round-robin and random: picked here, booked through the thread's lifecycle reporter.
  void route_locally() {
    const auto worker = thread_.local.pick(*set_, excluded_);
    if (!worker) {
      if (excluded_.empty())
        return send_error({api_errc::no_worker_available, "no healthy worker is available for this model", {}});
      return send_error({api_errc::worker_failed, "every available worker failed this request", {}});
    }
    thread_.report(set_->scorer, {lifecycle_event::kind::booked, request_id_, *worker, routing_->prompt_tokens});
    proxy_to(*worker);
  }

  friend class decision_sink;

  void on_decision(route_decision decision) {
    set_->routing_in_flight->fetch_sub(1);
    if (!decision.ok()) return send_error(routing_error(decision.failure));
    if (dry_run_) return answer_dry_run(decision);
    proxy_to(decision.worker);
  }

  void answer_dry_run(const route_decision& decision) {
    ++server_.counters.dry_runs;
    nlohmann::json candidates = nlohmann::json::array();
    for (const candidate_view& c : decision.candidates)
      candidates.push_back({{"worker", set_->workers[c.worker].name},
                            {"overlap_blocks", c.overlap_blocks},
                            {"active_prefill_tokens", c.active_prefill_tokens},
                            {"active_decode_blocks", c.active_decode_blocks},
                            {"healthy", c.healthy}});
    const worker_target& worker = set_->workers[decision.worker];
    send(http::status::ok,
         nlohmann::json{{"worker", worker.name},
                        {"url", worker.url},
                        {"router_mode", std::string(to_string(set_->config.mode))},
                        {"overlap_blocks", decision.overlap_blocks},
                        {"prompt_blocks", decision.prompt_blocks},
                        {"prompt_tokens", decision.prompt_tokens},
                        {"cost", decision.cost},
                        {"candidates", std::move(candidates)}}
             .dump(),
         "application/json");
  }

  // -- proxying ------------------------------------------------------------------------------
  void proxy_to(std::uint32_t worker) {
    worker_ = worker;
    ++attempts_;
    if (client_gone_) {  // the client left while the request was being routed
      ++server_.counters.client_disconnects;
      release_booking();
      return close();
    }
    state_ = state::proxying;
    stale_retry_done_ = false;
    connect_upstream(true);
  }

  /// The request head as the worker gets it: the client's method, target (under the worker's
  /// path prefix) and fields, minus hop-by-hop ones, with the worker's Host and the body's length.
  void write_upstream_head(const worker_target& worker) {
    upstream_head_.clear();
    const auto method = request_.method_string();
    const auto target = request_.target();
    upstream_head_.append(method.data(), method.size());
    upstream_head_ += ' ';
    upstream_head_ += worker.base_path;
    upstream_head_.append(target.data(), target.size());
    upstream_head_ += " HTTP/1.1\r\n";
    for (const auto& field : request_)
      if (!is_request_field_replaced(field)) append_field(upstream_head_, field.name_string(), field.value());
    upstream_head_ += fmt::format("Host: {}\r\nContent-Length: {}\r\n\r\n", worker.host_header, request_.body().size());
  }

  void connect_upstream(bool may_reuse) {
    const worker_target& worker = set_->workers[worker_];
    write_upstream_head(worker);
    upstream_ = may_reuse ? thread_.take_idle(worker.url) : nullptr;
    upstream_reused_ = upstream_ != nullptr;
    if (upstream_reused_) return write_upstream();
    upstream_ = std::make_unique<upstream_connection>(thread_.io);
    const auto endpoints = server_.endpoints_of(worker);
    if (endpoints.empty()) return worker_failed("the worker's address could not be resolved");
    expire_after(server_.settings.connect_timeout);
    // The condition stops the attempts at the next address once the deadline has passed.
    auto before_each_address = [self = shared_from_this()](const error_code&, const tcp::endpoint&) { return !self->timed_out_; };
    asio::async_connect(upstream_->socket, endpoints, before_each_address, [self = shared_from_this()](error_code ec, const tcp::endpoint&) {
      if (ec) return self->worker_failed(self->timed_out_ ? "cannot connect: timed out" : fmt::format("cannot connect: {}", ec.message()));
      error_code ignored;
      self->upstream_->socket.set_option(tcp::no_delay(true), ignored);  // small SSE writes go out at once
      self->write_upstream();
    });
  }

  void write_upstream() {
    expire_after(server_.settings.upstream_timeout);
    const std::array<asio::const_buffer, 2> request{asio::buffer(upstream_head_), asio::buffer(request_.body())};
    asio::async_write(upstream_->socket, request, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->upstream_failed_before_answer(ec);
      self->read_upstream_header();
    });
  }

  void read_upstream_header() {
    upstream_parser_.emplace();
    upstream_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // boost::none would mean 0
    http::async_read_header(upstream_->socket, upstream_->buffer, *upstream_parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) {
                              if (ec) return self->upstream_failed_before_answer(ec);
                              self->forward_header();
                            });
  }

  /// A pooled connection the worker closed meanwhile fails before any answer: retry once on a
  /// fresh connection without blaming the worker. Otherwise the worker failed.
  void upstream_failed_before_answer(error_code ec) {
    if (client_gone_) {  // the client left while the worker was busy: cancel, answer nobody
      ++server_.counters.client_disconnects;
      upstream_.reset();
      release_booking();
      return close();
    }
    if (timed_out_) {
      timed_out_ = false;
      ++server_.counters.worker_timeouts;
      release_booking();
      upstream_.reset();
      return send_error({api_errc::worker_timeout,
                         fmt::format("worker {} did not answer within {} s", set_->workers[worker_].name,
                                     server_.settings.upstream_timeout.count()),
                         {}});
    }
    if (upstream_reused_ && !stale_retry_done_) {
      stale_retry_done_ = true;
      ++server_.counters.stale_connection_retries;
      return connect_upstream(false);
    }
    worker_failed(ec.message());
  }

  void worker_failed(const std::string& why) {
    timed_out_ = false;
    ++server_.counters.worker_failures;
    upstream_.reset();
    tell_scorer(lifecycle_event::kind::worker_failed);
    if (client_gone_) {
      ++server_.counters.client_disconnects;
      return close();
    }
    excluded_.push_back(worker_);
    if (attempts_ <= server_.settings.max_retries) {
      ++server_.counters.retries;
      state_ = state::routing;
      return route();
    }
    send_error({api_errc::worker_failed,
                fmt::format("workers failed before answering ({} attempts; last: {} on {})", attempts_, why,
                            set_->workers[worker_].name),
                {}});
  }

  /// The answer's head as the client gets it: the worker's status and fields, framed by
  /// kvrouter (the worker's length, or chunked when the worker streams without one).
  void forward_header() {
    const auto& response = upstream_parser_->get();
    chunked_ = !response.has_content_length() && !upstream_parser_->is_done();
    head_.clear();
    head_ += fmt::format("HTTP/1.1 {} ", response.result_int());
    const auto reason = response.reason();
    head_.append(reason.data(), reason.size());
    head_ += "\r\n";
    for (const auto& field : response)
      if (!is_response_field_replaced(field.name())) append_field(head_, field.name_string(), field.value());
    if (chunked_) head_ += "Transfer-Encoding: chunked\r\n";
    else if (const auto length = upstream_parser_->content_length()) head_ += fmt::format("Content-Length: {}\r\n", *length);
    if (!keep_alive_) head_ += "Connection: close\r\n";
    head_ += "\r\n";
    head_pending_ = true;
    ++server_.counters.proxied;
    ++server_.counters.proxied_in_flight;
    status_class_ = response.result_int() / 100;
    // The head goes out together with the first body bytes: one write instead of two.
    relay_body();
  }

  void relay_body() {
    if (upstream_parser_->is_done()) return write_body(0);
    auto& body = upstream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    expire_after(server_.settings.upstream_timeout);
    http::async_read_some(upstream_->socket, upstream_->buffer, *upstream_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec) return self->upstream_broke(ec);
                            self->write_body(self->chunk_.size() - self->upstream_parser_->get().body().size);
                          });
  }

  /// The worker's stream failed: before anything reached the client it is still a worker
  /// failure with an error answer; after, the client's connection is cut.
  void upstream_broke(error_code ec) {
    if (!head_pending_ || client_gone_)
      return abort_stream(client_gone_ ? request_outcome::client_disconnected : request_outcome::worker_error);
    --server_.counters.proxied_in_flight;
    upstream_failed_before_answer(ec);
  }

  /// Forwards what one read brought (coalescing nothing across reads), then reads on.
  void write_body(std::size_t bytes) {
    const bool last = upstream_parser_->is_done();
    // First bytes of a longer answer: the worker's prefill is done. (An answer complete in
    // one read needs no separate message: finishing releases the prefill too.)
    if (bytes > 0 && !first_token_sent_ && !last) {
      first_token_sent_ = true;
      tell_scorer(lifecycle_event::kind::first_token);
    }
    std::array<asio::const_buffer, 5> out;
    std::size_t n = 0;
    if (head_pending_) out[n++] = asio::buffer(head_);
    if (chunked_ && bytes > 0) {
      chunk_size_line_ = fmt::format("{:x}\r\n", bytes);
      out[n++] = asio::buffer(chunk_size_line_);
    }
    if (bytes > 0) out[n++] = asio::buffer(chunk_.data(), bytes);
    if (chunked_ && bytes > 0) out[n++] = asio::buffer("\r\n", 2);
    if (chunked_ && last) out[n++] = asio::buffer("0\r\n\r\n", 5);
    if (n == 0) return last ? complete() : relay_body();
    head_pending_ = false;
    writing_client_ = true;
    expire_after(server_.settings.client_timeout);
    asio::async_write(client_, std::span(out.data(), n), [self = shared_from_this(), last](error_code ec, std::size_t) {
      self->writing_client_ = false;
      if (ec) return self->abort_stream(request_outcome::client_disconnected);
      if (last) return self->complete();
      self->relay_body();
    });
  }

  void complete() {
    const bool reusable = upstream_parser_->keep_alive() && upstream_->socket.is_open();
    if (reusable) thread_.give_back(set_->workers[worker_].url, std::move(upstream_));
    upstream_.reset();
    --server_.counters.proxied_in_flight;
    ++server_.counters.responses_by_class[std::min<unsigned>(status_class_, 5)];
    release_booking();
    if (keep_alive_ && !client_gone_) return next_request();
    close();
  }

  /// The stream broke after bytes went to the client: nothing can be retried or answered.
  void abort_stream(request_outcome outcome) {
    if (outcome == request_outcome::client_disconnected) ++server_.counters.client_disconnects;
    upstream_.reset();
    --server_.counters.proxied_in_flight;
    release_booking();
    close();
  }

  /// The request ended, however it ended: the scorer releases its load.
  void release_booking() { tell_scorer(lifecycle_event::kind::finished); }

  /// A step of this request's life, for the scorer's loads: batched through the thread when
  /// the thread routed it, else a message of its own.
  void tell_scorer(lifecycle_event::kind what) {
    if (routed_locally_) return thread_.report(set_->scorer, {what, request_id_, worker_, 0});
    if (what == lifecycle_event::kind::booked) return;  // the scorer booked it when it decided
    caf::anon_send(set_->scorer, lifecycle_event{what, request_id_, worker_, 0});
  }

  /// While a request is routed and proxied, the pending read of the client notices it going
  /// away (end of stream or reset) and cancels the upstream request at once. Only started with
  /// nothing buffered: the buffer must not move under a pending read, and bytes already there
  /// are a pipelined request, so the client is still there.
  void watch_client() {
    if (buffer_.size() == 0) read_client();
  }

  void client_went_away() {
    client_gone_ = true;
    if (upstream_) upstream_->socket.close();  // the pending upstream operation fails now
  }

  // -- answering directly ----------------------------------------------------------------------
  void send_error(const api_error& error) {
    send(static_cast<http::status>(http_status(error.code)), error_body(error), "application/json");
  }

  void send(http::status status, std::string body, std::string_view content_type) {
    state_ = state::answering;
    const auto reason = http::obsolete_reason(status);
    head_ = fmt::format("HTTP/1.1 {} {}\r\nServer: kvrouter\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}\r\n",
                        static_cast<unsigned>(status), std::string_view(reason.data(), reason.size()), content_type,
                        body.size(), keep_alive_ ? "" : "Connection: close\r\n");
    local_body_ = std::move(body);
    ++server_.counters.responses_by_class[std::min<unsigned>(static_cast<unsigned>(status) / 100, 5)];
    expire_after(server_.settings.client_timeout);
    const std::array<asio::const_buffer, 2> out{asio::buffer(head_), asio::buffer(local_body_)};
    asio::async_write(client_, out, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec || !self->keep_alive_ || self->client_gone_) return self->close();
      self->next_request();
    });
  }

  void next_request() {
    upstream_parser_.reset();
    routing_.reset();
    table_.reset();
    set_ = nullptr;
    first_token_sent_ = client_gone_ = timed_out_ = false;
    begin_request();
  }

  void close_client() {
    error_code ignored;
    client_.shutdown(tcp::socket::shutdown_both, ignored);
    client_.close(ignored);
  }

  void close() {
    state_ = state::closed;
    deadline = clock_type::time_point::max();
    close_client();
  }

  http_ingress::impl& server_;
  io_thread& thread_;
  std::list<timed*>::iterator registration_;
  tcp::socket client_;
  beast::flat_buffer buffer_;
  bool reading_client_ = false;
  bool continue_sent_ = false;  ///< `100 Continue` went out for the request being read
  state state_ = state::reading_request;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  bool keep_alive_ = true;
  std::string head_;        ///< the answer's head (proxied or local)
  std::string local_body_;  ///< the body of a local answer

  std::shared_ptr<const routing_table> table_;  ///< keeps set_ alive for this request
  const worker_set_route* set_ = nullptr;
  std::shared_ptr<const routing_request> routing_;
  std::uint64_t request_id_ = 0;
  bool dry_run_ = false;
  bool routed_locally_ = false;  ///< picked by this thread (round-robin, random), not the scorer
  std::vector<std::uint32_t> excluded_;
  std::uint32_t attempts_ = 0;
  std::uint32_t worker_ = 0;

  std::string upstream_head_;
  std::unique_ptr<upstream_connection> upstream_;
  bool upstream_reused_ = false;
  bool stale_retry_done_ = false;
  std::optional<http::response_parser<http::buffer_body>> upstream_parser_;
  std::array<char, 16384> chunk_{};
  std::string chunk_size_line_;
  bool chunked_ = false;
  bool head_pending_ = false;  ///< the answer's head is not yet written to the client (once it is, never retry)
  bool writing_client_ = false;
  bool first_token_sent_ = false;
  bool client_gone_ = false;
  bool timed_out_ = false;  ///< the deadline sweep cut the upstream connection
  unsigned status_class_ = 2;
};

decision_sink::decision_sink(std::shared_ptr<session> session) : session_(std::move(session)) {}

void decision_sink::deliver(route_decision decision) {
  auto executor = session_->client_.get_executor();
  asio::post(executor, [session = std::move(session_), decision = std::move(decision)]() mutable {
    session->on_decision(std::move(decision));
  });
}

decision_sink::~decision_sink() {
  if (!session_) return;  // delivered
  route_decision dropped;
  dropped.failure = route_failure::set_retired;
  deliver(std::move(dropped));
}

}  // namespace

void serve_connection(http_ingress::impl& server, io_thread& thread, tcp::socket socket) {
  std::make_shared<session>(server, thread, std::move(socket))->start();
}

}  // namespace kvr::ingress
