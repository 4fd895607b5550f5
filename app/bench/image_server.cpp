#include <utility>  // before Asio under g++ 12

#include "app/bench/image_server.hpp"

#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "actors/http/http_read_limits.hpp"

namespace kvr::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct image_server::impl {
  std::vector<std::vector<std::uint8_t>> images;
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::atomic<std::uint64_t> requests{0};
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      std::thread([this, s = std::move(socket)]() mutable { serve(std::move(s)); }).detach();
      accept();
    });
  }

  /// One connection, blocking (the bench's image traffic is small): answer until it closes.
  void serve(tcp::socket socket) {
    beast::flat_buffer buffer = bounded_http_read_buffer();
    beast::error_code ec;
    while (true) {
      http::request<http::empty_body> request;
      http::read(socket, buffer, request, ec);
      if (ec) return;
      ++requests;
      std::size_t k = 0;
      const bool found = std::sscanf(std::string(request.target()).c_str(), "/img/%zu.png", &k) == 1 && k < images.size();
      http::response<http::vector_body<std::uint8_t>> response;
      response.version(11);
      response.keep_alive(request.keep_alive());
      if (!found) {
        response.result(http::status::not_found);
      } else {
        const auto& image = images[k];
        std::size_t end = image.size() - 1;
        const std::string range(request[http::field::range]);
        if (range.starts_with("bytes=0-")) {
          end = std::min<std::size_t>(std::stoull(range.substr(8)), image.size() - 1);
          response.result(http::status::partial_content);
          response.set(http::field::content_range, fmt::format("bytes 0-{}/{}", end, image.size()));
        } else {
          response.result(http::status::ok);
        }
        response.set(http::field::content_type, "image/png");
        response.body().assign(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(end + 1));
      }
      response.prepare_payload();
      http::write(socket, response, ec);
      if (ec || !request.keep_alive()) return;
    }
  }
};

image_server::image_server(std::vector<std::vector<std::uint8_t>> images) : impl_(std::make_unique<impl>()) {
  impl_->images = std::move(images);
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

image_server::~image_server() {
  impl_->io.stop();
  impl_->thread.join();
}

std::string image_server::url(std::size_t k) const {
  return fmt::format("http://127.0.0.1:{}/img/{}.png", impl_->acceptor.local_endpoint().port(), k);
}

std::uint64_t image_server::requests() const { return impl_->requests; }

}  // namespace kvr::bench
