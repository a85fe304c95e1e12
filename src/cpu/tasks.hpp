#pragma once
// Work decomposition of the CPU backend: lists of independent tasks, each
// owning a disjoint set of output rows, run on a thread pool (OpenMP). Every
// output element is produced by exactly one task in a fixed order, so results
// are bitwise identical for any thread count.
#include <cstddef>
#include <vector>

#include "common/params.hpp"
#include "common/sequence.hpp"

namespace flashpp::cpu {

struct RowBlockTask {
  int batch;
  int head;  // query head for query-row tasks, kv head for key-row tasks
  int row0, row1;  // rows [row0, row1) of the sequence
  SequenceInfo seq;
};

// (batch, query head, block of `block` query rows); sequences with no query
// rows give no task.
inline std::vector<RowBlockTask> query_block_tasks(const AttnParams& p, int block) {
  std::vector<RowBlockTask> tasks;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceInfo s = host_sequence(p, b);
    for (int h = 0; h < p.heads_q; ++h)
      for (int r = 0; r < s.seqlen_q; r += block) tasks.push_back({b, h, r, std::min(r + block, s.seqlen_q), s});
  }
  return tasks;
}

// (batch, kv head, block of `block` key rows).
inline std::vector<RowBlockTask> key_block_tasks(const AttnParams& p, int block) {
  std::vector<RowBlockTask> tasks;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceInfo s = host_sequence(p, b);
    for (int h = 0; h < p.heads_kv; ++h)
      for (int r = 0; r < s.seqlen_k; r += block) tasks.push_back({b, h, r, std::min(r + block, s.seqlen_k), s});
  }
  return tasks;
}

// Runs body(for_each) once per worker thread; for_each(fn) calls fn(i) for the
// indices [0, n) handed to that worker. Per-thread scratch lives in body.
template <typename Body>
void run_parallel(std::size_t n, Body&& body) {
  if (n == 0) return;
#if defined(_OPENMP)
#pragma omp parallel if (n > 1)
  {
    body([&](auto&& fn) {
#pragma omp for schedule(dynamic, 1)
      for (long long i = 0; i < (long long)n; ++i) fn(std::size_t(i));
    });
  }
#else
  body([&](auto&& fn) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
  });
#endif
}

}  // namespace flashpp::cpu
