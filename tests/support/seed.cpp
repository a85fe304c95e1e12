#include "support/seed.hpp"

#include <cstdlib>
#include <string>

namespace flashpp::test {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::uint64_t choose_seed() {
  if (const char* env = std::getenv("FLASHPP_TEST_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (std::uint64_t(rd()) << 32) ^ rd();
}

}  // namespace

std::uint64_t run_seed() {
  static const std::uint64_t seed = choose_seed();
  return seed;
}

std::mt19937_64 make_rng(std::string_view stream_name, std::uint64_t index) {
  return std::mt19937_64(splitmix64(run_seed() ^ splitmix64(fnv1a(stream_name) + index)));
}

}  // namespace flashpp::test
