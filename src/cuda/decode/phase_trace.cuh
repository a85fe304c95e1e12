#pragma once
// Phase timestamps of the decode kernel, for tuning runs only
// (bench/decode/decode_trace.cu defines FLASHPP_DECODE_TRACE and reads them).
// In every other build PhaseTrace is empty and its calls compile to nothing.
//
// With the trace on, thread 0 of each block records the global timer (ns,
// comparable across SMs) at entry, start and exit, and its SM's clock at every
// phase; at exit it writes them to g_trace_buffer[seq * kTraceWords ...]
// (word 2i: timer or 0, word 2i + 1: clock64), where seq counts blocks in the
// order they exit. Blocks of launch L + 1 exit after every block of launch L
// (they wait for its completion first), so seq / blocks_per_launch is the
// launch's index in a replayed graph. stamp_after(phase, x) takes its clock
// only once x is known, so a phase that ends with a load ends when it lands.
#include <cstdint>

namespace flashpp::cuda::decode {

enum TracePhase : int {
  kPhaseEntry = 0,        // block started (before waiting for the previous grid)
  kPhaseStart = 1,        // previous grid complete
  kPhaseQIssued = 2,      // Q's copies issued
  kPhaseLength = 3,       // the cache length loaded
  kPhaseSpan = 4,         // the split's key span known
  kPhaseTilesIssued = 5,  // the prologue's tiles issued
  kPhasePrologue = 6,     // Q in shared memory
  kPhaseFirstTile = 7,    // first K/V tile landed
  kPhaseLoopEnd = 8,      // last tile consumed, ring drained
  kPhaseWarpLse = 9,      // the warps' LSEs in shared memory
  kPhaseWarpMerge = 10,   // the warps' scaled outputs in shared memory
  kPhaseWritten = 11,     // final rows or the split partial written
  kPhaseArrived = 12,     // split counter counted
  kPhaseExit = 13,        // block done (after the merge, for the merging block)
  kTracePhases = 14
};
inline constexpr int kTraceWords = 2 * kTracePhases + 2;  // per phase timer, clock; then smid, merged flag

#ifdef FLASHPP_DECODE_TRACE
__device__ unsigned long long* g_trace_buffer;
__device__ unsigned int g_trace_sequence;

// Thread 0 keeps its stamps in registers and writes them once, at exit, so the
// trace adds no memory round trip to the phases it measures.
struct PhaseTrace {
  unsigned long long timer_entry = 0, timer_start = 0, clock_start = 0;
  unsigned clock_at[kTracePhases] = {};  // cycles since the start stamp
  bool merged_block = false;

  static __device__ __forceinline__ unsigned long long timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  static __device__ __forceinline__ unsigned long long clock_after(int dep) {
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) : "r"(dep));
    return c;
  }
  __device__ __forceinline__ void stamp_after(int phase, int dep) {
    if (threadIdx.x != 0) return;
    if (phase == kPhaseEntry) {
      timer_entry = timer();
    } else if (phase == kPhaseStart) {
      timer_start = timer();
      clock_start = clock_after(dep);
    } else {
      clock_at[phase] = unsigned(clock_after(dep) - clock_start);
    }
  }
  __device__ __forceinline__ void stamp(int phase) { stamp_after(phase, 0); }
  __device__ __forceinline__ void merged() { merged_block = true; }
  // Last call of the block: takes the exit stamp and writes every stamp.
  __device__ __forceinline__ void exit() {
    stamp(kPhaseExit);
    if (threadIdx.x != 0 || g_trace_buffer == nullptr) return;
    const unsigned long long timer_exit = timer();
    unsigned long long* slot = g_trace_buffer + std::uint64_t(atomicAdd(&g_trace_sequence, 1u)) * kTraceWords;
#pragma unroll
    for (int i = 0; i < kTracePhases; ++i) {
      slot[2 * i] = i == kPhaseEntry ? timer_entry : i == kPhaseStart ? timer_start : i == kPhaseExit ? timer_exit : 0;
      slot[2 * i + 1] = clock_at[i];
    }
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    slot[2 * kTracePhases] = smid;
    slot[2 * kTracePhases + 1] = merged_block;
  }
};
#else
struct PhaseTrace {
  __device__ __forceinline__ void stamp_after(int, int) {}
  __device__ __forceinline__ void stamp(int) {}
  __device__ __forceinline__ void merged() {}
  __device__ __forceinline__ void exit() {}
};
#endif

}  // namespace flashpp::cuda::decode
