// tapegrad._C's pictures: tapegrad/viz's SVG writers (a loss curve, attention heatmaps, the
// tape drawn), which tapegrad/viz.py wraps so a notebook shows them inline.
#include "tapegrad/viz/viz.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "tapegrad/viz/tape_drawing.h"

namespace py = pybind11;
using namespace tapegrad;

namespace {

std::vector<viz::CurvePoint> points(const std::vector<std::pair<int64_t, double>>& xy) {
  std::vector<viz::CurvePoint> out;
  for (const auto& [step, value] : xy) out.push_back({step, value});
  return out;
}

}  // namespace

void bind_viz(py::module_& m) {
  m.def("_loss_curve_svg",
        [](const std::vector<std::pair<int64_t, double>>& train,
           const std::vector<std::pair<int64_t, double>>& valid, const std::string& train_label,
           const std::string& valid_label, const std::string& x_label, const std::string& y_label) {
          return viz::loss_curve_svg({.train = points(train),
                                      .valid = points(valid),
                                      .train_label = train_label,
                                      .valid_label = valid_label,
                                      .x_label = x_label,
                                      .y_label = y_label});
        });
  m.def("_heatmap_svg", [](const Tensor& weights, const std::vector<std::string>& source,
                           const std::vector<std::string>& target, const std::string& title,
                           const std::string& legend, const std::vector<std::string>& panels,
                           double high, bool signed_scale) {
    return viz::heatmap_svg(
        weights.detach(), source, target, title,
        {.legend = legend, .panels = panels, .high = high, .signed_scale = signed_scale});
  });
  m.def("_set_tape_details", [](bool on) { return std::exchange(detail::modes().details, on); });
  py::class_<viz::TapeDrawing>(m, "_TapeDrawing")
      .def(py::init<const std::vector<std::pair<std::string, Tensor>>&>())
      .def("svg", &viz::TapeDrawing::svg)
      .def("dot", &viz::TapeDrawing::dot);
}
