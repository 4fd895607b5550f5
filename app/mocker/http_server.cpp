#include <utility>  // before Asio under g++ 12

#include "app/mocker/http_server.hpp"
#include "app/mocker/other_routes.hpp"
#include "app/mocker/bootstrap_rooms.hpp"
#include "app/mocker/kv_transfer.hpp"

#include <algorithm>
#include <charconv>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/http/http_read_limits.hpp"
#include "core/common/json_parse.hpp"

namespace kvr::mocker {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct http_server::impl {
  server_settings settings;
  std::vector<std::unique_ptr<engine_loop>>& ranks;
  const prompt_tokenizer& prompts;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  tcp::acceptor bootstrap_acceptor{io};  ///< SGLang prefill workers' bootstrap server
  std::atomic<std::uint64_t> next_id{1};
  /// `process_start_time_seconds`, as every Python engine's Prometheus client exports it: a
  /// restart moves it (routers tell a restarted engine by it).
  std::atomic<double> start_time{wall_seconds()};

  static double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  impl(server_settings s, std::vector<std::unique_ptr<engine_loop>>& r, const prompt_tokenizer& p)
      : settings(std::move(s)), ranks(r), prompts(p), leases(settings.kv_lease), block_hasher(1, settings.block_size) {
    die_after_tokens = settings.die_after_tokens;
  }

  // -- disaggregated serving -------------------------------------------------------------------
  kv_leases leases;
  bootstrap_rooms rooms;
  const paged_cache block_hasher;  ///< computes a prompt's engine hashes (pure; shared read-only)
  std::atomic<std::uint64_t> prefill_legs{0};     ///< prefill legs answered with transfer params
  std::atomic<std::uint64_t> remote_prefills{0};  ///< decode legs whose KV was pulled and checked
  std::atomic<std::uint64_t> transfer_failures{0};  ///< pulls that failed or did not match: recomputed here
  /// Stream faults (`/mocker/faults`): cut, or end with an error event, every stream at this
  /// many tokens; 0 = off.
  std::atomic<std::uint32_t> break_streams_after_tokens{0};
  std::atomic<std::uint32_t> error_event_after_tokens{0};
  /// The process exits at this many generated tokens of a request (`--die-after-tokens`), or
  /// when an answer's context (prompt and generated tokens) reaches this length from below
  /// (so a continuation sent elsewhere from there would not die again); 0 = off.
  std::atomic<std::uint32_t> die_after_tokens{0};
  std::atomic<std::uint32_t> die_at_context_tokens{0};
  std::atomic<std::uint64_t> streams_broken{0};  ///< streams a fault cut or failed
  std::atomic<std::uint64_t> transfers_served{0};
  std::mutex last_params_mutex;
  std::string last_params = "null";  ///< the last decode leg's kv_transfer_params

  std::atomic<std::size_t> rotation{0};

  /// The longest sequence one rank's cache holds (what /tokenize reports as max_model_len).
  std::uint32_t max_model_len() const {
    const rank_snapshot s = ranks.front()->snapshot();
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{s.num_blocks} * s.block_size, UINT32_MAX));
  }

  /// The rank with the fewest requests; ties rotate, so idle ranks share the traffic.
  engine_loop& least_loaded(std::size_t& rank) {
    const std::size_t start = rotation++ % ranks.size();
    rank = start;
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      const std::size_t r = (start + i) % ranks.size();
      if (ranks[r]->load() < ranks[rank]->load()) rank = r;
    }
    return *ranks[rank];
  }

  std::string metrics() const;
  void accept(tcp::acceptor& on);

  /// SGLang: this worker serves only its half of disaggregated requests.
  [[nodiscard]] bool sglang_disaggregated() const { return settings.pd == "sglang" && settings.role != "both"; }
};

