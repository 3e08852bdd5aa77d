// Element types. float32 is the default for training; float64 exists so gradcheck can compare
// analytic and finite-difference gradients at full precision; int64 holds token ids and targets;
// bool holds masks. Kernels are templates over the C++ type; dispatch_floating picks the
// instantiation for a tensor's dtype and names the op when the dtype is not a float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

enum class DType : uint8_t { Float32, Float64, Int64, Bool };

template <class T>
inline constexpr DType kDTypeOf = DType::Float32;
template <>
inline constexpr DType kDTypeOf<double> = DType::Float64;
template <>
inline constexpr DType kDTypeOf<int64_t> = DType::Int64;
template <>
inline constexpr DType kDTypeOf<bool> = DType::Bool;

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64;
}

// Calls f(T{}) with T = float or double for a floating dtype; throws naming `op` otherwise.
template <class F>
decltype(auto) dispatch_floating(std::string_view op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default:
      throw Error(
          fmt::format("{}: expected a float32 or float64 tensor, got {}", op, dtype_name(dtype)));
  }
}

// Calls f(T{}) with the C++ type of any dtype.
template <class F>
constexpr decltype(auto) dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  TG_ASSERT(false);
}

constexpr size_t dtype_size(DType dtype) {
  return dispatch_all(dtype, [](auto t) { return sizeof(t); });
}

}  // namespace tapegrad

namespace fmt {
template <>
struct formatter<tapegrad::DType> : fmt::formatter<std::string_view> {
  auto format(tapegrad::DType d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(tapegrad::dtype_name(d), ctx);
  }
};
}  // namespace fmt
