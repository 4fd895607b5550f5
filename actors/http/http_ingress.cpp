#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace kvr {

using ingress::io_thread;
using ingress::tcp;
namespace asio = boost::asio;

namespace ingress {
namespace {

constexpr std::size_t max_idle_per_worker = 64;
/// How late the scorer may learn of bookings ingress made itself (round-robin, random): its
/// loads and counters lag by at most this much; decisions in those modes never read them.
constexpr std::chrono::milliseconds lifecycle_flush_interval{20};
/// How often each I/O thread checks its connections' deadlines (the timeouts' resolution).
constexpr std::chrono::milliseconds deadline_sweep_period{250};

}  // namespace

std::unique_ptr<upstream_connection> io_thread::take_idle(const std::string& url) {
  auto it = idle.find(url);
  if (it == idle.end() || it->second.empty()) return nullptr;
  auto connection = std::move(it->second.back());
  it->second.pop_back();
  return connection;
}

void io_thread::give_back(const std::string& url, std::unique_ptr<upstream_connection> connection) {
  auto& pool = idle[url];
  if (pool.size() < max_idle_per_worker) pool.push_back(std::move(connection));
}

void io_thread::report(const scorer_actor& scorer, const lifecycle_event& event) {
  const bool first = lifecycle.add(scorer, event);
  if (event.what == lifecycle_event::kind::worker_failed) return lifecycle.flush();
  if (!first) return;
  lifecycle_timer.expires_after(lifecycle_flush_interval);
  lifecycle_timer.async_wait([this](boost::system::error_code ec) {
    if (!ec) lifecycle.flush();
  });
}

void io_thread::sweep_every(std::chrono::milliseconds period) {
  sweep_timer.expires_after(period);
  sweep_timer.async_wait([this, period](boost::system::error_code ec) {
    if (ec) return;
    const auto now = clock_type::now();
    // Collected first: a connection acting on its deadline may end and leave the list.
    std::vector<timed*> expired;
    for (timed* connection : connections)
      if (connection->deadline <= now) expired.push_back(connection);
    for (timed* connection : expired) connection->on_deadline();
    sweep_every(period);
  });
}

}  // namespace ingress