namespace {

std::string status_line(int status) {
  switch (status) {
    case 200: return "200 OK";
    case 400: return "400 Bad Request";
    case 404: return "404 Not Found";
    case 405: return "405 Method Not Allowed";
    case 413: return "413 Payload Too Large";
    case 503: return "503 Service Unavailable";
    default: return std::to_string(status) + " Error";
  }
}

std::string chunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, http_server::impl& server) : stream_(std::move(socket)), server_(server) {}

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(64u << 20);
    parser_->header_limit(64u << 10);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec == http::error::body_limit) return self->respond(413, R"({"error":{"message":"body too large"}})", false);
      if (ec) return self->close();
      self->handle(self->parser_->release());
    });
  }

  void handle(http::request<http::string_body> request) {
    keep_alive_ = request.keep_alive();
    const std::string target(request.target());
    const std::string path = target.substr(0, target.find('?'));
    const bool get = request.method() == http::verb::get;
    const bool post = request.method() == http::verb::post;
    if (get && path == "/health") return respond(200, "{}");
    if (get && path == "/metrics") return respond(200, server_.metrics(), true, "text/plain; version=0.0.4");
    if (get && path == "/v1/models")
      return respond(200, nlohmann::json{{"object", "list"},
                                         {"data", {{{"id", server_.settings.model}, {"object", "model"}, {"owned_by", "kvrouter-mocker"}}}}}
                              .dump());
    if (get && path == "/mocker/cache") {
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& rank : server_.ranks) ranks.push_back(rank->dump());
      return respond(200, nlohmann::json{{"ranks", ranks}}.dump());
    }
    if (post && path == "/mocker/restart") {
      for (const auto& rank : server_.ranks) rank->restart();
      server_.start_time = std::max(http_server::impl::wall_seconds(), server_.start_time.load() + 0.001);
      return respond(200, R"({"restarted":true})");
    }
    if (post && path == "/mocker/faults") {
      const auto faults = parse_plain_json(request.body());
      const auto number_in = [&](const char* key, double high) {
        return !faults.contains(key) || (faults[key].is_number() && faults[key].get<double>() >= 0 && faults[key].get<double>() <= high);
      };
      if (!faults.is_object() || faults.empty() || !number_in("drop_batches_pct", 100) ||
          !number_in("break_streams_after_tokens", 1e6) || !number_in("error_event_after_tokens", 1e6) ||
          !number_in("die_after_tokens", 1e6) || !number_in("die_at_context_tokens", 1e9))
        return respond(400, error_json("expected {\"drop_batches_pct\": 0..100, \"break_streams_after_tokens\": N, "
                                       "\"error_event_after_tokens\": N, \"die_after_tokens\": N, "
                                       "\"die_at_context_tokens\": N} (any of them; 0 = off)",
                                       "BadRequestError", 400));
      if (faults.contains("drop_batches_pct"))
        for (const auto& rank : server_.ranks) rank->set_drop_pct(faults["drop_batches_pct"].get<double>());
      if (faults.contains("break_streams_after_tokens"))
        server_.break_streams_after_tokens = faults["break_streams_after_tokens"].get<std::uint32_t>();
      if (faults.contains("error_event_after_tokens"))
        server_.error_event_after_tokens = faults["error_event_after_tokens"].get<std::uint32_t>();
      if (faults.contains("die_after_tokens")) server_.die_after_tokens = faults["die_after_tokens"].get<std::uint32_t>();
      if (faults.contains("die_at_context_tokens"))
        server_.die_at_context_tokens = faults["die_at_context_tokens"].get<std::uint32_t>();
      return respond(200, faults.dump());
    }
    if (get && path.starts_with("/mocker/kv_transfer/")) {
      auto hashes = server_.leases.take(path.substr(20));
      if (!hashes) return respond(404, error_json("no such transfer (expired, or pulled already)", "NotFoundError", 404));
      ++server_.transfers_served;
      return respond(200, nlohmann::json{{"hashes", *hashes}}.dump());
    }
    if (get && path.starts_with("/mocker/bootstrap/")) return serve_room(path.substr(18));
    if (get && path == "/mocker/pd") {
      std::lock_guard lock(server_.last_params_mutex);
      return respond(200, nlohmann::json{{"role", server_.settings.role},
                                         {"prefill_legs", server_.prefill_legs.load()},
                                         {"remote_prefills", server_.remote_prefills.load()},
                                         {"transfer_failures", server_.transfer_failures.load()},
                                         {"transfers_served", server_.transfers_served.load()},
                                         {"leases", server_.leases.live()},
                                         {"open_rooms", server_.rooms.open()},
                                         {"last_kv_transfer_params", nlohmann::json::parse(server_.last_params)}}
                              .dump());
    }
    if (post && (path == "/v1/completions" || path == "/v1/chat/completions"))
      return generate(request.body(), path == "/v1/chat/completions");
    if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/health" || path == "/metrics")
      return respond(405, error_json("method not allowed", "invalid_request_error", 405));
    const auto method = request.method_string();
    const auto content_type = request[http::field::content_type];
    std::vector<std::pair<std::string, std::string>> x_headers;
    for (const auto& field : request) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      if (name.starts_with("x-")) x_headers.emplace_back(std::move(name), std::string(field.value()));
    }
    auto answer = answer_other_route({.method = std::string_view(method.data(), method.size()),
                                      .target = target,
                                      .path = path,
                                      .content_type = std::string_view(content_type.data(), content_type.size()),
                                      .body = request.body(),
                                      .x_headers = std::move(x_headers)},
                                     server_.settings.model, server_.prompts, server_.max_model_len());
    respond(answer.status, std::move(answer.body), true, answer.content_type);
  }

  void generate(const std::string& body, bool chat) {
    auto parsed = server_.prompts.parse(body, chat);
    if (!parsed) return respond(400, error_json(parsed.error(), "BadRequestError", 400));
    request_ = std::move(*parsed);
    if (!server_.settings.token_ids) request_.return_token_ids = false;  // as an engine that has no such field
    id_ = server_.next_id++;
    // The answer's words follow from the prompt: the same prompt reads the same on any worker,
    // aggregated or disaggregated, and a continuation of it reads on as it would have.
    answer_.emplace(request_.prompt, server_.prompts.vocabulary());
    generated_ = 0;
    text_.clear();
    done_ = false;
    sglang_prefill_ = false;
    if (server_.sglang_disaggregated()) return sglang_leg();
    const auto& transfer = request_.kv_transfer;
    const std::string& role = server_.settings.role;
    if (transfer && transfer->remote_decode && role == "decode")
      return respond(400, error_json("this worker only decodes (--role decode): send prefill legs to a prefill worker", "BadRequestError", 400));
    if (transfer && transfer->remote_prefill) {
      if (role == "prefill")
        return respond(400, error_json("this worker only prefills (--role prefill): send decode legs to a decode worker", "BadRequestError", 400));
      {
        std::lock_guard lock(server_.last_params_mutex);
        server_.last_params = transfer->raw;
      }
      // Pull the prompt's blocks from the prefill worker, check them, then decode.
      return pull_kv(stream_.get_executor(), transfer->remote_host, transfer->remote_port,
                     "/mocker/kv_transfer/" + transfer->remote_request_id, std::chrono::seconds(10),
                     [self = shared_from_this()](pull_result pulled) { self->after_pull(std::move(pulled)); });
    }
    submit(false);
  }

  // -- SGLang's legs (bootstrap_rooms.hpp) ------------------------------------------------------
  /// Both legs carry the same body; this worker's role says which leg it is. The prefill leg
  /// computes the prompt (one token, answered whole once the decode side took the blocks); the
  /// decode leg fetches the room from the prefill worker's bootstrap server, then decodes.
  void sglang_leg() {
    const auto& bootstrap = request_.sglang_bootstrap;
    if (!bootstrap)
      return respond(400, error_json(fmt::format("this worker serves only {} legs of disaggregated requests (--pd sglang): "
                                                 "the body has no bootstrap_room",
                                                 server_.settings.role),
                                     "BadRequestError", 400));
    {
      std::lock_guard lock(server_.last_params_mutex);
      server_.last_params = nlohmann::json{{"bootstrap_host", bootstrap->host}, {"bootstrap_port", bootstrap->port},
                                           {"bootstrap_room", bootstrap->room}}
                                .dump();
    }
    if (server_.settings.role == "prefill") {
      request_.max_tokens = 1;
      request_.stream = false;
      sglang_prefill_ = true;
      return submit(false);
    }
    const auto wait = server_.settings.kv_lease + std::chrono::seconds(1);  // the bootstrap server answers first
    pull_kv(stream_.get_executor(), bootstrap->host, bootstrap->port, fmt::format("/mocker/bootstrap/{}", bootstrap->room), wait,
            [self = shared_from_this()](pull_result pulled) { self->after_room(std::move(pulled)); });
  }

  /// The prefill leg's answer waits in its room until the decode side takes the blocks.
  void hand_over(std::string answer) {
    const std::uint64_t room = request_.sglang_bootstrap->room;
    auto executor = stream_.get_executor();
    wait_timer_.expires_after(server_.settings.kv_lease);
    wait_timer_.async_wait([self = shared_from_this(), room](beast::error_code ec) {
      if (!ec) self->server_.rooms.give_up_prefill(room);
    });
    ++server_.prefill_legs;
    server_.rooms.prefilled(room, server_.block_hasher.engine_hashes(request_.prompt, request_.images),
                            [self = shared_from_this(), executor, room, answer = std::move(answer)](bool taken) mutable {
                              asio::post(executor, [self, room, taken, answer = std::move(answer)]() mutable {
                                self->wait_timer_.cancel();
                                if (taken) return self->respond(200, std::move(answer));
                                ++self->server_.transfer_failures;
                                self->respond(500, error_json(fmt::format("bootstrap room {}: no decode worker took the KV "
                                                                          "within {} s",
                                                                          room, self->server_.settings.kv_lease.count()),
                                                              "InternalServerError", 500));
                              });
                            });
  }

  /// The bootstrap server: answers `room`'s blocks once its prefill is done.
  void serve_room(const std::string& room_text) {
    std::uint64_t room = 0;
    const auto [end, ec] = std::from_chars(room_text.data(), room_text.data() + room_text.size(), room);
    if (ec != std::errc{} || end != room_text.data() + room_text.size())
      return respond(400, error_json("the room must be an unsigned integer", "BadRequestError", 400));
    done_ = false;
    auto executor = stream_.get_executor();
    wait_timer_.expires_after(server_.settings.kv_lease);
    wait_timer_.async_wait([self = shared_from_this(), room](beast::error_code wait_ec) {
      if (!wait_ec) self->server_.rooms.give_up_fetch(room);
    });
    server_.rooms.fetch(room, [self = shared_from_this(), executor, room](std::optional<bootstrap_rooms::blocks> blocks) {
      asio::post(executor, [self, room, blocks = std::move(blocks)] {
        self->wait_timer_.cancel();
        if (!blocks)
          return self->respond(404, error_json(fmt::format("bootstrap room {}: no prefill within {} s", room,
                                                           self->server_.settings.kv_lease.count()),
                                               "NotFoundError", 404));
        ++self->server_.transfers_served;
        self->respond(200, nlohmann::json{{"hashes", *blocks}}.dump());
      });
    });
  }

  /// The decode leg's room came back: blocks that match this prompt are used (transfer time);
  /// a failed hand-off fails the request, as SGLang's decode side does.
  void after_room(pull_result pulled) {
    const bool matches = pulled.ok && pulled.hashes == server_.block_hasher.engine_hashes(request_.prompt, request_.images);
    if (!matches) {
      ++server_.transfer_failures;
      return respond(500, error_json(fmt::format("KV transfer from the prefill worker failed: {}",
                                                 pulled.ok ? "the blocks are another prompt's" : pulled.error),
                                     "InternalServerError", 500));
    }
    ++server_.remote_prefills;
    submit(true);
  }

  /// A decode leg's pull came back: blocks that match this prompt are used (transfer time);
  /// anything else is counted and the prompt recomputed here.
  void after_pull(pull_result pulled) {
    const auto mine = server_.block_hasher.engine_hashes(request_.prompt, request_.images);
    const bool matches = pulled.ok && pulled.hashes == mine;
    if (matches) ++server_.remote_prefills;
    else ++server_.transfer_failures;
    submit(matches);
  }

  void submit(bool kv_pulled) {
    rank_ = &server_.least_loaded(rank_index_);
    // The sink keeps the session alive until the sequence ends (the engine drops it then).
    auto executor = stream_.get_executor();
    sequence_request sequence{id_, request_.prompt, request_.max_tokens, request_.images};
    sequence.kv_pulled = kv_pulled;
    rank_->submit(std::move(sequence), [self = shared_from_this(), executor](const sequence_output& out) {
      asio::post(executor, [self, out] { self->on_output(out); });
    });
  }

  /// A prefill leg's answer: the blocks are leased for the decode worker, and the params say
  /// where to pull them (vLLM's NIXL connector answers with the same keys).
  std::string with_transfer_params(std::string body) {
    auto answer = nlohmann::json::parse(body);
    const std::string id = server_.leases.add(server_.block_hasher.engine_hashes(request_.prompt, request_.images));
    nlohmann::json blocks = nlohmann::json::array();
    for (std::uint32_t b = 0; b < (request_.prompt.size() + server_.settings.block_size - 1) / server_.settings.block_size; ++b)
      blocks.push_back(b);
    answer["kv_transfer_params"] = {{"do_remote_prefill", true},
                                    {"do_remote_decode", false},
                                    {"remote_engine_id", fmt::format("mocker-{}", server_.settings.port)},
                                    {"remote_block_ids", std::move(blocks)},
                                    {"remote_host", server_.settings.host},
                                    {"remote_port", stream_.socket().local_endpoint().port()},
                                    {"remote_request_id", id},
                                    {"tp_size", 1}};
    ++server_.prefill_legs;
    return answer.dump();
  }

  void on_output(const sequence_output& out) {
    if (done_) return;
    if (!out.error.empty()) {
      done_ = true;
      if (generated_ == 0 || !request_.stream)
        return respond(out.error == "the engine restarted" ? 503 : 400, error_json(out.error, "BadRequestError", 400));
      pending_ += chunk("data: " + error_json(out.error, "InternalServerError", 500) + "\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n";
      return flush();
    }
    const bool first = generated_ == 0;
    if (first) cached_tokens_ = out.cached_tokens;
    std::string piece;
    std::vector<std::uint32_t> ids;
    std::uint32_t count = out.new_tokens;
    const bool dies = death_due(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      const auto token = answer_->next();
      piece += token.text;
      ids.push_back(token.id);
    }
    generated_ += count;
    if (dies) {
      if (!request_.stream || first) die();  // nothing of the answer went out: it dies with the process
      pending_ += chunk(stream_chunk(request_, id_, piece, ids, first, false));
      exit_after_flush_ = true;
      return flush();
    }
    if (!request_.stream) {
      text_ += piece;
      if (out.finished) {
        done_ = true;
        std::string body = final_body(request_, id_, text_, generated_, reported_cached_tokens());
        if (sglang_prefill_) return hand_over(std::move(body));
        if (request_.kv_transfer && request_.kv_transfer->remote_decode && server_.settings.role != "decode")
          body = with_transfer_params(std::move(body));
        respond(200, std::move(body));
      }
      return;
    }
    if (first)
      pending_ += fmt::format("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                              "Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
                              keep_alive_ ? "keep-alive" : "close");
    pending_ += chunk(stream_chunk(request_, id_, piece, ids, first, out.finished));
    if (!out.finished && stream_fault_due()) return;
    if (out.finished) {
      done_ = true;
      if (request_.include_usage) pending_ += chunk(usage_chunk(request_, id_, generated_, reported_cached_tokens()));
      pending_ += chunk("data: [DONE]\n\n") + "0\r\n\r\n";
    }
    flush();
  }

  void respond(int status, std::string body, bool keep = true, std::string_view type = "application/json") {
    pending_ += fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
                            status_line(status), type, body.size(), keep && keep_alive_ ? "keep-alive" : "close");
    pending_ += body;
    done_ = true;
    if (!(keep && keep_alive_)) keep_alive_ = false;
    flush();
  }

  /// `/mocker/faults`' stream faults, once the answer has this many tokens: the connection is
  /// cut (as an engine that dies), or an error event ends the stream (as an engine that fails).
  bool stream_fault_due() {
    const std::uint32_t cut = server_.break_streams_after_tokens.load(std::memory_order_relaxed);
    const std::uint32_t fail = server_.error_event_after_tokens.load(std::memory_order_relaxed);
    if (cut > 0 && generated_ >= cut) {
      ++server_.streams_broken;
      break_after_flush_ = true;
    } else if (fail > 0 && generated_ >= fail) {
      ++server_.streams_broken;
      done_ = true;
      if (rank_ != nullptr) rank_->abort(id_);
      pending_ += chunk("data: " + error_json("the engine failed (fault injection)", "InternalServerError", 500) + "\n\n") +
                  chunk("data: [DONE]\n\n") + "0\r\n\r\n";
    } else {
      return false;
    }
    flush();
    return true;
  }

  /// Whether the process dies within this output of `count` tokens (cut to the tokens it
  /// still streams before it does): `--die-after-tokens` or the die faults.
  bool death_due(std::uint32_t& count) const {
    std::uint64_t limit = UINT64_MAX;  // generated tokens at which the process dies
    if (const std::uint32_t after = server_.die_after_tokens.load(std::memory_order_relaxed); after > 0) limit = after;
    const std::uint64_t at_context = server_.die_at_context_tokens.load(std::memory_order_relaxed);
    if (at_context > request_.prompt.size()) limit = std::min<std::uint64_t>(limit, at_context - request_.prompt.size());
    if (limit == UINT64_MAX || generated_ + count < limit) return false;
    count = static_cast<std::uint32_t>(limit > generated_ ? limit - generated_ : 0);
    return true;
  }

  [[noreturn]] void die() const {
    std::cerr << fmt::format("kvrouter-mocker: dying after {} tokens of request {} (fault injection)\n", generated_, id_);
    std::_Exit(3);
  }

  /// Writes what is pending; one write at a time, so chunks keep their order.
  void flush() {
    if (writing_ || pending_.empty()) return;
    writing_ = true;
    in_flight_.swap(pending_);
    pending_.clear();
    asio::async_write(stream_.socket(), asio::buffer(in_flight_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->in_flight_.clear();
      if (ec || self->break_after_flush_) {
        if (!self->done_ && self->rank_ != nullptr) self->rank_->abort(self->id_);  // the client went away, or a fault
        return self->close();
      }
      if (!self->pending_.empty()) return self->flush();
      if (self->exit_after_flush_) self->die();  // every byte up to the fatal token is out
      if (self->done_) {
        if (!self->keep_alive_) return self->close();
        self->rank_ = nullptr;
        self->read();
      }
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  http_server::impl& server_;
  beast::flat_buffer buffer_ = bounded_http_read_buffer();
  std::optional<http::request_parser<http::string_body>> parser_;  ///< one per request
  bool keep_alive_ = true;
  mock_request request_;
  std::uint64_t id_ = 0;
  std::optional<greedy_answer> answer_;
  bool exit_after_flush_ = false;  ///< a die fault: the process exits once the pending bytes are out
  bool break_after_flush_ = false;  ///< a stream fault: the connection is cut once the pending bytes are out
  engine_loop* rank_ = nullptr;
  std::size_t rank_index_ = 0;
  std::uint32_t generated_ = 0;
  std::uint32_t cached_tokens_ = 0;  ///< what the engine found cached, from the first step
  [[nodiscard]] std::optional<std::uint32_t> reported_cached_tokens() const {
    if (!server_.settings.prompt_tokens_details) return std::nullopt;
    return cached_tokens_;
  }
  std::string text_;
  bool done_ = false;
  bool writing_ = false;
  std::string pending_;
  std::string in_flight_;
  bool sglang_prefill_ = false;  ///< the request is an SGLang prefill leg (answered once its room is taken)
  asio::steady_timer wait_timer_{stream_.get_executor()};  ///< a bootstrap room's wait
};

}  // namespace

std::string http_server::impl::metrics() const {
  std::string out;
  const std::string model = settings.model;
  auto family = [&](std::string_view name, std::string_view help, std::string_view type, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (std::size_t r = 0; r < ranks.size(); ++r)
      out += fmt::format("{}{{model_name=\"{}\",engine=\"{}\"}} {}\n", name, model, r, value_of(ranks[r]->snapshot()));
  };
  family("vllm:num_requests_running", "Requests in the running batch.", "gauge", [](const rank_snapshot& s) { return s.running; });
  family("vllm:num_requests_waiting", "Requests waiting for blocks or a batch slot.", "gauge",
         [](const rank_snapshot& s) { return s.waiting; });
  family("vllm:kv_cache_usage_perc", "Fraction of KV blocks held by running requests.", "gauge",
         [](const rank_snapshot& s) { return s.kv_usage; });
  family("vllm:gpu_cache_usage_perc", "Same as vllm:kv_cache_usage_perc (older name).", "gauge",
         [](const rank_snapshot& s) { return s.kv_usage; });
  family("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", "counter",
         [](const rank_snapshot& s) { return s.counters.prefix_queries_tokens; });
  family("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", "counter",
         [](const rank_snapshot& s) { return s.counters.prefix_hits_tokens; });
  family("vllm:prompt_tokens_total", "Prompt tokens processed.", "counter",
         [](const rank_snapshot& s) { return s.counters.prompt_tokens; });
  family("vllm:generation_tokens_total", "Tokens generated.", "counter",
         [](const rank_snapshot& s) { return s.counters.generation_tokens; });
  family("vllm:request_success_total", "Requests finished.", "counter",
         [](const rank_snapshot& s) { return s.counters.finished_requests; });
  out += fmt::format("# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
                     "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {:.3f}\n",
                     start_time.load());
  // vLLM's info gauge: the cache's shape as labels, value 1.
  out += "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const rank_snapshot s = ranks[r]->snapshot();
    out += fmt::format("vllm:cache_config_info{{block_size=\"{}\",enable_prefix_caching=\"True\",engine=\"{}\",num_gpu_blocks=\"{}\"}} 1.0\n",
                       s.block_size, r, s.num_blocks);
  }
  out += fmt::format("# HELP kvrouter_mocker_pd_prefill_legs_total Prefill legs answered with kv_transfer_params.\n"
                     "# TYPE kvrouter_mocker_pd_prefill_legs_total counter\nkvrouter_mocker_pd_prefill_legs_total {}\n"
                     "# HELP kvrouter_mocker_pd_remote_prefills_total Decode legs whose KV was pulled and matched the prompt.\n"
                     "# TYPE kvrouter_mocker_pd_remote_prefills_total counter\nkvrouter_mocker_pd_remote_prefills_total {}\n"
                     "# HELP kvrouter_mocker_pd_transfer_failures_total Pulls that failed or did not match (recomputed).\n"
                     "# TYPE kvrouter_mocker_pd_transfer_failures_total counter\nkvrouter_mocker_pd_transfer_failures_total {}\n",
                     prefill_legs.load(), remote_prefills.load(), transfer_failures.load());
  out += fmt::format("# HELP kvrouter_mocker_streams_broken_total Streams a fault cut or ended with an error event.\n"
                     "# TYPE kvrouter_mocker_streams_broken_total counter\nkvrouter_mocker_streams_broken_total {}\n",
                     streams_broken.load());
  family("kvrouter_mocker_pulled_blocks_total", "KV blocks pulled from prefill workers.", "counter",
         [](const rank_snapshot& s) { return s.counters.pulled_blocks; });
  family("kvrouter_mocker_host_loaded_blocks_total", "Prompt KV blocks loaded from the host tier instead of computed.",
         "counter", [](const rank_snapshot& s) { return s.counters.host_loaded_blocks; });
  family("kvrouter_mocker_cached_blocks", "Blocks in the prefix cache (referenced or not).", "gauge",
         [](const rank_snapshot& s) { return s.cached_blocks; });
  family("kvrouter_mocker_kv_event_batches_total", "KV-event batches published (sequence numbers used).", "counter",
         [](const rank_snapshot& s) { return s.event_batches; });
  family("kvrouter_mocker_kv_event_batches_dropped_total", "Of which not sent live (fault injection).", "counter",
         [](const rank_snapshot& s) { return s.dropped_batches; });
  return out;
}

