// A handful of small forward + backward calls covering every kernel family
// (head dims, GQA, causal/window, softcap, varlen, both backward modes), sized for
// compute-sanitizer (memcheck, racecheck). Every case runs three times: with the
// kernels the device picks; with the FA2-class forward and backward forced
// (FLASHPP_CUDA_FORWARD_FAMILY=sm80, FLASHPP_CUDA_BACKWARD_FAMILY=sm80), so on Hopper
// both families are checked; and with the Hopper forward's plain kernels on a grid
// of two blocks (FLASHPP_SM90_PLAIN_LOOP=on, FLASHPP_SM90_GRID=2), so each block
// walks several tiles and the work between them (the next tile found under the
// last P V) runs under the sanitizer too.
// Exits non-zero on a wrong result.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_support.hpp"
#include "support/seed.hpp"

using namespace flashpp;
using namespace flashpp::test;

namespace {

AttnCase make(int d, bool causal, bool det, int wl, float cap, bool varlen, DType dt) {
  AttnCase c;
  c.label = "sanitize_d" + std::to_string(d);
  c.dtype = dt;
  c.head_dim = c.head_dim_v = d;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.causal = causal;
  c.deterministic = det;
  c.window_left = wl;
  c.softcap = cap;
  c.align = 8;
  if (varlen) {
    c.varlen = true;
    c.batch = 3;
    c.seqlens_q = {70, 0, 131};
    c.seqlens_k = {150, 9, 67};
  } else {
    c.batch = 1;
    c.seqlen_q = 150;
    c.seqlen_k = 200;
  }
  return c;
}

AttnCase square(AttnCase c, int len) {
  c.seqlen_q = c.seqlen_k = len;
  c.label += "_square";
  return c;
}

AttnCase large_logits(AttnCase c) {
  c.q_magnitude = 100;
  c.label += "_large_logits";
  return c;
}

}  // namespace

int main() {
  if (!gpu::gpu_unavailable_reason().empty()) {
    std::printf("skipped: %s\n", gpu::gpu_unavailable_reason().c_str());
    return 0;
  }
  const AttnCase cases[] = {
      make(32, false, false, -1, 0.f, false, DType::f16),  make(64, true, false, -1, 0.f, false, DType::bf16),
      make(96, false, true, 40, 0.f, true, DType::f16),    make(128, true, true, -1, 0.f, true, DType::bf16),
      make(192, false, false, -1, 8.f, false, DType::bf16), make(256, true, false, 64, 0.f, false, DType::f16),
      make(64, false, false, 30, 0.f, true, DType::f16),
      // Square causal on the 128 x 64 tile of d 256: the Hopper plain-loop kernel
      // takes each block's top two key tiles apart before its loop.
      square(make(256, true, false, -1, 0.f, false, DType::bf16), 384),
      // Large logits: most rows sit on one key, so the exact-D and fix passes run.
      large_logits(make(128, false, false, -1, 0.f, true, DType::f16)),
      large_logits(make(64, true, true, -1, 0.f, false, DType::bf16)),
      // Fixed-length, not deterministic, no softcap: the Hopper backward takes these
      // at d 128 (masked and not).
      make(128, false, false, 50, 0.f, false, DType::f16),
      make(128, true, false, -1, 0.f, false, DType::bf16),
  };
  int failed = 0;
  enum class Pass { picked, fa2, rounds };
  for (const Pass pass : {Pass::picked, Pass::fa2, Pass::rounds}) {
    // The library reads the variables per call.
    for (const char* family : {"FLASHPP_CUDA_FORWARD_FAMILY", "FLASHPP_CUDA_BACKWARD_FAMILY"}) {
      if (pass == Pass::fa2)
        ::setenv(family, "sm80", 1);
      else
        ::unsetenv(family);
    }
    if (pass == Pass::rounds) {
      ::setenv("FLASHPP_SM90_PLAIN_LOOP", "on", 1);
      ::setenv("FLASHPP_SM90_GRID", "2", 1);
    }
    int index = 0;
    for (AttnCase c : cases) {
      auto rng = make_rng("sanitize", std::uint64_t(index++));
      if (pass == Pass::fa2) c.label += "_fa2";
      if (pass == Pass::rounds) c.label += "_rounds";
      AttnTensors t = make_tensors(c, rng, true);
      gpu::DeviceCase dev(c, t);
      dev.run_forward();
      dev.run_backward();
      dev.download();
      const AttnResult f64 = reference_result(c, t, reference::Precision::f64, true);
      const AttnResult naive = reference_result(c, t, reference::Precision::storage, true);
      for (const auto& r : check_results(c, collect(t, true), f64, naive, true)) {
        if (!r.ok) ++failed;
        std::printf("%s\n", r.line.c_str());
      }
    }
  }
  ::unsetenv("FLASHPP_SM90_PLAIN_LOOP");
  ::unsetenv("FLASHPP_SM90_GRID");
  std::printf("sanitize cases: %s (seed %llu)\n", failed ? "FAILED" : "ok",
              static_cast<unsigned long long>(run_seed()));
  return failed ? 1 : 0;
}
