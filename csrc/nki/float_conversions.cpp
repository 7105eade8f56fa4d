// float32 <-> bfloat16, and 8-bit floats to wider types, over the rows of a tile, bit for bit as ml_dtypes'
// astype (and the numpy code of torchneuron_ext/nki/float_bits.py, which the NKI simulator uses without this
// extension): narrowing rounds to nearest even, overflows to infinity, and turns a NaN into the canonical quiet
// NaN with its sign; widening is exact. numpy needed seven passes over a tile to narrow it; one loop here, which
// the compiler vectorises, does it at memory speed. The Python side passes raw addresses of arrays it holds,
// laid out as `rows` rows of `cols` contiguous elements, `ld` elements apart.
#include "nki/float_conversions.h"

#include <cstdint>
#include <stdexcept>

namespace py = pybind11;

namespace torchneuron::nki {
namespace {

// Branch-free, so that GCC vectorises the row loops (-O2 alone does not: hence "tree-vectorize"), once per
// instruction set, chosen when the library loads: a (128, 512) tile narrows in 22 us with SSE2, 10 with AVX2,
// 7 with AVX-512 on the development VM.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCHNEURON_VECTORISED \
  __attribute__((optimize("tree-vectorize"), target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TORCHNEURON_VECTORISED
#endif

TORCHNEURON_VECTORISED void narrow_row(const uint32_t* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = src[i];
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
    dst[i] = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
  }
}

TORCHNEURON_VECTORISED void widen_row(const uint16_t* src, uint32_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<uint32_t>(src[i]) << 16;
}

// An 8-bit float (fp8, the MX scale e8m0, fp4 in a byte) through a table of 256 results, as
// float_bits._fp8_table holds them: ml_dtypes' own value for each pattern, so a lookup is its astype.
template <typename Out>
void lookup_row(const Out* table, const uint8_t* src, Out* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

void check(int64_t rows, int64_t cols, int64_t src_ld, int64_t dst_ld) {
  if (rows < 0 || cols < 0 || (rows > 1 && (src_ld < cols || dst_ld < cols)))
    throw std::invalid_argument("NKI native cast: bad layout (rows, cols, src_ld, dst_ld)");
}

void narrow(uintptr_t src, int64_t src_ld, uintptr_t dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  check(rows, cols, src_ld, dst_ld);
  for (int64_t r = 0; r < rows; ++r)
    narrow_row(reinterpret_cast<const uint32_t*>(src) + r * src_ld, reinterpret_cast<uint16_t*>(dst) + r * dst_ld,
               cols);
}

void widen(uintptr_t src, int64_t src_ld, uintptr_t dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  check(rows, cols, src_ld, dst_ld);
  for (int64_t r = 0; r < rows; ++r)
    widen_row(reinterpret_cast<const uint16_t*>(src) + r * src_ld, reinterpret_cast<uint32_t*>(dst) + r * dst_ld,
              cols);
}

void lookup(uintptr_t table, int64_t width, uintptr_t src, int64_t src_ld, uintptr_t dst, int64_t dst_ld,
            int64_t rows, int64_t cols) {
  check(rows, cols, src_ld, dst_ld);
  if (width != 2 && width != 4) throw std::invalid_argument("byte lookup: results of 2 or 4 bytes");
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* in = reinterpret_cast<const uint8_t*>(src) + r * src_ld;
    if (width == 2)
      lookup_row(reinterpret_cast<const uint16_t*>(table), in, reinterpret_cast<uint16_t*>(dst) + r * dst_ld, cols);
    else
      lookup_row(reinterpret_cast<const uint32_t*>(table), in, reinterpret_cast<uint32_t*>(dst) + r * dst_ld, cols);
  }
}

}  // namespace

void init_float_conversion_bindings(py::module& m) {
  m.def("_nki_bf16_narrow", &narrow, py::arg("src"), py::arg("src_ld"), py::arg("dst"), py::arg("dst_ld"),
        py::arg("rows"), py::arg("cols"),
        "float32 rows -> bfloat16 bit patterns, rounded as ml_dtypes does (nki/torch/native_casts.py)");
  m.def("_nki_bf16_widen", &widen, py::arg("src"), py::arg("src_ld"), py::arg("dst"), py::arg("dst_ld"),
        py::arg("rows"), py::arg("cols"), "bfloat16 rows -> float32, exactly (nki/torch/native_casts.py)");
  m.def("_nki_byte_lookup", &lookup, py::arg("table"), py::arg("width"), py::arg("src"), py::arg("src_ld"),
        py::arg("dst"), py::arg("dst_ld"), py::arg("rows"), py::arg("cols"),
        "rows of bytes -> their entries in a 256-entry table of 2- or 4-byte results (nki/torch/native_casts.py)");
}

}  // namespace torchneuron::nki
