// What a training run shows a person, as files a browser opens: an SVG loss curve, SVG
// attention heatmaps (a panel per head, laid out in rows that fit a page, with a colour scale)
// and an HTML report that puts them together with the config and sample outputs. Pure
// functions from numbers to text: a program writes the text where it likes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tensor.h"

// Pictures as text any program can write: the loss curve, heatmaps, the report, the tape.
namespace tapegrad::viz {

// Text made safe inside SVG and HTML: < > & " escaped.
std::string escape(const std::string& s);

struct CurvePoint {
  int64_t step;
  double value;
};

struct Curves {
  std::vector<CurvePoint> train{};  // a line
  std::vector<CurvePoint> valid{};  // dots
  // Legend entries: say what each series is (smoothed how, measured on what).
  std::string train_label = "training loss";
  std::string valid_label = "validation loss";
  std::string x_label = "step", y_label = "loss";  // the axes'
};

// The loss against the step (or any two series against a count), with ticks on both axes and
// a legend; 720 x 360.
std::string loss_curve_svg(const Curves& curves);

// How a heatmap reads its values: attention weights by default. With `signed_scale` the
// values run from -high to high, blue below zero and red above (a table of sinusoids).
struct HeatmapStyle {
  std::string legend = "weight";      // over the colour scale
  std::string panel = "head";         // panel i is titled "head i"
  std::vector<std::string> panels{};  // or each panel's own title
  double high = 1;                    // the value of the darkest colour
  bool signed_scale = false;
};

// weights [H, T, S] of one example: for each head a grid with the source tokens along x and
// the target tokens along y, darker for more attention, and a colour scale from 0 to 1. Panels
// wrap into rows so the image is at most kMaxWidth wide; labels longer than one character are
// written vertically so neighbours do not overlap.
constexpr double kMaxWidth = 1200;  // the report scales it to its 1100-pixel column
std::string heatmap_svg(const Tensor& weights, const std::vector<std::string>& source,
                        const std::vector<std::string>& target, const std::string& title,
                        const HeatmapStyle& style = {});

// A search over sequences, drawn as a tree (a beam search, nn::GenerateOptions::on_step): one
// column per step, holding the hypotheses kept after it, each joined to the one it extends.
struct SearchNode {
  std::vector<std::string> tokens;  // the whole hypothesis; the node shows the last one
  double log_prob = 0;
  bool finished = false;  // it ended here (<eos>)
};
// Nodes along the path to `answer` are drawn bold.
std::string search_tree_svg(const std::vector<std::vector<SearchNode>>& steps,
                            const std::vector<std::string>& answer, const std::string& title);

struct Sample {
  std::string source, expected, predicted;
};

using Rows = std::vector<std::pair<std::string, std::string>>;

struct ReportData {
  std::string title;
  Rows facts;   // "held-out exact match" -> "99.60%"
  Rows config;  // the model's config, a row per field
  std::string loss_curve_file;
  std::string scores_file;  // BLEU and chrF over the run, or none
  std::vector<std::string> heatmap_files;
  std::vector<Sample> samples;  // a mismatch is highlighted
  // Held-out examples the model gets wrong, and what they are of: "12 of 500 wrong"
  std::vector<Sample> mistakes;
  std::string mistakes_of;
  Rows texts;  // generated texts, each under its heading ("step 500" -> a language model's sample)
};

// One HTML page that fits a browser window: images scale down to the column's width.
std::string report_html(const ReportData& data);

}  // namespace tapegrad::viz
