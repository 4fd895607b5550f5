// The media fetcher's deadline and its name resolution, driven as its actor drives it (fetch,
// then poll), with host names resolved by an injected lookup so a DNS server that never
// answers can be played without one.

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>

#include <gtest/gtest.h>

#include <thread>

#include "actors/pipeline/media_fetcher.hpp"

namespace kvr {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

/// Resolves every host to 127.0.0.1, except `slow.example`, whose lookup hangs until released
/// (a DNS server that never answers). The lookup threads may outlive a test, so what they wait
/// on is shared with them.
class scripted_dns {
 public:
  ~scripted_dns() { release(); }
  name_resolver::lookup_fn lookup() {
    return [gate = gate_](const std::string& host, const std::string& port, name_resolver::endpoints& out) {
      if (host == "slow.example") {
        std::unique_lock lock(gate->mutex);
        gate->released_cv.wait_for(lock, 10s, [&] { return gate->released; });
      }
      out.emplace_back(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::stoi(port)));
      return boost::system::error_code{};
    };
  }
  void release() {
    {
      const std::lock_guard lock(gate_->mutex);
      gate_->released = true;
    }
    gate_->released_cv.notify_all();
  }

 private:
  struct gate {
    std::mutex mutex;
    std::condition_variable released_cv;
    bool released = false;
  };
  std::shared_ptr<gate> gate_ = std::make_shared<gate>();
};

struct fetch_outcome {
  std::optional<media_fetcher::result> result;
  clock_type::duration took{};
};

/// Starts a fetch of each URL and polls until all have answered or `limit` passes.
std::vector<fetch_outcome> fetch_all(media_fetcher& fetcher, const std::vector<std::string>& urls,
                                     std::chrono::milliseconds limit) {
  std::vector<fetch_outcome> outcomes(urls.size());
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < urls.size(); ++i)
    fetcher.fetch(urls[i], [&outcomes, i, start](const media_fetcher::result& result) {
      outcomes[i] = {result, clock_type::now() - start};
    });
  while (clock_type::now() - start < limit) {
    fetcher.poll_for(10ms);
    if (std::ranges::all_of(outcomes, [](const auto& o) { return o.result.has_value(); })) break;
  }
  return outcomes;
}

media_fetch_settings settings_with_timeout(std::chrono::milliseconds timeout) {
  media_fetch_settings settings;
  settings.timeout = timeout;
  settings.allow_private = true;  // the scripted addresses are loopback
  return settings;
}

TEST(media_fetcher, a_fetch_whose_dns_never_answers_fails_at_its_deadline) {
  scripted_dns dns;
  auto counters = std::make_shared<media_fetch_counters>();
  media_fetcher fetcher(settings_with_timeout(300ms), counters, dns.lookup());
  const auto outcomes = fetch_all(fetcher, {"http://slow.example:9/cat.png"}, 3s);
  ASSERT_TRUE(outcomes[0].result.has_value()) << "the fetch answered";
  ASSERT_FALSE(*outcomes[0].result);
  EXPECT_EQ(outcomes[0].result->error(), "timed out after 300 ms");
  EXPECT_LT(outcomes[0].took, 1500ms) << "answered near its deadline, not when DNS gave up";
  EXPECT_EQ(counters->failures.load(), 1u);
}

TEST(media_fetcher, a_lookup_that_ends_after_the_fetcher_is_gone_touches_nothing_of_it) {
  scripted_dns dns;
  {
    auto counters = std::make_shared<media_fetch_counters>();
    media_fetcher fetcher(settings_with_timeout(100ms), counters, dns.lookup());
    const auto outcomes = fetch_all(fetcher, {"http://slow.example:9/cat.png"}, 3s);
    ASSERT_TRUE(outcomes[0].result.has_value());
  }  // the fetcher and its io_context are gone; the lookup thread still waits in "DNS"
  dns.release();
  // The thread now ends its lookup. Under AddressSanitizer, a callback it still owned (with the
  // fetch's socket and timer inside) would be destroyed after its io_context: reported here,
  // while the process lives (symbolizing the report takes seconds), instead of racing its exit.
  std::this_thread::sleep_for(std::getenv("KVR_SANITIZER_BUILD") ? 5s : 100ms);
}

TEST(media_fetcher, a_hung_lookup_holds_up_no_other_hosts_fetch) {
  scripted_dns dns;
  auto counters = std::make_shared<media_fetch_counters>();
  media_fetcher fetcher(settings_with_timeout(2000ms), counters, dns.lookup());
  // Port 9 on loopback: nothing listens, so the quick host's fetch ends at once with a refusal.
  const auto outcomes = fetch_all(fetcher, {"http://slow.example:9/a.png", "http://quick.example:9/b.png"}, 5s);
  ASSERT_TRUE(outcomes[1].result.has_value());
  EXPECT_NE(outcomes[1].result->error().find("connect"), std::string::npos) << outcomes[1].result->error();
  EXPECT_LT(outcomes[1].took, 1000ms) << "the second lookup ran beside the hung one";
  ASSERT_TRUE(outcomes[0].result.has_value());
  EXPECT_EQ(outcomes[0].result->error(), "timed out after 2000 ms");
}

TEST(media_fetcher, a_server_that_never_answers_is_abandoned_at_the_deadline) {
  scripted_dns dns;
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address("127.0.0.1"), 0});  // accepts, says nothing
  const auto port = silent.local_endpoint().port();
  auto counters = std::make_shared<media_fetch_counters>();
  media_fetcher fetcher(settings_with_timeout(300ms), counters, dns.lookup());
  const auto outcomes = fetch_all(fetcher, {"http://img.example:" + std::to_string(port) + "/c.png"}, 3s);
  ASSERT_TRUE(outcomes[0].result.has_value());
  ASSERT_FALSE(*outcomes[0].result);
  EXPECT_LT(outcomes[0].took, 1500ms);
  EXPECT_EQ(counters->failures.load(), 1u) << "counted once, though the aborted read also completes";
}

}  // namespace
}  // namespace kvr
