#include "actors/http/proxy_stream.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <limits>

#include <fmt/format.h>

#include "actors/http/bounded_head_read.hpp"
#include "actors/http/http_fields.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/tls/worker_tls.hpp"

namespace kvr::ingress {

namespace beast = boost::beast;
using error_code = boost::system::error_code;

void proxy_stream::start(const worker_target& worker, const http::request<http::string_body>& request, bool keep_alive,
                         const head_tags& tags, const proxy_leg& leg) {
  worker_ = &worker;
  request_ = &request;
  body_ = leg.body != nullptr ? leg.body : &request.body();
  target_ = leg.target;
  filter_ = leg.filter;
  continuing_ = leg.continuing;
  collect_asked_ = leg.collect;
  unavailable_is_failure_ = leg.unavailable_is_failure;
  if (!continuing_) collect_ = false;  // a continuation collects if its answer's first leg did
  keep_alive_ = keep_alive;
  prefill_reported_ = false;
  if (!continuing_) body_bytes_ = 0;  // a continuation's bytes add to the answer's
  cut_ = cut_reason::none;
  answer_tags_.clear();
  if (tags.decision_headers)
    answer_tags_ = fmt::format("x-kvrouter-worker: {}\r\nx-kvrouter-overlap-blocks: {}\r\n", tags.worker, tags.overlap_blocks);
  request_id_.assign(tags.request_id.data(), tags.request_id.size());
  write_upstream_head(tags);
  connect(connection_kind::pooled);
}

void proxy_stream::on_deadline() {
  switch (phase_) {
    case phase::writing_client: {  // the client does not take the answer: its write fails now
      error_code ignored;
      client_.close(ignored);
      return;
    }
    case phase::held:  // nothing pending: the stream ends here
      return end_early(early_end::timed_out,
                       fmt::format("worker {}'s answer was held past {} s", worker_->name, server_.settings.upstream_timeout.count()));
    case phase::connecting:
    case phase::sending:
    case phase::awaiting_answer:
    case phase::relaying:
      cut_ = cut_reason::deadline;
      if (upstream_) upstream_->socket().close();  // the pending upstream operation fails now
      return;
    case phase::idle:
    case phase::done: return;
  }
}

void proxy_stream::cancel() {
  if (phase_ == phase::idle || phase_ == phase::done) return;
  cut_ = cut_reason::client_gone;
  if (phase_ == phase::held) return end_early(early_end::client_gone, "");  // nothing pending to fail
  if (upstream_) upstream_->socket().close();
}

void proxy_stream::resume() {
  if (phase_ != phase::held) return;
  phase_ = phase::awaiting_answer;
  relay();
}

std::string upstream_request_head(const worker_target& worker, const http::request<http::string_body>& request,
                                  std::size_t body_size, std::string_view request_id, bool client_sent_id,
                                  bool forward_authorization, std::string_view target_override) {
  std::string head;
  const auto method = request.method_string();
  const std::string_view target = target_override.empty() ? std::string_view(request.target().data(), request.target().size())
                                                          : target_override;
  head.append(method.data(), method.size());
  head += ' ';
  head += worker.base_path;
  head.append(target.data(), target.size());
  head += " HTTP/1.1\r\n";
  const auto connection = request.find(http::field::connection);
  const boost::beast::string_view hop_fields = connection == request.end() ? "" : connection->value();
  for (const auto& field : request)
    if (!is_request_field_replaced(field, forward_authorization) && !is_named_in_connection(hop_fields, field.name_string()) &&
        (client_sent_id || !boost::beast::iequals(field.name_string(), "x-request-id")))  // an unusable one is replaced
      append_field(head, field.name_string(), field.value());
  if (!client_sent_id) head += fmt::format("X-Request-Id: {}\r\n", request_id);
  head += fmt::format("Host: {}\r\nContent-Length: {}\r\n\r\n", worker.host_header, body_size);
  return head;
}

void proxy_stream::write_upstream_head(const head_tags& tags) {
  upstream_head_ = upstream_request_head(*worker_, *request_, body_->size(), tags.request_id, tags.client_sent_id,
                                         server_.settings.forward_authorization, target_);
}

void proxy_stream::connect(connection_kind kind) {
  connection_ = kind;
  phase_ = phase::connecting;
  upstream_ = kind == connection_kind::pooled ? thread_.take_idle(worker_->url) : nullptr;
  if (upstream_) return write_upstream();
  if (connection_ == connection_kind::pooled) connection_ = connection_kind::fresh;
  if (worker_->tls) {
    upstream_ = std::make_unique<upstream_connection>(thread_.io, *server_.worker_tls);
    if (!name_tls_server(upstream_->secure->native_handle(), worker_->host))
      return end_early(early_end::worker_failed, "TLS: cannot name the server " + worker_->host);
  } else {
    upstream_ = std::make_unique<upstream_connection>(thread_.io);
  }
  const auto endpoints = server_.endpoints_of(*worker_);
  if (endpoints.empty()) return end_early(early_end::worker_failed, "the worker's address could not be resolved");
  owner_.expire_after(server_.settings.connect_timeout);
  // The condition stops the attempts at the next address once the connection was cut.
  auto before_each_address = [this, keep = owner_.keep_alive()](const error_code&, const tcp::endpoint&) {
    return cut_ == cut_reason::none;
  };
  asio::async_connect(upstream_->socket(), endpoints, before_each_address,
                      [this, keep = owner_.keep_alive()](error_code ec, const tcp::endpoint&) {
                        if (!ec) {
                          error_code ignored;
                          upstream_->socket().set_option(tcp::no_delay(true), ignored);  // small SSE writes go out at once
                          return upstream_->secure ? handshake() : write_upstream();
                        }
                        switch (cut_) {
                          case cut_reason::client_gone: return end_early(early_end::client_gone, "");
                          case cut_reason::deadline: return end_early(early_end::worker_failed, "cannot connect: timed out");
                          case cut_reason::none: return end_early(early_end::worker_failed, fmt::format("cannot connect: {}", ec.message()));
                        }
                      });
}

/// An https:// worker: TLS over the fresh connection, under the connect timeout. A certificate
/// the worker cannot prove is its own failure.
void proxy_stream::handshake() {
  upstream_->secure->async_handshake(asio::ssl::stream_base::client, [this, keep = owner_.keep_alive()](error_code ec) {
    if (!ec) return write_upstream();
    switch (cut_) {
      case cut_reason::client_gone: return end_early(early_end::client_gone, "");
      case cut_reason::deadline: return end_early(early_end::worker_failed, "TLS handshake: timed out");
      case cut_reason::none: return end_early(early_end::worker_failed, fmt::format("TLS handshake: {}", tls_failure(ec, upstream_->secure->native_handle())));
    }
  });
}

void proxy_stream::write_upstream() {
  phase_ = phase::sending;
  owner_.expire_after(server_.settings.upstream_timeout);
  const std::array<asio::const_buffer, 2> request{asio::buffer(upstream_head_), asio::buffer(*body_)};
  upstream_->on_stream([&](auto& stream) {
    asio::async_write(stream, request, [this, keep = owner_.keep_alive()](error_code ec, std::size_t) {
      if (ec) return failed_before_answer(ec);
      read_answer_head();
    });
  });
}

void proxy_stream::read_answer_head() {
  phase_ = phase::awaiting_answer;
  parser_.emplace();
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // boost::none would mean 0
  upstream_->on_stream([&](auto& stream) {
    async_read_head_bounded(stream, upstream_->buffer, *parser_, max_answer_head_bytes, [this, keep = owner_.keep_alive()](error_code ec, std::size_t) {
      if (ec) return failed_before_answer(ec);
      forward_head();
    });
  });
}

/// Nothing reached the client: the client left, the deadline passed, a pooled connection had
/// gone stale (retried once, fresh), or the worker failed.
void proxy_stream::failed_before_answer(const error_code& ec) {
  if (cut_ == cut_reason::client_gone) return end_early(early_end::client_gone, "");
  if (cut_ == cut_reason::deadline)
    return end_early(early_end::timed_out,
                     fmt::format("worker {} did not answer within {} s", worker_->name, server_.settings.upstream_timeout.count()));
  if (connection_ == connection_kind::pooled) {
    server_.probe.stale_connection_retried();
    upstream_.reset();
    return connect(connection_kind::fresh_after_stale);
  }
  end_early(early_end::worker_failed, ec.message());
}

/// The answer's head as the client gets it: the worker's status and fields, framed by
/// kvrouter (the worker's length, or chunked when the worker streams without one). It goes out
/// with the first body bytes: one write instead of two.
void proxy_stream::forward_head() {
  const auto& response = parser_->get();
  status_ = response.result_int();
  if (unavailable_is_failure_ && !continuing_ && (status_ == 502 || status_ == 503 || status_ == 504))
    return end_early(early_end::worker_failed, fmt::format("answered with status {}", status_));
  if (continuing_) {  // the client has its head: this worker only goes on with the body
    if (status_ != 200) return end_early(early_end::worker_failed, fmt::format("answered the continuation with status {}", status_));
    if (filter_ != nullptr) filter_->on_head(status_, true);
    server_.probe.continuation_started();  // this leg streams now; end_late counts it out
    phase_ = phase::relaying;
    return relay();
  }
  chunked_ = !response.has_content_length() && !parser_->is_done();
  // Only an event stream can be followed (and gathered): anything else passes as it is.
  const auto type = response.find(http::field::content_type);
  const bool event_stream = chunked_ && type != response.end() && type->value().starts_with("text/event-stream");
  collect_ = collect_asked_ && status_ == 200 && event_stream;
  head_.clear();
  head_ += fmt::format("HTTP/1.1 {} ", status_);
  const auto reason = response.reason();
  head_.append(reason.data(), reason.size());
  head_ += "\r\n";
  const auto connection = response.find(http::field::connection);
  const boost::beast::string_view hop_fields = connection == response.end() ? "" : connection->value();
  for (const auto& field : response)
    if (!is_response_field_replaced(field.name()) && !is_named_in_connection(hop_fields, field.name_string()) &&
        !(collect_ && field.name() == http::field::content_type))
      append_field(head_, field.name_string(), field.value());
  head_ += answer_tags_;
  if (response.find("x-request-id") == response.end()) head_ += fmt::format("x-request-id: {}\r\n", request_id_);
  if (!keep_alive_) head_ += "Connection: close\r\n";
  if (collect_) {  // framed once the answer is whole (answer_collected)
    if (filter_ != nullptr) filter_->on_head(status_, event_stream);
    server_.probe.answer_started();
    phase_ = phase::relaying;
    return relay();
  }
  if (chunked_) head_ += "Transfer-Encoding: chunked\r\n";
  else if (const auto length = parser_->content_length()) head_ += fmt::format("Content-Length: {}\r\n", *length);
  head_ += "\r\n";
  if (filter_ != nullptr) filter_->on_head(status_, event_stream);
  if (!owner_.answer_may_start(status_)) {
    phase_ = phase::held;
    return;
  }
  relay();
}

void proxy_stream::relay() {
  if (parser_->is_done()) return write_client(0);
  if (phase_ != phase::awaiting_answer) phase_ = phase::relaying;
  auto& body = parser_->get().body();
  body.data = chunk_.data();
  body.size = chunk_.size();
  owner_.expire_after(server_.settings.upstream_timeout);
  upstream_->on_stream([&](auto& stream) {
    http::async_read_some(stream, upstream_->buffer, *parser_, [this, keep = owner_.keep_alive()](error_code ec, std::size_t) {
      if (ec == http::error::need_buffer) ec = {};
      if (!ec) return write_client(chunk_.size() - parser_->get().body().size);
      if (phase_ == phase::awaiting_answer) return failed_before_answer(ec);
      last_cut_ = cut_ == cut_reason::deadline ? cut_cause::timed_out : cut_cause::broken;
      end_late(cut_ == cut_reason::client_gone ? late_end::client_gone : late_end::cut);
    });
  });
}

/// Forwards what one read brought (coalescing nothing across reads), then reads on.
void proxy_stream::write_client(std::size_t read) {
  std::string_view payload(chunk_.data(), read);
  bool worker_failed = false;
  if (filter_ != nullptr && read > 0) {
    const auto filtered = filter_->filter(payload);
    payload = filtered.out;
    worker_failed = filtered.worker_failed;
  }
  const std::size_t bytes = payload.size();
  const bool last = parser_->is_done() && !worker_failed;
  // First bytes of a longer answer: the worker's prefill is done. (An answer complete in one
  // read needs no separate message: finishing releases the prefill too.)
  if ((bytes > 0 || (collect_ && read > 0)) && !prefill_reported_ && !last) {
    prefill_reported_ = true;
    owner_.on_first_bytes();
  }
  if (last) owner_.on_answer_received();
  // The engine said it failed: what came before its error goes out, then the stream is cut.
  auto next = [this, last, worker_failed] {
    if (worker_failed) {
      last_cut_ = cut_cause::error_event;
      return end_late(late_end::cut);
    }
    if (last) return end_late(late_end::completed);
    relay();
  };
  if (collect_) return next();  // the filter keeps what it read; the owner answers at the end
  std::array<asio::const_buffer, 5> out;
  std::size_t n = 0;
  const bool head = phase_ == phase::awaiting_answer;
  if (head) out[n++] = asio::buffer(head_);
  if (chunked_ && bytes > 0) {
    chunk_size_line_ = fmt::format("{:x}\r\n", bytes);
    out[n++] = asio::buffer(chunk_size_line_);
  }
  if (bytes > 0) out[n++] = asio::buffer(payload.data(), bytes);
  body_bytes_ += bytes;
  if (chunked_ && bytes > 0) out[n++] = asio::buffer("\r\n", 2);
  if (chunked_ && last) out[n++] = asio::buffer("0\r\n\r\n", 5);
  if (n == 0) return next();
  if (head) server_.probe.answer_started();
  phase_ = phase::writing_client;
  owner_.expire_after(server_.settings.client_timeout);
  asio::async_write(client_, std::span(out.data(), n), [this, next, keep = owner_.keep_alive()](error_code ec, std::size_t) {
    if (ec) return end_late(late_end::client_gone);
    next();
  });
}

void proxy_stream::finish_client_stream(std::string events, std::function<void(bool)> done) {
  tail_.clear();
  if (!events.empty()) tail_ = fmt::format("{:x}\r\n{}\r\n", events.size(), events);
  tail_ += "0\r\n\r\n";
  body_bytes_ += events.size();
  owner_.expire_after(server_.settings.client_timeout);
  asio::async_write(client_, asio::buffer(tail_),
                    [this, done = std::move(done), keep = owner_.keep_alive()](error_code ec, std::size_t) { done(!ec); });
}

void proxy_stream::answer_collected(std::string body, std::function<void(bool)> done) {
  tail_ = head_;
  tail_ += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.size());
  tail_ += body;
  body_bytes_ = body.size();
  owner_.expire_after(server_.settings.client_timeout);
  asio::async_write(client_, asio::buffer(tail_),
                    [this, done = std::move(done), keep = owner_.keep_alive()](error_code ec, std::size_t) { done(!ec); });
}

void proxy_stream::end_early(early_end why, std::string detail) {
  phase_ = phase::done;
  upstream_.reset();
  owner_.on_early_end(why, std::move(detail));
}

void proxy_stream::end_late(late_end why) {
  phase_ = phase::done;
  if (why == late_end::completed && parser_->keep_alive() && upstream_->socket().is_open())
    thread_.give_back(worker_->url, std::move(upstream_));
  upstream_.reset();
  server_.probe.answer_ended();
  owner_.on_late_end(why, status_);
}

}  // namespace kvr::ingress
