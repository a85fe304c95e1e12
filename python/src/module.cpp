// flashpp._core: the C++ API as seen from Python. Arrays arrive as spec
// tuples or DLPack/buffer objects (tensor_arg.hpp); scratch memory comes from
// a Python callback so it is allocated by the caller's framework, on the
// caller's device and stream, and never by flashpp itself.
#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#ifdef FLASHPP_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "errors.hpp"
#include "flashpp/flashpp.hpp"
#include "flashpp/kvcache.hpp"
#include "tensor_arg.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashpp::python {
namespace {

// The keyword options shared by every entry point, bound as flashpp._core.Options.
struct Options {
  std::optional<float> softmax_scale;
  bool causal = false;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.f;
  bool deterministic = false;
  bool partial_keys = false;  // backward: out/lse from a larger key set (one ring shard)
  std::int64_t max_seqlen_q = 0;
  std::int64_t max_seqlen_k = 0;
  std::uintptr_t stream = 0;  // cudaStream_t as an integer; 0 = legacy default stream
};

// Options plus the views of cu_seqlens, which must stay alive with `keep`.
AttentionOptions make_options(const Options& o, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, KeepAlive& keep) {
  AttentionOptions a;
  a.softmax_scale = o.softmax_scale;
  a.causal = o.causal;
  a.window_left = o.window_left;
  a.window_right = o.window_right;
  a.softcap = o.softcap;
  a.deterministic = o.deterministic;
  a.partial_keys = o.partial_keys;
  a.max_seqlen_q = o.max_seqlen_q;
  a.max_seqlen_k = o.max_seqlen_k;
  a.stream = reinterpret_cast<void*>(o.stream);
  a.cu_seqlens_q = to_view(cu_seqlens_q, "cu_seqlens_q", keep);
  a.cu_seqlens_k = to_view(cu_seqlens_k, "cu_seqlens_k", keep);
  return a;
}

// Asks `alloc(nbytes) -> (owner, address)` for scratch memory when the call
// needs some; `owner` is returned so the memory outlives the call.
Workspace make_workspace(std::size_t bytes, nb::handle alloc, nb::object& owner) {
  if (bytes == 0) return {};
  if (alloc.is_none())
    throw Error(ErrorKind::value, "workspace",
                "this call needs " + std::to_string(bytes) + " bytes of scratch memory but no allocator was given");
  nb::tuple got = nb::cast<nb::tuple>(alloc(bytes));
  if (got.size() != 2) throw Error(ErrorKind::value, "workspace", "allocator must return (owner, address)");
  owner = got[0];
  return {reinterpret_cast<void*>(nb::cast<std::uintptr_t>(got[1])), bytes};
}

void py_forward(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse, const Options& o,
                nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, nb::handle alloc) {
  KeepAlive keep;
  const TensorView tq = to_view(q, "q", keep), tk = to_view(k, "k", keep), tv = to_view(v, "v", keep);
  const TensorView to = to_view(out, "out", keep), tl = to_view(lse, "lse", keep);
  const AttentionOptions opts = make_options(o, cu_seqlens_q, cu_seqlens_k, keep);
  nb::object owner;
  const Workspace ws = make_workspace(forward_workspace_bytes(tq, tk, tv, opts), alloc, owner);
  nb::gil_scoped_release unlocked;  // the CPU backend runs for a while; let other threads go on
  forward(tq, tk, tv, to, tl, opts, ws);
}

void py_backward(nb::handle dout, nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                 nb::handle dq, nb::handle dk, nb::handle dv, const Options& o, nb::handle cu_seqlens_q,
                 nb::handle cu_seqlens_k, nb::handle alloc) {
  KeepAlive keep;
  const TensorView tdo = to_view(dout, "dout", keep);
  const TensorView tq = to_view(q, "q", keep), tk = to_view(k, "k", keep), tv = to_view(v, "v", keep);
  const TensorView to = to_view(out, "out", keep), tl = to_view(lse, "lse", keep);
  const TensorView tdq = to_view(dq, "dq", keep), tdk = to_view(dk, "dk", keep), tdv = to_view(dv, "dv", keep);
  const AttentionOptions opts = make_options(o, cu_seqlens_q, cu_seqlens_k, keep);
  nb::object owner;
  const Workspace ws = make_workspace(backward_workspace_bytes(tq, tk, tv, opts), alloc, owner);
  nb::gil_scoped_release unlocked;
  backward(tdo, tq, tk, tv, to, tl, tdq, tdk, tdv, opts, ws);
}

// attention_with_kvcache: k_new/v_new, cache_seqlens, cache_batch_idx,
// block_table, rotary_cos/sin and lse may be None.
void py_kvcache(nb::handle q, nb::handle k_cache, nb::handle v_cache, nb::handle k_new, nb::handle v_new,
                nb::handle cache_seqlens, nb::handle cache_batch_idx, nb::handle block_table, nb::handle rotary_cos,
                nb::handle rotary_sin, nb::handle out, nb::handle lse, const Options& o, bool rotary_interleaved,
                int num_splits, nb::handle alloc, nb::handle split_counters) {
  KeepAlive keep;
  KVCacheArgs a;
  a.q = to_view(q, "q", keep);
  a.k_cache = to_view(k_cache, "k_cache", keep);
  a.v_cache = to_view(v_cache, "v_cache", keep);
  a.k_new = to_view(k_new, "k", keep);
  a.v_new = to_view(v_new, "v", keep);
  a.cache_seqlens = to_view(cache_seqlens, "cache_seqlens", keep);
  a.cache_batch_idx = to_view(cache_batch_idx, "cache_batch_idx", keep);
  a.block_table = to_view(block_table, "block_table", keep);
  a.rotary_cos = to_view(rotary_cos, "rotary_cos", keep);
  a.rotary_sin = to_view(rotary_sin, "rotary_sin", keep);
  a.out = to_view(out, "out", keep);
  a.lse = to_view(lse, "lse", keep);
  a.split_counters = to_view(split_counters, "split_counters", keep);
  a.rotary_interleaved = rotary_interleaved;
  a.num_splits = num_splits;
  const AttentionOptions opts = make_options(o, nb::none(), nb::none(), keep);
  nb::object owner;
  const Workspace ws = make_workspace(kvcache_workspace_bytes(a, opts), alloc, owner);
  nb::gil_scoped_release unlocked;
  attention_with_kvcache(a, opts, ws);
}

template <class F>
auto with_views(nb::handle q, nb::handle k, nb::handle v, const Options& o, nb::handle cu_q, nb::handle cu_k, F f) {
  KeepAlive keep;
  const TensorView tq = to_view(q, "q", keep), tk = to_view(k, "k", keep), tv = to_view(v, "v", keep);
  const AttentionOptions opts = make_options(o, cu_q, cu_k, keep);
  return f(tq, tk, tv, opts);
}

// Binds a query over q, k, v, the options and cu_seqlens that runs nothing
// (workspace sizes, backend selection); they all take the same arguments.
template <class F, class... Doc>
void def_query(nb::module_& m, const char* name, F query, const Doc&... doc) {
  m.def(
      name,
      [query](nb::handle q, nb::handle k, nb::handle v, const Options& o, nb::handle cu_q, nb::handle cu_k) {
        return with_views(q, k, v, o, cu_q, cu_k, query);
      },
      "q"_a.none(), "k"_a.none(), "v"_a.none(), "options"_a, "cu_seqlens_q"_a.none() = nb::none(),
      "cu_seqlens_k"_a.none() = nb::none(), doc...);
}

std::tuple<bool, std::string, std::string> as_tuple(const Selection& s) { return {s.ok, s.backend, s.reason}; }

// Waits for `stream` on CUDA device `device`. For frameworks whose streams
// flashpp cannot see, the Python layer launches on the legacy default stream
// and waits here, so the framework never reads an output early.
void synchronize_stream(std::uintptr_t stream, int device) {
#ifdef FLASHPP_WITH_CUDA
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err == cudaSuccess) err = cudaSetDevice(device);
  if (err == cudaSuccess) {
    nb::gil_scoped_release unlocked;
    err = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
  }
  cudaSetDevice(previous);
  if (err != cudaSuccess) throw Error(ErrorKind::runtime, "stream", cudaGetErrorString(err));
#else
  (void)stream;
  (void)device;
  throw Error(ErrorKind::not_supported, "stream", "flashpp was built without CUDA support");
#endif
}

}  // namespace
}  // namespace flashpp::python

