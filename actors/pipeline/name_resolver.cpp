#include <utility>  // before Asio under g++ 12

#include "actors/pipeline/name_resolver.hpp"

#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>

namespace kvr {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

/// One lookup; its caller gave up once `ticket` has expired.
struct lookup_job {
  std::string host;
  std::string port;
  name_resolver::done_fn done;
  std::weak_ptr<void> ticket;
};

}  // namespace

struct name_resolver::state {
  std::mutex mutex;
  std::condition_variable wake;
  std::list<lookup_job> jobs;
  /// Jobs a thread is looking up. They stay here, not on the thread, so that the resolver's
  /// destructor destroys their callbacks: a callback owns the caller's sockets and timers, which
  /// must die while their io_context lives, never later on a lookup thread that outlived it.
  std::list<lookup_job> running;
  asio::io_context* deliver_to = nullptr;  ///< null once the resolver is gone
  lookup_fn lookup;

  void run() {
    for (;;) {
      std::list<lookup_job>::iterator job;
      std::string host, port;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return deliver_to == nullptr || !jobs.empty(); });
        if (deliver_to == nullptr) return;
        running.splice(running.end(), jobs, jobs.begin());
        job = std::prev(running.end());
        if (job->ticket.expired()) {  // its caller gave up before it started
          running.erase(job);
          continue;
        }
        host = job->host;
        port = job->port;
      }
      endpoints found;
      const boost::system::error_code ec = lookup(host, port, found);
      const std::lock_guard lock(mutex);  // held while posting: the io_context cannot go meanwhile
      if (deliver_to == nullptr) return;  // the resolver went, and destroyed the job with it
      asio::post(*deliver_to, [done = std::move(job->done), ticket = std::move(job->ticket), ec, found = std::move(found)]() mutable {
        if (!ticket.expired()) done(ec, std::move(found));
      });
      running.erase(job);
    }
  }
};

name_resolver::lookup_fn name_resolver::system_lookup() {
  return [](const std::string& host, const std::string& port, endpoints& out) {
    asio::io_context local;
    tcp::resolver resolver(local);
    boost::system::error_code ec;
    const auto results = resolver.resolve(host, port, ec);
    if (!ec)
      for (const auto& entry : results) out.push_back(entry.endpoint());
    return ec;
  };
}

name_resolver::name_resolver(asio::io_context& deliver_to, std::size_t threads, lookup_fn lookup)
    : state_(std::make_shared<state>()) {
  state_->deliver_to = &deliver_to;
  state_->lookup = std::move(lookup);
  for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i)
    std::thread([shared = state_] { shared->run(); }).detach();  // may outlive us, stuck in getaddrinfo
}

name_resolver::~name_resolver() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->deliver_to = nullptr;
    state_->jobs.clear();
    state_->running.clear();  // on the owner's thread, while the io_context the callbacks use still lives
  }
  state_->wake.notify_all();
}

name_resolver::ticket name_resolver::resolve(std::string host, std::string port, done_fn done) {
  auto handle = std::make_shared<char>(0);
  {
    const std::lock_guard lock(state_->mutex);
    state_->jobs.push_back({std::move(host), std::move(port), std::move(done), handle});
  }
  state_->wake.notify_one();
  return handle;
}

}  // namespace kvr
