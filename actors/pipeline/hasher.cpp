#include "actors/pipeline/hasher.hpp"

#include <optional>
#include <unordered_map>
#include <vector>

#include "core/kv/block_hash.hpp"
#include "core/prompt/chat_budget.hpp"
#include "core/prompt/mm_splice.hpp"

namespace kvr {

namespace {

/// A job waiting for the media fetcher: its tokens (placeholders not yet expanded) and its
/// images, resolved so far.
struct parked_job {
  route_job_ptr job;
  std::vector<std::uint32_t> tokens;
  std::vector<std::optional<resolved_image>> images;
  std::size_t pending = 0;
  bool failed = false;
};

struct hasher_state {
  hasher_resources resources;
  std::optional<tokenizer> text_tokenizer;  ///< shares the set's tables, owns its caches
  tokenizer::segment_cache_stats reported;  ///< segment-cache figures already added to the counters
  std::vector<std::uint32_t> tokens;        ///< reused per request
  std::vector<std::uint64_t> local;
  std::vector<resolved_image> images;
  std::vector<image_span> spans;
  std::unordered_map<std::uint64_t, parked_job> parked;
  std::uint64_t next_parked_id = 1;

  /// Jobs waiting for image URLs at once; beyond, new ones route on their text at once.
  static constexpr std::size_t max_parked = 1024;
  static constexpr std::size_t max_image_bytes = 64u << 20;

  /// The prompt text of a chat request, or nullopt if it cannot be rendered (counted). Input
  /// the template refuses (JSON in a string nesting too deep) is answered with a 400 naming
  /// its field, and `refused` set; any other failure routes the request unrendered.
  std::optional<std::string> render_chat(const chat_template_inputs& chat, route_job& job, bool& refused) {
    const chat_render_inputs inputs{.messages_json = chat.messages_json,
                                    .tools_json = chat.tools_json,
                                    .template_kwargs_json = chat.template_kwargs_json,
                                    .add_generation_prompt = chat.add_generation_prompt};
    auto rendered = resources.chat ? resources.chat->render(inputs) : chat_template::render_plain(inputs);
    if (!rendered) {
      resources.counters->chat_render_errors.fetch_add(1, std::memory_order_relaxed);
      if (!rendered.error().refused_field.empty()) {
        refused = true;
        route_decision refusal;
        refusal.failure = route_failure::input_refused;
        refusal.refusal = std::move(rendered.error().message);
        refusal.refused_field = std::move(rendered.error().refused_field);
        job.reply(std::move(refusal));
      }
      return std::nullopt;
    }
    resources.counters->chats_rendered.fetch_add(1, std::memory_order_relaxed);
    return std::move(*rendered);
  }

  /// Stops past the set's token limit: the prompt is refused then, and costs no more work.
  void tokenize(std::string_view text) {
    tokens.clear();
    text_tokenizer->encode(text, tokens, resources.max_prompt_tokens);
    hasher_counters& counters = *resources.counters;
    counters.prompts_tokenized.fetch_add(1, std::memory_order_relaxed);
    const auto now = text_tokenizer->segment_stats();
    counters.segment_cache_hits.fetch_add(now.hits - reported.hits, std::memory_order_relaxed);
    counters.segment_cache_misses.fetch_add(now.misses - reported.misses, std::memory_order_relaxed);
    reported = now;
  }

  /// Expands the images' placeholders in `prompt` (or, if any image failed, cuts it at the
  /// first one: those blocks are exact whatever the images are) and leaves the spans in `spans`.
  void splice(std::vector<std::uint32_t>& prompt, const std::vector<std::optional<resolved_image>>& resolved, bool failed) {
    const multimodal_card& card = *resources.multimodal;
    hasher_counters& counters = *resources.counters;
    images.clear();
    spans.clear();
    for (const auto& image : resolved)
      if (image) images.push_back(*image);
    if (!failed && images.size() == resolved.size() && splice_images(prompt, card.image_token_id, images, spans)) {
      counters.images_resolved.fetch_add(images.size(), std::memory_order_relaxed);
      return;
    }
    counters.image_fallbacks.fetch_add(1, std::memory_order_relaxed);
    spans.clear();
    prompt.resize(text_prefix_length(prompt, card.image_token_id));
  }

  /// A prompt longer than the set allows (images expanded) is answered with an error, unrouted.
  bool refuse_if_too_long(std::size_t tokens, route_job& job) const {
    if (tokens <= resources.max_prompt_tokens) return false;
    route_decision refused;
    refused.failure = route_failure::prompt_too_long;
    refused.prompt_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(tokens, UINT32_MAX));
    job.reply(std::move(refused));
    return true;
  }