NB_MODULE(_core, m) {
  using namespace flashpp::python;
  m.doc() = "flashpp C++ core (see the flashpp package for the documented API)";
  register_errors(m);

  nb::class_<Options>(m, "Options")
      .def(
          "__init__",
          [](Options* self, std::optional<float> softmax_scale, bool causal, std::int64_t window_left,
             std::int64_t window_right, float softcap, bool deterministic, bool partial_keys,
             std::int64_t max_seqlen_q, std::int64_t max_seqlen_k, std::uintptr_t stream) {
            new (self) Options{softmax_scale, causal,       window_left,  window_right, softcap, deterministic,
                               partial_keys,  max_seqlen_q, max_seqlen_k, stream};
          },
          nb::kw_only(), "softmax_scale"_a = nb::none(), "causal"_a = false, "window_left"_a = -1,
          "window_right"_a = -1, "softcap"_a = 0.f, "deterministic"_a = false, "partial_keys"_a = false,
          "max_seqlen_q"_a = 0,
          "max_seqlen_k"_a = 0, "stream"_a = 0)
      .def_rw("softmax_scale", &Options::softmax_scale)
      .def_rw("causal", &Options::causal)
      .def_rw("window_left", &Options::window_left)
      .def_rw("window_right", &Options::window_right)
      .def_rw("softcap", &Options::softcap)
      .def_rw("deterministic", &Options::deterministic)
      .def_rw("partial_keys", &Options::partial_keys)
      .def_rw("max_seqlen_q", &Options::max_seqlen_q)
      .def_rw("max_seqlen_k", &Options::max_seqlen_k)
      .def_rw("stream", &Options::stream);

  m.def("forward", &py_forward, "q"_a.none(), "k"_a.none(), "v"_a.none(), "out"_a.none(), "lse"_a.none(), "options"_a,
        "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(), "alloc"_a.none() = nb::none(),
        "Runs the forward pass into `out` (and `lse` unless None).");
  m.def("backward", &py_backward, "dout"_a.none(), "q"_a.none(), "k"_a.none(), "v"_a.none(), "out"_a.none(),
        "lse"_a.none(), "dq"_a.none(), "dk"_a.none(), "dv"_a.none(),
        "options"_a, "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "alloc"_a.none() = nb::none(), "Runs the backward pass into dq, dk, dv.");
  def_query(m, "forward_workspace_bytes", [](auto&... a) { return flashpp::forward_workspace_bytes(a...); });
  def_query(m, "backward_workspace_bytes", [](auto&... a) { return flashpp::backward_workspace_bytes(a...); });
  def_query(m, "select_forward", [](auto&... a) { return as_tuple(flashpp::select_forward(a...)); },
            "(ok, backend, reason): which backend would run the forward, or why none can.");
  def_query(m, "select_backward", [](auto&... a) { return as_tuple(flashpp::select_backward(a...)); },
            "(ok, backend, reason): which backend would run the backward, or why none can.");
  m.def(
      "address_of",
      [](nb::handle obj) {
        KeepAlive keep;
        return reinterpret_cast<std::uintptr_t>(to_view(obj, "array", keep).data);
      },
      "array"_a, "Address of the first element of a DLPack or buffer-protocol array.");
  m.def("kvcache", &py_kvcache, "q"_a.none(), "k_cache"_a.none(), "v_cache"_a.none(), "k_new"_a.none(),
        "v_new"_a.none(), "cache_seqlens"_a.none(), "cache_batch_idx"_a.none(), "block_table"_a.none(),
        "rotary_cos"_a.none(), "rotary_sin"_a.none(), "out"_a.none(), "lse"_a.none(), "options"_a,
        "rotary_interleaved"_a, "num_splits"_a, "alloc"_a.none(), "split_counters"_a.none() = nb::none(),
        "Attention of q against a (contiguous or paged) KV cache, appending k_new/v_new first.");
  m.def("synchronize_stream", &synchronize_stream, "stream"_a, "device"_a);
  m.def("built_with_cuda", &flashpp::built_with_cuda);
  m.def("version", [] { return std::string(flashpp::version()); });
}
