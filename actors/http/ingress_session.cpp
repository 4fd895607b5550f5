#include "actors/http/proxy_stream.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <expected>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "actors/http/http_fields.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/http/request_router.hpp"
#include "actors/http/set_metrics.hpp"
#include "actors/http/upstream_exchange.hpp"
#include "core/common/http_url.hpp"
#include "core/common/json_parse.hpp"
#include "core/common/multipart.hpp"
#include "core/disagg/pd_requests.hpp"
#include "core/prompt/api_translation.hpp"
#include "core/prompt/tokenize_api.hpp"

namespace kvr::ingress {
namespace {

namespace beast = boost::beast;
using error_code = boost::system::error_code;

constexpr std::size_t client_read_size = 16384;

class session;

/// Where an actor's routing decision goes: posted to the session's I/O thread. A job an actor
/// drops unanswered (its worker set was retired meanwhile) is answered too, with an error, so
/// the client is not left waiting and the session ends on its own thread, never on the actor's.
class decision_sink {
 public:
  explicit decision_sink(std::shared_ptr<session> session) : session_(std::move(session)) {}
  decision_sink(const decision_sink&) = delete;
  decision_sink& operator=(const decision_sink&) = delete;
  ~decision_sink();
  void deliver(route_decision decision);

 private:
  std::shared_ptr<session> session_;
};

/// One client connection: reads its requests, answers kvrouter's own routes, and hands
/// completions to a `request_router` (which worker) and a `proxy_stream` (the relay). Lives on
/// one I/O thread; every handler runs there.
///
/// Its shape keeps system calls and allocations per request at what a proxy must do: one read
/// of the client is always pending (it reads the next request and, meanwhile, notices a client
/// that goes away), heads are written by hand in one gather write each, and deadlines are
/// fields the thread sweeps rather than timers re-armed per operation.
class session final : public std::enable_shared_from_this<session>, public timed, private proxy_stream::owner {
 public:
  session(http_ingress::impl& server, io_thread& thread, tcp::socket socket)
      : server_(server),
        thread_(thread),
        client_(std::move(socket)),
        router_(thread, server.probe, {server.settings.max_retries, server.settings.max_routing_in_flight}),
        stream_(server, thread, client_, *this) {
    registration_ = thread_.connections.insert(thread_.connections.end(), this);
    server_.probe.connection_opened();
  }
  ~session() override {
    thread_.connections.erase(registration_);
    server_.probe.connection_closed();
  }

  void start() { begin_request(); }

  void on_deadline() override {
    deadline = clock_type::time_point::max();
    switch (state_) {
      case state::reading_request:  // an idle keep-alive connection, or a client too slow
      case state::answering: return close();
      case state::proxying: return stream_.on_deadline();
      case state::prefilling:  // the prefill leg has its own deadline
      case state::routing:
      case state::closed: return;
    }
  }

  void on_drain() override {
    keep_alive_ = false;  // a request being handled is answered, with `Connection: close`
    // Between requests (nothing of the next one read yet): close now.
    if (state_ == state::reading_request && buffer_.size() == 0 && !parser_->got_some()) close();
  }

  [[nodiscard]] auto executor() { return client_.get_executor(); }

  /// The set's actors decided (posted to this thread by the sink).
  void on_decision(route_decision decision) { act(router_.on_decision(decision)); }

 private:
  enum class state : std::uint8_t { reading_request, routing, prefilling, proxying, answering, closed };

  // -- proxy_stream::owner ---------------------------------------------------------------------
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }
  void expire_after(std::chrono::seconds timeout) override { deadline = clock_type::now() + timeout; }
  void on_first_bytes() override {
    if (!first_bytes_) first_bytes_ = clock_type::now();
    decode_leg_answering();
    router_.first_token();
  }
  void on_answer_received() override {
    decode_leg_answering();
    if (std::exchange(decode_leg_, false)) server_.probe.pd_decode_took(seconds_since(decode_started_));
    router_.finished();
  }

  /// SGLang: a decode worker failing while its prefill leg still runs may fail because of it
  /// (no KV came); its answer waits for the prefill's outcome, which decides whose failure it is.
  bool answer_may_start(unsigned status) override {
    return !(status >= 500 && decode_leg_ && prefill_ && prefill_->running() &&
             router_.set().disaggregation->protocol == pd_protocol::sglang);
  }

  void on_early_end(proxy_stream::early_end why, std::string detail) override {
    cancel_prefill();  // SGLang's concurrent prefill leg goes with its decode leg
    decode_leg_ = false;
    if (auto cut = std::exchange(decode_cut_, std::nullopt); cut && !client_gone_) return after_decode_cut(std::move(*cut));
    switch (why) {
      case proxy_stream::early_end::client_gone:
        log_access("client_left", 0, 0);
        return client_left_during_request();
      case proxy_stream::early_end::timed_out:
        server_.probe.upstream_timed_out();
        router_.finished();
        send_error({api_errc::worker_timeout, std::move(detail), {}});
        return log_access("timed_out", http_status(api_errc::worker_timeout), local_body_.size());
      case proxy_stream::early_end::worker_failed:
        if (client_gone_) {  // the worker's own failure, but nobody waits for a retry
          router_.blame_worker();
          log_access("client_left", 0, 0);
          return close_after_client_left();
        }
        state_ = state::routing;
        return act(router_.on_worker_failed(detail));
    }
  }

