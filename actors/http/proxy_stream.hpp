#pragma once
/// One request relayed to one worker and its answer streamed back to the client, as an explicit
/// state machine: connecting -> sending -> awaiting_answer -> (relaying <-> writing_client) -> done.
/// Until the first bytes reach the client a failure is the worker's (or a timeout, or the
/// client's departure) and the request may go elsewhere; after, the stream can only be cut.
/// A pooled connection the worker closed meanwhile is retried once on a fresh one, unblamed.
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <functional>

#include <boost/beast/http.hpp>

#include "actors/http/body_filter.hpp"

namespace kvr::ingress {

namespace http = boost::beast::http;

/// The request head a worker gets: the client's method, target (under the worker's path
/// prefix; `target` instead when given) and fields, minus hop-by-hop ones, with the worker's
/// Host and `body_size` as the length; the request id is added unless the client sent a usable one.
[[nodiscard]] std::string upstream_request_head(const worker_target& worker, const http::request<http::string_body>& request,
                                                std::size_t body_size, std::string_view request_id, bool client_sent_id,
                                                bool forward_authorization, std::string_view target = {});

/// What one leg changes of the client's request and of the answer's way back.
struct proxy_leg {
  /// Goes instead of the request's own body (a disaggregated leg's or a migration's rewrite;
  /// it must outlive the stream).
  const std::string* body = nullptr;
  std::string_view target;  ///< instead of the client's target ("" = the client's)
  body_filter* filter = nullptr;
  /// The client has this answer's head and part of its body already (a migration's
  /// continuation): the worker's head is not forwarded, and a status other than 200 is the
  /// worker's failure; the body goes on in the client's framing.
  bool continuing = false;
  /// The client asked for a whole answer that the worker streams (a migratable request,
  /// actors/http/stream_migration.hpp): a 200 event stream is given to the filter only, and
  /// once it is over the owner writes the answer with answer_collected(). Anything else the
  /// worker answers is relayed as it is.
  bool collect = false;
  /// A 502, 503 or 504 head (the engine unavailable: restarting, overloaded, behind a gateway
  /// that lost it) is the worker's failure, not an answer: the stream ends early and the
  /// request may go elsewhere. Nothing of it has reached the client.
  bool unavailable_is_failure = false;
};

class proxy_stream {
 public:
  enum class phase : std::uint8_t {
    idle,             ///< no request (between requests)
    connecting,       ///< opening a connection to the worker
    sending,          ///< writing the request head and body
    awaiting_answer,  ///< reading the answer's head and first bytes; nothing sent to the client yet
    held,             ///< the answer's head is in, kept from the client until the owner resumes it
    relaying,         ///< reading the worker's next bytes; the client has some already
    writing_client,   ///< writing bytes to the client
    done,
  };
  /// Why the stream ended before any bytes reached the client.
  enum class early_end : std::uint8_t {
    worker_failed,  ///< refused, reset, unresolvable, connect timeout: the worker's failure
    timed_out,      ///< connected, but no answer within the upstream timeout
    client_gone,    ///< the client left first: nobody's failure but the client's
  };
  /// How a stream that reached the client ended.
  enum class late_end : std::uint8_t {
    completed,    ///< the whole answer went through
    client_gone,  ///< the client stopped taking it
    cut,          ///< the worker's stream broke off (the client's answer is unfinished: see cut_cause)
  };
  /// Why a worker's stream broke off after the client had some of it.
  enum class cut_cause : std::uint8_t {
    broken,       ///< the connection was reset or closed before the answer's end
    timed_out,    ///< no bytes within the upstream timeout
    error_event,  ///< the engine said it failed (an error event, seen by the body filter)
  };

  /// The connection that owns the stream: deadlines and what happened.
  class owner {
   public:
    virtual ~owner() = default;
    /// Held by every pending operation, so the owner outlives them.
    [[nodiscard]] virtual std::shared_ptr<void> keep_alive() = 0;
    virtual void expire_after(std::chrono::seconds timeout) = 0;
    /// The worker's first bytes of a longer answer arrived: its prefill is done.
    virtual void on_first_bytes() = 0;
    /// The worker's whole answer is in: its work is done. Told before the answer's last bytes
    /// go to the client, so the client's next request already finds the worker free.
    virtual void on_answer_received() = 0;
    virtual void on_early_end(early_end why, std::string detail) = 0;
    /// `status`: the worker's status code.
    virtual void on_late_end(late_end why, unsigned status) = 0;
    /// The answer's head is in: whether it may go to the client now. If not, the stream holds
    /// it until resume() (or cancel(), which ends the stream early, at once).
    [[nodiscard]] virtual bool answer_may_start(unsigned /*status*/) { return true; }
  };

