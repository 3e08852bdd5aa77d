// tapegrad._C: the C++ engine bound for Python with pybind11. Tensors, their ops (PyTorch's
// names and argument orders), autograd (backward, grad, hooks, grad mode) and gradcheck are
// bound here; everything else of the Python package (tapegrad/__init__.py, nn, optim) is plain
// Python over these. Every derivative stays in C++: a Python caller only composes bound ops.
//
// Errors cross as exceptions with the library's message (tapegrad.Error, a RuntimeError); an
// index out of range is an IndexError and a value tapegrad cannot hold a TypeError, as Python
// expects. Long calls (matmul, backward, a C++ model's forward, decoding) are LongCalls: the GIL
// released, Ctrl-C honoured. No buffer protocol: pybind11 2.10 aborts on an exception thrown
// inside it, so numpy() builds an array over the storage instead.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <set>
#include <utility>

#include "python/src/bindings.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/check/gradcheck.h"

namespace py = pybind11;
using namespace tapegrad;

namespace {

// True on a thread inside a LongCall: only there may the interrupt check run Python's handlers
// (a worker thread, or a call that must finish, such as an optimizer's step, is never stopped).
thread_local bool t_interruptible = false;

// The engine's interrupt check (storage.h): Ctrl-C's KeyboardInterrupt, raised by Python's
// handler, leaves the C++ call as an exception; pybind11 raises it again in Python.
void check_signals() {
  if (!t_interruptible) return;
  const py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace

LongCall::LongCall() : outer_(std::exchange(t_interruptible, true)) {}
LongCall::~LongCall() { t_interruptible = outer_; }

namespace {

// The default generator, as torch's: manual_seed reseeds it.
Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

// The dtype numpy uses for ours, and ours for numpy's; another is a TypeError.
py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::Float32: return py::dtype::of<float>();
    case DType::Float64: return py::dtype::of<double>();
    case DType::Int64: return py::dtype::of<int64_t>();
    case DType::Bool: return py::dtype::of<bool>();
  }
  throw py::type_error("tapegrad: unknown dtype");
}

DType from_numpy_dtype(const py::dtype& d) {
  if (d.is(py::dtype::of<float>())) return DType::Float32;
  if (d.is(py::dtype::of<double>())) return DType::Float64;
  if (d.is(py::dtype::of<int64_t>())) return DType::Int64;
  if (d.is(py::dtype::of<bool>())) return DType::Bool;
  if (d.kind() == 'f' || d.kind() == 'i' || d.kind() == 'u' || d.kind() == 'b') {
    return d.kind() == 'f' ? DType::Float64 : d.kind() == 'b' ? DType::Bool : DType::Int64;
  }
  throw py::type_error(fmt::format("tapegrad.tensor: cannot hold a numpy array of dtype {}",
                                   py::str(py::handle(d)).cast<std::string>()));
}

// A copy of `array` as a tensor of `dtype` (numpy converts, C order).
Tensor from_array(const py::array& array, DType dtype) {
  const py::array a = py::array::ensure(array.attr("astype")(numpy_dtype(dtype)),
                                        py::array::c_style | py::array::forcecast);
  if (!a) throw py::type_error("tapegrad.tensor: expected an array of numbers");
  Shape shape(a.shape(), a.shape() + a.ndim());
  Tensor t = empty(shape, dtype);
  std::memcpy(t.impl().storage->data(), a.data(), static_cast<size_t>(a.nbytes()));
  return t;
}

// A numpy array over t's storage, which it keeps alive; PyTorch's refusal for a tensor that
// requires grad.
py::array to_numpy(const Tensor& t) {
  if (t.requires_grad()) {
    throw Error(
        "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  }
  const size_t item = dtype_size(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (const int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * item));
  auto* keep = new std::shared_ptr<Storage>(t.impl().storage);
  const py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  char* data = static_cast<char*>(t.impl().storage->data()) + t.offset() * item;
  return py::array(numpy_dtype(t.dtype()), shape, strides, data, owner);
}

// Where PyTorch promotes: a float with an integer or bool gives the float, float32 with
// float64 gives float64, int64 with bool gives int64.
int rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::Int64: return 1;
    case DType::Float32: return 2;
    case DType::Float64: return 3;
  }
  return 0;
}
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return {a, b};
  const DType d = rank(a.dtype()) > rank(b.dtype()) ? a.dtype() : b.dtype();
  return {a.dtype() == d ? a : a.to(d), b.dtype() == d ? b : b.to(d)};
}
// A tensor with a Python number: an integer tensor with a float becomes float32, as in PyTorch.
Tensor with_scalar(const Tensor& x, const py::object& s) {
  const bool is_float = py::isinstance<py::float_>(s);
  if (is_float && (x.dtype() == DType::Int64 || x.dtype() == DType::Bool))
    return x.to(DType::Float32);
  if (x.dtype() == DType::Bool) return x.to(DType::Int64);
  return x;
}