  void hash(const std::vector<std::uint32_t>& prompt, std::span<const image_span> image_spans, std::uint32_t block_size,
            route_job& job) {
    if (prompt.empty()) return;
    compute_local_hashes(prompt, block_size, image_spans, {}, local);
    compute_sequence_hashes(local, job.sequence_hashes);
  }
};

using hasher_pointer = hasher_actor::stateful_pointer<hasher_state>;

/// Resolves a chat's images: data URIs at once, URLs through the set's media fetcher. Returns
/// true if the job was parked (it continues when the last URL is resolved).
bool resolve_images(hasher_pointer self, const route_job_ptr& job) {
  auto& s = self->state;
  const multimodal_card& card = *s.resources.multimodal;
  hasher_counters& counters = *s.resources.counters;
  std::vector<std::optional<resolved_image>> resolved;
  std::vector<std::pair<std::size_t, std::string>> urls;
  bool failed = false;
  for (const std::string& url : job->request->messages.image_urls) {
    resolved.emplace_back();
    if (url.starts_with("data:")) {
      std::size_t bytes = 0;
      auto image = resolve_data_uri_image(url, card, hasher_state::max_image_bytes, bytes);
      counters.image_bytes_hashed.fetch_add(bytes, std::memory_order_relaxed);
      if (image) resolved.back() = *image;
      else failed = true;
    } else if (s.resources.fetcher && s.parked.size() < hasher_state::max_parked) {
      urls.emplace_back(resolved.size() - 1, url);
    } else {
      counters.image_urls_unresolved.fetch_add(1, std::memory_order_relaxed);
      failed = true;
    }
  }
  if (urls.empty() || failed) {  // nothing to wait for, or the request falls back anyway
    s.splice(s.tokens, resolved, failed || !urls.empty());
    return false;
  }
  const std::uint64_t id = s.next_parked_id++;
  s.parked.emplace(id, parked_job{job, s.tokens, std::move(resolved), urls.size(), false});
  auto handle = caf::actor_cast<hasher_actor>(self);
  for (auto& [slot, url] : urls) {
    s.resources.fetcher->fetch(url, [handle, id, slot = slot, url = url, card](const media_fetcher::result& dims) {
      auto answer = std::make_shared<media_resolution>();
      answer->parked_id = id;
      answer->slot = slot;
      if (dims) {
        if (auto tokens = placeholder_tokens(card, *dims)) {
          answer->ok = true;
          answer->tokens = *tokens;
          answer->hash = image_hash_of_url(url);
        }
      }
      caf::anon_send(handle, media_resolution_ptr(std::move(answer)));
    });
  }
  return true;
}

/// A hashed job is decided here if the scorer's routing state is free (sparing the scorer a
/// wake-up), else it goes to the scorer.
void hand_on(hasher_pointer self, const scorer_handle& scorer, const route_job_ptr& job) {
  if (auto decision = scorer.core->try_decide(query_of(*job))) return job->reply(std::move(*decision));
  self->send(scorer.actor, job);
}

hasher_actor::behavior_type hasher(hasher_pointer self, scorer_handle scorer, std::uint32_t block_size,
                                   hasher_resources resources) {
  auto& s = self->state;
  if (resources.text_tokenizer) s.text_tokenizer.emplace(resources.text_tokenizer->share());
  s.resources = std::move(resources);
  return {
      [self, scorer, block_size](const route_job_ptr& job) {
        auto& s = self->state;
        const routing_request& request = *job->request;
        const std::vector<std::uint32_t>* tokens = &request.prompt_token_ids;
        std::span<const image_span> spans;
        switch (job->plan.path) {
          case prompt_path::token_ids:
          case prompt_path::none: break;
          case prompt_path::text:
            s.tokenize(request.prompt_text);
            tokens = &s.tokens;
            break;
          case prompt_path::chat: {
            if (s.refuse_if_too_long(chat_tokens_at_least(request.messages, s.resources.chat_tokens_per_message), *job)) return;
            bool refused = false;
            auto prompt = s.render_chat(request.chat, *job, refused);
            if (refused) return;
            if (prompt) {
              s.tokenize(*prompt);
              tokens = &s.tokens;
              if (job->plan.images) {
                if (resolve_images(self, job)) return;  // continues on media_resolution
                spans = s.spans;
              }
            }
            break;
          }
        }
        if (tokens == &s.tokens) job->prompt_tokens = static_cast<std::uint32_t>(s.tokens.size());
        if (s.refuse_if_too_long(tokens->size(), *job)) return;
        s.hash(*tokens, spans, block_size, *job);
        hand_on(self, scorer, job);
      },
      [self, scorer, block_size](const media_resolution_ptr& answer) {
        auto& s = self->state;
        auto it = s.parked.find(answer->parked_id);
        if (it == s.parked.end()) return;
        parked_job& p = it->second;
        if (answer->ok) p.images[answer->slot] = resolved_image{answer->tokens, answer->hash};
        else p.failed = true;
        if (--p.pending > 0) return;
        s.splice(p.tokens, p.images, p.failed);
        p.job->prompt_tokens = static_cast<std::uint32_t>(p.tokens.size());
        if (!s.refuse_if_too_long(p.tokens.size(), *p.job)) {
          s.hash(p.tokens, s.spans, block_size, *p.job);
          hand_on(self, scorer, p.job);
        }
        s.parked.erase(it);
      },
  };
}

}  // namespace

hasher_actor spawn_hasher(caf::actor_system& system, scorer_handle scorer, std::uint32_t block_size,
                          const hasher_resources& resources) {
  return system.spawn(hasher, std::move(scorer), block_size, resources);
}

}  // namespace kvr
