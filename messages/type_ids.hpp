#pragma once
/// The one CAF type-ID block of kvrouter (CAF 0.17.6). Message types that only travel inside
/// this process are passed as shared pointers marked unsafe (never serialized).

#include <cstdint>
#include <string>
#include <utility>

#include <caf/all.hpp>

#include "messages/kv_messages.hpp"
#include "messages/route_messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(kvr, caf::first_custom_type_id)

  // -- KV events: subscriber -> scorer
  CAF_ADD_TYPE_ID(kvr, (kvr::kv_updates))

  // -- request path: ingress -> hasher -> scorer
  CAF_ADD_TYPE_ID(kvr, (kvr::route_job_ptr))
  CAF_ADD_ATOM(kvr, kvr, first_token_atom, "firsttok")
  CAF_ADD_ATOM(kvr, kvr, finished_atom, "finished")
  CAF_ADD_ATOM(kvr, kvr, worker_failed_atom, "wfailed")
  CAF_ADD_ATOM(kvr, kvr, tick_atom, "tick")
  CAF_ADD_ATOM(kvr, kvr, worker_health_atom, "whealth")

  // -- operator / debug requests
  CAF_ADD_ATOM(kvr, kvr, dump_index_atom, "dumpindex")
  CAF_ADD_ATOM(kvr, kvr, remove_worker_atom, "rmworker")

CAF_END_TYPE_ID_BLOCK(kvr)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::kv_updates)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::route_job_ptr)
