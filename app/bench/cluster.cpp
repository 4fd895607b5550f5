#include "app/bench/cluster.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace kvr::bench {

namespace {

/// Starts `argv` with stderr (and stdout) to `log`; returns its pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  // Everything the child needs is prepared before fork: the bench has threads (the image
  // server), so the child may only make async-signal-safe calls until execv.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string tail(const std::string& path) {
  const std::string text = read_text(path);
  return text.size() > 1500 ? text.substr(text.size() - 1500) : text;
}

bool alive(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

/// A loopback port nobody listens on now (bound, then released).
std::uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  std::uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  return port;
}

bool accepts(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return ok;
}

/// `name` found on PATH (execv takes no search path), or empty.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  dirs += ":/usr/sbin:/usr/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const auto candidate = std::filesystem::path(dirs.substr(start, colon - start)) / name;
    if (colon > start && access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = colon + 1;
  }
  return {};
}

}  // namespace

std::vector<std::string> policy_flags(const std::string& policy) {
  if (policy == "kv") return {"--router-mode", "kv"};
  // kv-queue[:T]: kv with the admission queue at busy threshold T (default 1).
  if (policy == "kv-queue") return {"--router-mode", "kv", "--busy-threshold", "1"};
  if (policy.starts_with("kv-queue:")) {
    const std::string threshold = policy.substr(9);
    char* end = nullptr;
    const double t = std::strtod(threshold.c_str(), &end);
    if (threshold.empty() || *end != '\0' || !(t > 0)) return {};
    return {"--router-mode", "kv", "--busy-threshold", threshold};
  }
  if (policy == "approx-kv") return {"--router-mode", "kv", "--no-kv-events"};
  if (policy == "load-aware") return {"--load-aware"};
  if (policy == "round-robin" || policy == "random" || policy == "power-of-two" || policy == "least-loaded")
    return {"--router-mode", policy};
  return {};
}

bool policy_uses_kv_events(const std::string& policy) { return policy == "kv" || policy.starts_with("kv-queue"); }