void http_server::impl::accept(tcp::acceptor& on) {
  on.async_accept(asio::make_strand(io), [this, &on](beast::error_code ec, tcp::socket socket) {
    if (ec) return;
    socket.set_option(tcp::no_delay(true));
    std::make_shared<session>(std::move(socket), *this)->start();
    accept(on);
  });
}

http_server::http_server(server_settings settings, std::vector<std::unique_ptr<engine_loop>>& ranks,
                         const prompt_tokenizer& prompts)
    : impl_(std::make_unique<impl>(std::move(settings), ranks, prompts)) {
  auto listen = [this](tcp::acceptor& acceptor, std::uint16_t port) {
    const tcp::endpoint endpoint(asio::ip::make_address(impl_->settings.host), port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
    impl_->accept(acceptor);
  };
  listen(impl_->acceptor, impl_->settings.port);
  if (impl_->sglang_disaggregated() && impl_->settings.role == "prefill") listen(impl_->bootstrap_acceptor, impl_->settings.bootstrap_port);
}

http_server::~http_server() = default;

std::uint16_t http_server::port() const { return impl_->acceptor.local_endpoint().port(); }

std::uint16_t http_server::bootstrap_port() const {
  return impl_->bootstrap_acceptor.is_open() ? impl_->bootstrap_acceptor.local_endpoint().port() : 0;
}

void http_server::run() {
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < std::max<std::size_t>(impl_->settings.threads, 1); ++i)
    threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (auto& t : threads) t.join();
}

void http_server::stop() { impl_->io.stop(); }

}  // namespace kvr::mocker
