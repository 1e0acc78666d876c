// SHA-256 through OpenSSL's EVP interface, for exported-file checksums and input comparison.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "util/result.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace sandrun::storage {

// Incremental SHA-256. Not thread-safe per object; independent objects may be used
// concurrently. Not safe after fork.
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  // The digest as 64 lowercase hex characters. Call once.
  std::string FinalHex();

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const;
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// SHA-256 (hex) of everything readable from `fd`, from its current offset to EOF.
// Errors: read(2) fails.
Result<std::string> Sha256OfFd(int fd);

}  // namespace sandrun::storage
