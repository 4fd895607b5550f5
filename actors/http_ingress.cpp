#include <utility>  // before Asio under g++ 12

#include "actors/http_ingress.hpp"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/openai.hpp"

namespace kvr {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr const char* dry_run_header = "x-kvrouter-dry-run";
constexpr std::size_t max_idle_per_worker = 64;

/// Which hasher of the set's pool takes a request. A chat goes by its first bytes (its system
/// prompt and first turn), so every turn of a conversation meets the hasher whose segment cache
/// already holds the earlier messages; other prompts spread round-robin.
std::size_t hasher_for(const routing_request& request, std::uint64_t request_id, std::size_t hashers) {
  const std::string& messages = request.chat.messages_json;
  if (messages.empty()) return request_id % hashers;
  return XXH3_64bits(messages.data(), std::min<std::size_t>(messages.size(), 256)) % hashers;
}

/// Counters for /metrics, shared by all I/O threads.
struct ingress_counters {
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> open_connections{0};
  std::atomic<std::uint64_t> proxied{0};
  std::atomic<std::uint64_t> proxied_in_flight{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> stale_connection_retries{0};
  std::atomic<std::uint64_t> worker_failures{0};
  std::atomic<std::uint64_t> worker_timeouts{0};
  std::atomic<std::uint64_t> client_disconnects{0};
  std::atomic<std::uint64_t> dry_runs{0};
  std::array<std::atomic<std::uint64_t>, 6> responses_by_class{};  ///< index = status / 100
  std::atomic<std::uint64_t> overloaded{0};
};

struct upstream_connection {
  explicit upstream_connection(asio::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

/// What one I/O thread owns: its io_context, acceptor, idle upstream connections, JSON parser.
struct io_thread {
  asio::io_context io{1};
  std::optional<tcp::acceptor> acceptor;
  std::unordered_map<std::string, std::vector<std::unique_ptr<upstream_connection>>> idle;  ///< by worker URL
  request_parser json;

  std::unique_ptr<upstream_connection> take_idle(const std::string& url) {
    auto it = idle.find(url);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto connection = std::move(it->second.back());
    it->second.pop_back();
    return connection;
  }
  void give_back(const std::string& url, std::unique_ptr<upstream_connection> connection) {
    auto& pool = idle[url];
    if (pool.size() < max_idle_per_worker) pool.push_back(std::move(connection));
  }
};

}  // namespace

struct http_ingress::impl {
  ingress_settings settings;
  std::vector<std::unique_ptr<io_thread>> threads;
  std::mutex table_mutex;
  std::shared_ptr<const routing_table> table = std::make_shared<routing_table>();
  /// Resolved addresses of worker hosts, by "host:port" (resolved when a table is installed).
  std::map<std::string, std::vector<tcp::endpoint>> resolved;
  std::atomic<std::uint64_t> next_request_id{1};
  ingress_counters counters;
  std::uint16_t bound_port = 0;

  std::shared_ptr<const routing_table> current_table() {
    std::lock_guard lock(table_mutex);
    return table;
  }
  std::vector<tcp::endpoint> endpoints_of(const worker_target& target) {
    std::lock_guard lock(table_mutex);
    auto it = resolved.find(target.host + ":" + target.port);
    return it == resolved.end() ? std::vector<tcp::endpoint>{} : it->second;
  }

  void accept(io_thread& thread);
  std::string metrics_text();
};

namespace {

/// One client connection. Lives on one I/O thread; every handler runs there.
class session : public std::enable_shared_from_this<session> {
 public:
  session(http_ingress::impl& server, io_thread& thread, tcp::socket socket)
      : server_(server), thread_(thread), client_(std::move(socket)) {
    ++server_.counters.connections;
    ++server_.counters.open_connections;
  }
  ~session() { --server_.counters.open_connections; }

  void start() { read_request(); }

 private:
  // -- reading requests ----------------------------------------------------------------------
  void read_request() {
    parser_.emplace();
    parser_->header_limit(server_.settings.max_header_bytes);
    parser_->body_limit(server_.settings.max_body_bytes);
    client_.expires_after(server_.settings.client_timeout);
    http::async_read(client_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_request(ec); });
  }

