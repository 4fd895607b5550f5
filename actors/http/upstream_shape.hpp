#pragma once
/// The shapes a routed request's upstream side takes, one strategy each: aggregated (the whole
/// request on one worker), vLLM-NIXL (a prefill leg first, then the decode leg with its KV
/// transfer params) and SGLang (both legs at once, sharing a bootstrap room). A shape decides
/// which legs run and what a leg's end means for the request; the `request_exchange` that owns
/// it does the I/O, the routing and the request's end (actors/http/request_exchange.hpp).
///
/// Shapes see their exchange only through `shape_host`, which names no socket, parser or actor
/// type: the shapes' files stay small, cheap to compile, and readable as protocols.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/config/disaggregation.hpp"

namespace kvr::ingress {

class ingress_probe;

/// How a buffered leg to a worker (a prefill leg) ended.
struct leg_outcome {
  enum class kind : std::uint8_t {
    answered,       ///< `status` and `body` as the worker sent them
    worker_failed,  ///< refused, reset, unresolvable, a broken or oversized answer: the worker's failure
    timed_out,      ///< the deadline passed first
  };
  kind what = kind::answered;
  unsigned status = 0;
  std::string body;
  std::string detail;  ///< why, for failures
};
using leg_done = std::function<void(leg_outcome)>;

/// What a shape may ask of the exchange running it.
class shape_host {
 public:
  virtual ~shape_host() = default;

  // -- the request ----------------------------------------------------------------------------
  [[nodiscard]] virtual const std::string& client_body() const = 0;
  [[nodiscard]] virtual const disaggregation_card& disaggregation() const = 0;
  [[nodiscard]] virtual ingress_probe& probe() const = 0;
  /// The chosen prefill worker's name, host (as SGLang's bootstrap address) and bootstrap port.
  [[nodiscard]] virtual const std::string& prefill_name() const = 0;
  [[nodiscard]] virtual const std::string& prefill_host() const = 0;
  [[nodiscard]] virtual std::uint16_t prefill_bootstrap_port() const = 0;
  /// --pd-timeout-secs, as said in errors.
  [[nodiscard]] virtual std::int64_t prefill_timeout_seconds() const = 0;
  /// A fresh SGLang bootstrap room (63 bits).
  [[nodiscard]] virtual std::uint64_t next_bootstrap_room() = 0;

  // -- legs -----------------------------------------------------------------------------------
  /// Starts a prefill leg of `body` on the chosen prefill worker; `done` gets its outcome
  /// (possibly before this returns). `alone`: nothing else runs meanwhile (vLLM), so the
  /// client's departure ends the request there.
  virtual void start_prefill_leg(std::string body, bool alone, leg_done done) = 0;
  virtual void cancel_prefill_leg() = 0;
  /// The answering leg, streamed to the client: the client's body, or `body` (a rewrite that
  /// the shape keeps alive while the leg runs).
  virtual void start_answering_leg(const std::string* body) = 0;
  /// Whether any of the answering leg's answer reached the client.
  [[nodiscard]] virtual bool answering_leg_answered() const = 0;
  [[nodiscard]] virtual bool answering_leg_running() const = 0;
  [[nodiscard]] virtual bool prefill_leg_running() const = 0;
  /// A held answer head (see `upstream_shape::answer_may_start`) goes to the client.
  virtual void resume_answering_leg() = 0;
  /// Cuts the answering leg: it ends early, and the exchange asks the shape what that means.
  virtual void cancel_answering_leg() = 0;

  // -- the request's fate ---------------------------------------------------------------------
  /// The prefill worker's part is done: its booking is released.
  virtual void prefill_done() = 0;
  /// The prefill worker failed: the request goes to a new pair (or is answered, out of tries).
  virtual void prefill_failed(std::string_view detail) = 0;
  /// The request runs whole on its decode worker instead (counted by the caller).
  virtual void run_aggregated() = 0;
  /// kvrouter answers the client itself and the request ends (`outcome` for the access log).
  virtual void finish_with(unsigned status, std::string body, std::string_view outcome) = 0;
  /// The client left while nothing but a prefill leg ran: the request ends, nobody blamed.
  virtual void client_left_during_prefill() = 0;
};

/// One way of running a request's legs. Its hooks run on the exchange's I/O thread.
class upstream_shape {
 public:
  explicit upstream_shape(shape_host& host) : host_(host) {}
  virtual ~upstream_shape() = default;
  upstream_shape(const upstream_shape&) = delete;
  upstream_shape& operator=(const upstream_shape&) = delete;

  /// The router chose the worker(s): start the legs.
  virtual void start() = 0;
  /// The answering leg's head is in (`status`): whether it may reach the client now, or is held
  /// until the shape resumes or cancels the leg.
  [[nodiscard]] virtual bool answer_may_start(unsigned /*status*/) { return true; }
  /// The answering leg ended before any byte reached the client. True when the shape decided
  /// what becomes of the request; false leaves it to the exchange (a worker failure, retried).
  [[nodiscard]] virtual bool answering_leg_ended_early() { return false; }
  /// The answering leg's answer reached the client (whole or cut).
  virtual void answering_leg_ended() {}

 protected:
  shape_host& host_;
};

/// The whole request on the chosen worker.
class aggregated_shape final : public upstream_shape {
 public:
  using upstream_shape::upstream_shape;
  void start() override;
};

/// vLLM with NIXL: the prefill leg (one token, no stream, a remote decode asked for) runs first;
/// its answer's `kv_transfer_params` go to the decode worker with the client's body.
class vllm_nixl_shape final : public upstream_shape {
 public:
  using upstream_shape::upstream_shape;
  void start() override;

 private:
  void on_prefill_answer(leg_outcome outcome);
  std::string decode_body_;  ///< the client's body plus the transfer params, while the decode leg runs
};

/// SGLang: both legs get the body with the prefill worker's bootstrap address and fresh rooms
/// and run at once; the decode leg streams to the client, the prefill leg is drained.
class sglang_shape final : public upstream_shape {
 public:
  using upstream_shape::upstream_shape;
  void start() override;
  bool answer_may_start(unsigned status) override;
  bool answering_leg_ended_early() override;
  void answering_leg_ended() override { decode_cut_.reset(); }

 private:
  /// What becomes of a request whose decode leg is cut because its prefill leg failed first.
  struct decode_cut {
    bool retry = false;   ///< the prefill worker failed: choose a new pair (else answer)
    unsigned status = 0;  ///< the answer: the prefill's error status, or a timeout's 504
    std::string body;
    std::string outcome;  ///< for the access log
    std::string detail;   ///< why the prefill worker failed (retry)
  };
  void on_prefill_answer(leg_outcome outcome);
  void after_decode_cut(decode_cut cut);

  std::string legs_body_;  ///< both legs' body, while they run
  std::optional<decode_cut> decode_cut_;  ///< the decode leg is being cut because its prefill leg failed
};

}  // namespace kvr::ingress
