// GoogleTest entry point shared by the flashpp test executables: it prints the
// run seed up front and again after every failed test, with the command line
// that replays it.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/seed.hpp"

namespace {

class SeedReporter : public testing::EmptyTestEventListener {
 public:
  explicit SeedReporter(const char* program) : program_(program) {}
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[   SEED   ] replay with: FLASHPP_TEST_SEED=%llu %s --gtest_filter='%s.%s'\n",
                static_cast<unsigned long long>(flashpp::test::run_seed()), program_, info.test_suite_name(),
                info.name());
  }

 private:
  const char* program_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::printf("flashpp test seed: %llu\n", static_cast<unsigned long long>(flashpp::test::run_seed()));
  testing::UnitTest::GetInstance()->listeners().Append(new SeedReporter(argv[0]));
  return RUN_ALL_TESTS();
}
