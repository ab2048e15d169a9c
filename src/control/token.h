// Bearer tokens: random, shown once, stored only as their SHA-256.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// 32 random bytes from OpenSSL's CSPRNG, hex-encoded (64 characters). Throws
// std::runtime_error if the generator fails.
std::string new_token();
// Lower-case hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);
// Lower-case hex HMAC-SHA256 of `message` under `key`: a token derived from a secret, which the
// secret's holder can check without storing it.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

}  // namespace tessera
