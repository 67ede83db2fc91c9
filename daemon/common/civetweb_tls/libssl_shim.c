// Debian 12's civetweb 1.15 loads OpenSSL with dlopen("libssl.so") through the OpenSSL 1.1 API and
// needs SSL_get_peer_certificate, which libssl.so.3 no longer exports (it became a macro for
// SSL_get1_peer_certificate). Without it civetweb calls a NULL pointer on the first HTTPS
// connection. This library has the SONAME "libssl.so", depends on libssl.so.3 and supplies that one
// function; ringside loads it by absolute path before civetweb starts, so civetweb's
// dlopen("libssl.so") gets this object and its dlsym() finds everything else in libssl.so.3.
// See docs/http-security.md.
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate
X509 *SSL_get_peer_certificate(const SSL *s);
X509 *SSL_get_peer_certificate(const SSL *s) { return SSL_get1_peer_certificate(s); }
