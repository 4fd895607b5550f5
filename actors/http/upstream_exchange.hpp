#pragma once
/// One request to a worker whose whole answer is read into memory, not streamed: a
/// disaggregated request's prefill leg (vLLM answers it with one token and the KV transfer
/// params; SGLang's is drained while the decode leg streams). Connect, write, read, with a
/// bounded answer, cut by its own deadline or cancelled by its owner. A pooled connection the
/// worker closed meanwhile is retried once on a fresh one, unblamed.
///
/// One exchange per leg, owned through a shared pointer: a cancelled leg is forgotten at once
/// (its pending operation keeps it alive until it fails), so the owner can start the next leg
/// while the old one winds down. Its deadline is swept with the thread's connections.
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <functional>

#include <boost/beast/http.hpp>

#include "actors/http/upstream_shape.hpp"

namespace kvr::ingress {

class upstream_exchange final : public timed, public std::enable_shared_from_this<upstream_exchange> {
 public:
  using outcome = leg_outcome;
  using done_handler = leg_done;

  /// Answers beyond this are the worker's failure (a prefill answer is one token and its params).
  static constexpr std::size_t max_answer_bytes = 4 << 20;

  upstream_exchange(http_ingress::impl& server, io_thread& thread);
  ~upstream_exchange() override;
  upstream_exchange(const upstream_exchange&) = delete;
  upstream_exchange& operator=(const upstream_exchange&) = delete;

  /// Sends `head` (a whole request head, its Content-Length matching `body`) and `body` to
  /// `worker`; `done` gets the outcome, once, unless the exchange is cancelled first; after
  /// `timeout` it is cut (timed_out). `keep` (the owner) is held by every pending operation.
  void start(const worker_target& worker, std::string head, std::string body, std::chrono::seconds timeout,
             std::shared_ptr<void> keep, done_handler done);
  /// Cut now; `done` is not called (the owner has moved on).
  void cancel();
  [[nodiscard]] bool running() const { return running_; }

  // -- timed -----------------------------------------------------------------------------------
  void on_deadline() override { cut(cut_reason::deadline); }
  void on_drain() override {}  // the owning connection drains; the leg finishes or times out

 private:
  enum class cut_reason : std::uint8_t { none, deadline, cancelled };
  [[nodiscard]] std::shared_ptr<upstream_exchange> self() { return shared_from_this(); }
  void cut(cut_reason why);
  void connect(bool pooled);
  void write();
  void read();
  void fail(const boost::system::error_code& ec, std::string_view what);
  void finish(outcome result);

  http_ingress::impl& server_;
  io_thread& thread_;
  std::list<timed*>::iterator registration_;
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