  void on_request(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      return send_error({api_errc::body_too_large,
                         fmt::format("the request body exceeds {} bytes", server_.settings.max_body_bytes), {}});
    }
    if (ec == http::error::header_limit) {
      keep_alive_ = false;
      return send_error({api_errc::invalid_request, "the request headers are too large", {}});
    }
    if (ec) return close();  // end of stream, timeout (slow or idle client), reset
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
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
    dry_run_ = request_[dry_run_header] == "1";
    excluded_.clear();
    attempts_ = 0;
    route();
  }

  void route() {
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
    job->reply = [self = shared_from_this(), executor = client_.get_executor()](route_decision decision) {
      asio::post(executor, [self, decision = std::move(decision)]() mutable { self->on_decision(std::move(decision)); });
    };
    // Only prompts the hasher can hash take the extra hop: token ids, text when the set has a
    // tokenizer, chats when it also has a chat template.
    const bool hashable = !routing_->prompt_token_ids.empty() ||
                          (set_->hashes_text && !routing_->prompt_text.empty()) ||
                          (set_->hashes_chat && routing_->endpoint == api_endpoint::chat_completions);
    if (!set_->hashers.empty() && hashable)
      caf::anon_send(set_->hashers[hasher_for(*routing_, request_id_, set_->hashers.size())], std::move(job));
    else
      caf::anon_send(set_->scorer, std::move(job));
  }

  void on_decision(route_decision decision) {
    set_->routing_in_flight->fetch_sub(1);
    if (!decision.ok) return send_error({decision.error, decision.error_message, {}});
    if (dry_run_) return answer_dry_run(decision);
    worker_ = decision.worker;
    ++attempts_;
    if (!upstream_prepared_) prepare_upstream_request();
    stale_retry_done_ = false;
    connect_upstream(true);
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
  /// The client's request itself goes upstream (no copy): hop-by-hop fields go, the body and
  /// every other field stay as the client sent them.
  void prepare_upstream_request() {
    for (http::field hop : {http::field::connection, http::field::keep_alive, http::field::transfer_encoding,
                            http::field::te, http::field::upgrade, http::field::proxy_authorization})
      request_.erase(hop);
    request_.erase(beast::string_view(dry_run_header));
    client_target_ = std::string(request_.target());
    request_.version(11);
    request_.keep_alive(true);
    request_.prepare_payload();
    upstream_prepared_ = true;
  }

  void connect_upstream(bool may_reuse) {
    const worker_target& worker = set_->workers[worker_];
    if (worker.base_path.empty()) request_.target(client_target_);
    else request_.target(worker.base_path + client_target_);
    request_.set(http::field::host, worker.host_header);
    upstream_ = may_reuse ? thread_.take_idle(worker.url) : nullptr;
    upstream_reused_ = upstream_ != nullptr;
    if (upstream_reused_) return write_upstream();
    upstream_ = std::make_unique<upstream_connection>(thread_.io);
    const auto endpoints = server_.endpoints_of(worker);
    if (endpoints.empty()) return worker_failed("the worker's address could not be resolved");
    upstream_->stream.expires_after(server_.settings.connect_timeout);
    upstream_->stream.async_connect(endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return self->worker_failed(fmt::format("cannot connect: {}", ec.message()));
      beast::error_code ignored;
      self->upstream_->stream.socket().set_option(tcp::no_delay(true), ignored);  // small SSE writes go out at once
      self->write_upstream();
    });
  }

  void write_upstream() {
    upstream_->stream.expires_after(server_.settings.upstream_timeout);
    http::async_write(upstream_->stream, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->upstream_failed_before_answer(ec);
      self->read_upstream_header();
    });
  }

  void read_upstream_header() {
    upstream_parser_.emplace();
    upstream_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // boost::none would mean 0
    upstream_->stream.expires_after(server_.settings.upstream_timeout);
    watch_client();
    http::async_read_header(upstream_->stream, upstream_->buffer, *upstream_parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->upstream_failed_before_answer(ec);
                              self->forward_header();
                            });
  }