using Binary = Tensor (*)(const Tensor&, const Tensor&);
using WithNumber = Tensor (*)(const Tensor&, double);

// x op other, other a tensor or a Python number. The engine's arithmetic is floating point:
// integers are computed in float64 (exact below 2^53) and given back as int64.
Tensor binary(const Tensor& x, const py::object& other, Binary op, WithNumber op_number) {
  const auto integral = [](const Tensor& t) { return t.dtype() == DType::Int64; };
  if (py::isinstance<Tensor>(other)) {
    const auto [a, b] = promoted(x, other.cast<Tensor>());
    if (!integral(a)) return op(a, b);
    return op(a.to(DType::Float64), b.to(DType::Float64)).to(DType::Int64);
  }
  if (!py::isinstance<py::int_>(other) && !py::isinstance<py::float_>(other))
    throw py::type_error(
        fmt::format("unsupported operand type: {}",
                    py::str(other.get_type().attr("__name__")).cast<std::string>()));
  const Tensor a = with_scalar(x, other);
  if (!integral(a)) return op_number(a, other.cast<double>());
  return op_number(a.to(DType::Float64), other.cast<double>()).to(DType::Int64);
}

// -x, an integer tensor's too.
Tensor negated(const Tensor& x) {
  return x.dtype() == DType::Int64 ? binary(x, py::int_(-1), mul, mul) : neg(x);
}

// The dims of a reduction: None (all), an int or a sequence of ints.
std::vector<int64_t> dims_of(const py::object& dim) {
  if (dim.is_none()) return {};
  if (py::isinstance<py::int_>(dim)) return {dim.cast<int64_t>()};
  return dim.cast<std::vector<int64_t>>();
}

// A shape given as separate ints or as one sequence: view(2, 3) or view((2, 3)).
Shape shape_of(const py::args& args) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<Shape>();
  return args.cast<Shape>();
}

// x[index]: integers, slices (a positive step), None and ... as differentiable views.
Tensor index(const Tensor& x, const py::object& index) {
  const py::tuple items =
      py::isinstance<py::tuple>(index) ? index.cast<py::tuple>() : py::make_tuple(index);
  int64_t specified = 0;
  for (const auto& item : items) {
    if (!item.is_none() && !item.is(py::ellipsis())) ++specified;
  }
  TG_CHECK(specified <= x.dim(), "index: {} indices for a tensor of {} dims", specified, x.dim());
  Tensor out = x;
  int64_t d = 0;  // the dim of `out` the next item indexes
  for (const auto& item : items) {
    if (item.is_none()) {
      out = unsqueeze(out, d++);
    } else if (item.is(py::ellipsis())) {
      d += x.dim() - specified;
    } else if (py::isinstance<py::slice>(item)) {
      py::ssize_t start = 0, stop = 0, step = 0, length = 0;
      if (!item.cast<py::slice>().compute(out.size(d), &start, &stop, &step, &length))
        throw py::error_already_set();
      if (step <= 0) throw py::value_error("step must be greater than zero");
      out = slice(out, d++, start, length > 0 ? start + (length - 1) * step + 1 : start, step);
    } else if (py::isinstance<Tensor>(item) || py::isinstance<py::list>(item)) {
      throw py::type_error(
          "tapegrad: indexing with a tensor or a list is not supported; use masked_fill or where "
          "for a mask, and slices, integers, None and ... for views");
    } else {
      const int64_t n = out.size(d);
      int64_t i = item.cast<int64_t>();
      if (i < -n || i >= n)
        throw py::index_error(
            fmt::format("index {} is out of bounds for dimension {} with size {}", i, d, n));
      if (i < 0) i += n;
      out = squeeze(slice(out, d, i, i + 1), d);
    }
  }
  return out;
}

