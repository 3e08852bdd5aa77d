// fmt::formatter<Tensor>: the elements shown are read once, in print order, through
// Tensor::at; the column width and the choice of fixed or scientific notation come from them.
#include "tapegrad/viz/print.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using tapegrad::DType;
using tapegrad::Tensor;

constexpr int64_t kSummarizeAbove = 1000;  // PyTorch's print threshold
constexpr int64_t kEdgeItems = 3;

// The indices of a dim of n to show: all, or the first and last kEdgeItems with -1 marking "...".
std::vector<int64_t> shown_indices(int64_t n, bool summarize) {
  const bool cut = summarize && n > 2 * kEdgeItems;
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    if (!cut || i < kEdgeItems || i >= n - kEdgeItems) idx.push_back(i);
    if (cut && i == kEdgeItems) idx.push_back(-1);
  }
  return idx;
}

struct Printer {
  const Tensor& t;
  bool summarize;
  bool scientific = false;
  size_t width = 0;
  std::vector<int64_t> index = std::vector<int64_t>(static_cast<size_t>(t.dim()));
  std::vector<double> values{};  // the shown elements, in print order
  size_t next = 0;               // the next of them emit() writes

  std::string element(double v) const {
    switch (t.dtype()) {
      case DType::Bool: return v != 0 ? "True" : "False";
      case DType::Int64: return fmt::format("{}", static_cast<int64_t>(v));
      default: return scientific ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v);
    }
  }

  void collect(int64_t dim) {
    if (dim == t.dim()) {
      values.push_back(t.at(index));
      return;
    }
    for (int64_t i : shown_indices(t.shape()[dim], summarize)) {
      if (i < 0) continue;
      index[static_cast<size_t>(dim)] = i;
      collect(dim + 1);
    }
  }

  void emit(std::string& out, int64_t dim, size_t indent) {
    if (dim == t.dim()) {
      const std::string s = element(values[next++]);
      out += std::string(width - s.size(), ' ') + s;
      return;
    }
    out += '[';
    // ", " between elements of the last dim; between blocks a newline per dim below, and indent
    const std::string separator =
        dim + 1 == t.dim() ? ", "
                           : "," + std::string(static_cast<size_t>(t.dim() - dim - 1), '\n') +
                                 std::string(indent + 1, ' ');
    bool first = true;
    for (int64_t i : shown_indices(t.shape()[dim], summarize)) {
      if (!first) out += separator;
      first = false;
      if (i < 0) {
        out += "...";
      } else {
        emit(out, dim + 1, indent + 1);
      }
    }
    out += ']';
  }
};

}  // namespace

fmt::format_context::iterator fmt::formatter<Tensor>::format(const Tensor& t,
                                                             format_context& ctx) const {
  if (!t.defined()) return fmt::format_to(ctx.out(), "tensor(undefined)");
  Printer p{t, t.numel() > kSummarizeAbove};
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
  } else {
    p.collect(0);
    if (tapegrad::is_floating(t.dtype())) {
      double max_abs = 0, min_abs = INFINITY;
      for (double v : p.values) {
        if (!std::isfinite(v)) continue;
        max_abs = std::max(max_abs, std::abs(v));
        if (v != 0) min_abs = std::min(min_abs, std::abs(v));
      }
      p.scientific = max_abs >= 1e8 || (min_abs < 1e-4 && min_abs > 0);
    }
    for (double v : p.values) p.width = std::max(p.width, p.element(v).size());
    p.emit(body, 0, 7);  // 7 = strlen("tensor(")
  }
  std::string suffix;
  if (t.dtype() == DType::Float64) suffix += ", dtype=float64";
  if (t.requires_grad()) {
    suffix += t.is_leaf() ? ", requires_grad=True" : fmt::format(", grad_fn=<{}>", t.grad_fn());
  }
  return fmt::format_to(ctx.out(), "tensor({}{})", body, suffix);
}
