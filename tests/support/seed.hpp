#pragma once
// Every test run draws fresh random inputs. The run's seed comes from
// std::random_device unless FLASHPP_TEST_SEED is set, so any failure can be
// replayed exactly; test_main.cpp prints the seed next to every failure.
#include <cstdint>
#include <random>
#include <string_view>

namespace flashpp::test {

std::uint64_t run_seed();

// An independent random stream for one named test (and case index), derived
// from the run seed: cases do not shift when other tests are added or skipped.
std::mt19937_64 make_rng(std::string_view stream_name, std::uint64_t index = 0);

}  // namespace flashpp::test