// An integer or bool tensor as float32, where an op computes in floating point (PyTorch's
// int ** float, 10000 ** int).
Tensor with_float(const Tensor& x) {
  return x.dtype() == DType::Int64 || x.dtype() == DType::Bool ? x.to(DType::Float32) : x;
}

// The other operand as a tensor: itself, or a 0-dim one of the number (int64 for an int).
Tensor operand(const py::object& other) {
  if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
  if (py::isinstance<py::bool_>(other)) return full({}, other.cast<bool>(), DType::Bool);
  if (py::isinstance<py::int_>(other)) return full({}, other.cast<double>(), DType::Int64);
  if (py::isinstance<py::float_>(other)) return full({}, other.cast<double>(), DType::Float64);
  throw py::type_error(fmt::format("unsupported operand type: {}",
                                   py::str(other.get_type().attr("__name__")).cast<std::string>()));
}

// x // other (other // x when reflected), Python's floor division; a number keeps x's dtype
// unless it is a float and x an integer, as in PyTorch.
Tensor floor_divided(const Tensor& x, const py::object& other, bool reflected) {
  Tensor a = with_scalar(x, other), b = operand(other);
  if (!py::isinstance<Tensor>(other)) b = b.to(a.dtype());
  std::tie(a, b) = promoted(a, b);
  return reflected ? floor_divide(b, a) : floor_divide(a, b);
}

// x < other and the like: with a tensor (promoted, broadcast) or a number; == and != with
// anything else are False and True, as Python's default, ordering a TypeError.
using Compare = Tensor (*)(const Tensor&, const Tensor&);
using CompareNumber = Tensor (*)(const Tensor&, double);
void bind_comparison(py::class_<Tensor>& t, const char* name, Compare op, CompareNumber number) {
  t.def(name, [op, number](const Tensor& x, const py::object& other) -> py::object {
    if (py::isinstance<Tensor>(other)) {
      const auto [a, b] = promoted(x, other.cast<Tensor>());
      return py::cast(op(a, b));
    }
    if (py::isinstance<py::int_>(other) || py::isinstance<py::float_>(other))
      return py::cast(number(x, other.cast<double>()));
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  });
}

