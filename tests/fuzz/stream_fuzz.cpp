// libFuzzer target: arbitrary bytes as a worker's streamed answer, as kvrouter follows it to
// continue it elsewhere (core/migration). The first byte cuts the bytes into pieces of its
// size; each event's data goes through the answer's ledger, the token-id stripping, the
// continuation's request and the continuation's rewriting. Nothing may crash; every rewritten
// event must be SSE whose data is JSON (or [DONE]); stripped events must hold no token ids; a
// continuation's prompt must be the prompt's ids then the answer's; the events, raw and
// rewritten, gathered into a whole answer (core/migration/whole_answer) must give one JSON
// object.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/migration/answer_ledger.hpp"
#include "core/migration/continuation.hpp"
#include "core/migration/sse_events.hpp"
#include "core/migration/whole_answer.hpp"

using json = nlohmann::json;

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

void check_rewritten(std::string_view bytes) {
  kvr::sse_reader reader;
  reader.feed(bytes, [](std::string_view data) {
    if (data == "[DONE]") return;
    check(!kvr::parse_plain_json(data).is_discarded());
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  kvr::sse_reader reader(4096);
  kvr::answer_ledger ledger;
  kvr::answer_ledger relayed_ledger;
  kvr::whole_answer gathered;
  kvr::sse_reader gathered_reader;
  kvr::continuation_relay relay(relayed_ledger, {.token_ids = (data[0] & 0x80) != 0, .usage = (data[0] & 0x40) != 0}, 3);
  for (std::size_t at = 0; at < stream.size(); at += piece)
    reader.feed(stream.substr(at, piece), [&](std::string_view event) {
      ledger.observe(event);
      const std::string stripped = kvr::without_token_ids(event);
      // Events are read as kvrouter reads them (nlohmann alone would stop at a NUL byte).
      if (kvr::parse_plain_json(event).is_object()) {
        const json out = kvr::parse_plain_json(stripped);
        check(out.is_object());
        check(!out.contains("prompt_token_ids"));
        if (out.contains("choices") && out["choices"].is_array())
          for (const json& choice : out["choices"])
            check(!choice.is_object() || (!choice.contains("token_ids") && !choice.contains("prompt_token_ids")));
      }
      gathered.add(event);
      const auto step = relay.relay(event);
      check_rewritten(step.to_client);
      gathered_reader.feed(step.to_client, [&](std::string_view rewritten) { gathered.add(rewritten); });
    });
  check(kvr::parse_plain_json(gathered.body()).is_object());

  const json body = {{"model", "m"}, {"max_tokens", 64}, {"stream", true}, {"temperature", 0}};
  const auto next = kvr::continue_answer(body, ledger, data[0] & 0x20 ? 32 : 0);
  if (next && !next->nothing_left()) {
    const json request = json::parse(next->body);
    std::vector<std::uint32_t> expected = ledger.prompt_ids();
    expected.insert(expected.end(), ledger.generated_ids().begin(), ledger.generated_ids().end());
    check(request["prompt"].get<std::vector<std::uint32_t>>() == expected);
    check(request["max_tokens"].get<std::int64_t>() == 64 - static_cast<std::int64_t>(ledger.generated_ids().size()));
  }
  check_rewritten(relay.finish("length"));
  return 0;
}
