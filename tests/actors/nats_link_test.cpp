// The NATS link against a real nats-server on loopback: what one link publishes reaches another
// whole and in order, through the link's own event-loop thread, including a burst the socket
// cannot take at once; and a server that goes away and comes back is reconnected to.

#include "actors/replica/nats_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kvr {
namespace {

using namespace std::chrono_literals;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

bool accepting(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{.sin_family = AF_INET, .sin_port = htons(static_cast<std::uint16_t>(port)),
                      .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
  const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return up;
}

/// A nats-server of its own on a free loopback port (Debian installs it in /usr/sbin).
class nats_server {
 public:
  nats_server() : port_(free_port()) { start(); }
  ~nats_server() { stop(); }
  nats_server(const nats_server&) = delete;
  nats_server& operator=(const nats_server&) = delete;

  [[nodiscard]] std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  void start() {
    const std::string program = std::filesystem::exists("/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : "nats-server";
    const std::string port = std::to_string(port_);
    std::vector<char*> argv{const_cast<char*>(program.c_str()), const_cast<char*>("-a"), const_cast<char*>("127.0.0.1"),
                            const_cast<char*>("-p"), const_cast<char*>(port.c_str()), nullptr};
    posix_spawn_file_actions_t quiet;  // its start-up banner would bury the test's own output
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    const int spawned = posix_spawnp(&pid_, program.c_str(), &quiet, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&quiet);
    ASSERT_EQ(spawned, 0) << "nats-server not found";
    for (int i = 0; i < 100 && !accepting(port_); ++i) std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(accepting(port_)) << "nats-server did not start on " << port_;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

constexpr std::string_view probe_subject = "kvr.s.probe";

/// What a link hands its callback, and on which threads (probes counted apart).
struct inbox {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> messages;
  std::size_t probes = 0;
  std::set<std::thread::id> threads;

  nats_link::on_message sink() {
    return [this](std::string_view subject, std::span<const std::uint8_t> data) {
      std::lock_guard lock(mutex);
      if (subject == probe_subject) ++probes;
      else messages.emplace_back(reinterpret_cast<const char*>(data.data()), data.size());
      threads.insert(std::this_thread::get_id());
      arrived.notify_all();
    };
  }
  bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, limit, done);
  }
};

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::span<const std::uint8_t> bytes_of(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

/// Publishes probes until the receiver has one more: its subscription has reached the server.
void until_heard(nats_link& sender, inbox& receiver) {
  std::size_t before = 0;
  {
    std::lock_guard lock(receiver.mutex);
    before = receiver.probes;
  }
  for (int i = 0; i < 200; ++i) {
    sender.publish(std::string(probe_subject), bytes_of("probe"));
    if (receiver.wait_for([&] { return receiver.probes > before; }, 50ms)) return;
  }
  FAIL() << "the receiver never heard the sender";
}

std::string payload(std::size_t index, std::size_t size) {
  std::string text = std::to_string(index) + ":";
  text.reserve(size);
  while (text.size() < size) text.push_back(static_cast<char>('a' + (index + text.size()) % 26));
  return text;
}

TEST(nats_link, a_burst_bigger_than_the_socket_takes_arrives_whole_and_in_order_on_the_links_own_thread) {
  nats_server server;
  inbox received;
  nats_link receiver({.servers = {server.url()}, .name = "receiver"}, "kvr.*.*", received.sink(), {});
  nats_link sender({.servers = {server.url()}, .name = "sender"}, "elsewhere.>", [](auto, auto) {}, {});
  ASSERT_TRUE(eventually([&] { return receiver.connected() && sender.connected(); }));
  until_heard(sender, received);

  // 24 MB published back to back: far more than a loopback socket takes without waiting, so
  // most of it goes out from the link's thread once the socket is writable again.
  constexpr std::size_t count = 120;
  constexpr std::size_t size = 200 * 1024;
  for (std::size_t i = 0; i < count; ++i) ASSERT_TRUE(sender.publish("kvr.s.bookings", bytes_of(payload(i, size))));
  ASSERT_TRUE(received.wait_for([&] { return received.messages.size() >= count; }, 30s))
      << "only " << received.messages.size() << " of " << count << " arrived";

  std::lock_guard lock(received.mutex);
  ASSERT_EQ(received.messages.size(), count);
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(received.messages[i], payload(i, size)) << "message " << i;
  ASSERT_EQ(received.threads.size(), 1u);
  EXPECT_NE(*received.threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(receiver.dropped(), 0u);
}

TEST(nats_link, a_server_that_goes_away_and_comes_back_is_reconnected_and_messages_flow_again) {
  nats_server server;
  inbox received;
  std::mutex states_mutex;
  std::vector<bool> states;
  nats_link receiver({.servers = {server.url()}, .name = "receiver"}, "kvr.*.*", received.sink(), [&](bool up) {
    std::lock_guard lock(states_mutex);
    states.push_back(up);
  });
  nats_link sender({.servers = {server.url()}, .name = "sender"}, "elsewhere.>", [](auto, auto) {}, {});
  ASSERT_TRUE(eventually([&] { return receiver.connected() && sender.connected(); }));
  until_heard(sender, received);

  server.stop();
  ASSERT_TRUE(eventually([&] { return !receiver.connected() && !sender.connected(); })) << "the loss went unnoticed";
  EXPECT_FALSE(sender.publish("kvr.s.bookings", bytes_of("while down"))) << "a publish while disconnected claimed success";

  server.start();
  ASSERT_TRUE(eventually([&] { return receiver.connected() && sender.connected(); }, 10000ms)) << "no reconnection";
  until_heard(sender, received);
  ASSERT_TRUE(sender.publish("kvr.s.bookings", bytes_of("after")));
  ASSERT_TRUE(received.wait_for([&] { return !received.messages.empty(); }, 5s));
  {
    std::lock_guard lock(received.mutex);
    EXPECT_EQ(received.messages.front(), "after");
  }
  std::lock_guard lock(states_mutex);
  ASSERT_GE(states.size(), 3u);  // up, down, up again
  EXPECT_TRUE(states.front());
  EXPECT_TRUE(states.back());
}

}  // namespace
}  // namespace kvr
