// Copies between a tensor, indexed as if flattened (row-major), and a plain
// buffer: what the stream and TCM accessors move. Contiguous tensors copy in
// one memcpy; others walk their strides.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <cstring>

namespace torchneuron::gpsimd {

// The tensor must hold elements of type T in host-addressable memory.
template <typename T>
void check_element_type(const at::Tensor& t, const char* api) {
  TORCH_CHECK(t.defined(), api, ": the tensor is undefined");
  TORCH_CHECK(t.device().is_cpu(), api, ": the tensor is on ", t.device(),
              "; kernels run on host views of neuron tensors, so this tensor cannot be accessed");
  constexpr auto expected = c10::CppTypeToScalarType<T>::value;
  TORCH_CHECK(t.scalar_type() == expected, api, "<", c10::toString(expected), ">: the tensor holds ",
              c10::toString(t.scalar_type()), " elements");
}

// Calls f(i, element_offset) for flat indices start .. start + n - 1.
template <typename F>
void for_each_element(const at::Tensor& t, size_t start, size_t n, F&& f) {
  const int64_t dim = t.dim();
  if (dim == 0) {
    if (n > 0) f(size_t{0}, int64_t{0});
    return;
  }
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  c10::SmallVector<int64_t, 8> index(dim);
  int64_t rest = static_cast<int64_t>(start);
  int64_t offset = 0;
  for (int64_t d = dim - 1; d >= 0; --d) {
    index[d] = rest % sizes[d];
    rest /= sizes[d];
    offset += index[d] * strides[d];
  }
  for (size_t i = 0; i < n; ++i) {
    f(i, offset);
    for (int64_t d = dim - 1; d >= 0; --d) {
      ++index[d];
      offset += strides[d];
      if (index[d] < sizes[d]) break;
      offset -= index[d] * strides[d];
      index[d] = 0;
    }
  }
}

template <typename T>
void copy_from_tensor(const at::Tensor& t, size_t start, size_t n, T* out) {
  const T* base = static_cast<const T*>(t.const_data_ptr());
  if (t.is_contiguous()) {
    std::memcpy(out, base + start, n * sizeof(T));
    return;
  }
  for_each_element(t, start, n, [&](size_t i, int64_t off) { out[i] = base[off]; });
}

template <typename T>
void copy_to_tensor(const at::Tensor& t, size_t start, size_t n, const T* in) {
  T* base = static_cast<T*>(t.data_ptr());
  if (t.is_contiguous()) {
    std::memcpy(base + start, in, n * sizeof(T));
    return;
  }
  for_each_element(t, start, n, [&](size_t i, int64_t off) { base[off] = in[i]; });
}

}  // namespace torchneuron::gpsimd