void http_ingress::impl::accept(io_thread& thread) {
  thread.acceptor->async_accept(thread.io, [this, &thread](boost::system::error_code ec, tcp::socket socket) {
    if (!thread.acceptor->is_open()) return;
    if (ec) {
      // Out of file descriptors or memory: accepting again at once would spin; pause a little.
      thread.accept_backoff.expires_after(std::chrono::milliseconds(50));
      thread.accept_backoff.async_wait([this, &thread](boost::system::error_code) { accept(thread); });
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    ingress::serve_connection(*this, thread, std::move(socket));
    accept(thread);
  });
}

std::string http_ingress::impl::metrics_text() {
  std::string out;
  probe.write_metrics(out);

  auto table = current_table();
  auto family = [&](std::string_view name, std::string_view help, std::string_view type, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const worker_set_route& set : table->sets) {
      const auto snapshot = set.snapshot->load();
      for (const auto& w : snapshot->workers)
        out += fmt::format("{}{{set=\"{}\",model=\"{}\",worker=\"{}\"}} {}\n", name, set.name, set.model, w.name, value_of(w));
    }
  };
  using worker = scorer_snapshot::worker;
  family("kvrouter_worker_healthy", "1 if the worker takes requests.", "gauge", [](const worker& w) { return w.healthy ? 1 : 0; });
  family("kvrouter_worker_active_prefill_tokens", "Booked prompt tokens not yet prefilled.", "gauge",
         [](const worker& w) { return w.prefill_tokens; });
  family("kvrouter_worker_active_decode_blocks", "KV blocks held by requests in flight.", "gauge",
         [](const worker& w) { return w.decode_blocks; });
  family("kvrouter_worker_active_requests", "Requests in flight.", "gauge", [](const worker& w) { return w.requests; });
  family("kvrouter_worker_index_blocks", "Blocks the prefix index holds for the worker.", "gauge",
         [](const worker& w) { return w.index_blocks; });
  family("kvrouter_worker_routed_total", "Requests routed to the worker.", "counter", [](const worker& w) { return w.routed; });
  family("kvrouter_worker_failures_total", "Failures reported for the worker.", "counter",
         [](const worker& w) { return w.failures; });
  out += "# HELP kvrouter_component_restarts_total Restarts of a set's pipeline component after it died.\n"
         "# TYPE kvrouter_component_restarts_total counter\n";
  for (const worker_set_route& set : table->sets)
    for (const component_status& c : set.components)
      out += fmt::format("kvrouter_component_restarts_total{{set=\"{}\",model=\"{}\",component=\"{}\"}} {}\n", set.name,
                         set.model, c.name, c.restarts);
  out += "# HELP kvrouter_component_running 1 while a set's pipeline component runs (0: waiting for its restart).\n"
         "# TYPE kvrouter_component_running gauge\n";
  for (const worker_set_route& set : table->sets)
    for (const component_status& c : set.components)
      out += fmt::format("kvrouter_component_running{{set=\"{}\",model=\"{}\",component=\"{}\"}} {}\n", set.name, set.model,
                         c.name, c.running ? 1 : 0);
  out += "# HELP kvrouter_set_restarts_total Restarts of a whole set after its scorer or a hasher died.\n"
         "# TYPE kvrouter_set_restarts_total counter\n";
  for (const worker_set_route& set : table->sets)
    out += fmt::format("kvrouter_set_restarts_total{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model, set.restarts);
  out += "# HELP kvrouter_set_kv_batches_total KV-event batches applied.\n# TYPE kvrouter_set_kv_batches_total counter\n";
  for (const worker_set_route& set : table->sets)
    out += fmt::format("kvrouter_set_kv_batches_total{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model,
                       set.snapshot->load()->kv_batches);
  auto hasher_family = [&](std::string_view name, std::string_view help, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (const worker_set_route& set : table->sets)
      if (set.hashing)
        out += fmt::format("{}{{set=\"{}\",model=\"{}\"}} {}\n", name, set.name, set.model, value_of(*set.hashing));
  };
  hasher_family("kvrouter_set_prompts_tokenized_total", "Text and chat prompts tokenized.",
                [](const hasher_counters& c) { return c.prompts_tokenized.load(); });
  hasher_family("kvrouter_set_chats_rendered_total", "Chat requests rendered with the set's chat template.",
                [](const hasher_counters& c) { return c.chats_rendered.load(); });
  hasher_family("kvrouter_set_chat_render_errors_total", "Chat requests the template refused (routed on load).",
                [](const hasher_counters& c) { return c.chat_render_errors.load(); });
  hasher_family("kvrouter_set_segment_cache_hits_total", "Prompt segments whose token ids were reused.",
                [](const hasher_counters& c) { return c.segment_cache_hits.load(); });
  hasher_family("kvrouter_set_segment_cache_misses_total", "Prompt segments tokenized afresh (128 bytes or more).",
                [](const hasher_counters& c) { return c.segment_cache_misses.load(); });
  hasher_family("kvrouter_set_images_resolved_total", "Images spliced into prompts and hashed (multimodal routing).",
                [](const hasher_counters& c) { return c.images_resolved.load(); });
  hasher_family("kvrouter_set_image_bytes_hashed_total", "Decoded bytes of data-URI images hashed.",
                [](const hasher_counters& c) { return c.image_bytes_hashed.load(); });
  hasher_family("kvrouter_set_image_fallbacks_total", "Image requests routed on their text before the first image.",
                [](const hasher_counters& c) { return c.image_fallbacks.load(); });
  hasher_family("kvrouter_set_image_urls_unresolved_total", "Image URLs not resolved (no media fetcher, or too many waiting).",
                [](const hasher_counters& c) { return c.image_urls_unresolved.load(); });
  hasher_family("kvrouter_set_media_lookups_total", "Image URLs asked of the media fetcher.",
                [](const hasher_counters& c) { return c.media.lookups.load(); });
  hasher_family("kvrouter_set_media_cache_hits_total", "Image dimensions answered from the media cache.",
                [](const hasher_counters& c) { return c.media.cache_hits.load(); });
  hasher_family("kvrouter_set_media_fetches_total", "HTTP range requests the media fetcher sent.",
                [](const hasher_counters& c) { return c.media.http_requests.load(); });
  hasher_family("kvrouter_set_media_refusals_total", "Image URLs refused (scheme, or a private / loopback address).",
                [](const hasher_counters& c) { return c.media.refusals.load(); });
  hasher_family("kvrouter_set_media_failures_total", "Image fetches that failed (network, timeout, status, not an image).",
                [](const hasher_counters& c) { return c.media.failures.load(); });
  return out;
}

namespace {

/// Binds and listens; `shared` lets later sockets of this process bind the same port.
void listen_on(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, bool shared, const std::string& host) {
  boost::system::error_code ec;
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  if (shared) acceptor.set_option(asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
  acceptor.bind(endpoint, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, endpoint.port(), ec.message()));
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, endpoint.port(), ec.message()));
}

}  // namespace

