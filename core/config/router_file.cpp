#include "core/config/router_file.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

std::unexpected<config_error> fail(std::string message) { return std::unexpected(config_error{std::move(message)}); }

/// Rejects keys outside `allowed`: a misspelt key must not silently fall back to a default.
std::expected<void, config_error> only_keys(const json& object, std::initializer_list<std::string_view> allowed,
                                            std::string_view where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view name : allowed) known |= key == name;
    if (!known) return fail(fmt::format("{}: unknown key \"{}\"", where, key));
  }
  return {};
}

template <class T>
std::expected<T, config_error> get(const json& object, std::string_view key, std::string_view where, T fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fail(fmt::format("{}: \"{}\" has the wrong type ({})", where, key, it->dump()));
  }
}

std::expected<std::uint32_t, config_error> get_count(const json& object, std::string_view key, std::string_view where,
                                                     std::uint32_t fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() > UINT32_MAX)
    return fail(fmt::format("{}: \"{}\" must be a non-negative integer (got {})", where, key, it->dump()));
  return it->get<std::uint32_t>();
}

std::expected<worker_spec, config_error> parse_worker(const json& object, std::string_view where) {
  if (!object.is_object()) return fail(fmt::format("{}: each worker must be an object", where));
  if (auto keys = only_keys(object, {"id", "url", "kv_events", "replay", "topic", "dp_size", "role", "bootstrap_port"}, where); !keys)
    return std::unexpected(keys.error());
  auto url = get<std::string>(object, "url", where, "");
  if (!url) return std::unexpected(url.error());
  if (url->empty()) return fail(fmt::format("{}: \"url\" is required", where));
  // The same checks as a command-line worker: build its spec text and parse it.
  std::string spec = *url;
  for (const char* key : {"kv_events", "replay", "topic", "id", "role"}) {
    auto value = get<std::string>(object, key, where, "");
    if (!value) return std::unexpected(value.error());
    if (value->empty()) continue;
    if (value->find(',') != std::string::npos) return fail(fmt::format("{}: \"{}\" must not contain ','", where, key));
    spec += fmt::format(",{}={}", key, *value);
  }
  auto dp = get_count(object, "dp_size", where, 1);
  if (!dp) return std::unexpected(dp.error());
  spec += fmt::format(",dp_size={}", *dp);
  if (object.contains("bootstrap_port")) {
    auto port = get_count(object, "bootstrap_port", where, default_bootstrap_port);
    if (!port) return std::unexpected(port.error());
    spec += fmt::format(",bootstrap={}", *port);
  }
  auto parsed = parse_worker_spec(spec);
  if (!parsed) return fail(fmt::format("{}: {}", where, parsed.error().message));
  return *parsed;
}

std::expected<multimodal_card, config_error> parse_multimodal(const json& object, std::string_view where) {
  if (!object.is_object()) return fail(fmt::format("{}: \"multimodal\" must be an object", where));
  if (auto keys = only_keys(object, {"image_token_id", "token_count"}, where); !keys) return std::unexpected(keys.error());
  multimodal_card card;
  auto token = get_count(object, "image_token_id", where, 0);
  if (!token) return std::unexpected(token.error());
  if (!object.contains("image_token_id")) return fail(fmt::format("{}: multimodal needs \"image_token_id\"", where));
  card.image_token_id = *token;
  if (auto it = object.find("token_count"); it != object.end()) {
    const std::string inner = fmt::format("{}.token_count", where);
    if (!it->is_object()) return fail(fmt::format("{} must be an object", inner));
    if (auto keys = only_keys(*it, {"rule", "patch_size", "merge_size", "tokens", "min_pixels", "max_pixels"}, inner); !keys)
      return std::unexpected(keys.error());
    auto rule = get<std::string>(*it, "rule", inner, "qwen2-vl");
    if (!rule) return std::unexpected(rule.error());
    if (*rule != "qwen2-vl" && *rule != "fixed")
      return fail(fmt::format("{}: unknown rule \"{}\" (expected qwen2-vl or fixed)", inner, *rule));
    card.rule = *rule;
    for (auto [key, field] : {std::pair{"patch_size", &card.patch_size}, std::pair{"merge_size", &card.merge_size},
                              std::pair{"tokens", &card.fixed_tokens}}) {
      auto value = get_count(*it, key, inner, *field);
      if (!value) return std::unexpected(value.error());
      if (*value == 0) return fail(fmt::format("{}: \"{}\" must be at least 1", inner, key));
      *field = *value;
    }
    for (auto [key, field] : {std::pair{"min_pixels", &card.min_pixels}, std::pair{"max_pixels", &card.max_pixels}}) {
      auto value = get<std::uint64_t>(*it, key, inner, *field);
      if (!value) return std::unexpected(value.error());
      *field = *value;
    }
    if (card.min_pixels > card.max_pixels) return fail(fmt::format("{}: min_pixels exceeds max_pixels", inner));
  }
  return card;
}

