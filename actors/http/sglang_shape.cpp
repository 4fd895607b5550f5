#include <utility>
#include <vector>

#include <fmt/format.h>

#include "actors/http/ingress_probe.hpp"
#include "actors/http/upstream_shape.hpp"
#include "core/disagg/pd_requests.hpp"
#include "core/prompt/openai.hpp"

namespace kvr::ingress {

void sglang_shape::start() {
  std::vector<std::uint64_t> rooms(prompts_in(host_.client_body()));
  for (std::uint64_t& room : rooms) room = host_.next_bootstrap_room();
  auto body = sglang_body(host_.client_body(), host_.prefill_host(), host_.prefill_bootstrap_port(), rooms);
  if (!body)  // the body parsed as a request but is not one JSON object: the client's error
    return host_.finish_with(
        http_status(api_errc::invalid_json),
        error_body({api_errc::invalid_json, fmt::format("the body cannot be split into prefill and decode: {}", body.error()), {}}),
        "router_error");
  host_.probe().pd_ran(ingress_probe::pd_path::disaggregated);
  legs_body_ = std::move(*body);
  decode_cut_.reset();
  host_.start_prefill_leg(legs_body_, /*alone=*/false, [this](leg_outcome outcome) { on_prefill_answer(std::move(outcome)); });
  // A prefill leg that failed at once, before the decode leg started, decides here.
  if (auto cut = std::exchange(decode_cut_, std::nullopt)) return after_decode_cut(std::move(*cut));
  host_.start_answering_leg(&legs_body_);
}

/// A decode worker failing while its prefill leg still runs may fail because of it (no KV
/// came): its answer waits for the prefill's outcome, which decides whose failure it is.
bool sglang_shape::answer_may_start(unsigned status) { return !(status >= 500 && host_.prefill_leg_running()); }

bool sglang_shape::answering_leg_ended_early() {
  auto cut = std::exchange(decode_cut_, std::nullopt);
  if (!cut) return false;
  after_decode_cut(std::move(*cut));
  return true;
}

/// A prefill leg that succeeds only releases its booking. A failure before the decode leg
/// answered cuts the decode leg and decides for the request; after, the decode leg already has
/// the KV and goes on.
void sglang_shape::on_prefill_answer(leg_outcome outcome) {
  ingress_probe& probe = host_.probe();
  const bool decode_answered = host_.answering_leg_running() && host_.answering_leg_answered();
  std::optional<decode_cut> cut;
  switch (outcome.what) {
    case leg_outcome::kind::answered:
      if (outcome.status == 200) break;
      probe.pd_prefill_error_status();
      cut = decode_cut{false, outcome.status, std::move(outcome.body), "prefill_error", {}};
      break;
    case leg_outcome::kind::timed_out:
      probe.pd_prefill_timed_out();
      cut = decode_cut{false, static_cast<unsigned>(http_status(api_errc::worker_timeout)),
                       error_body({api_errc::worker_timeout,
                                   fmt::format("prefill worker {} did not answer within {} s", host_.prefill_name(),
                                               host_.prefill_timeout_seconds()),
                                   {}}),
                       "timed_out", {}};
      break;
    case leg_outcome::kind::worker_failed:
      probe.pd_prefill_failed();
      cut = decode_cut{true, 0, {}, {}, std::move(outcome.detail)};
      break;
  }
  if (!cut || decode_answered) {
    host_.prefill_done();
    return host_.resume_answering_leg();  // a held decode failure was the decode worker's own
  }
  decode_cut_ = std::move(cut);
  // Failed at once, before the decode leg started: start() decides. Else the decode leg's early
  // end, which its cut brings, does.
  if (host_.answering_leg_running()) host_.cancel_answering_leg();
}

void sglang_shape::after_decode_cut(decode_cut cut) {
  if (cut.retry) return host_.prefill_failed(cut.detail);
  host_.finish_with(cut.status, std::move(cut.body), cut.outcome);
}

}  // namespace kvr::ingress
