#include "storage/digest.h"

#include <openssl/evp.h>

#include <new>

#include "storage/fs.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::storage {

void Sha256::Free::operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  // EVP_MD_CTX_new and EVP_DigestInit_ex(SHA-256) fail only when memory runs out; report it
  // the way every std::string allocation in this module already does.
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

void Sha256::Update(const void* data, size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }

std::string Sha256::FinalHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_.get(), md, &len);
  return util::HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
}

Result<std::string> Sha256OfFd(int fd) {
  Sha256 sha;
  char buf[64 * 1024];
  while (true) {
    auto n = sys::Read(fd, buf, sizeof buf);
    if (!n.ok()) return StorageError("read", std::to_string(fd), n.error().err);
    if (*n == 0) return sha.FinalHex();
    sha.Update(buf, *n);
  }
}

}  // namespace sandrun::storage