std::expected<worker_set_card, config_error> parse_card(const json& object, std::size_t index) {
  std::string where = fmt::format("worker_sets[{}]", index);
  if (!object.is_object()) return fail(fmt::format("{} must be an object", where));
  worker_set_card card;
  auto name = get<std::string>(object, "name", where, "");
  if (!name) return std::unexpected(name.error());
  if (name->empty()) return fail(fmt::format("{}: \"name\" is required", where));
  card.name = *name;
  where = fmt::format("worker set \"{}\"", card.name);
  if (auto keys = only_keys(object, {"name", "model", "block_size", "tokenizer", "tokenizer_config",
                                     "chat_template_fallback", "multimodal", "workers", "router_config",
                                     "disaggregation"},
                            where);
      !keys)
    return std::unexpected(keys.error());
  auto model = get<std::string>(object, "model", where, "");
  if (!model) return std::unexpected(model.error());
  if (model->empty()) return fail(fmt::format("{}: \"model\" is required", where));
  card.model = *model;
  auto block_size = get_count(object, "block_size", where, 16);
  if (!block_size) return std::unexpected(block_size.error());
  if (*block_size == 0) return fail(fmt::format("{}: block_size must be at least 1 token (got 0)", where));
  card.block_size = *block_size;
  for (auto [key, field] : {std::pair{"tokenizer", &card.tokenizer}, std::pair{"tokenizer_config", &card.tokenizer_config}}) {
    auto value = get<std::string>(object, key, where, "");
    if (!value) return std::unexpected(value.error());
    *field = *value;
  }
  auto fallback = get<std::string>(object, "chat_template_fallback", where, "none");
  if (!fallback) return std::unexpected(fallback.error());
  if (*fallback != "none" && *fallback != "concat")
    return fail(fmt::format("{}: chat_template_fallback must be \"none\" or \"concat\" (got \"{}\")", where, *fallback));
  card.chat_template_fallback_concat = *fallback == "concat";
  if (!card.tokenizer_config.empty() && card.tokenizer.empty())
    return fail(fmt::format("{}: tokenizer_config needs a tokenizer (the rendered chat is tokenized to route)", where));
  if (auto it = object.find("multimodal"); it != object.end() && !it->is_null()) {
    auto mm = parse_multimodal(*it, where);
    if (!mm) return std::unexpected(mm.error());
    card.multimodal = *mm;
  }
  const auto workers = object.find("workers");
  if (workers == object.end() || !workers->is_array() || workers->empty())
    return fail(fmt::format("{}: \"workers\" must be a non-empty array", where));
  std::set<std::string> ids;
  for (std::size_t w = 0; w < workers->size(); ++w) {
    auto worker = parse_worker((*workers)[w], fmt::format("{} worker {}", where, w));
    if (!worker) return std::unexpected(worker.error());
    if (worker->id.empty()) worker->id = worker_name(*worker, w);
    if (!ids.insert(worker->id).second) return fail(fmt::format("{}: two workers have the id \"{}\"", where, worker->id));
    card.workers.push_back(std::move(*worker));
  }
  if (auto it = object.find("router_config"); it != object.end() && !it->is_null()) {
    if (it->contains("block_size"))
      return fail(fmt::format("{}: block_size belongs to the card, not to its router_config", where));
    auto override_config = router_config_from_json(*it);
    if (!override_config) return fail(fmt::format("{}: router_config: {}", where, override_config.error().message));
    card.router_config_override = *override_config;
  }
  if (auto it = object.find("disaggregation"); it != object.end() && !it->is_null()) {
    auto disaggregation = parse_disaggregation(*it, where);
    if (!disaggregation) return std::unexpected(disaggregation.error());
    card.disaggregation = *disaggregation;
  }
  if (auto roles = validate_roles(card.workers, card.disaggregation, where); !roles) return std::unexpected(roles.error());
  return card;
}

}  // namespace

