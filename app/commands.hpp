#pragma once
/// The operator commands of `kvrouter` (each returns the process exit code).

#include <string>
#include <vector>

namespace kvr::cli {

/// `kvrouter kv-dump`: print decoded KV-event batches as JSON lines.
int run_kv_dump(const std::vector<std::string>& args);
/// `kvrouter kv-index`: subscribe to workers' KV events, build the prefix index, print it.
int run_kv_index(const std::vector<std::string>& args);

}  // namespace kvr::cli
