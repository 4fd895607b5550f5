#include <utility>  // before Asio under g++ 12

#include "actors/pipeline/media_fetcher.hpp"

#include <cstdint>
#include <deque>
#include <list>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>

#include "actors/http/bounded_head_read.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/pipeline/name_resolver.hpp"
#include "core/media/fetch_policy.hpp"

namespace kvr {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t first_range = 4096;
constexpr std::size_t second_range = 65536;
/// The longest head an image server may answer with (a CDN's headers fit with room to spare).
constexpr std::uint32_t max_image_head_bytes = 16 * 1024;

bool forbidden(const asio::ip::address& address) {
  if (address.is_v4()) return is_forbidden_address(address.to_v4().to_bytes());
  return is_forbidden_address(address.to_v6().to_bytes());
}

/// `Content-Range: bytes 0-4095/123456` -> 123456 (nullopt if absent or `*`).
std::optional<std::uint64_t> total_length(std::string_view content_range) {
  const auto slash = content_range.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  try {
    return std::stoull(std::string(content_range.substr(slash + 1)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

struct media_fetcher::impl {
  media_fetch_settings settings;
  std::shared_ptr<media_fetch_counters> counters;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  ssl::context tls{ssl::context::tls_client};
  /// Lookups on threads of their own (after `io`: it goes first and delivers nothing after).
  name_resolver resolver;
  static constexpr std::size_t resolver_threads = 4;

  struct cache_entry {
    image_dims dims;
    steady::time_point expires;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, cache_entry> cache;
  std::list<std::string> lru;  ///< most recent first
  std::unordered_map<std::string, std::vector<callback>> waiting;  ///< URL -> callers of its fetch in flight
  std::deque<std::string> queued;
  std::size_t running = 0;

  /// Kept-alive connections to image hosts, by `scheme://host:port`, newest last.
  struct idle_connection {
    std::unique_ptr<beast::tcp_stream> plain;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
    steady::time_point until;
  };
  std::unordered_map<std::string, std::vector<idle_connection>> idle;
  static constexpr std::size_t max_idle_per_host = 4;
  static constexpr std::chrono::seconds idle_lifetime{15};

  impl(media_fetch_settings s, std::shared_ptr<media_fetch_counters> c, name_resolver::lookup_fn lookup)
      : settings(std::move(s)), counters(std::move(c)), resolver(io, resolver_threads, std::move(lookup)) {
    tls.set_default_verify_paths();
    tls.set_verify_mode(ssl::verify_peer);
    if (!settings.ca_file.empty()) tls.load_verify_file(settings.ca_file);  // throws with the reason
  }

  void lookup(std::string url, callback done) {
    ++counters->lookups;
    if (auto it = cache.find(url); it != cache.end()) {
      if (steady::now() < it->second.expires) {
        ++counters->cache_hits;
        lru.splice(lru.begin(), lru, it->second.position);
        return done(it->second.dims);
      }
      lru.erase(it->second.position);
      cache.erase(it);
    }
    auto [entry, first] = waiting.try_emplace(url);
    entry->second.push_back(std::move(done));
    if (!first) {
      ++counters->cache_hits;  // shares the fetch in flight
      return;
    }
    queued.push_back(std::move(url));
    start_queued();
  }

  void start_queued() {
    while (running < settings.max_concurrent && !queued.empty()) {
      std::string url = std::move(queued.front());
      queued.pop_front();
      ++running;
      start_fetch(std::move(url));
    }
  }

  void finish(const std::string& url, const result& outcome) {
    --running;
    if (outcome) {
      lru.push_front(url);
      cache[url] = cache_entry{*outcome, steady::now() + settings.cache_ttl, lru.begin()};
      while (cache.size() > settings.cache_entries) {
        cache.erase(lru.back());
        lru.pop_back();
      }
    }
    auto callers = std::move(waiting[url]);
    waiting.erase(url);
    for (auto& done : callers) done(outcome);
    start_queued();
  }

  void start_fetch(std::string url);
};

namespace {

/// One URL's fetch: resolve, check, connect, range GET, maybe a larger range, maybe redirects,
/// all under one deadline: when it passes, whatever step is running is abandoned.
class fetch_op : public std::enable_shared_from_this<fetch_op> {
 public:
  fetch_op(media_fetcher::impl& owner, std::string url)
      : owner_(owner), url_(std::move(url)), deadline_(steady::now() + owner.settings.timeout),
        deadline_timer_(owner.io, deadline_) {}

  void start() {
    auto parsed = parse_http_url(url_);
    if (!parsed) return refuse(parsed.error());
    target_ = *parsed;
    deadline_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->finished_) return;
      self->fail(fmt::format("timed out after {} ms", self->owner_.settings.timeout.count()));
      self->lookup_.reset();  // a lookup still waiting for DNS is abandoned
      if (self->plain_ || self->tls_) self->tcp_layer().close();  // pending I/O ends, its outcome ignored
    });
    attempt();
  }

 private:
  /// Runs `fn` on the stream the current attempt uses (TLS or plain).
  template <class Fn>
  void on_stream(Fn&& fn) {
    if (tls_) fn(*tls_);
    else fn(*plain_);
  }
  beast::tcp_stream& tcp_layer() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }
  [[nodiscard]] std::string pool_key() const { return target_.scheme + "://" + target_.host + ":" + target_.port; }

  /// A kept-alive connection to this target's host, if one is idle and fresh.
  bool take_idle() {
    auto it = owner_.idle.find(pool_key());
    while (it != owner_.idle.end() && !it->second.empty()) {
      auto connection = std::move(it->second.back());
      it->second.pop_back();
      if (steady::now() >= connection.until) continue;  // dropped: the server may have closed it
      plain_ = std::move(connection.plain);
      tls_ = std::move(connection.tls);
      return true;
    }
    return false;
  }

  /// Keeps the connection for the next fetch from this host, or closes it.
  void release_connection(bool reusable) {
    if (!plain_ && !tls_) return;
    auto& idle = owner_.idle[pool_key()];
    if (reusable && idle.size() < media_fetcher::impl::max_idle_per_host) {
      idle.push_back({std::move(plain_), std::move(tls_), steady::now() + media_fetcher::impl::idle_lifetime});
    } else {
      beast::error_code ignored;
      tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);  // no TLS close_notify needed
      tcp_layer().close();
    }
    plain_.reset();
    tls_.reset();
  }

  void attempt() {
    if (take_idle()) {
      reused_ = true;
      return send();
    }
    connect_fresh();
  }

  void connect_fresh() {
    reused_ = false;
    plain_.reset();
    tls_.reset();
    if (target_.scheme == "https") {
      tls_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(owner_.io, owner_.tls);
      if (!SSL_set_tlsext_host_name(tls_->native_handle(), target_.host.c_str()))  // SNI
        return fail("cannot set the TLS server name");
      tls_->set_verify_callback(ssl::host_name_verification(target_.host));
    } else {
      plain_ = std::make_unique<beast::tcp_stream>(owner_.io);
    }
    auto self = shared_from_this();
    lookup_ = owner_.resolver.resolve(target_.host, target_.port, [self](beast::error_code ec, name_resolver::endpoints found) {
      self->lookup_.reset();
      if (ec) return self->fail("cannot resolve " + self->target_.host + ": " + ec.message());
      std::vector<tcp::endpoint> allowed;
      for (const auto& endpoint : found)
        if (self->owner_.settings.allow_private || !forbidden(endpoint.address())) allowed.push_back(endpoint);
      if (allowed.empty())
        return self->refuse(self->target_.host + " resolves to a loopback, private, link-local or multicast address");
      self->tcp_layer().expires_at(self->deadline_);
      self->tcp_layer().async_connect(allowed, [self](beast::error_code ec2, const tcp::endpoint&) {
        if (ec2) return self->fail("connect: " + ec2.message());
        if (!self->tls_) return self->send();
        self->tls_->async_handshake(ssl::stream_base::client, [self](beast::error_code ec3) {
          if (ec3) return self->fail("TLS: " + ec3.message());
          self->send();
        });
      });
    });
  }

  /// A kept-alive connection the server closed meanwhile fails at once: try a fresh one.
  bool retry_if_stale() {
    if (!reused_) return false;
    plain_.reset();
    tls_.reset();
    connect_fresh();
    return true;
  }

  void send() {
    request_ = {http::verb::get, target_.target, 11};
    request_.set(http::field::host, target_.host);
    request_.set(http::field::user_agent, "kvrouter-media-fetcher");
    request_.set(http::field::range, fmt::format("bytes=0-{}", range_ - 1));
    ++owner_.counters->http_requests;
    tcp_layer().expires_at(deadline_);
    buffer_.clear();
    auto self = shared_from_this();
    on_stream([&](auto& stream) {
      http::async_write(stream, request_, [self, &stream](beast::error_code ec, std::size_t) {
        if (ec) return self->retry_if_stale() ? void() : self->fail("write: " + ec.message());
        self->parser_.emplace();
        self->parser_->body_limit(self->range_);
        async_read_bounded(stream, self->buffer_, *self->parser_, max_image_head_bytes, [self](beast::error_code ec2, std::size_t) {
          if (ec2 && ec2 != http::error::body_limit && !self->parser_->is_header_done() && self->retry_if_stale()) return;
          self->on_response(ec2);
        });
      });
    });
  }

  void on_response(beast::error_code ec) {
    const bool too_long = ec == http::error::body_limit;
    if (ec && !too_long) {
      release_connection(false);
      return fail("read: " + ec.message());
    }
    const auto response = parser_->release();
    const unsigned status = response.result_int();
    release_connection(!ec && response.keep_alive());
    if (status >= 300 && status < 400 && status != 304) {
      if (++redirects_ > owner_.settings.max_redirects) return fail("more than 3 redirects");
      auto next = resolve_location(target_, std::string(response[http::field::location]));
      if (!next) return refuse("redirect: " + next.error());
      target_ = *next;
      buffer_.clear();
      return attempt();  // the new address is checked again
    }
    if (status != 206 && status != 200) return fail(fmt::format("HTTP {}", status));
    if (status == 200 && too_long) return fail("the server ignores Range and the image is larger than " + std::to_string(range_) + " bytes");
    const std::string& body = response.body();
    bool complete = status == 200;
    if (status == 206) {
      const auto total = total_length(std::string(response[http::field::content_range]));
      complete = total && *total == body.size();
    }
    auto dims = image_dimensions({reinterpret_cast<const std::uint8_t*>(body.data()), body.size()}, complete);
    if (dims) return done(*dims);
    if (dims.error() == dims_error::need_more_bytes && range_ == first_range) {
      range_ = second_range;
      buffer_.clear();
      return attempt();
    }
    fail("not a supported image (or its header is beyond 64 KiB)");
  }

  /// Each ends the fetch once; whatever completes after the first (an I/O step aborted by the
  /// deadline) changes nothing.
  void refuse(const std::string& why) {
    if (!finish_once()) return;
    ++owner_.counters->refusals;
    owner_.finish(url_, std::unexpected(why));
  }
  void fail(const std::string& why) {
    if (!finish_once()) return;
    ++owner_.counters->failures;
    owner_.finish(url_, std::unexpected(why));
  }
  void done(image_dims dims) {
    if (finish_once()) owner_.finish(url_, dims);
  }
  bool finish_once() {
    if (finished_) return false;
    finished_ = true;
    deadline_timer_.cancel();
    return true;
  }

  media_fetcher::impl& owner_;
  std::string url_;
  parsed_url target_;
  name_resolver::ticket lookup_;  ///< the lookup in flight, if any
  std::unique_ptr<beast::tcp_stream> plain_;                 ///< http
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;  ///< https
  bool reused_ = false;                                      ///< the connection came from the pool
  steady::time_point deadline_;
  asio::steady_timer deadline_timer_;
  bool finished_ = false;
  std::size_t range_ = first_range;
  std::size_t redirects_ = 0;
  http::request<http::empty_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_ = bounded_http_read_buffer();
};

}  // namespace

void media_fetcher::impl::start_fetch(std::string url) { std::make_shared<fetch_op>(*this, std::move(url))->start(); }

media_fetcher::media_fetcher(media_fetch_settings settings, std::shared_ptr<media_fetch_counters> counters,
                             name_resolver::lookup_fn lookup)
    : impl_(std::make_unique<impl>(settings, std::move(counters), std::move(lookup))) {}

media_fetcher::~media_fetcher() = default;

void media_fetcher::poll_for(std::chrono::milliseconds budget) { impl_->io.run_for(budget); }

void media_fetcher::fetch(std::string url, callback done) {
  asio::post(impl_->io, [this, url = std::move(url), done = std::move(done)]() mutable { impl_->lookup(std::move(url), std::move(done)); });
}

}  // namespace kvr