std::expected<void, config_error> validate_roles(const std::vector<worker_spec>& workers,
                                                 const std::optional<disaggregation_card>& disaggregation,
                                                 std::string_view where) {
  const bool any_prefill = std::ranges::any_of(workers, [](const worker_spec& w) { return prefills(w.role); });
  const bool any_decode = std::ranges::any_of(workers, [](const worker_spec& w) { return decodes(w.role); });
  if (!disaggregation) {
    for (const worker_spec& w : workers)
      if (w.role != worker_role::both)
        return fail(fmt::format("{}: worker \"{}\" has role {}, but the set is not disaggregated (give the card "
                                "\"disaggregation\": {{\"protocol\": \"vllm-nixl\"}}, or --disaggregation vllm-nixl on "
                                "the command line)",
                                where, w.id.empty() ? w.url : w.id, to_string(w.role)));
    return {};
  }
  if (!any_prefill) return fail(fmt::format("{}: a disaggregated set needs a worker with role prefill (or both)", where));
  if (!any_decode) return fail(fmt::format("{}: a disaggregated set needs a worker with role decode (or both)", where));
  return {};
}

std::expected<router_file, config_error> parse_router_file(std::string_view text) {
  auto document = parse_json<json>(text);
  if (!document && document.error() == json_parse_error::too_deep)
    return std::unexpected(config_error{fmt::format("the config is refused: it {}", describe(document.error()))});
  if (!document) return fail("the config file is not valid JSON");
  return parse_router_document(*document);
}

std::expected<router_file, config_error> parse_router_document(const json& document) {
  if (!document.is_object()) return fail("the config file must hold a JSON object");
  if (auto keys = only_keys(document, {"router", "worker_sets", "nats", "replica_id", "nats_subject_prefix", "replica_warmup_ms"},
                            "config file");
      !keys)
    return std::unexpected(keys.error());
  router_file file;
  for (auto [key, field] : {std::pair{"nats", &file.replicas.nats}, std::pair{"replica_id", &file.replicas.replica_id},
                            std::pair{"nats_subject_prefix", &file.replicas.nats_subject_prefix}}) {
    const auto it = document.find(key);
    if (it == document.end()) continue;
    if (!it->is_string() || it->get_ref<const std::string&>().empty())
      return fail(fmt::format("config file: \"{}\" must be a non-empty string (got {})", key, it->dump()));
    *field = it->get<std::string>();
  }
  if (document.contains("replica_warmup_ms")) {
    auto warmup = get_count(document, "replica_warmup_ms", "config file", 0);
    if (!warmup) return std::unexpected(warmup.error());
    file.replicas.replica_warmup_ms = *warmup;
  }
  if (auto it = document.find("router"); it != document.end()) {
    auto global = router_config_from_json(*it);
    if (!global) return fail(fmt::format("router: {}", global.error().message));
    file.router = *global;
  }
  if (auto valid = validate(file.router); !valid) return fail(fmt::format("router: {}", valid.error().message));
  const auto sets = document.find("worker_sets");
  if (sets == document.end() || !sets->is_array()) return fail("\"worker_sets\" must be an array");
  std::set<std::string> names, models;
  for (std::size_t i = 0; i < sets->size(); ++i) {
    auto card = parse_card((*sets)[i], i);
    if (!card) return std::unexpected(card.error());
    if (!names.insert(card->name).second) return fail(fmt::format("two worker sets are named \"{}\"", card->name));
    if (!models.insert(card->model).second) return fail(fmt::format("two worker sets serve the model \"{}\"", card->model));
    if (auto valid = validate(effective_config(file, *card)); !valid)
      return fail(fmt::format("worker set \"{}\": {}", card->name, valid.error().message));
    file.sets.push_back(std::move(*card));
  }
  return file;
}

