// What a training run shows a person: an SVG loss curve, SVG attention heatmaps (one panel
// per head) and an HTML page that puts them together with the sample decodes.
#pragma once

#include <string>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::examples {

struct CurvePoint {
  int64_t step;
  double value;
};

// Training loss (and validation loss, drawn as dots) against the step.
std::string loss_curve_svg(const std::vector<CurvePoint>& train,
                           const std::vector<CurvePoint>& valid);

// weights [H, T, S] of one example: for each head a grid with the source tokens along x and
// the target tokens along y, darker for more attention.
std::string heatmap_svg(const Tensor& weights, const std::vector<std::string>& source,
                        const std::vector<std::string>& target, const std::string& title);

struct Sample {
  std::string source, expected, predicted;
};

struct ReportData {
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  // "exact match" -> "99.6%"
  std::string loss_curve_file;
  std::vector<std::string> heatmap_files;
  std::vector<Sample> samples;
};

std::string report_html(const ReportData& data);

}  // namespace tapegrad::examples
