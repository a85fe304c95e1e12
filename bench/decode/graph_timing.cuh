#pragma once
// CUDA-graph timing shared by the decode benchmark and the decode trace, so
// the benchmark's per-call times and the trace's steps and floors are measured
// the same way: `calls` launches captured into one graph, replayed, timed
// between events on the stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda_check.cuh"

// Middle element of x after sorting (0 for none).
inline double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// launch(0) .. launch(calls - 1) captured from `stream` into an instantiated
// graph (the caller destroys it).
template <typename Launch>
cudaGraphExec_t capture_calls(cudaStream_t stream, int calls, Launch&& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) launch(i);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));  // the instantiated graph does not need it
  return exec;
}

// Captures the calls, replays them once untimed, then 7 times between two
// events: microseconds per call of each timed replay, in replay order.
template <typename Launch>
std::vector<double> graph_call_times_us(cudaStream_t stream, int calls, Launch&& launch) {
  const cudaGraphExec_t exec = capture_calls(stream, calls, launch);
  CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<double> times;
  for (int rep = 0; rep < 7; ++rep) {
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(1e3 * ms / calls);
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return times;
}