  void on_late_end(proxy_stream::late_end why, unsigned status) override {
    cancel_prefill();
    decode_cut_.reset();  // the decode leg answered before its cut took effect
    decode_leg_ = false;
    router_.finished();
    if (!first_bytes_) first_bytes_ = clock_type::now();  // the whole answer came in one read
    log_access(why == proxy_stream::late_end::completed     ? "completed"
               : why == proxy_stream::late_end::client_gone ? "client_left"
                                                            : "cut",
               status, stream_.body_bytes());
    switch (why) {
      case proxy_stream::late_end::completed:
        server_.probe.responded(status);
        if (keep_alive_ && !client_gone_) return next_request();
        return close();
      case proxy_stream::late_end::client_gone: return close_after_client_left();
      case proxy_stream::late_end::cut: return close();
    }
  }

  // -- reading requests ----------------------------------------------------------------------
  void begin_request() {
    state_ = state::reading_request;
    continue_sent_ = false;
    framing_checked_ = false;
    parser_.emplace();
    parser_->header_limit(server_.settings.max_header_bytes);
    parser_->body_limit(server_.settings.max_body_bytes);
    parser_->eager(false);  // stop after the header: reserve_body() sizes the body first
    body_reserved_ = false;
    head_bytes_ = 0;
    expire_after(server_.settings.client_timeout);  // the whole request, keep-alive idle time included
    parse_buffered();
  }

  /// Feeds what the client sent to the parser; reads more until a request is complete.
  void parse_buffered() {
    error_code ec;
    while (buffer_.size() > 0 && !parser_->is_done()) {
      const bool in_head = !parser_->is_header_done();
      std::size_t used = 0;
      try {
        used = parser_->put(buffer_.data(), ec);
      } catch (const std::exception& e) {  // e.g. a trailer field past Beast's 64 KiB (std::length_error)
        keep_alive_ = false;
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", e.what()), {}});
      }
      buffer_.consume(used);  // only while no read is pending (see watch_client)
      // Beast (1.74) applies its header limit to each put's bytes, not to the head: the fields
      // a put consumed are forgotten by the next one, so a head fed in pieces would never end.
      if (in_head && (head_bytes_ += used) > server_.settings.max_header_bytes) return on_request_error(http::error::header_limit);
      if (ec == http::error::need_more) break;
      if (ec) return on_request_error(ec);
      if (parser_->is_header_done() && !body_reserved_) reserve_body();
    }
    // Body bytes are parsed as they come, so what waits here is a head, a chunk's size line or a
    // trailer, waiting for its end; Beast bounds only the head (http_read_limits.hpp).
    const std::size_t unparsed_limit = std::max<std::size_t>(server_.settings.max_header_bytes, max_unparsed_http_bytes);
    if (!parser_->is_done() && buffer_.size() > unparsed_limit) {
      keep_alive_ = false;
      return send_error({api_errc::invalid_request,
                         fmt::format("malformed HTTP request: a chunk line or trailer longer than {} bytes", unparsed_limit), {}});
    }
    if (parser_->is_header_done() && !framing_checked_) {
      framing_checked_ = true;
      if (const std::string problem = framing_problem(parser_->get()); !problem.empty()) {
        keep_alive_ = false;  // the rest of the stream cannot be delimited: answer, then close
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", problem), {}});
      }
      if (const std::string problem = host_problem(parser_->get()); !problem.empty()) {
        keep_alive_ = false;
        return send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", problem), {}});
      }
    }
    if (parser_->is_done()) return on_request();
    if (parser_->is_header_done() && !continue_sent_ && expects_continue()) send_continue();
    read_client();
  }

  /// With the header read and no body byte yet: a declared body gets its whole buffer now,
  /// with the JSON parser's padding, so that it is never copied into a bigger one.
  void reserve_body() {
    body_reserved_ = true;
    if (const auto length = parser_->content_length(); length && *length <= server_.settings.max_body_bytes)
      parser_->get().body().reserve(static_cast<std::size_t>(*length) + request_parser::padding);
    parser_->eager(true);
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
    if (ec == http::error::header_limit) return send_error({api_errc::invalid_request, "the request headers are too large", {}});
    send_error({api_errc::invalid_request, fmt::format("malformed HTTP request: {}", ec.message()), {}});
  }

  void on_request() {
    request_ = parser_->release();
    // An absolute-form target is routed, and forwarded, by its path (RFC 9112 §3.2.2).
    if (const std::string_view target(request_.target().data(), request_.target().size()); !target.starts_with('/'))
      if (const auto origin = origin_form_target(target)) request_.target(std::string(*origin));
    keep_alive_ = request_.keep_alive() && !server_.draining.load(std::memory_order_relaxed);
    deadline = clock_type::time_point::max();
    dispatch();
  }

