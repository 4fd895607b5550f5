#include "actors/hasher.hpp"

#include <optional>
#include <vector>

#include "core/block_hash.hpp"
#include "core/mm_splice.hpp"

namespace kvr {

namespace {

struct hasher_state {
  hasher_resources resources;
  std::optional<tokenizer> text_tokenizer;  ///< shares the set's tables, owns its caches
  tokenizer::segment_cache_stats reported;  ///< segment-cache figures already added to the counters
  std::vector<std::uint32_t> tokens;        ///< reused per request
  std::vector<std::uint64_t> local;
  std::vector<resolved_image> images;
  std::vector<image_span> spans;

  /// Images of a chat, in prompt order, spliced into `tokens`; on any failure the tokens are cut
  /// at the first image (those blocks are exact whatever the images are) and no span is left.
  void splice_request_images(const routing_request& request) {
    const multimodal_card& card = *resources.multimodal;
    hasher_counters& counters = *resources.counters;
    images.clear();
    spans.clear();
    bool ok = true;
    for (const chat_message& message : request.messages) {
      for (const std::string& url : message.image_urls) {
        if (!url.starts_with("data:")) {
          counters.image_urls_unresolved.fetch_add(1, std::memory_order_relaxed);
          ok = false;
          continue;
        }
        std::size_t bytes = 0;
        auto image = resolve_data_uri_image(url, card, max_image_bytes, bytes);
        counters.image_bytes_hashed.fetch_add(bytes, std::memory_order_relaxed);
        if (!image) {
          ok = false;
          continue;
        }
        images.push_back(*image);
      }
    }
    if (ok && splice_images(tokens, card.image_token_id, images, spans)) {
      counters.images_resolved.fetch_add(images.size(), std::memory_order_relaxed);
      return;
    }
    counters.image_fallbacks.fetch_add(1, std::memory_order_relaxed);
    spans.clear();
    tokens.resize(text_prefix_length(tokens, card.image_token_id));
  }

  static constexpr std::size_t max_image_bytes = 64u << 20;

  /// The prompt text of a chat request, or nullopt if it cannot be rendered (counted).
  std::optional<std::string> render_chat(const chat_template_inputs& chat) {
    const chat_render_inputs inputs{.messages_json = chat.messages_json,
                                    .tools_json = chat.tools_json,
                                    .template_kwargs_json = chat.template_kwargs_json,
                                    .add_generation_prompt = chat.add_generation_prompt};
    auto rendered = resources.chat ? resources.chat->render(inputs) : chat_template::render_plain(inputs);
    if (!rendered) {
      resources.counters->chat_render_errors.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    resources.counters->chats_rendered.fetch_add(1, std::memory_order_relaxed);
    return std::move(*rendered);
  }

  void tokenize(std::string_view text) {
    tokens.clear();
    text_tokenizer->encode(text, tokens);
    hasher_counters& counters = *resources.counters;
    counters.prompts_tokenized.fetch_add(1, std::memory_order_relaxed);
    const auto now = text_tokenizer->segment_stats();
    counters.segment_cache_hits.fetch_add(now.hits - reported.hits, std::memory_order_relaxed);
    counters.segment_cache_misses.fetch_add(now.misses - reported.misses, std::memory_order_relaxed);
    reported = now;
  }
};

hasher_actor::behavior_type hasher(hasher_actor::stateful_pointer<hasher_state> self, scorer_actor scorer,
                                   std::uint32_t block_size, hasher_resources resources) {
  auto& s = self->state;
  if (resources.text_tokenizer) s.text_tokenizer.emplace(resources.text_tokenizer->share());
  s.resources = std::move(resources);
  return {
      [self, scorer, block_size](const route_job_ptr& job) {
        auto& s = self->state;
        const routing_request& request = *job->request;
        const std::vector<std::uint32_t>* tokens = &request.prompt_token_ids;
        if (tokens->empty() && s.text_tokenizer) {
          if (request.endpoint == api_endpoint::chat_completions && s.resources.hashes_chat()) {
            if (auto prompt = s.render_chat(request.chat)) {
              s.tokenize(*prompt);
              if (s.resources.multimodal) s.splice_request_images(request);
              tokens = &s.tokens;
            }
          } else if (!request.prompt_text.empty()) {
            s.tokenize(request.prompt_text);
            s.spans.clear();
            tokens = &s.tokens;
          }
          if (tokens == &s.tokens) job->prompt_tokens = static_cast<std::uint32_t>(s.tokens.size());
        }
        if (!tokens->empty()) {
          const std::span<const image_span> spans = tokens == &s.tokens ? std::span<const image_span>(s.spans) : std::span<const image_span>();
          compute_local_hashes(*tokens, block_size, spans, {}, s.local);
          compute_sequence_hashes(s.local, job->sequence_hashes);
        }
        self->send(scorer, job);
      },
  };
}

}  // namespace

hasher_actor spawn_hasher(caf::actor_system& system, scorer_actor scorer, std::uint32_t block_size,
                          const hasher_resources& resources) {
  return system.spawn(hasher, std::move(scorer), block_size, resources);
}

}  // namespace kvr
