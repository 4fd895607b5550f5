#pragma once
/// One request to a worker whose whole answer is read into memory, not streamed: a
/// disaggregated request's prefill leg (vLLM answers it with one token and the KV transfer
/// params; SGLang's is drained while the decode leg streams). Connect, write, read, with a
/// bounded answer, cut by the owner's deadline or cancellation. A pooled connection the worker
/// closed meanwhile is retried once on a fresh one, unblamed.
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <functional>

#include <boost/beast/http.hpp>

namespace kvr::ingress {

class upstream_exchange {
 public:
  struct outcome {
    enum class kind : std::uint8_t {
      answered,       ///< `status` and `body` as the worker sent them
      worker_failed,  ///< refused, reset, unresolvable, a broken or oversized answer: the worker's failure
      timed_out,      ///< the deadline passed first
      cancelled,      ///< cancel() (the client left, or the other leg failed)
    };
    kind what = kind::answered;
    unsigned status = 0;
    std::string body;
    std::string detail;  ///< why, for failures
  };
  using done_handler = std::function<void(outcome)>;

  /// Answers beyond this are the worker's failure (a prefill answer is one token and its params).
  static constexpr std::size_t max_answer_bytes = 4 << 20;

  upstream_exchange(http_ingress::impl& server, io_thread& thread) : server_(server), thread_(thread) {}

  /// Sends `head` (a whole request head, its Content-Length matching `body`) and `body` to
  /// `worker`; `done` gets the outcome, once. `keep` is held by every pending operation.
  void start(const worker_target& worker, std::string head, std::string body, std::shared_ptr<void> keep, done_handler done);
  /// The owner's deadline passed: the pending operation is cut (timed_out).
  void on_deadline() { cut(cut_reason::deadline); }
  /// Cut now (cancelled); nothing happens once the outcome was given.
  void cancel() { cut(cut_reason::cancelled); }
  [[nodiscard]] bool running() const { return running_; }

 private:
  enum class cut_reason : std::uint8_t { none, deadline, cancelled };
  void cut(cut_reason why);
  void connect(bool pooled);
  void write();
  void read();
  void fail(const boost::system::error_code& ec, std::string_view what);
  void finish(outcome result);

  http_ingress::impl& server_;
  io_thread& thread_;
  const worker_target* worker_ = nullptr;
  std::string head_;
  std::string body_;
  std::weak_ptr<void> keep_;  ///< the owner: each pending operation holds it (no cycle while idle)
  done_handler done_;
  bool running_ = false;
  bool pooled_ = false;  ///< the current connection came from the idle pool
  cut_reason cut_ = cut_reason::none;
  std::unique_ptr<upstream_connection> upstream_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
};

}  // namespace kvr::ingress