  // -- kvrouter's own routes -------------------------------------------------------------------
  void dispatch() {
    const std::string_view target(request_.target().data(), request_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = request_.method() == http::verb::get;
    const bool post = request_.method() == http::verb::post;
    const auto authorization = request_.find(http::field::authorization);
    if (auto refused = server_.keys->check(api_key_guard::classify(path),
                                           authorization == request_.end() ? std::string_view{}
                                                                           : std::string_view(authorization->value().data(),
                                                                                              authorization->value().size())))
      return send_error(*refused);
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (!post) return send_error({api_errc::method_not_allowed, "use POST", {}});
      return handle_completion(path == "/v1/chat/completions" ? api_endpoint::chat_completions : api_endpoint::completions);
    }
    if (path == "/v1/router/faults" && server_.settings.fault_injection) {
      if (!post) return send_error({api_errc::method_not_allowed, "use POST", {}});
      return handle_fault();
    }
    if (!is_own_route(path)) return handle_passthrough(path);
    if (!get) return send_error({api_errc::method_not_allowed, "use GET", {}});
    if (path == "/health") return send(http::status::ok, R"({"status":"ok"})", "application/json");
    if (path == "/ready") return handle_ready(target);
    if (path == "/v1/models") return handle_models();
    if (path.starts_with("/v1/models/")) return handle_model(path_segment_decoded(path.substr(11)).value_or(std::string(path.substr(11))));
    if (path == "/v1/router/sets")
      return send(http::status::ok,
                  sets_page(*server_.current_table(), server_.replication_status ? server_.replication_status() : std::string()),
                  "application/json");
    if (path == "/metrics") return send(http::status::ok, server_.metrics_text(), "text/plain; version=0.0.4");
    if (path == "/" || path == "/dashboard") return send(http::status::ok, std::string(status_page_html()), "text/html; charset=utf-8");
    if (path == "/v1/router/status")
      return send(http::status::ok, server_.traffic.status_json(*server_.current_table(), server_.uptime_seconds()),
                  "application/json");
    return send_error({api_errc::not_found, fmt::format("no route for {}", path), {}});
  }

  /// Routes kvrouter answers itself; every other one is the engines' and passes through.
  [[nodiscard]] static bool is_own_route(std::string_view path) {
    return path == "/health" || path == "/ready" || path == "/metrics" || path == "/" || path == "/dashboard" ||
           path == "/v1/models" || path.starts_with("/v1/models/") || path.starts_with("/v1/router/");
  }

  /// `/ready`: some set has a routable worker; `/ready?model=M`: M's set has one.
  void handle_ready(std::string_view target) {
    if (server_.draining.load(std::memory_order_relaxed))
      return send(http::status::service_unavailable, R"({"status":"draining"})", "application/json");
    auto table = server_.current_table();
    if (server_.not_ready)
      if (const auto why = server_.not_ready(*table))
        return send(http::status::service_unavailable, nlohmann::json{{"status", *why}}.dump(), "application/json");
    const auto model = query_parameter(target, "model");
    if (model && table->find(*model) == nullptr)
      return send(http::status::not_found, nlohmann::json{{"status", "unknown model"}, {"model", *model}}.dump(),
                  "application/json");
    for (const worker_set_route& set : table->sets) {
      if (model && set.model != *model) continue;
      for (const auto& worker : set.snapshot->load()->workers)
        if (worker.healthy) return send(http::status::ok, R"({"status":"ready"})", "application/json");
    }
    send(http::status::service_unavailable, R"({"status":"no routable worker"})", "application/json");
  }

  static nlohmann::json model_object(const worker_set_route& set) {
    return {{"id", set.model}, {"object", "model"}, {"created", 0}, {"owned_by", "kvrouter"}};
  }

  void handle_models() {
    nlohmann::json data = nlohmann::json::array();
    for (const worker_set_route& set : server_.current_table()->sets) data.push_back(model_object(set));
    send(http::status::ok, nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump(), "application/json");
  }

