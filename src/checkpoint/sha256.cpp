#include "checkpoint/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include "attnlab/checkpoint_error.h"
#include "common/input_file.h"

namespace attnlab::detail {
namespace {

std::string to_hex(const unsigned char* bytes, unsigned int n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

/// A SHA-256 context, or nullptr when OpenSSL cannot start one.
DigestContext start_digest() {
  DigestContext ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) ctx.reset();
  return ctx;
}

std::string finish_digest(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  return to_hex(digest, length);
}

}  // namespace

std::string sha256_file(const std::filesystem::path& file) {
  if (const auto problem = regular_file_problem(file); !problem.empty()) throw CheckpointError(file, problem);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CheckpointError(file, "cannot open for hashing");
  const DigestContext ctx = start_digest();
  if (!ctx) throw CheckpointError(file, "OpenSSL could not start a SHA-256 digest");
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.bad()) throw CheckpointError(file, "read failed while hashing");
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return finish_digest(ctx.get());
}

std::string sha256_hex(std::string_view bytes) {
  const DigestContext ctx = start_digest();
  if (!ctx) throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
  EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size());
  return finish_digest(ctx.get());
}

}  // namespace attnlab::detail