// Shape, dtype, copies, numpy and indexing.
void bind_tensor(py::class_<Tensor>& t) {
  // Tensor(t) is t itself under another handle: what nn.Parameter, a subclass, is built on
  t.def(py::init([](const Tensor& other) { return other; }))
      .def_property_readonly("shape",
                             [](const Tensor& x) { return py::tuple(py::cast(x.shape())); })
      .def(
          "size",
          [](const Tensor& x, const py::object& dim) -> py::object {
            if (dim.is_none()) return py::tuple(py::cast(x.shape()));
            return py::int_(x.size(dim.cast<int64_t>()));
          },
          py::arg("dim") = py::none())
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("dtype", &Tensor::dtype)
      .def("detach", &Tensor::detach)
      .def("clone", &Tensor::clone)
      .def("contiguous", &Tensor::contiguous)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("item",
           [](const Tensor& x) -> py::object {
             if (x.dtype() == DType::Bool) return py::bool_(x.item() != 0);
             if (x.dtype() == DType::Int64) return py::int_(static_cast<int64_t>(x.item()));
             return py::float_(x.item());
           })
      .def("to", [](const Tensor& x, DType d) { return x.to(d); })
      .def("float", [](const Tensor& x) { return x.to(DType::Float32); })
      .def("double", [](const Tensor& x) { return x.to(DType::Float64); })
      .def("long", [](const Tensor& x) { return x.to(DType::Int64); })
      .def("bool", [](const Tensor& x) { return x.to(DType::Bool); })
      .def("numpy", &to_numpy)
      .def(
          "__array__",
          [](const Tensor& x, const py::object& dtype) {
            py::array a = to_numpy(x.detach());
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      .def("tolist", [](const Tensor& x) { return to_numpy(x.detach()).attr("tolist")(); })
      .def("__deepcopy__",  // a new leaf with a copy of the values, as torch.Tensor's
           [](const Tensor& x, const py::dict&) {
             return x.detach().clone().set_requires_grad(x.requires_grad());
           })
      .def("__hash__",  // by identity, as torch.Tensor's
           [](const py::object& self) { return reinterpret_cast<std::intptr_t>(self.ptr()); })
      .def("__len__", [](const Tensor& x) { return x.dim() == 0 ? 0 : x.size(0); })
      .def("__getitem__", &index)
      .def("__setitem__", [](const Tensor& x, const py::object& at, const py::object& value) {
        // the view, recorded when x requires grad, so that assign refuses it under grad mode
        const Tensor target = index(x, at);
        assign(target, operand(value));
      });
}

// requires_grad, .grad, backward, retain_grad and hooks taking Python functions.
void bind_tensor_autograd(py::class_<Tensor>& t) {
  t.def_property("requires_grad", &Tensor::requires_grad,
                 [](Tensor& x, bool on) { x.set_requires_grad(on); })
      .def(
          "requires_grad_", [](Tensor& x, bool on) -> Tensor& { return x.set_requires_grad(on); },
          py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("_grad_fn",  // the op that made it, for repr; None for a leaf
                             [](const Tensor& x) -> py::object {
                               if (const char* op = x.grad_fn()) return py::str(op);
                               return py::none();
                             })
      .def_property(
          "grad",
          [](const Tensor& x) -> py::object {
            const Tensor g = x.grad();
            return g.defined() ? py::cast(g) : py::none();
          },
          [](Tensor& x, const py::object& g) {
            if (!g.is_none()) throw py::value_error("tapegrad: .grad can only be set to None");
            x.zero_grad();
          })
      .def(
          "backward",
          [](const Tensor& x, const py::object& gradient, const py::object& retain_graph,
             bool create_graph) {
            const Tensor dout = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
            const bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
            const LongCall call;
            x.backward(dout, {.retain_graph = retain, .create_graph = create_graph});
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
          py::arg("create_graph") = false)
      .def("retain_grad", &Tensor::retain_grad)
      .def("register_hook",
           [](const Tensor& x, const py::function& fn) {
             // the node that keeps the hook may die in a walk that released the GIL
             const std::shared_ptr<py::function> hook(new py::function(fn), [](py::function* f) {
               py::gil_scoped_acquire gil;
               delete f;
             });
             return x.register_hook([hook](const Tensor& g) -> Tensor {
               py::gil_scoped_acquire gil;
               const py::object r = (*hook)(g);
               return r.is_none() ? Tensor() : r.cast<Tensor>();
             });
           })
      .def("_bump_version",  // a write into its storage from Python (an optimizer's step)
           [](const Tensor& x) { x.impl().storage->bump_version(); });
}

// Arithmetic, with tensors and numbers, and reflected.
void bind_operators(py::class_<Tensor>& t) {
  t.def("__add__", [](const Tensor& x, py::object o) { return binary(x, o, add, add); })
      .def("__radd__", [](const Tensor& x, py::object o) { return binary(x, o, add, add); })
      .def("__sub__", [](const Tensor& x, py::object o) { return binary(x, o, sub, sub); })
      .def("__rsub__",
           [](const Tensor& x, py::object o) { return negated(binary(x, o, sub, sub)); })
      .def("__mul__", [](const Tensor& x, py::object o) { return binary(x, o, mul, mul); })
      .def("__rmul__", [](const Tensor& x, py::object o) { return binary(x, o, mul, mul); })
      .def("__pow__",
           [](const Tensor& x, const py::object& p) {
             if (py::isinstance<Tensor>(p))
               throw py::type_error("tapegrad: a tensor exponent needs a number base (2 ** t)");
             if (x.dtype() == DType::Int64 && py::isinstance<py::int_>(p))  // stays an integer
               return pow(x.to(DType::Float64), p.cast<double>()).to(DType::Int64);
             return pow(with_float(x), p.cast<double>());
           })
      .def("__rpow__",
           [](const Tensor& x, const py::object& base) {
             if (x.dtype() == DType::Int64 && py::isinstance<py::int_>(base))  // an integer
               return pow(base.cast<double>(), x.to(DType::Float64)).to(DType::Int64);
             return pow(base.cast<double>(), with_float(x));
           })
      .def("__neg__", &negated)
      .def("__matmul__", [](const Tensor& a, const Tensor& b) {
        const auto [x, y] = promoted(a, b);
        const LongCall call;
        return matmul(x, y);
      });
}

// /, // and %, with tensors and numbers, and reflected; / of integers is float32, as PyTorch's.
void bind_division(py::class_<Tensor>& t) {
  t.def("__truediv__",
        [](const Tensor& x, py::object o) {
          return binary(x.dtype() == DType::Int64 ? x.to(DType::Float32) : x, o, div, div);
        })
      .def("__rtruediv__",
           [](const Tensor& x, py::object o) {
             const Tensor f = x.dtype() == DType::Int64 ? x.to(DType::Float32) : x;
             return mul(pow(f, -1.0), o.cast<double>());
           })
      .def("__floordiv__",
           [](const Tensor& x, const py::object& o) { return floor_divided(x, o, false); })
      .def("__rfloordiv__",
           [](const Tensor& x, const py::object& o) { return floor_divided(x, o, true); })
      // x % o = x - (x // o) * o, Python's (the sign of the divisor)
      .def("__mod__",
           [](const Tensor& x, const py::object& o) {
             const Tensor times = binary(floor_divided(x, o, false), o, mul, mul);
             return binary(x, py::cast(times), sub, sub);
           })
      .def("__rmod__", [](const Tensor& x, const py::object& o) {
        const Tensor times = binary(floor_divided(x, o, true), py::cast(x), mul, mul);
        return negated(binary(times, o, sub, sub));
      });
}

// Comparisons, and ~ | & of bool masks (PyTorch's logical ops on bool tensors).
void bind_logic(py::class_<Tensor>& t) {
  const auto boolean = [](const char* op, const Tensor& x) {
    if (x.dtype() != DType::Bool)
      throw py::type_error(fmt::format("tapegrad: {} takes bool tensors, got {}", op, x.dtype()));
    return x;
  };
  t.def("__invert__", [boolean](const Tensor& x) { return eq(boolean("~", x), 0); })
      .def("__or__",
           [boolean](const Tensor& a, const Tensor& b) {
             return logical_or(boolean("|", a), boolean("|", b));
           })
      .def("__and__", [boolean](const Tensor& a, const Tensor& b) {
        return eq(logical_or(eq(boolean("&", a), 0), eq(boolean("&", b), 0)), 0);
      });
  bind_comparison(t, "__eq__", eq, eq);
  bind_comparison(t, "__ne__", ne, ne);
  bind_comparison(t, "__lt__", lt, lt);
  bind_comparison(t, "__le__", le, le);
  bind_comparison(t, "__gt__", gt, gt);
  bind_comparison(t, "__ge__", ge, ge);
}

// The shape ops as methods, as torch.Tensor has them.
void bind_view_methods(py::class_<Tensor>& t) {
  t.def("view", [](const Tensor& x, py::args s) { return view(x, shape_of(s)); })
      .def("reshape", [](const Tensor& x, py::args s) { return reshape(x, shape_of(s)); })
      .def("transpose", [](const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); })
      .def("permute",
           [](const Tensor& x, py::args dims) {
             return permute(x, dims.size() == 1 && !py::isinstance<py::int_>(dims[0])
                                   ? dims[0].cast<std::vector<int64_t>>()
                                   : dims.cast<std::vector<int64_t>>());
           })
      .def("unsqueeze", [](const Tensor& x, int64_t d) { return unsqueeze(x, d); })
      .def("squeeze", [](const Tensor& x, int64_t d) { return squeeze(x, d); })
      .def("expand", [](const Tensor& x, py::args s) { return expand(x, shape_of(s)); })
      .def(
          "chunk", [](const Tensor& x, int64_t n, int64_t dim) { return chunk(x, n, dim); },
          py::arg("chunks"), py::arg("dim") = 0)
      .def(
          "split",
          [](const Tensor& x, const py::object& size, int64_t dim) {
            if (!py::isinstance<py::int_>(size))
              return split(x, size.cast<std::vector<int64_t>>(), dim);
            const int64_t n = x.size(dim), each = size.cast<int64_t>();
            TG_CHECK(each > 0, "split: split_size must be positive, got {}", each);
            std::vector<int64_t> sizes;
            for (int64_t start = 0; start < n; start += each)
              sizes.push_back(std::min(each, n - start));
            return split(x, sizes, dim);
          },
          py::arg("split_size_or_sections"), py::arg("dim") = 0);
}

// The other ops as methods.
void bind_methods(py::class_<Tensor>& t) {
  t.def("masked_fill",
        [](const Tensor& x, const Tensor& mask, double v) { return masked_fill(x, mask, v); })
      .def(
          "softmax", [](const Tensor& x, int64_t dim) { return softmax(x, dim); }, py::arg("dim"))
      .def(
          "log_softmax", [](const Tensor& x, int64_t dim) { return log_softmax(x, dim); },
          py::arg("dim"))
      .def(
          "sum",
          [](const Tensor& x, const py::object& dim, bool keepdim) {
            return sum(x, dims_of(dim), keepdim);
          },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "mean",
          [](const Tensor& x, const py::object& dim, bool keepdim) {
            return mean(x, dims_of(dim), keepdim);
          },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "argmax", [](const Tensor& x, int64_t dim, bool k) { return argmax(x, dim, k); },
          py::arg("dim"), py::arg("keepdim") = false)
      .def("exp", [](const Tensor& x) { return exp(x); })
      .def("log", [](const Tensor& x) { return log(x); })
      .def("sqrt", [](const Tensor& x) { return sqrt(x); })
      .def("tanh", [](const Tensor& x) { return tanh(x); })
      .def("relu", [](const Tensor& x) { return relu(x); })
      .def("sin", [](const Tensor& x) { return sin(x); })
      .def("cos", [](const Tensor& x) { return cos(x); })
      .def(
          "tril", [](const Tensor& x, int64_t k) { return tril(x, k); }, py::arg("diagonal") = 0)
      .def(
          "triu", [](const Tensor& x, int64_t k) { return triu(x, k); }, py::arg("diagonal") = 0)
      .def("pow", [](const Tensor& x, double p) { return pow(x, p); });
}

// The free functions: creation and the ops as functions.
void bind_functions(py::module_& m) {
  m.def("_from_numpy", &from_array);
  m.def("_numpy_dtype", [](const py::dtype& d) { return from_numpy_dtype(d); });
  m.def("manual_seed", [](uint64_t seed) { default_generator().manual_seed(seed); });
  m.def("zeros", [](const Shape& s, DType d) { return zeros(s, d); });
  m.def("ones", [](const Shape& s, DType d) { return ones(s, d); });
  m.def("full", [](const Shape& s, double v, DType d) { return full(s, v, d); });
  m.def("rand",
        [](const Shape& s, DType d) { return uniform(s, 0.0, 1.0, default_generator(), d); });
  m.def("randn",
        [](const Shape& s, DType d) { return normal(s, 0.0, 1.0, default_generator(), d); });
  m.def("randint", [](int64_t low, int64_t high, const Shape& s) {
    return randint(low, high, s, default_generator());
  });
  m.def("arange",
        [](double start, double end, double step, DType d) { return arange(start, end, step, d); });
  m.def("matmul", [](const Tensor& a, const Tensor& b) {
    const auto [x, y] = promoted(a, b);
    const LongCall call;
    return matmul(x, y);
  });
  m.def(
      "cat", [](const std::vector<Tensor>& xs, int64_t dim) { return concat(xs, dim); },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def("logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); });
  m.def("where", [](const Tensor& c, const Tensor& a, const Tensor& b) {
    const auto [x, y] = promoted(a, b);
    return where(c, x, y);
  });
}

// Grad mode, grad() and the gradient checks.
void bind_autograd(py::module_& m) {
  m.def("is_grad_enabled", &grad_enabled);
  m.def("_set_grad_enabled", [](bool on) { detail::modes().grad = on; });
  m.def("_grad", [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                    bool allow_unused) {
    std::vector<Tensor> got;
    {
      const LongCall call;
      got = grad(outputs, inputs, grad_outputs,
                 {.retain_graph = retain_graph,
                  .create_graph = create_graph,
                  .allow_unused = allow_unused});
    }
    py::list out;  // an unused input's gradient is None
    for (const Tensor& g : got) out.append(g.defined() ? py::cast(g) : py::none());
    return out;
  });
  py::class_<GradcheckResult>(m, "GradcheckResult")
      .def_readonly("ok", &GradcheckResult::ok)
      .def_readonly("elements_checked", &GradcheckResult::elements_checked)
      .def_readonly("where", &GradcheckResult::where)
      .def("message", &GradcheckResult::message);
  const auto check = [](auto checker) {
    return [checker](const py::function& f, const std::vector<Tensor>& inputs, double eps,
                     double atol, double rtol) {
      const GradcheckFn call = [&f](const std::vector<Tensor>& in) {
        return f(*py::cast(in)).cast<Tensor>();
      };
      return checker(call, inputs, GradcheckOptions{.step = eps, .atol = atol, .rtol = rtol});
    };
  };
  m.def("_gradcheck", check([](const GradcheckFn& f, const std::vector<Tensor>& in,
                               const GradcheckOptions& o) { return gradcheck(f, in, o); }));
  m.def("_gradgradcheck", check([](const GradcheckFn& f, const std::vector<Tensor>& in,
                                   const GradcheckOptions& o) { return gradgradcheck(f, in, o); }));
  py::class_<HookHandle>(m, "RemovableHandle").def("remove", &HookHandle::remove);
}

void bind_custom_ops(py::module_& m) {
  // autograd.Function: `out` (computed from `inputs` without recording) joins the tape, its
  // derivative the Python `backward`, called with out's gradient and returning one gradient
  // (or None) per input; run with recording on under create_graph, as any backward
  m.def("_record", [](const std::string& name, const std::vector<Tensor>& inputs, Tensor out,
                      const py::function& backward) {
    static std::set<std::string> names;  // record() keeps the op's name as a pointer
    const char* op = names.insert(name).first->c_str();
    const std::shared_ptr<py::function> fn(new py::function(backward), [](py::function* f) {
      py::gil_scoped_acquire gil;
      delete f;
    });
    const size_t n = inputs.size();
    record(op, inputs, out, {.backward = [fn, op, n](const Tensor& dout, Grads& g) {
             py::gil_scoped_acquire gil;
             const py::object r = (*fn)(dout);
             const py::tuple grads = py::isinstance<py::tuple>(r) ? r : py::make_tuple(r);
             TG_CHECK(grads.size() == n, "{}.backward: {} gradients for {} tensor inputs", op,
                      grads.size(), n);
             for (size_t i = 0; i < n; ++i) {
               if (!grads[i].is_none() && g.wants(i)) g.pass(i, grads[i].cast<Tensor>());
             }
           }});
    return out;
  });
}

// The ops nn.functional and the layers call, in PyTorch's argument orders.
void bind_nn_ops(py::module_& m) {
  const auto maybe = [](const py::object& t) { return t.is_none() ? Tensor() : t.cast<Tensor>(); };
  m.def(
      "linear",
      [maybe](const Tensor& x, const Tensor& weight, const py::object& bias) {
        const Tensor b = maybe(bias);
        const LongCall call;
        return linear(x, weight, b);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("gelu", [](const Tensor& x) { return gelu(x); });
  m.def(
      "layer_norm",
      [](const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
        return layer_norm(x, weight, bias, eps);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("eps") = 1e-5);
  m.def(
      "embedding",
      [](const Tensor& ids, const Tensor& weight, const py::object& padding_idx) {
        return embedding(
            weight, ids,
            padding_idx.is_none() ? std::nullopt : std::optional(padding_idx.cast<int64_t>()));
      },
      py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none());
  m.def(
      "cross_entropy",
      [](const Tensor& logits, const Tensor& targets, int64_t ignore_index,
         double label_smoothing) {
        const LongCall call;
        return cross_entropy(logits, targets,
                             {.ignore_index = ignore_index, .label_smoothing = label_smoothing});
      },
      py::arg("input"), py::arg("target"), py::arg("ignore_index") = -100,
      py::arg("label_smoothing") = 0.0);
  m.def(
      "dropout",
      [](const Tensor& x, double p, bool training) {
        return dropout(x, p, training, default_generator());
      },
      py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true);
  m.def(
      "attention",
      [maybe](const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
              const py::object& blocked, double p, bool training) {
        const AttentionOptions o{
            .blocked = maybe(blocked),
            .dropout = {.p = p, .training = training, .gen = &default_generator()}};
        const LongCall call;
        return attention(q, k, v, heads, o);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("heads"), py::arg("blocked") = py::none(),
      py::arg("dropout_p") = 0.0, py::arg("training") = false);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tapegrad's C++ engine (tensors, ops, autograd, gradcheck); import tapegrad instead";
  set_interrupt_check(&check_signals);
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    }
  });
  py::enum_<DType> dtypes(m, "dtype");
  dtypes.value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("int64", DType::Int64)
      .value("bool", DType::Bool)
      .def_property_readonly("is_floating_point",
                             [](DType d) { return d == DType::Float32 || d == DType::Float64; });
  // as torch.float32 prints (enum_ sets its own __repr__ on the type, which this replaces)
  const py::cpp_function dtype_repr(
      [](DType d) { return fmt::format("tapegrad.{}", dtype_name(d)); }, py::is_method(dtypes));
  dtypes.attr("__repr__") = dtype_repr;
  dtypes.attr("__str__") = dtype_repr;
  py::class_<Tensor> tensor(m, "Tensor");
  bind_tensor(tensor);
  bind_tensor_autograd(tensor);
  bind_operators(tensor);
  bind_division(tensor);
  bind_logic(tensor);
  bind_view_methods(tensor);
  bind_methods(tensor);
  bind_functions(m);
  bind_autograd(m);
  bind_custom_ops(m);
  bind_nn_ops(m);
  bind_files(m);
  bind_runs(m);
  bind_optim(m);
  bind_cpp_models(m);
  bind_viz(m);
}