  /// `GET /v1/models/{id}` (ids such as `Qwen/Qwen3-0.6B` keep their slash).
  void handle_model(const std::string& id) {
    const auto table = server_.current_table();
    if (const worker_set_route* set = table->find(id)) return send(http::status::ok, model_object(*set).dump(), "application/json");
    send_error({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", id), "model"});
  }

  /// `{"set": NAME, "component": kv_subscriber | health_checker | media_fetcher | scorer | hasher}`:
  /// the watcher kills it as a crash would (and restarts it, as after a crash).
  void handle_fault() {
    const auto body = parse_plain_json(request_.body());
    if (!body.is_object() || !body.contains("set") || !body["set"].is_string() || !body.contains("component") ||
        !body["component"].is_string())
      return send_error({api_errc::invalid_request, R"(expected {"set": NAME, "component": NAME})", {}});
    if (server_.inject_fault) server_.inject_fault(body["set"].get<std::string>(), body["component"].get<std::string>());
    send(http::status::accepted, R"({"status":"sent"})", "application/json");
  }

  // -- routed requests -----------------------------------------------------------------------
  void handle_completion(api_endpoint endpoint) {
    auto table = server_.current_table();
    // A set that reads no prompt gets the body's envelope only (model, stream, user). With one
    // set, its mode decides before anything is parsed; with several, the envelope names the set
    // and a set that reads the prompt then gets the full parse.
    const bool dry_run = request_.find(dry_run_header) != request_.end();
    const bool envelope_first =
        std::ranges::any_of(table->sets, [&](const worker_set_route& s) { return reads_no_prompt(s, dry_run); });
    auto parsed = envelope_first ? parse_body(endpoint, body_reading::envelope) : parse_body(endpoint, body_reading::full);
    if (!parsed) return send_error(parsed.error());
    const worker_set_route* set = table->find(parsed->model);
    if (set == nullptr)
      return send_error({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", parsed->model), "model"});
    if (envelope_first && !reads_no_prompt(*set, dry_run)) {
      parsed = parse_body(endpoint, body_reading::full);
      if (!parsed) return send_error(parsed.error());
    }
    route_request(std::move(table), *set, std::move(*parsed));
  }

  /// Round-robin and random decide without reading the prompt (unless a dry run asks to see
  /// the decision's terms, which the scorer computes from it).
  [[nodiscard]] static bool reads_no_prompt(const worker_set_route& set, bool dry_run) {
    return decides_without_state(set.config) && set.hashers.empty() && !dry_run;
  }

  enum class body_reading : std::uint8_t { full, envelope };
  std::expected<routing_request, api_error> parse_body(api_endpoint endpoint, body_reading reading = body_reading::full) {
    std::string& body = request_.body();
    const std::size_t size = body.size();
    body.reserve(size + request_parser::padding);  // reserved as the body arrived (parse_buffered): no copy
    const std::string_view bytes(body.data(), size);
    return reading == body_reading::envelope ? thread_.json.parse_envelope(endpoint, bytes, body.capacity())
                                             : thread_.json.parse(endpoint, bytes, body.capacity());
  }

  /// Any route kvrouter does not serve itself goes to a worker of the set whose model the body
  /// names (a JSON `model`, or the `model` field of a multipart upload), else of the only set.
  /// SGLang's `/generate` routes on its prompt; the rest on load, the prompt's length estimated
  /// from the body. A body kvrouter cannot read is the engine's to judge, when the set is known.
  void handle_passthrough(std::string_view path) {
    const api_endpoint endpoint = path == "/generate" ? api_endpoint::generate : api_endpoint::other;
    const std::string& body = request_.body();
    routing_request request;
    request.endpoint = endpoint;
    std::optional<api_error> unreadable;
    const auto content_type = request_.find(http::field::content_type);
    const auto boundary = content_type == request_.end()
                              ? std::nullopt
                              : multipart_boundary(std::string_view(content_type->value().data(), content_type->value().size()));
    if (boundary) {
      if (const auto model = multipart_field(body, *boundary, "model")) request.model = *model;
    } else if (const auto first = body.find_first_not_of(" \t\r\n"); first != std::string::npos && body[first] == '{') {
      auto parsed = parse_body(endpoint);
      if (parsed) request = std::move(*parsed);
      else unreadable = parsed.error();
      if (parsed && request_.method() == http::verb::post) read_prompt_of_other_apis(path, request);
    }
    if (request.prompt_tokens == 0) request.prompt_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(body.size() / 4, UINT32_MAX));
    auto table = server_.current_table();
    const worker_set_route* set = nullptr;
    if (!request.model.empty()) {
      set = table->find(request.model);
      if (set == nullptr)
        return send_error({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", request.model), "model"});
    } else if (table->sets.size() == 1) {
      set = &table->sets.front();
    } else if (unreadable) {
      return send_error(*unreadable);
    } else {
      std::string models;
      for (const worker_set_route& s : table->sets) models += (models.empty() ? "" : ", ") + s.model;
      return send_error({table->sets.empty() ? api_errc::no_worker_available : api_errc::invalid_request,
                         table->sets.empty() ? std::string("no worker set is configured")
                                             : fmt::format("{} {} is passed to a worker of the model the body names: give \"model\" (one of {})",
                                                           std::string_view(request_.method_string().data(), request_.method_string().size()), path, models),
                         "model"});
    }
    if (serves_tokenize(path, *set)) return answer_tokenize_locally(path, *set);
    route_request(std::move(table), *set, std::move(request));
  }

  /// `/v1/responses` and `/v1/messages` route by prefix as the chat they render to (the worker
  /// still gets the body as sent); one whose rendering is not certain routes on load (counted).
  void read_prompt_of_other_apis(std::string_view path, routing_request& request) {
    const bool responses = path == "/v1/responses";
    if (!responses && path != "/v1/messages") return;
    auto chat = responses ? responses_as_chat(request_.body()) : messages_as_chat(request_.body());
    if (!chat) return server_.probe.prompt_routed_on_load();
    const std::size_t size = chat->size();
    chat->reserve(size + request_parser::padding);
    auto parsed = thread_.json.parse(api_endpoint::chat_completions, std::string_view(chat->data(), size), chat->capacity());
    if (!parsed || parsed->model != request.model) return server_.probe.prompt_routed_on_load();
    request = std::move(*parsed);
  }

  /// `/tokenize` and `/detokenize` are answered here with the set's own tokenizer and chat
  /// template when it has them (and the request wants nothing only the engine knows).
  [[nodiscard]] bool serves_tokenize(std::string_view path, const worker_set_route& set) const {
    if (request_.method() != http::verb::post || !set.text_tokenizer) return false;
    if (path == "/detokenize") return true;
    return path == "/tokenize" && !tokenize_needs_engine(request_.body());
  }

  void answer_tokenize_locally(std::string_view path, const worker_set_route& set) {
    server_.probe.tokenized_locally();
    tokenizer text = set.text_tokenizer->share();
    auto answer = path == "/detokenize" ? answer_detokenize(request_.body(), text)
                                        : answer_tokenize(request_.body(), text, set.chat.get(), set.chat_plain_fallback);
    if (!answer) return send_error(answer.error());
    send(http::status::ok, std::move(*answer), "application/json");
  }

  void route_request(std::shared_ptr<const routing_table> table, const worker_set_route& set, routing_request request) {
    if (auto refused = beyond_limits(request)) return send_error(*refused);
    auto options = routing_options(set);
    if (!options) return send_error(options.error());
    if (set.config.session_affinity_ttl_secs > 0) options->session = session_key(request);
    options->disaggregate = splits_into_legs(set, request);
    const std::uint64_t id = server_.next_request_id++;
    take_request_id(id);
    router_.start(std::move(table), set, std::make_shared<const routing_request>(std::move(request)), id, *options,
                  [this] { return make_sink(); });
    start_access_record();
    state_ = state::routing;
    watch_client();
    act(router_.route());
  }

  /// `x-kvrouter-dry-run: 1`, `x-kvrouter-priority: high | normal | low` (normal if absent) and
  /// `x-kvrouter-worker: NAME` (a worker of `set`).
  [[nodiscard]] std::expected<request_options, api_error> routing_options(const worker_set_route& set) const {
    request_options options;
    const auto dry_run = request_.find(dry_run_header);
    options.dry_run = dry_run != request_.end() && dry_run->value() == "1";
    if (const auto pinned = request_.find(worker_header); pinned != request_.end()) {
      const std::string_view name(pinned->value().data(), pinned->value().size());
      const auto it = std::find_if(set.workers.begin(), set.workers.end(), [&](const worker_target& w) { return w.name == name; });
      if (it == set.workers.end())
        return std::unexpected(api_error{api_errc::invalid_request,
                                         fmt::format("x-kvrouter-worker: the set of model {} has no worker \"{}\"", set.model,
                                                     name.substr(0, 128)),
                                         {}});
      options.pinned_worker = static_cast<std::uint32_t>(it - set.workers.begin());
    }
    const auto given = request_.find(priority_header);
    if (given == request_.end()) return options;
    const std::string_view value(given->value().data(), given->value().size());
    const auto priority = parse_priority(value);
    if (!priority)
      return std::unexpected(api_error{
          api_errc::invalid_request,
          fmt::format("x-kvrouter-priority must be high, normal or low (got \"{}\")", value.substr(0, 64)), {}});
    options.priority = *priority;
    return options;
  }

  /// Session affinity's key: the session header's value, else the body's `user`; 0 = neither.
  [[nodiscard]] std::uint64_t session_key(const routing_request& request) const {
    std::string_view name = request.user;
    if (const auto header = request_.find(server_.settings.session_header); header != request_.end())
      name = std::string_view(header->value().data(), header->value().size());
    if (name.empty()) return 0;
    const std::uint64_t key = XXH3_64bits(name.data(), name.size());
    return key == 0 ? 1 : key;
  }

  /// The client's `X-Request-Id` if it is a sane one (1-128 visible ASCII characters), else
  /// one of kvrouter's own, `kvr-TAG-N`; it goes to the worker and back to the client.
  void take_request_id(std::uint64_t id) {
    const auto given = request_.find("x-request-id");
    client_sent_id_ = false;
    if (given != request_.end() && !given->value().empty() && given->value().size() <= 128 &&
        std::ranges::all_of(given->value(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      request_id_.assign(given->value().data(), given->value().size());
      client_sent_id_ = true;
      return;
    }
    request_id_ = fmt::format("kvr-{:010x}-{}", server_.instance_tag, id);
  }

  /// Work a request may ask of the router is bounded: its images, and its token-id prompt.
  [[nodiscard]] std::optional<api_error> beyond_limits(const routing_request& request) const {
    std::size_t images = 0;
    for (const chat_message& m : request.messages) images += m.image_urls.size();
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

  route_sink make_sink() {
    return [answer = std::make_shared<decision_sink>(shared_from_this())](route_decision decision) {
      answer->deliver(std::move(decision));
    };
  }

  void act(route_verdict verdict) {
    switch (verdict.what) {
      case route_verdict::kind::wait: return;
      case route_verdict::kind::answer:
        if (client_gone_) {  // e.g. withdrawn from the queue
          log_access("client_left", 0, 0);
          return close_after_client_left();
        }
        send(static_cast<http::status>(verdict.status), std::move(verdict.body), "application/json");
        return log_access(verdict.status == 200 ? "dry_run" : "router_error", verdict.status, local_body_.size());
      case route_verdict::kind::proxy:
        if (client_gone_) {  // the client left while the request was being routed
          router_.finished();
          log_access("client_left", 0, 0);
          return close_after_client_left();
        }
        if (router_.prefill_worker() != nullptr)
          return router_.set().disaggregation->protocol == pd_protocol::sglang ? start_sglang_legs() : start_prefill();
        if (router_.set().disaggregation) server_.probe.pd_ran(router_.local_prefill() ? ingress_probe::pd_path::local
                                                                                       : ingress_probe::pd_path::aggregated_fallback);
        return start_decode(nullptr);
    }
  }

  /// The answering leg: the whole request on its worker, or a disaggregated request's decode
  /// leg with its rewritten `body`.
  void start_decode(const std::string* body) {
    state_ = state::proxying;
    decode_leg_ = body != nullptr;
    decode_first_bytes_seen_ = false;
    if (decode_leg_) decode_started_ = clock_type::now();
    stream_.start(router_.worker(), request_, keep_alive_,
                  {.request_id = request_id_,
                   .client_sent_id = client_sent_id_,
                   .decision_headers = !server_.settings.no_decision_headers,
                   .worker = router_.worker().name,
                   .overlap_blocks = router_.overlap_blocks()},
                  body);
  }

  // -- disaggregated requests (docs/disaggregation.md) ----------------------------------------
  /// Completions and chats of a disaggregated set run as two legs, and SGLang's `/generate`.
  /// vLLM runs requests asking for several choices aggregated (as its own proxy does); an
  /// SGLang decode worker serves nothing without a bootstrap room, so SGLang splits them too.
  [[nodiscard]] bool splits_into_legs(const worker_set_route& set, const routing_request& request) const {
    if (!set.disaggregation) return false;
    if (set.disaggregation->protocol == pd_protocol::sglang)
      return request.endpoint == api_endpoint::chat_completions || request.endpoint == api_endpoint::completions ||
             request.endpoint == api_endpoint::generate;
    const bool generative = request.endpoint == api_endpoint::chat_completions || request.endpoint == api_endpoint::completions;
    return generative && !asks_for_several_choices(request_.body());
  }

  /// Starts a prefill leg of `body` on the chosen prefill worker; `done` gets its outcome.
  void start_prefill_leg(std::string body, upstream_exchange::done_handler done) {
    const worker_target& worker = *router_.prefill_worker();
    std::string head = upstream_request_head(worker, request_, body.size(), request_id_, client_sent_id_,
                                             server_.settings.forward_authorization);
    prefill_started_ = clock_type::now();
    // Held here too: a leg failing at once may retry, and the retry replaces prefill_ while
    // this leg's start() is still on the stack.
    const auto leg = std::make_shared<upstream_exchange>(server_, thread_);
    prefill_ = leg;
    leg->start(worker, std::move(head), std::move(body), server_.settings.pd_timeout, shared_from_this(), std::move(done));
  }

  void cancel_prefill() {
    if (prefill_ && prefill_->running()) prefill_->cancel();
  }

  [[nodiscard]] static double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
  }

  /// The decode leg's first answer bytes (or all of it in one read): its TTFT, once per leg.
  void decode_leg_answering() {
    if (!decode_leg_ || std::exchange(decode_first_bytes_seen_, true)) return;
    server_.probe.pd_decode_first_bytes_after(seconds_since(decode_started_));
  }

  /// vLLM's prefill leg: one token, no stream, a remote decode asked for; its answer's params
  /// go to the decode worker with the client's body.
  void start_prefill() {
    auto body = vllm_prefill_body(request_.body());
    if (!body) {  // the body parsed as a request but is not one JSON object: the client's error
      router_.finished();
      send_error({api_errc::invalid_json, fmt::format("the body cannot be split into prefill and decode: {}", body.error()), {}});
      return log_access("router_error", http_status(api_errc::invalid_json), local_body_.size());
    }
    state_ = state::prefilling;
    deadline = clock_type::time_point::max();  // the leg has its own (--pd-timeout-secs)
    start_prefill_leg(std::move(*body), [this](upstream_exchange::outcome outcome) { on_prefill_answer(std::move(outcome)); });
  }

  void on_prefill_answer(upstream_exchange::outcome outcome) {
    using kind = upstream_exchange::outcome::kind;
    const std::string prefill_name = router_.prefill_worker()->name;
    switch (outcome.what) {
      case kind::timed_out:
        server_.probe.pd_prefill_timed_out();
        router_.finished();
        send_error({api_errc::worker_timeout,
                    fmt::format("prefill worker {} did not answer within {} s", prefill_name, server_.settings.pd_timeout.count()),
                    {}});
        return log_access("timed_out", http_status(api_errc::worker_timeout), local_body_.size());
      case kind::worker_failed:
        server_.probe.pd_prefill_failed();
        if (client_gone_) {
          log_access("client_left", 0, 0);
          return client_left_during_request();
        }
        state_ = state::routing;
        return act(router_.on_prefill_failed(outcome.detail));
      case kind::answered: break;
    }
    server_.probe.pd_prefill_took(seconds_since(prefill_started_));
    if (outcome.status != 200) {  // the prefill's verdict on the request is the client's answer
      server_.probe.pd_prefill_error_status();
      router_.finished();
      send(static_cast<http::status>(outcome.status), std::move(outcome.body), "application/json");
      return log_access("prefill_error", outcome.status, local_body_.size());
    }
    auto params = kv_transfer_params_of(outcome.body);
    if (!params) {
      server_.probe.pd_missing_params();
      if (router_.set().disaggregation->missing_params == missing_params_policy::fail) {
        router_.finished();
        send_error({api_errc::worker_failed, fmt::format("prefill worker {}: {}", prefill_name, describe(params.error())), {}});
        return log_access("router_error", http_status(api_errc::worker_failed), local_body_.size());
      }
      server_.probe.pd_ran(ingress_probe::pd_path::aggregated_fallback);
      router_.run_aggregated();
      return start_decode(nullptr);
    }
    auto decode_body = vllm_decode_body(request_.body(), *params);
    if (!decode_body) {  // cannot happen for a body the prefill leg took; answered rather than assumed
      router_.finished();
      send_error({api_errc::invalid_json, decode_body.error(), {}});
      return log_access("router_error", http_status(api_errc::invalid_json), local_body_.size());
    }
    router_.prefill_done();
    server_.probe.pd_ran(ingress_probe::pd_path::disaggregated);
    leg_body_ = std::move(*decode_body);
    start_decode(&leg_body_);
  }

  /// SGLang: both legs get the body with the prefill worker's bootstrap address and fresh rooms
  /// and run at once; the decode leg streams to the client, the prefill leg is drained.
  void start_sglang_legs() {
    const worker_target& prefill = *router_.prefill_worker();
    rooms_.resize(prompts_in(request_.body()));
    for (std::uint64_t& room : rooms_) room = thread_.bootstrap_rooms() >> 1;  // 63 bits, as SGLang's rooms
    auto body = sglang_body(request_.body(), prefill.host, prefill.bootstrap_port, rooms_);
    if (!body) {  // the body parsed as a request but is not one JSON object: the client's error
      router_.finished();
      send_error({api_errc::invalid_json, fmt::format("the body cannot be split into prefill and decode: {}", body.error()), {}});
      return log_access("router_error", http_status(api_errc::invalid_json), local_body_.size());
    }
    server_.probe.pd_ran(ingress_probe::pd_path::disaggregated);
    leg_body_ = std::move(*body);
    start_prefill_leg(leg_body_, [this](upstream_exchange::outcome outcome) { on_sglang_prefill_answer(std::move(outcome)); });
    if (auto cut = std::exchange(decode_cut_, std::nullopt)) return after_decode_cut(std::move(*cut));
    start_decode(&leg_body_);
  }

  /// What becomes of a request whose decode leg is cut because its prefill leg failed first.
  struct decode_cut {
    bool retry = false;   ///< the prefill worker failed: choose a new pair (else answer)
    unsigned status = 0;  ///< the answer: the prefill's error status, or a timeout's 504
    std::string body;
    std::string outcome;  ///< for the access log
    std::string detail;   ///< why the prefill worker failed (retry)
  };

  /// An SGLang prefill leg ended while its decode leg runs. Success only releases its booking;
  /// a failure before the decode leg answered cuts the decode leg and decides for the request;
  /// after, the decode leg already has the KV and goes on.
  void on_sglang_prefill_answer(upstream_exchange::outcome outcome) {
    using kind = upstream_exchange::outcome::kind;
    const std::string prefill_name = router_.prefill_worker()->name;
    const bool decode_answered = state_ == state::proxying && stream_.answered();
    std::optional<decode_cut> cut;
    switch (outcome.what) {
      case kind::answered:
        server_.probe.pd_prefill_took(seconds_since(prefill_started_));
        if (outcome.status == 200) break;
        server_.probe.pd_prefill_error_status();
        cut = decode_cut{false, outcome.status, std::move(outcome.body), "prefill_error", {}};
        break;
      case kind::timed_out:
        server_.probe.pd_prefill_timed_out();
        cut = decode_cut{false, static_cast<unsigned>(http_status(api_errc::worker_timeout)),
                         error_body({api_errc::worker_timeout,
                                     fmt::format("prefill worker {} did not answer within {} s", prefill_name,
                                                 server_.settings.pd_timeout.count()),
                                     {}}),
                         "timed_out", {}};
        break;
      case kind::worker_failed:
        server_.probe.pd_prefill_failed();
        cut = decode_cut{true, 0, {}, {}, std::move(outcome.detail)};
        break;
    }
    if (!cut || decode_answered) {
      router_.prefill_done();
      return stream_.resume();  // a held decode failure was the decode worker's own
    }
    decode_cut_ = std::move(cut);
    // Failed at once, before the decode leg started: start_sglang_legs decides. Else the decode
    // leg's early end, which its cut brings, does.
    if (state_ == state::proxying) stream_.cancel();
  }

  void after_decode_cut(decode_cut cut) {
    if (cut.retry) {
      state_ = state::routing;
      return act(router_.on_prefill_failed(cut.detail));
    }
    router_.finished();
    send(static_cast<http::status>(cut.status), std::move(cut.body), "application/json");
    log_access(cut.outcome, cut.status, local_body_.size());
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
    if (state_ == state::routing) router_.withdraw();
    if (state_ == state::prefilling) {  // vLLM's prefill leg, nothing else running: the request ends here
      cancel_prefill();
      log_access("client_left", 0, 0);
      return client_left_during_request();
    }
    stream_.cancel();
  }

  /// The proxy stream ended because the client left before any answer: release, no blame.
  void client_left_during_request() {
    router_.finished();
    close_after_client_left();
  }

  void close_after_client_left() {
    server_.probe.client_disconnected();
    close();
  }

  // -- the access log -------------------------------------------------------------------------
  void start_access_record() {
    logged_ = server_.access == nullptr;
    if (logged_) return;  // no access log: no clocks read per request
    received_wall_ = std::chrono::system_clock::now();
    received_ = clock_type::now();
    first_bytes_.reset();
  }

  /// The routed request ended (`outcome`, with `status` as the client got it, 0 = it left, and
  /// `bytes` of answer body).
  void log_access(std::string_view outcome, unsigned status, std::uint64_t bytes) {
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
                           .queue_wait_ms = ms(router_.queued_for()),
                           .ttft_ms = first_bytes_ ? ms(*first_bytes_ - received_) : -1.0,
                           .duration_ms = ms(clock_type::now() - received_),
                           .status = status,
                           .bytes = bytes,
                           .outcome = outcome});
  }

  // -- answering directly ----------------------------------------------------------------------
  void send_error(const api_error& error) {
    send(static_cast<http::status>(http_status(error.code)), error_body(error), "application/json");
  }

  void send(http::status status, std::string body, std::string_view content_type) {
    state_ = state::answering;
    const auto reason = http::obsolete_reason(status);
    // A 429 (the set's queue or in-flight bound is full) says when to come back.
    head_ = fmt::format("HTTP/1.1 {} {}\r\nServer: kvrouter\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n",
                        static_cast<unsigned>(status), std::string_view(reason.data(), reason.size()), content_type,
                        body.size(), status == http::status::too_many_requests ? "Retry-After: 1\r\n" : "",
                        keep_alive_ ? "" : "Connection: close\r\n");
    local_body_ = std::move(body);
    server_.probe.responded(static_cast<unsigned>(status));
    expire_after(server_.settings.client_timeout);
    const std::array<asio::const_buffer, 2> out{asio::buffer(head_), asio::buffer(local_body_)};
    asio::async_write(client_, out, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec || !self->keep_alive_ || self->client_gone_) return self->close();
      self->next_request();
    });
  }

  void next_request() {
    router_.reset();
    client_gone_ = false;
    begin_request();
  }

  void close() {
    state_ = state::closed;
    deadline = clock_type::time_point::max();
    error_code ignored;
    client_.shutdown(tcp::socket::shutdown_both, ignored);
    client_.close(ignored);
  }

  http_ingress::impl& server_;
  io_thread& thread_;
  std::list<timed*>::iterator registration_;
  tcp::socket client_;
  beast::flat_buffer buffer_;
  bool reading_client_ = false;
  bool continue_sent_ = false;  ///< `100 Continue` went out for the request being read
  bool framing_checked_ = false;  ///< the request's framing fields were checked (once its head is read)
  bool body_reserved_ = false;    ///< reserve_body() ran for the request being read
  std::size_t head_bytes_ = 0;    ///< bytes of the request's head the parser consumed so far
  bool keep_alive_ = true;
  std::string request_id_;       ///< the routed request's id (the client's, or generated)
  bool client_sent_id_ = false;  ///< it came with the request (so it is forwarded as it was)
  bool client_gone_ = false;    ///< the client left while its request was routed or proxied
  bool logged_ = true;          ///< the routed request's access-log line is written (or not wanted)
  std::chrono::system_clock::time_point received_wall_;
  clock_type::time_point received_;
  std::optional<clock_type::time_point> first_bytes_;
  state state_ = state::reading_request;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::string head_;        ///< a local answer's head
  std::string local_body_;  ///< a local answer's body
  request_router router_;
  proxy_stream stream_;
  std::shared_ptr<upstream_exchange> prefill_;  ///< a disaggregated request's prefill leg (one per leg)
  std::string leg_body_;  ///< the decode leg's body (vLLM: the client's plus the transfer params; SGLang: both legs')
  std::vector<std::uint64_t> rooms_;  ///< SGLang's bootstrap rooms, one per prompt
  clock_type::time_point prefill_started_;
  bool decode_leg_ = false;               ///< the stream is a disaggregated request's decode leg
  bool decode_first_bytes_seen_ = false;  ///< its TTFT was recorded
  clock_type::time_point decode_started_;
  std::optional<decode_cut> decode_cut_;  ///< SGLang: the decode leg is being cut because its prefill leg failed
};

void decision_sink::deliver(route_decision decision) {
  auto executor = session_->executor();
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
