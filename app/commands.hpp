#pragma once
/// The operator commands of `kvrouter` (each returns the process exit code).

#include <string>
#include <vector>

namespace kvr::cli {

struct options;

/// `kvrouter --model M --worker ...` or `kvrouter --config FILE`: serve until SIGINT / SIGTERM.
int run_serve(const options& options);
/// `kvrouter explain --config FILE`: each worker set's effective config and gate, as JSON.
int run_explain(const options& options);

/// `kvrouter kv-dump`: print decoded KV-event batches as JSON lines.
int run_kv_dump(const std::vector<std::string>& args);
/// `kvrouter tokenize --tokenizer PATH`: token ids of stdin's text, as one JSON array.
int run_tokenize(const std::vector<std::string>& args);
/// `kvrouter render-chat --tokenizer-config PATH`: the prompt a chat template renders from stdin.
int run_render_chat(const std::vector<std::string>& args);
/// `kvrouter kv-index`: subscribe to workers' KV events, build the prefix index, print it.
int run_kv_index(const std::vector<std::string>& args);

}  // namespace kvr::cli