  /// A pooled connection the worker closed meanwhile fails before any answer: retry once on a
  /// fresh connection without blaming the worker. Otherwise the worker failed.
  void upstream_failed_before_answer(beast::error_code ec) {
    if (client_gone_) {  // the client left while the worker was busy: cancel, answer nobody
      ++server_.counters.client_disconnects;
      upstream_.reset();
      release_booking();
      return close();
    }
    if (ec == beast::error::timeout) {
      ++server_.counters.worker_timeouts;
      stop_watching_client();
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
    ++server_.counters.worker_failures;
    stop_watching_client();
    upstream_.reset();
    caf::anon_send(set_->scorer, worker_failed_atom_v, request_id_, worker_);
    excluded_.push_back(worker_);
    if (attempts_ <= server_.settings.max_retries) {
      ++server_.counters.retries;
      return route();
    }
    send_error({api_errc::worker_failed,
                fmt::format("workers failed before answering ({} attempts; last: {} on {})", attempts_, why,
                            set_->workers[worker_].name),
                {}});
  }

  void forward_header() {
    auto& response = upstream_parser_->get();
    response.version(11);
    response.erase(http::field::connection);
    response.erase(http::field::keep_alive);
    if (!response.has_content_length() && !response.chunked() && !upstream_parser_->is_done()) response.chunked(true);
    response.keep_alive(keep_alive_);
    answered_ = true;  // the worker answered: from here on, never retry
    ++server_.counters.proxied;
    ++server_.counters.proxied_in_flight;
    status_class_ = response.result_int() / 100;
    serializer_.emplace(response);
    // The header goes out together with the first body bytes: one write instead of two.
    relay_body();
  }

  void relay_body() {
    if (serializer_->is_done()) return complete();
    if (upstream_parser_->is_done()) return write_body(0);
    auto& body = upstream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    upstream_->stream.expires_after(server_.settings.upstream_timeout);
    http::async_read_some(upstream_->stream, upstream_->buffer, *upstream_parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec) return self->upstream_broke(ec);
                            self->write_body(self->chunk_.size() - self->upstream_parser_->get().body().size);
                          });
  }

  /// The worker's stream failed: before anything reached the client it is still a worker
  /// failure with an error answer; after, the client's connection is cut.
  void upstream_broke(beast::error_code ec) {
    if (serializer_->is_header_done() || client_gone_)
      return abort_stream(client_gone_ ? request_outcome::client_disconnected : request_outcome::worker_error);
    --server_.counters.proxied_in_flight;
    answered_ = false;
    upstream_failed_before_answer(ec);
  }

  /// Forwards what one read brought (coalescing nothing across reads), then reads on.
  void write_body(std::size_t bytes) {
    // First bytes of a longer answer: the worker's prefill is done. (An answer complete in
    // one read needs no separate message: finishing releases the prefill too.)
    if (bytes > 0 && !first_token_sent_ && !upstream_parser_->is_done()) {
      first_token_sent_ = true;
      caf::anon_send(set_->scorer, first_token_atom_v, request_id_);
    }
    auto& body = upstream_parser_->get().body();
    body.data = bytes > 0 ? chunk_.data() : nullptr;
    body.size = bytes;
    body.more = !upstream_parser_->is_done();
    client_.expires_after(server_.settings.client_timeout);
    http::async_write(client_, *serializer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return self->abort_stream(request_outcome::client_disconnected);
      self->relay_body();
    });
  }

  void complete() {
    const bool reusable = upstream_parser_->keep_alive() && upstream_parser_->is_done();
    stop_watching_client();
    if (reusable) thread_.give_back(set_->workers[worker_].url, std::move(upstream_));
    upstream_.reset();
    --server_.counters.proxied_in_flight;
    ++server_.counters.responses_by_class[std::min<unsigned>(status_class_, 5)];
    release_booking();
    if (keep_alive_) return next_request();
    close();
  }

  /// The stream broke after bytes went to the client: nothing can be retried or answered.
  void abort_stream(request_outcome outcome) {
    if (outcome == request_outcome::client_disconnected) ++server_.counters.client_disconnects;
    stop_watching_client();
    upstream_.reset();
    --server_.counters.proxied_in_flight;
    release_booking();
    close();
  }

  /// The request ended, however it ended: the scorer releases its load.
  void release_booking() { caf::anon_send(set_->scorer, finished_atom_v, request_id_); }

  /// While the worker works, notice a client that goes away (readable + zero bytes on peek)
  /// and cancel the upstream request at once.
  void watch_client() {
    if (watching_) return;
    watching_ = true;
    client_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation = watch_generation_](
                                                            beast::error_code ec) {
      if (generation != self->watch_generation_) return;  // a watch of an earlier request
      self->watching_ = false;
      if (ec || self->upstream_ == nullptr) return;
      char byte;
      beast::error_code peek_error;
      const std::size_t n = self->client_.socket().receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_error);
      if (n > 0 || peek_error == asio::error::would_block) return;  // a pipelined request: not a disconnect
      self->client_gone_ = true;
      if (self->upstream_) self->upstream_->stream.socket().close();  // pending upstream ops fail now
    });
  }

  void stop_watching_client() {
    if (!watching_) return;
    watching_ = false;
    ++watch_generation_;
    beast::error_code ignored;
    client_.socket().cancel(ignored);
  }

  // -- answering directly ----------------------------------------------------------------------
  void send_error(const api_error& error) {
    send(static_cast<http::status>(http_status(error.code)), error_body(error), "application/json");
  }

  void send(http::status status, std::string body, std::string_view content_type) {
    auto response = std::make_shared<http::response<http::string_body>>(status, 11);
    response->set(http::field::server, "kvrouter");
    response->set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    response->keep_alive(keep_alive_);
    response->body() = std::move(body);
    response->prepare_payload();
    ++server_.counters.responses_by_class[std::min<unsigned>(static_cast<unsigned>(status) / 100, 5)];
    client_.expires_after(server_.settings.client_timeout);
    http::async_write(client_, *response, [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
      if (ec || !self->keep_alive_) return self->close();
      self->next_request();
    });
  }

  void next_request() {
    upstream_prepared_ = false;
    upstream_parser_.reset();
    serializer_.reset();
    routing_.reset();
    table_.reset();
    set_ = nullptr;
    answered_ = first_token_sent_ = client_gone_ = false;
    read_request();
  }

  void close() {
    beast::error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    client_.socket().close(ignored);
  }

  http_ingress::impl& server_;
  io_thread& thread_;
  beast::tcp_stream client_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  bool keep_alive_ = true;

  std::shared_ptr<const routing_table> table_;  ///< keeps set_ alive for this request
  const worker_set_route* set_ = nullptr;
  std::shared_ptr<const routing_request> routing_;
  std::uint64_t request_id_ = 0;
  bool dry_run_ = false;
  std::vector<std::uint32_t> excluded_;
  std::uint32_t attempts_ = 0;
  std::uint32_t worker_ = 0;

  std::string client_target_;
  std::unique_ptr<upstream_connection> upstream_;
  bool upstream_reused_ = false;
  bool stale_retry_done_ = false;
  std::optional<http::response_parser<http::buffer_body>> upstream_parser_;
  std::optional<http::response_serializer<http::buffer_body>> serializer_;
  std::array<char, 16384> chunk_{};
  bool answered_ = false;
  bool first_token_sent_ = false;
  bool client_gone_ = false;
  bool watching_ = false;
  std::uint64_t watch_generation_ = 0;
  bool upstream_prepared_ = false;
  unsigned status_class_ = 2;
};

}  // namespace