local_cluster::local_cluster(cluster_settings settings) : settings_(std::move(settings)) {
  namespace fs = std::filesystem;
  fs::create_directories(settings_.workdir);
  std::vector<std::string> workers;
  try {
    const bool disaggregated = settings_.prefill > 0;
    const std::size_t mockers = disaggregated ? settings_.prefill + settings_.decode : settings_.mockers;
    for (std::size_t i = 0; i < mockers; ++i) {
      const std::string base = fmt::format("{}/{}-m{}", settings_.workdir, settings_.policy, i);
      fs::remove(base + ".port");
      std::vector<std::string> argv = {settings_.mocker, "--port", "0", "--port-file", base + ".port",
                                       "--model", settings_.model, "--block-size", std::to_string(settings_.block_size)};
      const std::string kv = "ipc://" + base + ".kv", replay = "ipc://" + base + ".replay";
      if (policy_uses_kv_events(settings_.policy))
        argv.insert(argv.end(), {"--kv-events-endpoint", kv, "--replay-endpoint", replay});
      std::string role_spec;
      if (disaggregated) {
        const bool prefill = i < settings_.prefill;
        argv.insert(argv.end(), {"--role", prefill ? "prefill" : "decode", "--pd", settings_.pd});
        role_spec = prefill ? ",role=prefill" : ",role=decode";
        if (prefill && settings_.pd == "sglang") {
          const std::string bootstrap = std::to_string(free_port());
          argv.insert(argv.end(), {"--bootstrap-port", bootstrap});
          role_spec += ",bootstrap=" + bootstrap;
        }
      }
      argv.insert(argv.end(), settings_.mocker_flags.begin(), settings_.mocker_flags.end());
      mockers_.push_back(spawn(argv, base + ".log"));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!fs::exists(base + ".port")) {
        if (!alive(mockers_.back()) || std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("kvrouter-mocker did not start:\n" + tail(base + ".log"));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      mocker_urls_.push_back("http://127.0.0.1:" + read_text(base + ".port"));
      std::string spec = mocker_urls_.back() + fmt::format(",id=m{}", i);
      if (policy_uses_kv_events(settings_.policy)) spec += ",kv_events=" + kv + ",replay=" + replay;
      workers.push_back(spec + role_spec);
    }
    if (settings_.replicas > 1 && settings_.replica_sync) {
      const std::string nats = on_path("nats-server");
      if (nats.empty()) throw std::runtime_error("--replica-sync on needs nats-server (Debian's nats-server package)");
      nats_port_ = free_port();
      const std::string log = fmt::format("{}/{}-nats.log", settings_.workdir, settings_.policy);
      nats_ = spawn({nats, "-a", "127.0.0.1", "-p", std::to_string(nats_port_)}, log);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!accepts(nats_port_)) {
        if (!alive(nats_) || std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("nats-server did not start:\n" + tail(log));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    for (std::size_t r = 0; r < std::max<std::size_t>(1, settings_.replicas); ++r) start_router(r, workers);
  } catch (...) {
    stop_all();
    throw;
  }
}

void local_cluster::start_router(std::size_t replica, const std::vector<std::string>& workers) {
  const std::string log = fmt::format("{}/{}-router{}.log", settings_.workdir, settings_.policy, replica);
  std::vector<std::string> argv = {settings_.kvrouter, "--host", "127.0.0.1", "--port", "0", "--model", settings_.model,
                                   "--block-size", std::to_string(settings_.block_size)};
  for (const auto& w : workers) argv.insert(argv.end(), {"--worker", w});
  const auto flags = policy_flags(settings_.policy);
  if (flags.empty()) throw std::runtime_error("unknown policy " + settings_.policy);
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (settings_.prefill > 0) argv.insert(argv.end(), {"--disaggregation", settings_.pd});
  if (nats_ > 0)
    argv.insert(argv.end(), {"--nats", fmt::format("nats://127.0.0.1:{}", nats_port_), "--replica-id", fmt::format("r{}", replica)});
  argv.insert(argv.end(), settings_.router_flags.begin(), settings_.router_flags.end());
  const pid_t pid = spawn(argv, log);
  routers_.push_back(pid);
  const std::regex serving(R"(serving .* on http://[^:]+:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::uint16_t port = 0;
  while (port == 0 || http_get(fmt::format("http://127.0.0.1:{}/ready", port)).empty()) {
    if (!alive(pid) || std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("kvrouter did not become ready:\n" + tail(log));
    std::smatch match;
    const std::string text = read_text(log);
    if (port == 0 && std::regex_search(text, match, serving)) port = static_cast<std::uint16_t>(std::stoi(match[1]));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  router_ports_.push_back(port);
}

void local_cluster::stop_all() {
  for (pid_t p : routers_) stop(p);
  for (pid_t p : mockers_) stop(p);
  stop(nats_);
}

local_cluster::~local_cluster() { stop_all(); }

std::string http_get(const std::string& url) {
  const std::regex pattern(R"(http://([^:/]+):(\d+)(/.*)?)");
  std::smatch match;
  if (!std::regex_match(url, match, pattern)) return {};
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* address = nullptr;
  if (getaddrinfo(match[1].str().c_str(), match[2].str().c_str(), &hints, &address) != 0) return {};
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string response;
  if (connect(fd, address->ai_addr, address->ai_addrlen) == 0) {
    const std::string path = match[3].matched ? match[3].str() : "/";
    const std::string request = fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", path, match[1].str());
    if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buffer[16384];
      ssize_t n = 0;
      while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  freeaddrinfo(address);
  if (!response.starts_with("HTTP/1.1 200")) return {};
  const auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : response.substr(body + 4);
}

/// CPU time of `pid`'s live threads from the scheduler's nanosecond accounting
/// (`/proc/PID/task/TID/schedstat`); -1 when unreadable. Threads that already exited are not in
/// it (kvrouter's threads live as long as it does, bar restarted components).
static double scheduler_cpu_seconds(pid_t pid) {
  namespace fs = std::filesystem;
  std::error_code ec;
  double total = 0;
  bool any = false;
  for (const auto& task : fs::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long on_cpu_ns = 0;
    if (in >> on_cpu_ns) {
      total += static_cast<double>(on_cpu_ns) / 1e9;
      any = true;
    }
  }
  return any ? total : -1;
}

double process_cpu_seconds(pid_t pid) {
  // Nanoseconds from the scheduler where the kernel keeps them; /proc/PID/stat counts in clock
  // ticks (10 ms), too coarse for short runs.
  if (const double precise = scheduler_cpu_seconds(pid); precise >= 0) return precise;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(in, text)) return -1;
  // Fields after the command name (which may contain spaces) start after the last ')'.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace kvr::bench