  proxy_stream(http_ingress::impl& server, io_thread& thread, tcp::socket& client, owner& owner)
      : server_(server), thread_(thread), client_(client), owner_(owner) {}

  /// What kvrouter adds to the heads: the request id (to the worker's request when the client
  /// sent none, and to the answer when the worker echoes none), and unless turned off the
  /// decision (`x-kvrouter-worker`, `x-kvrouter-overlap-blocks`) on the answer.
  struct head_tags {
    std::string_view request_id;
    bool client_sent_id = false;
    bool decision_headers = true;
    std::string_view worker;
    std::uint32_t overlap_blocks = 0;
  };

  /// Sends `request` to `worker`; the answer's head says `Connection: close` unless `keep_alive`.
  void start(const worker_target& worker, const http::request<http::string_body>& request, bool keep_alive,
             const head_tags& tags, const proxy_leg& leg = {});
  /// After a cut (late_end::cut): `events` go to the client as the answer's last bytes and its
  /// chunked body ends, so the client reads a whole HTTP answer; `done(written)` follows.
  void finish_client_stream(std::string events, std::function<void(bool written)> done);
  /// A collected answer's end (proxy_leg::collect): `body` goes to the client as a JSON answer,
  /// under the first worker's head; `done(written)` follows.
  void answer_collected(std::string body, std::function<void(bool written)> done);
  /// The answer is being collected, not relayed (nothing of it reached the client).
  [[nodiscard]] bool collecting() const { return collect_; }
  /// The owner's deadline passed: cut what the stream waits for.
  void on_deadline();
  /// The client went away: cut the worker's request now.
  void cancel();
  /// A held answer goes to the client.
  void resume();
  [[nodiscard]] phase current() const { return phase_; }
  /// Whether any of the answer reached the client (then nothing can be retried).
  [[nodiscard]] bool answered() const { return phase_ == phase::relaying || phase_ == phase::writing_client; }
  /// Answer body bytes forwarded to the client for the current request.
  [[nodiscard]] std::uint64_t body_bytes() const { return body_bytes_; }
  /// Why the last late_end::cut happened.
  [[nodiscard]] cut_cause last_cut() const { return last_cut_; }
  /// The client's answer is framed chunked (a stream that can be continued in place).
  [[nodiscard]] bool client_chunked() const { return chunked_; }

 private:
  /// Why kvrouter itself closed the upstream socket (the pending operation then fails).
  enum class cut_reason : std::uint8_t { none, deadline, client_gone };
  enum class connection_kind : std::uint8_t { pooled, fresh_after_stale, fresh };

  void write_upstream_head(const head_tags& tags);
  void connect(connection_kind kind);
  void handshake();
  void write_upstream();
  void read_answer_head();
  void forward_head();
  void relay();
  void write_client(std::size_t bytes);
  void failed_before_answer(const boost::system::error_code& ec);
  void end_early(early_end why, std::string detail);
  void end_late(late_end why);

  http_ingress::impl& server_;
  io_thread& thread_;
  tcp::socket& client_;
  owner& owner_;

  phase phase_ = phase::idle;
  cut_reason cut_ = cut_reason::none;
  connection_kind connection_ = connection_kind::pooled;
  const worker_target* worker_ = nullptr;
  const http::request<http::string_body>* request_ = nullptr;
  const std::string* body_ = nullptr;  ///< what goes to the worker: the request's body or its rewrite
  std::string_view target_;            ///< instead of the request's, when not empty
  body_filter* filter_ = nullptr;
  bool continuing_ = false;
  bool collect_asked_ = false;  ///< the leg's proxy_leg::collect
  bool unavailable_is_failure_ = false;
  bool collect_ = false;        ///< this answer is collected (a 200 event stream was asked to be)
  cut_cause last_cut_ = cut_cause::broken;
  std::string tail_;  ///< finish_client_stream's bytes while they are written
  bool keep_alive_ = true;
  bool prefill_reported_ = false;

  std::string upstream_head_;
  std::unique_ptr<upstream_connection> upstream_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 16384> chunk_{};
  std::string head_;             ///< the answer's head as the client gets it
  std::string answer_tags_;      ///< the decision's fields for the answer's head ("" when turned off)
  std::string request_id_;
  std::string chunk_size_line_;
  bool chunked_ = false;  ///< the client's framing: chunked (the worker streams without a length) or its length
  unsigned status_ = 200;
  std::uint64_t body_bytes_ = 0;
};

}  // namespace kvr::ingress
