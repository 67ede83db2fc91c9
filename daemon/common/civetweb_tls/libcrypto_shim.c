// The SONAME "libcrypto.so" for civetweb's dlopen("libcrypto.so") (see libssl_shim.c): no code of
// its own, it depends on libcrypto.so.3, where civetweb's dlsym() finds the functions it wants.
// The one symbol below only keeps the object from being empty.
int ringside_civetweb_crypto_shim = 1;