router_config effective_config(const router_file& file, const worker_set_card& card) {
  return resolve_effective_config(file.router, card.router_config_override, card.block_size);
}

const worker_set_card* card_named(const router_file& file, std::string_view name) {
  for (const worker_set_card& card : file.sets)
    if (card.name == name) return &card;
  return nullptr;
}

reload_plan plan_reload(const router_file& current, const router_file& next) {
  reload_plan plan;
  for (const worker_set_card& card : next.sets) {
    const worker_set_card* old = card_named(current, card.name);
    const bool same_card = old != nullptr && *old == card;
    // The same card but for its router_config override: the set may still be retunable.
    bool same_but_override = false;
    if (old != nullptr && !same_card) {
      worker_set_card with_new_override = *old;
      with_new_override.router_config_override = card.router_config_override;
      same_but_override = with_new_override == card;
    }
    const router_config after = effective_config(next, card);
    if (same_card && effective_config(current, *old) == after) {
      plan.keep.push_back(card.name);
    } else if ((same_card || same_but_override) && retunable_in_place(effective_config(current, *old), after)) {
      plan.retune.push_back(card.name);
    } else {
      if (old != nullptr) plan.stop.push_back(card.name);
      plan.start.push_back(card.name);
    }
  }
  for (const worker_set_card& card : current.sets)
    if (card_named(next, card.name) == nullptr) plan.stop.push_back(card.name);
  return plan;
}

nlohmann::json explain(const router_file& file) {
  json sets = json::array();
  for (const worker_set_card& card : file.sets) {
    const router_config config = effective_config(file, card);
    sets.push_back({{"name", card.name},
                    {"model", card.model},
                    {"effective_router_config", to_json(config)},
                    {"uses_prefix_overlap", uses_prefix_overlap(config)},
                    {"kv_events_subscribed", should_subscribe_to_kv_events(config)},
                    {"mm_routing_enabled", uses_prefix_overlap(config)}});
    if (card.disaggregation) {
      const bool sglang = card.disaggregation->protocol == pd_protocol::sglang;
      json pools = {{"prefill", json::array()}, {"decode", json::array()}};
      for (std::size_t w = 0; w < card.workers.size(); ++w) {
        const worker_spec& worker = card.workers[w];
        // SGLang's prefill workers are named with the bootstrap port both legs are told.
        if (prefills(worker.role))
          pools["prefill"].push_back(sglang ? fmt::format("{} (bootstrap port {})", worker_name(worker, w), worker.bootstrap_port)
                                            : worker_name(worker, w));
        if (decodes(worker.role)) pools["decode"].push_back(worker_name(worker, w));
      }
      json rules = to_json(*card.disaggregation);
      rules["legs"] = sglang ? "both at once, with the prefill worker's bootstrap address and a fresh room"
                             : "prefill (one token, kv_transfer_params asked for), then decode with the params";
      rules["prefill_choice"] = "the set's cost function over the prefill pool (its workers' cached prefixes)";
      rules["decode_choice"] = card.disaggregation->decode_overlap_credit > 0
                                   ? "booked load over the decode pool, its cached prefix credited"
                                   : "booked load over the decode pool";
      rules["pools"] = std::move(pools);
      sets.back()["disaggregation"] = std::move(rules);
    }
  }
  return {{"sets", std::move(sets)}};
}

}  // namespace kvr