http_ingress::http_ingress(ingress_settings settings) : impl_(std::make_unique<impl>()) {
  impl_->settings = std::move(settings);
  impl_->instance_tag = (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}()) & 0xffffffffffull;
  std::size_t n = impl_->settings.threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(impl_->settings.host, ec);
  if (ec) throw std::runtime_error(fmt::format("invalid listen address {}", impl_->settings.host));
  std::uint16_t port = impl_->settings.port;
  if (port != 0) {
    // SO_REUSEPORT would let this process share a port another kvrouter (same user) already
    // serves, silently splitting its traffic; a plain bind first fails as "address in use".
    asio::io_context probe_io;
    tcp::acceptor probe(probe_io);
    listen_on(probe, tcp::endpoint(address, port), false, impl_->settings.host);
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto thread = std::make_unique<io_thread>(0x5eed + i);
    thread->acceptor.emplace(thread->io);
    // One listening socket per I/O thread on the same port: the kernel spreads connections.
    listen_on(*thread->acceptor, tcp::endpoint(address, port), true, impl_->settings.host);
    port = thread->acceptor->local_endpoint().port();  // later threads share the chosen port
    impl_->threads.push_back(std::move(thread));
  }
  impl_->bound_port = port;
}

http_ingress::~http_ingress() = default;

void http_ingress::set_routing_table(std::shared_ptr<const routing_table> table) {
  std::map<std::string, std::vector<tcp::endpoint>> resolved;
  asio::io_context io;
  tcp::resolver resolver(io);
  for (const worker_set_route& set : table->sets)
    for (const worker_target& worker : set.workers) {
      boost::system::error_code ec;
      auto results = resolver.resolve(worker.host, worker.port, ec);
      std::vector<tcp::endpoint>& endpoints = resolved[worker.host + ":" + worker.port];
      if (!ec)
        for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }
  std::lock_guard lock(impl_->table_mutex);
  impl_->table = std::move(table);
  impl_->resolved = std::move(resolved);
}

std::uint16_t http_ingress::port() const { return impl_->bound_port; }

void http_ingress::set_fault_injector(std::function<void(std::string, std::string)> inject) {
  impl_->inject_fault = std::move(inject);
}

void http_ingress::run() {
  std::vector<std::thread> others;
  for (auto& thread : impl_->threads) {
    impl_->accept(*thread);
    thread->sweep_every(ingress::deadline_sweep_period);
  }
  for (std::size_t i = 1; i < impl_->threads.size(); ++i)
    others.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), fmt::format("kvr-io-{}", i).c_str());
      impl_->threads[i]->io.run();
    });
  impl_->threads[0]->io.run();
  for (auto& t : others) t.join();
}

void http_ingress::stop() {
  for (auto& thread : impl_->threads) thread->io.stop();
}

void http_ingress::drain(std::chrono::seconds accept_for, std::chrono::seconds grace) {
  if (impl_->draining.exchange(true)) return;
  const auto now = std::chrono::steady_clock::now();
  const auto give_up = now + grace;
  std::cerr << fmt::format("kvrouter: draining: {} connection(s) open; accepting for {} s, exiting within {} s\n",
                           impl_->probe.open_connections(), accept_for.count(), grace.count());
  for (auto& thread : impl_->threads)
    asio::post(thread->io, [&t = *thread] {
      std::vector<ingress::timed*> open(t.connections.begin(), t.connections.end());  // closing ones leave the list
      for (ingress::timed* connection : open) connection->on_drain();
    });
  auto& first = *impl_->threads.front();
  asio::post(first.io, [this, &first, close_at = std::min(now + accept_for, give_up), give_up] {
    first.drain_timer.expires_at(close_at);
    first.drain_timer.async_wait([this, give_up](boost::system::error_code ec) {
      if (!ec) impl_->finish_drain(give_up);
    });
  });
}

void http_ingress::impl::finish_drain(std::chrono::steady_clock::time_point give_up) {
  for (auto& thread : threads)
    asio::post(thread->io, [&t = *thread] {
      boost::system::error_code ignored;
      if (t.acceptor) t.acceptor->close(ignored);
    });
  wait_for_drained(give_up);
}

void http_ingress::impl::wait_for_drained(std::chrono::steady_clock::time_point give_up) {
  const std::uint64_t open = probe.open_connections();  // connections count themselves out as they end
  if (open == 0 || std::chrono::steady_clock::now() >= give_up) {
    if (open == 0) std::cerr << "kvrouter: drained: every request finished\n";
    else std::cerr << fmt::format("kvrouter: grace period over: cutting {} connection(s)\n", open);
    for (auto& thread : threads) thread->io.stop();
    return;
  }
  auto& timer = threads.front()->drain_timer;
  timer.expires_after(std::chrono::milliseconds(50));
  timer.async_wait([this, give_up](boost::system::error_code ec) {
    if (!ec) wait_for_drained(give_up);
  });
}

}  // namespace kvr
