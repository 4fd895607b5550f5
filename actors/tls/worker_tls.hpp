#pragma once
/// TLS to `https://` workers: the proxy's connections and the health and engine-metrics polls.
/// Workers are verified as browsers verify sites: a chain to a trusted CA (the system's, plus
/// `--worker-ca-file`) and the certificate's names against the URL's host (DNS name or IP).

#include <utility>  // before Asio under g++ 12

#include <memory>
#include <string>

#include <boost/asio/ssl.hpp>

namespace kvr {

/// A client context trusting the system's CAs and, when `ca_file` is not empty, the PEM
/// certificates in it; TLS 1.2 or newer. Throws std::runtime_error naming a file it cannot load.
[[nodiscard]] std::shared_ptr<boost::asio::ssl::context> make_worker_tls_context(const std::string& ca_file);

/// Names the server `host` on a connection before its handshake: SNI (for DNS names; an IP
/// literal is not sent, as RFC 6066 says) and the name or address the certificate must carry,
/// checked by OpenSSL's own verification (so a mismatch is reported as one). False when
/// OpenSSL refuses the name.
[[nodiscard]] bool name_tls_server(SSL* ssl, const std::string& host);

/// Why a handshake failed, for logs and error answers: OpenSSL's reason and, when the
/// certificate was refused, the verification's own (e.g. "self-signed certificate in
/// certificate chain", "hostname mismatch").
[[nodiscard]] std::string tls_failure(const boost::system::error_code& ec, SSL* ssl);

}  // namespace kvr