void http_ingress::impl::accept(io_thread& thread) {
  thread.acceptor->async_accept(thread.io, [this, &thread](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<session>(*this, thread, std::move(socket))->start();
    }
    if (thread.acceptor->is_open()) accept(thread);
  });
}

std::string http_ingress::impl::metrics_text() {
  std::string out;
  auto counter = [&](std::string_view name, std::string_view help, std::string_view type, auto value,
                     std::string_view labels = {}) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{} {}\n", name, help, name, type, name, labels, value);
  };
  counter("kvrouter_connections_total", "Client connections accepted.", "counter", counters.connections.load());
  counter("kvrouter_open_connections", "Client connections open now.", "gauge", counters.open_connections.load());
  counter("kvrouter_proxied_requests_total", "Requests answered by a worker.", "counter", counters.proxied.load());
  counter("kvrouter_proxied_requests_in_flight", "Requests streaming from a worker now.", "gauge",
          counters.proxied_in_flight.load());
  counter("kvrouter_retries_total", "Re-routes after a worker failed before answering.", "counter", counters.retries.load());
  counter("kvrouter_stale_connection_retries_total", "Retries on a fresh connection after a pooled one was closed.",
          "counter", counters.stale_connection_retries.load());
  counter("kvrouter_worker_failures_total", "Workers failing before answering (refused, reset).", "counter",
          counters.worker_failures.load());
  counter("kvrouter_worker_timeouts_total", "Workers not answering within the upstream timeout.", "counter",
          counters.worker_timeouts.load());
  counter("kvrouter_client_disconnects_total", "Clients gone before their answer was complete.", "counter",
          counters.client_disconnects.load());
  counter("kvrouter_dry_runs_total", "Routing-only requests (x-kvrouter-dry-run: 1).", "counter", counters.dry_runs.load());
  counter("kvrouter_overloaded_total", "Requests refused because routing was saturated.", "counter",
          counters.overloaded.load());
  out += "# HELP kvrouter_responses_total Responses by status class.\n# TYPE kvrouter_responses_total counter\n";
  for (std::size_t c = 1; c < counters.responses_by_class.size(); ++c)
    out += fmt::format("kvrouter_responses_total{{code=\"{}xx\"}} {}\n", c, counters.responses_by_class[c].load());

  auto table = current_table();
  auto family = [&](std::string_view name, std::string_view help, std::string_view type, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const worker_set_route& set : table->sets) {
      const auto snapshot = set.snapshot->load();
      for (const auto& w : snapshot->workers)
        out += fmt::format("{}{{set=\"{}\",model=\"{}\",worker=\"{}\"}} {}\n", name, set.name, set.model, w.name, value_of(w));
    }
  };
  using worker = scorer_snapshot::worker;
  family("kvrouter_worker_healthy", "1 if the worker takes requests.", "gauge", [](const worker& w) { return w.healthy ? 1 : 0; });
  family("kvrouter_worker_active_prefill_tokens", "Booked prompt tokens not yet prefilled.", "gauge",
         [](const worker& w) { return w.prefill_tokens; });
  family("kvrouter_worker_active_decode_blocks", "KV blocks held by requests in flight.", "gauge",
         [](const worker& w) { return w.decode_blocks; });
  family("kvrouter_worker_active_requests", "Requests in flight.", "gauge", [](const worker& w) { return w.requests; });
  family("kvrouter_worker_index_blocks", "Blocks the prefix index holds for the worker.", "gauge",
         [](const worker& w) { return w.index_blocks; });
  family("kvrouter_worker_routed_total", "Requests routed to the worker.", "counter", [](const worker& w) { return w.routed; });
  family("kvrouter_worker_failures_total", "Failures reported for the worker.", "counter",
         [](const worker& w) { return w.failures; });
  out += "# HELP kvrouter_set_kv_batches_total KV-event batches applied.\n# TYPE kvrouter_set_kv_batches_total counter\n";
  for (const worker_set_route& set : table->sets)
    out += fmt::format("kvrouter_set_kv_batches_total{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model,
                       set.snapshot->load()->kv_batches);
  auto hasher_family = [&](std::string_view name, std::string_view help, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (const worker_set_route& set : table->sets)
      if (set.hashing)
        out += fmt::format("{}{{set=\"{}\",model=\"{}\"}} {}\n", name, set.name, set.model, value_of(*set.hashing));
  };
  hasher_family("kvrouter_set_prompts_tokenized_total", "Text and chat prompts tokenized.",
                [](const hasher_counters& c) { return c.prompts_tokenized.load(); });
  hasher_family("kvrouter_set_chats_rendered_total", "Chat requests rendered with the set's chat template.",
                [](const hasher_counters& c) { return c.chats_rendered.load(); });
  hasher_family("kvrouter_set_chat_render_errors_total", "Chat requests the template refused (routed on load).",
                [](const hasher_counters& c) { return c.chat_render_errors.load(); });
  hasher_family("kvrouter_set_segment_cache_hits_total", "Prompt segments whose token ids were reused.",
                [](const hasher_counters& c) { return c.segment_cache_hits.load(); });
  hasher_family("kvrouter_set_segment_cache_misses_total", "Prompt segments tokenized afresh (128 bytes or more).",
                [](const hasher_counters& c) { return c.segment_cache_misses.load(); });
  hasher_family("kvrouter_set_images_resolved_total", "Images spliced into prompts and hashed (multimodal routing).",
                [](const hasher_counters& c) { return c.images_resolved.load(); });
  hasher_family("kvrouter_set_image_bytes_hashed_total", "Decoded bytes of data-URI images hashed.",
                [](const hasher_counters& c) { return c.image_bytes_hashed.load(); });
  hasher_family("kvrouter_set_image_fallbacks_total", "Image requests routed on their text before the first image.",
                [](const hasher_counters& c) { return c.image_fallbacks.load(); });
  hasher_family("kvrouter_set_image_urls_unresolved_total", "Image URLs not resolved (no media fetcher, or too many waiting).",
                [](const hasher_counters& c) { return c.image_urls_unresolved.load(); });
  hasher_family("kvrouter_set_media_lookups_total", "Image URLs asked of the media fetcher.",
                [](const hasher_counters& c) { return c.media.lookups.load(); });
  hasher_family("kvrouter_set_media_cache_hits_total", "Image dimensions answered from the media cache.",
                [](const hasher_counters& c) { return c.media.cache_hits.load(); });
  hasher_family("kvrouter_set_media_fetches_total", "HTTP range requests the media fetcher sent.",
                [](const hasher_counters& c) { return c.media.http_requests.load(); });
  hasher_family("kvrouter_set_media_refusals_total", "Image URLs refused (scheme, or a private / loopback address).",
                [](const hasher_counters& c) { return c.media.refusals.load(); });
  hasher_family("kvrouter_set_media_failures_total", "Image fetches that failed (network, timeout, status, not an image).",
                [](const hasher_counters& c) { return c.media.failures.load(); });
  return out;
}

