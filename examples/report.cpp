#include "examples/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace tapegrad::examples {

namespace {
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace

std::string loss_curve_svg(const std::vector<CurvePoint>& train,
                           const std::vector<CurvePoint>& valid) {
  const double W = 640, H = 360, left = 60, right = 20, top = 30, bottom = 40;
  int64_t max_step = 1;
  double max_v = 1e-9;
  for (const auto* series : {&train, &valid}) {
    for (const CurvePoint& p : *series) {
      max_step = std::max(max_step, p.step);
      if (std::isfinite(p.value)) max_v = std::max(max_v, p.value);
    }
  }
  auto x = [&](double step) {
    return left + (W - left - right) * step / static_cast<double>(max_step);
  };
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - std::min(v, max_v) / max_v); };
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H);
  for (int i = 0; i <= 4; ++i) {
    const double v = max_v * i / 4;
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)"
                       R"(<text x="{}" y="{:.1f}" text-anchor="end">{:.2f}</text>)"
                       "\n",
                       left, W - right, y(v), y(v), left - 5, y(v) + 4, v);
  }
  svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">step (max {})</text>)"
                     "\n",
                     (W + left) / 2, H - 10, max_step);
  std::string path;
  for (const CurvePoint& p : train) {
    path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L",
                        x(static_cast<double>(p.step)), y(p.value));
  }
  svg += fmt::format(R"(<path d="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>)"
                     "\n",
                     path);
  for (const CurvePoint& p : valid) {
    svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="#d62728"/>)"
                       "\n",
                       x(static_cast<double>(p.step)), y(p.value));
  }
  svg += fmt::format(
      R"(<text x="{}" y="18" fill="#1f77b4">training loss (label-smoothed, averaged)</text>)"
      R"(<text x="{}" y="18" fill="#d62728">validation loss</text>)"
      "\n",
      left, left + 260);
  return svg + "</svg>\n";
}

std::string heatmap_svg(const Tensor& weights, const std::vector<std::string>& source,
                        const std::vector<std::string>& target, const std::string& title) {
  const int64_t H = weights.size(0), T = weights.size(1), S = weights.size(2);
  const double cell = 16, label = 50, gap = 30;
  const double panel_w = label + cell * static_cast<double>(S),
               panel_h = label + cell * static_cast<double>(T);
  const double W = gap + static_cast<double>(H) * (panel_w + gap), Ht = 40 + panel_h + gap;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="monospace" font-size="11">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      R"(<text x="{}" y="18" font-family="sans-serif" font-size="13">{}</text>)"
      "\n",
      W, Ht, gap, escape(title));
  for (int64_t h = 0; h < H; ++h) {
    const double ox = gap + static_cast<double>(h) * (panel_w + gap) + label, oy = 40 + label;
    svg += fmt::format(R"(<text x="{}" y="{}" font-family="sans-serif">head {}</text>)"
                       "\n",
                       ox, oy - label + 12, h);
    for (int64_t s = 0; s < S; ++s) {
      const std::string tok = s < static_cast<int64_t>(source.size()) ? source[s] : "";
      svg += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)"
                         "\n",
                         ox + cell * (static_cast<double>(s) + 0.5), oy - 4,
                         escape(tok == " " ? "␣" : tok));
    }
    for (int64_t t = 0; t < T; ++t) {
      const std::string tok = t < static_cast<int64_t>(target.size()) ? target[t] : "";
      svg += fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end">{}</text>)"
                         "\n",
                         ox - 4, oy + cell * (static_cast<double>(t) + 0.75), escape(tok));
      for (int64_t s = 0; s < S; ++s) {
        const double w = std::clamp(weights.at({h, t, s}), 0.0, 1.0);
        const int shade = static_cast<int>(255 * (1 - w));
        svg += fmt::format(
            R"svg(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" fill="rgb({},{},255)"/>)svg"
            "\n",
            ox + cell * static_cast<double>(s), oy + cell * static_cast<double>(t), cell, cell,
            shade, shade);
      }
    }
  }
  return svg + "</svg>\n";
}

std::string report_html(const ReportData& d) {
  std::string html = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}"
      "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px "
      "8px;font-family:monospace}}"
      ".bad{{background:#fdd}}</style></head><body>\n<h1>{0}</h1>\n<table>\n",
      escape(d.title));
  for (const auto& [k, v] : d.facts)
    html += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(k), escape(v));
  html += fmt::format("</table>\n<h2>Loss</h2>\n<img src=\"{}\">\n", escape(d.loss_curve_file));
  html +=
      "<h2>Held-out "
      "samples</h2>\n<table><tr><th>input</th><th>expected</th><th>predicted</th></tr>\n";
  for (const Sample& s : d.samples) {
    html += fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        s.expected == s.predicted ? "" : " class=\"bad\"", escape(s.source),
                        escape(s.expected), escape(s.predicted));
  }
  html += "</table>\n<h2>Cross-attention of the last decoder layer</h2>\n";
  for (const std::string& f : d.heatmap_files)
    html += fmt::format("<p><img src=\"{}\"></p>\n", escape(f));
  return html + "</body></html>\n";
}

}  // namespace tapegrad::examples
