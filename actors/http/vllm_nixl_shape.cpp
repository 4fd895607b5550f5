#include <utility>

#include <fmt/format.h>

#include "actors/http/ingress_probe.hpp"
#include "actors/http/upstream_shape.hpp"
#include "core/disagg/pd_requests.hpp"
#include "core/prompt/openai.hpp"

namespace kvr::ingress {

void vllm_nixl_shape::start() {
  auto body = vllm_prefill_body(host_.client_body());
  if (!body)  // the body parsed as a request but is not one JSON object: the client's error
    return host_.finish_with(
        http_status(api_errc::invalid_json),
        error_body({api_errc::invalid_json, fmt::format("the body cannot be split into prefill and decode: {}", body.error()), {}}),
        "router_error");
  host_.start_prefill_leg(std::move(*body), /*alone=*/true, [this](leg_outcome outcome) { on_prefill_answer(std::move(outcome)); });
}

void vllm_nixl_shape::on_prefill_answer(leg_outcome outcome) {
  ingress_probe& probe = host_.probe();
  switch (outcome.what) {
    case leg_outcome::kind::timed_out:
      probe.pd_prefill_timed_out();
      return host_.finish_with(http_status(api_errc::worker_timeout),
                               error_body({api_errc::worker_timeout,
                                           fmt::format("prefill worker {} did not answer within {} s", host_.prefill_name(),
                                                       host_.prefill_timeout_seconds()),
                                           {}}),
                               "timed_out");
    case leg_outcome::kind::worker_failed:
      probe.pd_prefill_failed();
      return host_.prefill_failed(outcome.detail);
    case leg_outcome::kind::answered: break;
  }
  if (outcome.status != 200) {  // the prefill's verdict on the request is the client's answer
    probe.pd_prefill_error_status();
    return host_.finish_with(outcome.status, std::move(outcome.body), "prefill_error");
  }
  auto params = kv_transfer_params_of(outcome.body);
  if (!params) {
    probe.pd_missing_params();
    if (host_.disaggregation().missing_params == missing_params_policy::fail)
      return host_.finish_with(
          http_status(api_errc::worker_failed),
          error_body({api_errc::worker_failed, fmt::format("prefill worker {}: {}", host_.prefill_name(), describe(params.error())), {}}),
          "router_error");
    probe.pd_ran(ingress_probe::pd_path::aggregated_fallback);
    host_.run_aggregated();
    return host_.start_answering_leg(nullptr);
  }
  auto decode_body = vllm_decode_body(host_.client_body(), *params);
  if (!decode_body)  // cannot happen for a body the prefill leg took; answered rather than assumed
    return host_.finish_with(http_status(api_errc::invalid_json), error_body({api_errc::invalid_json, decode_body.error(), {}}),
                             "router_error");
  host_.prefill_done();
  probe.pd_ran(ingress_probe::pd_path::disaggregated);
  decode_body_ = std::move(*decode_body);
  host_.start_answering_leg(&decode_body_);
}

}  // namespace kvr::ingress