http_ingress::http_ingress(ingress_settings settings) : impl_(std::make_unique<impl>()) {
  impl_->settings = std::move(settings);
  std::size_t n = impl_->settings.threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  std::uint16_t port = impl_->settings.port;
  for (std::size_t i = 0; i < n; ++i) {
    auto thread = std::make_unique<io_thread>();
    beast::error_code ec;
    const auto address = asio::ip::make_address(impl_->settings.host, ec);
    if (ec) throw std::runtime_error(fmt::format("invalid listen address {}", impl_->settings.host));
    const tcp::endpoint endpoint(address, port);
    thread->acceptor.emplace(thread->io);
    thread->acceptor->open(endpoint.protocol());
    thread->acceptor->set_option(asio::socket_base::reuse_address(true));
    // One listening socket per I/O thread on the same port: the kernel spreads connections.
    thread->acceptor->set_option(asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
    thread->acceptor->bind(endpoint, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", impl_->settings.host, port, ec.message()));
    thread->acceptor->listen(asio::socket_base::max_listen_connections);
    port = thread->acceptor->local_endpoint().port();  // later threads share the chosen port
    impl_->threads.push_back(std::move(thread));
  }
  impl_->bound_port = port;
}

http_ingress::~http_ingress() = default;

void http_ingress::set_routing_table(std::shared_ptr<const routing_table> table) {
  std::map<std::string, std::vector<tcp::endpoint>> resolved;
  asio::io_context io;
  tcp::resolver resolver(io);
  for (const worker_set_route& set : table->sets)
    for (const worker_target& worker : set.workers) {
      beast::error_code ec;
      auto results = resolver.resolve(worker.host, worker.port, ec);
      std::vector<tcp::endpoint>& endpoints = resolved[worker.host + ":" + worker.port];
      if (!ec)
        for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }
  std::lock_guard lock(impl_->table_mutex);
  impl_->table = std::move(table);
  impl_->resolved = std::move(resolved);
}

std::uint16_t http_ingress::port() const { return impl_->bound_port; }

void http_ingress::run() {
  std::vector<std::thread> others;
  for (auto& thread : impl_->threads) impl_->accept(*thread);
  for (std::size_t i = 1; i < impl_->threads.size(); ++i)
    others.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), fmt::format("kvr-io-{}", i).c_str());
      impl_->threads[i]->io.run();
    });
  impl_->threads[0]->io.run();
  for (auto& t : others) t.join();
}

void http_ingress::stop() {
  for (auto& thread : impl_->threads) thread->io.stop();
}

}  // namespace kvr
