#include "actors/tls/worker_tls.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace kvr {

std::shared_ptr<boost::asio::ssl::context> make_worker_tls_context(const std::string& ca_file) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  context->set_default_verify_paths();  // the system's CAs (SSL_CERT_FILE / SSL_CERT_DIR move them)
  context->set_verify_mode(ssl::verify_peer);
  if (!ca_file.empty()) {
    if (std::FILE* file = std::fopen(ca_file.c_str(), "r")) {
      std::fclose(file);
    } else {
      throw std::runtime_error("cannot load the worker CA file " + ca_file + ": " + std::strerror(errno));
    }
    boost::system::error_code ec;
    context->load_verify_file(ca_file, ec);
    if (ec) throw std::runtime_error("cannot load the worker CA file " + ca_file + ": it holds no PEM certificate");
  }
  return context;
}

bool name_tls_server(SSL* ssl, const std::string& host) {
  boost::system::error_code not_an_address;
  (void)boost::asio::ip::make_address(host, not_an_address);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (!not_an_address) return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) == 1;
}

std::string tls_failure(const boost::system::error_code& ec, SSL* ssl) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify == X509_V_OK) return ec.message();
  return ec.message() + " (" + X509_verify_cert_error_string(verify) + ")";
}

}  // namespace kvr
