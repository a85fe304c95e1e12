#include "cuda/sm90/tensor_maps.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <mutex>

#include "flashpp/error.hpp"

namespace flashpp::cuda::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status) ==
            cudaSuccess &&
        status == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
    else
      cudaGetLastError();
  });
  return fn;
}

constexpr std::int64_t kElem = 2;  // fp16 / bf16

struct View {
  const void* base;
  std::int64_t cols, rows, heads, batch;              // extents
  std::int64_t row_stride, head_stride, batch_stride;  // elements
};

View q_view(const AttnParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {p.q, p.head_dim, varlen ? p.total_q : p.seqlen_q, p.heads_q, varlen ? 1 : p.batch,
          p.q_row_stride, p.q_head_stride, varlen ? 0 : p.q_batch_stride};
}
View k_view(const AttnParams& p, bool value) {
  const bool varlen = p.cu_seqlens_k != nullptr;
  return {value ? p.v : p.k,
          value ? p.head_dim_v : p.head_dim,
          varlen ? p.total_k : p.seqlen_k,
          p.heads_kv,
          varlen ? 1 : p.batch,
          value ? p.v_row_stride : p.k_row_stride,
          value ? p.v_head_stride : p.k_head_stride,
          varlen ? 0 : (value ? p.v_batch_stride : p.k_batch_stride)};
}

View o_view(const AttnParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {p.o, p.head_dim_v, varlen ? p.total_q : p.seqlen_q, p.heads_q, varlen ? 1 : p.batch,
          p.o_row_stride, p.o_head_stride, varlen ? 0 : p.o_batch_stride};
}

View do_view(const AttnParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {p.dout, p.head_dim_v, varlen ? p.total_q : p.seqlen_q, p.heads_q, varlen ? 1 : p.batch,
          p.do_row_stride, p.do_head_stride, varlen ? 0 : p.do_batch_stride};
}

std::string view_problem(const char* name, const View& v) {
  const std::string n(name);
  if (v.cols % 8 != 0) return n + " head dim " + std::to_string(v.cols) + " is not a multiple of 8 (Hopper TMA path)";
  if (v.base != nullptr && reinterpret_cast<std::uintptr_t>(v.base) % 16 != 0)
    return n + " is not 16-byte aligned (the Hopper kernels load it with TMA)";
  for (std::int64_t s : {v.row_stride, v.head_stride, v.batch_stride})
    if ((s * kElem) % 16 != 0 || s * kElem >= (std::int64_t(1) << 40))
      return n + " strides must be multiples of 8 elements below 2^39 for TMA, got row " +
             std::to_string(v.row_stride) + ", head " + std::to_string(v.head_stride) + ", batch " +
             std::to_string(v.batch_stride);
  for (std::int64_t e : {v.rows, v.heads, v.batch})
    if (e >= (std::int64_t(1) << 31)) return n + " has an extent of 2^31 or more rows (TMA coordinates are int32)";
  return "";
}

void encode(CUtensorMap* map, const View& v, CUtensorMapDataType type, int box_rows, const char* name) {
  const auto fn = encode_fn();
  if (fn == nullptr)
    throw Error(ErrorKind::runtime, "cuda", "the CUDA driver has no cuTensorMapEncodeTiled (driver too old for TMA)");
  // Sizes must be >= 1 even for an empty batch; the kernel never reads then.
  const cuuint64_t dims[4] = {cuuint64_t(v.cols), cuuint64_t(v.rows > 0 ? v.rows : 1),
                              cuuint64_t(v.heads > 0 ? v.heads : 1), cuuint64_t(v.batch > 0 ? v.batch : 1)};
  // Strides of dims 1..3 in bytes; an unused batch stride (varlen) still has to be a
  // multiple of 16.
  const cuuint64_t strides[3] = {cuuint64_t(v.row_stride * kElem), cuuint64_t(v.head_stride * kElem),
                                 cuuint64_t(v.batch_stride > 0 ? v.batch_stride * kElem : 16)};
  const cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = fn(map, type, 4, const_cast<void*>(v.base), dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorKind::runtime, name,
                std::string("cuTensorMapEncodeTiled rejected the tensor map (CUresult ") + std::to_string(int(r)) + ")");
}

CUtensorMapDataType element_type(const AttnParams& p) {
  return p.dtype == ElemType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

// Q in boxes of block_m rows, K and V in boxes of block_n rows: the loads the forward
// and the backward share.
template <typename Maps>
void encode_qkv(Maps& m, const AttnParams& p, int block_m, int block_n) {
  encode(&m.q, q_view(p), element_type(p), block_m, "q");
  encode(&m.k, k_view(p, false), element_type(p), block_n, "k");
  encode(&m.v, k_view(p, true), element_type(p), block_n, "v");
}

}  // namespace

std::string tma_problem(const AttnParams& p) {
  std::string why = view_problem("q", q_view(p));
  if (why.empty()) why = view_problem("k", k_view(p, false));
  if (why.empty()) why = view_problem("v", k_view(p, true));
  return why;
}

std::string bwd_tma_problem(const AttnParams& p) {
  std::string why = tma_problem(p);
  if (why.empty()) why = view_problem("dout", do_view(p));
  return why;
}

BwdMaps encode_bwd_maps(const AttnParams& p, int block_m, int block_n) {
  BwdMaps m;
  encode_qkv(m, p, block_m, block_n);
  encode(&m.dout, do_view(p), element_type(p), block_m, "dout");
  return m;
}

FwdMaps encode_fwd_maps(const AttnParams& p, int block_m, int block_n) {
  FwdMaps m;
  encode_qkv(m, p, block_m, block_n);
  return m;
}

std::string o_store_problem(const AttnParams& p) { return view_problem("out", o_view(p)); }

void encode_o_map(const AttnParams& p, CUtensorMap* map) {
  encode(map, o_view(p), element_type(p), kOStoreRows, "out");
}

}  // namespace flashpp::cuda::sm90
