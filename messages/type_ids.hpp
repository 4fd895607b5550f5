#pragma once
/// The one CAF type-ID block of kvrouter (CAF 0.17.6). Message types that only travel inside
/// this process are passed as shared pointers marked unsafe (never serialized).

#include <cstdint>
#include <string>
#include <map>
#include <memory>
#include <utility>

#include <caf/all.hpp>

#include "core/config/router_file.hpp"
#include "core/replica/peer_messages.hpp"
#include "messages/kv_messages.hpp"
#include "messages/route_messages.hpp"

namespace kvr {
struct routing_table;  ///< actors/http/routing_table.hpp
/// Card JSON by etcd key (actors/sources/etcd_source.hpp has the source).
using etcd_cards = std::map<std::string, std::string>;
/// A running set's new cost-function weights (a reload that retunes it in place).
using router_config_ptr = std::shared_ptr<const router_config>;
/// A decoded message of another router replica (actors/replica/replica_hub, peer_inbox).
using peer_message_ptr = std::shared_ptr<const peer_message>;
}  // namespace kvr

CAF_BEGIN_TYPE_ID_BLOCK(kvr, caf::first_custom_type_id)

  // -- KV events: subscriber -> scorer
  CAF_ADD_TYPE_ID(kvr, (kvr::kv_updates))

  // -- request path: ingress -> hasher -> scorer
  CAF_ADD_TYPE_ID(kvr, (kvr::route_job_ptr))
  CAF_ADD_TYPE_ID(kvr, (kvr::media_resolution_ptr))
  CAF_ADD_TYPE_ID(kvr, (kvr::lifecycle_batch_ptr))
  CAF_ADD_ATOM(kvr, kvr, steps_waiting_atom, "steps")
  CAF_ADD_ATOM(kvr, kvr, tick_atom, "tick")
  CAF_ADD_ATOM(kvr, kvr, worker_health_atom, "whealth")
  CAF_ADD_ATOM(kvr, kvr, withdraw_atom, "withdraw")
  CAF_ADD_ATOM(kvr, kvr, queue_check_atom, "qcheck")
  CAF_ADD_TYPE_ID(kvr, (kvr::engine_scrape_ptr))

  // -- discovery: sources -> watcher
  CAF_ADD_ATOM(kvr, kvr, apply_atom, "apply")
  CAF_ADD_TYPE_ID(kvr, (std::shared_ptr<const kvr::router_file>))
  CAF_ADD_TYPE_ID(kvr, (std::shared_ptr<const kvr::etcd_cards>))

  // -- supervision: watcher
  CAF_ADD_ATOM(kvr, kvr, restart_atom, "restart")
  CAF_ADD_ATOM(kvr, kvr, fault_atom, "fault")
  CAF_ADD_TYPE_ID(kvr, (std::shared_ptr<const kvr::routing_table>))
  CAF_ADD_ATOM(kvr, kvr, stop_atom, "stop")
  CAF_ADD_TYPE_ID(kvr, (kvr::router_config_ptr))

  // -- replicas: replica hub <-> scorer
  CAF_ADD_ATOM(kvr, kvr, peer_inbox_atom, "peerinbox")
  CAF_ADD_ATOM(kvr, kvr, replica_resync_atom, "rresync")
  CAF_ADD_ATOM(kvr, kvr, peer_check_atom, "peercheck")

  // -- operator / debug requests
  CAF_ADD_ATOM(kvr, kvr, dump_index_atom, "dumpindex")

CAF_END_TYPE_ID_BLOCK(kvr)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::kv_updates)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::route_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::media_resolution_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::lifecycle_batch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::engine_scrape_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const kvr::router_file>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const kvr::etcd_cards>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const kvr::routing_table>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvr::router_config_ptr)
