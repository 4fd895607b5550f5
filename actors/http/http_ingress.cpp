#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "actors/http/set_metrics.hpp"
#include "actors/pipeline/runtime.hpp"
#include "actors/tls/worker_tls.hpp"

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
  out += fmt::format("# HELP kvrouter_access_log_lines_total Access-log lines written.\n"
                     "# TYPE kvrouter_access_log_lines_total counter\nkvrouter_access_log_lines_total {}\n"
                     "# HELP kvrouter_access_log_dropped_total Access-log lines dropped (the writer fell behind, or a write failed).\n"
                     "# TYPE kvrouter_access_log_dropped_total counter\nkvrouter_access_log_dropped_total {}\n",
                     access ? access->written() : 0, access ? access->dropped() : 0);
  write_set_metrics(out, *current_table());
  if (write_more_metrics) write_more_metrics(out);
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
  if (n == 0) n = usable_cores();
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
  if (!impl_->settings.access_log.empty()) impl_->access = std::make_unique<access_log>(impl_->settings.access_log);
  impl_->worker_tls = make_worker_tls_context(impl_->settings.worker_ca_file);
  impl_->keys = std::make_unique<api_key_guard>(impl_->settings);
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

void http_ingress::set_metrics_writer(std::function<void(std::string&)> write) { impl_->write_more_metrics = std::move(write); }

void http_ingress::set_readiness_gate(std::function<std::optional<std::string>(const routing_table&)> not_ready) {
  impl_->not_ready = std::move(not_ready);
}

void http_ingress::set_replication_status(std::function<std::string()> status) {
  impl_->replication_status = std::move(status);
}

void http_ingress::set_fault_injector(std::function<void(std::string, std::string)> inject) {
  impl_->inject_fault = std::move(inject);
}

void http_ingress::impl::sample_traffic() {
  traffic.sample(*current_table(), uptime_seconds());
  auto& timer = threads.front()->traffic_timer;
  timer.expires_after(std::chrono::duration_cast<ingress::clock_type::duration>(
      std::chrono::duration<double>(traffic_recorder::sample_period_seconds)));
  timer.async_wait([this](boost::system::error_code ec) {
    if (!ec) sample_traffic();
  });
}

void http_ingress::impl::watch_key_file() {
  auto& timer = threads.front()->key_file_timer;
  timer.expires_after(std::chrono::seconds(1));
  timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    keys->reload_if_changed();
    watch_key_file();
  });
}

namespace {

/// Runs an I/O thread's loop until it is stopped. Every throw known to come from a handler is
/// caught where it happens; should an unknown one escape, only what its handler owned goes
/// (usually one connection) and the loop goes on: Asio lets run() be called again after a
/// handler threw. It is logged, since it is a defect to fix where it happened.
void run_io(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      std::cerr << fmt::format("kvrouter: error: an HTTP I/O handler threw ({}); what it served was dropped\n", e.what());
    }
  }
}

}  // namespace

void http_ingress::run() {
  impl_->sample_traffic();
  if (!impl_->settings.api_key_file.empty()) impl_->watch_key_file();
  std::vector<std::thread> others;
  for (auto& thread : impl_->threads) {
    impl_->accept(*thread);
    thread->sweep_every(ingress::deadline_sweep_period);
  }
  for (std::size_t i = 1; i < impl_->threads.size(); ++i)
    others.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), fmt::format("kvr-io-{}", i).c_str());
      run_io(impl_->threads[i]->io);
    });
  run_io(impl_->threads[0]->io);
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
