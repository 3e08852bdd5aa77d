// tapegrad._C's optimizers and schedules: the C++ SGD, Adam and AdamW (tapegrad/optim), whose
// update rules are PyTorch's, over a list of tensors, and the learning-rate schedules'
// formulas. tapegrad/optim.py gives them torch.optim's face (param_groups, state_dict and the
// lr_scheduler classes); the updates themselves run here, threaded, with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/schedule.h"

namespace py = pybind11;
using namespace tapegrad;

namespace {

// The parameters named by their place in the list: a group's state is keyed by those names.
nn::NamedTensors numbered(const std::vector<Tensor>& params) {
  nn::NamedTensors named;
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back(std::to_string(i), params[i]);
  return named;
}

template <class A>
A* make_adam(const std::vector<Tensor>& params, double lr, double beta1, double beta2, double eps,
             double weight_decay) {
  return new A(
      numbered(params),
      {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay});
}

}  // namespace

void bind_optim(py::module_& m) {
  py::class_<optim::Optimizer>(m, "_Optimizer")
      .def("step",
           [](optim::Optimizer& o) {
             py::gil_scoped_release release;
             o.step();
           })
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
      .def_property_readonly("step_count", &optim::Optimizer::step_count)
      .def("state", &optim::Optimizer::state)
      .def("load_state", &optim::Optimizer::load_state);
  py::class_<optim::SGD, optim::Optimizer>(m, "_SGD").def(
      py::init([](const std::vector<Tensor>& params, double lr, double momentum, double dampening,
                  double weight_decay, bool nesterov) {
        return new optim::SGD(numbered(params), {.lr = lr,
                                                 .momentum = momentum,
                                                 .dampening = dampening,
                                                 .weight_decay = weight_decay,
                                                 .nesterov = nesterov});
      }));
  py::class_<optim::Adam, optim::Optimizer>(m, "_Adam").def(py::init(&make_adam<optim::Adam>));
  py::class_<optim::AdamW, optim::Adam>(m, "_AdamW").def(py::init(&make_adam<optim::AdamW>));
  m.def("_clip_grad_norm", [](const std::vector<Tensor>& params, double max_norm) {
    return optim::clip_grad_norm(numbered(params), max_norm);
  });
  py::class_<optim::Schedule>(m, "_Schedule").def("lr", &optim::Schedule::lr);
  py::class_<optim::NoamSchedule, optim::Schedule>(m, "_NoamSchedule")
      .def(py::init<int64_t, int64_t, double>());
  py::class_<optim::WarmupCosineSchedule, optim::Schedule>(m, "_WarmupCosineSchedule")
      .def(py::init<double, int64_t, int64_t, double>());
}
