// The SVG plots and the HTML report of viz.h, written by hand: a few text elements per mark.
#include "tapegrad/viz/viz.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tapegrad::viz {

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

namespace {

// A round step for about `count` ticks over [0, max]: 1, 2 or 5 times a power of ten.
double tick_step(double max, int count) {
  const double raw = std::max(max, 1e-12) / count;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

// Characters a label takes, counting a UTF-8 sequence as one.
size_t length(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string svg_open(double w, double h, const char* family) {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" font-family="{2}" font-size="11">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      w, h, family);
}

// White for 0, darker blue up to `high`; on a signed scale darker red up to high and darker
// blue down to -high.
std::string shade(double w, const HeatmapStyle& style = {}) {
  const double x = std::clamp(w / style.high, style.signed_scale ? -1.0 : 0.0, 1.0);
  const int s = static_cast<int>(std::lround(255 * (1 - std::abs(x))));
  return x > 0 && style.signed_scale ? fmt::format("rgb(255,{},{})", s, s)
                                     : fmt::format("rgb({},{},255)", s, s);
}

}  // namespace

std::string loss_curve_svg(const Curves& c) {
  const double W = 720, H = 360, left = 60, right = 20, top = 40, bottom = 45;
  int64_t max_step = 1;
  double max_v = 1e-9;
  for (const auto* series : {&c.train, &c.valid}) {
    for (const CurvePoint& p : *series) {
      max_step = std::max(max_step, p.step);
      if (std::isfinite(p.value)) max_v = std::max(max_v, p.value);
    }
  }
  const double y_step = tick_step(max_v, 4), x_step = tick_step(static_cast<double>(max_step), 6);
  max_v = std::ceil(max_v / y_step) * y_step;
  auto x = [&](double step) {
    return left + (W - left - right) * step / static_cast<double>(max_step);
  };
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - std::min(v, max_v) / max_v); };
  std::string svg = svg_open(W, H, "sans-serif");
  for (double v = 0; v <= max_v + y_step / 2; v += y_step) {
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)"
                       R"(<text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)"
                       "\n",
                       left, W - right, y(v), y(v), left - 5, y(v) + 4, v);
  }
  for (double s = 0; s <= static_cast<double>(max_step) + x_step / 2; s += x_step) {
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#999"/>)"
                       R"(<text x="{0:.1f}" y="{3}" text-anchor="middle">{4:g}</text>)"
                       "\n",
                       x(s), H - bottom, H - bottom + 5, H - bottom + 18, s);
  }
  svg += fmt::format(
      R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)"
      R"svg(<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)svg"
      "\n",
      (W + left) / 2, H - 8, escape(c.x_label), (H - bottom + top) / 2, (H - bottom + top) / 2,
      escape(c.y_label));
  std::string path;
  for (const CurvePoint& p : c.train) {
    path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L",
                        x(static_cast<double>(p.step)), y(p.value));
  }
  svg += fmt::format(R"(<path d="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>)"
                     "\n",
                     path);
  for (const CurvePoint& p : c.valid) {
    svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="#d62728"/>)"
                       "\n",
                       x(static_cast<double>(p.step)), y(p.value));
  }
  svg +=
      fmt::format(R"(<line x1="{0}" x2="{1}" y1="14" y2="14" stroke="#1f77b4" stroke-width="2"/>)"
                  R"(<text x="{2}" y="18">{3}</text>)",
                  left, left + 20, left + 26, escape(c.train_label));
  if (!c.valid.empty()) {  // a legend entry for a series that is there
    svg += fmt::format(
        R"(<circle cx="{0}" cy="30" r="3.5" fill="#d62728"/><text x="{1}" y="34">{2}</text>)",
        left + 10, left + 26, escape(c.valid_label));
  }
  return svg + "\n</svg>\n";
}

namespace {

constexpr double kCell = 16;  // a heatmap cell's side

// Label i of a heatmap's axis ("" past the end; an open box for a space).
std::string token(const std::vector<std::string>& tokens, int64_t i) {
  if (i >= static_cast<int64_t>(tokens.size())) return "";
  return tokens[i] == " " ? "\u2423" : tokens[i];
}

// Panel h of a heatmap: its column and row labels and its cells, the grid's top left at
// (ox, oy).
std::string panel_cells(const Tensor& weights, int64_t h, const std::vector<std::string>& source,
                        const std::vector<std::string>& target, double ox, double oy, bool vertical,
                        const HeatmapStyle& style) {
  const int64_t T = weights.size(1), S = weights.size(2);
  const double cell = kCell;
  std::string svg;
  for (int64_t s = 0; s < S; ++s) {
    const double cx = ox + cell * (static_cast<double>(s) + 0.5);
    if (vertical) {
      svg += fmt::format(
          R"svg(<text x="{0:.1f}" y="{1:.1f}" transform="rotate(-90 {0:.1f} {1:.1f})">{2}</text>)svg"
          "\n",
          cx + 4, oy - 4, escape(token(source, s)));
    } else {
      svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)"
                         "\n",
                         cx, oy - 4, escape(token(source, s)));
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    svg +=
        fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)"
                    "\n",
                    ox - 4, oy + cell * (static_cast<double>(t) + 0.75), escape(token(target, t)));
    for (int64_t s = 0; s < S; ++s) {
      svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" fill="{}"/>)"
                         "\n",
                         ox + cell * static_cast<double>(s), oy + cell * static_cast<double>(t),
                         cell, cell, shade(weights.at({h, t, s}), style));
    }
  }
  return svg;
}

// A heatmap's colour scale at (sx, sy), 120 high: `high` at the top, 0 (or -high) at the bottom.
std::string colour_scale(double sx, double sy, const HeatmapStyle& style) {
  const double sh = 120, low = style.signed_scale ? -style.high : 0;
  std::string svg;
  for (int i = 0; i < 20; ++i) {
    const double v = style.high - (style.high - low) * (i + 0.5) / 20;
    svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="12" height="{:.1f}" fill="{}"/>)"
                       "\n",
                       sx, sy + sh * i / 20, sh / 20 + 0.5, shade(v, style));
  }
  return svg +
         fmt::format(
             R"(<rect x="{0:.1f}" y="{1:.1f}" width="12" height="{2:.1f}" fill="none" stroke="#999"/>)"
             R"(<text x="{3:.1f}" y="{4:.1f}">{8:.1f}</text><text x="{3:.1f}" y="{5:.1f}">{9:.1f}</text>)"
             R"(<text x="{3:.1f}" y="{6:.1f}">{10:.1f}</text><text x="{0:.1f}" y="{7:.1f}" font-family="sans-serif">{11}</text>)"
             "\n",
             sx, sy, sh, sx + 16, sy + 4, sy + sh / 2 + 4, sy + sh + 4, sy - 6, style.high,
             (style.high + low) / 2, low, escape(style.legend));
}

}  // namespace

std::string heatmap_svg(const Tensor& weights, const std::vector<std::string>& source,
                        const std::vector<std::string>& target, const std::string& title,
                        const HeatmapStyle& style) {
  const int64_t H = weights.size(0), T = weights.size(1), S = weights.size(2);
  size_t longest_src = 1, longest_tgt = 1;
  for (int64_t s = 0; s < S; ++s) longest_src = std::max(longest_src, length(token(source, s)));
  for (int64_t t = 0; t < T; ++t) longest_tgt = std::max(longest_tgt, length(token(target, t)));
  const bool vertical = longest_src > 1;  // words: one label per column, written upwards
  const double cell = kCell, gap = 24, char_w = 7;
  const double label_x = 8 + char_w * static_cast<double>(std::min<size_t>(longest_tgt, 16));
  const double label_y =
      vertical ? 8 + char_w * static_cast<double>(std::min<size_t>(longest_src, 16)) : 16;
  const double panel_w = label_x + cell * static_cast<double>(S);
  const double panel_h = 18 + label_y + cell * static_cast<double>(T);
  const double scale_w = 60, title_h = 26;
  const int64_t columns = std::clamp<int64_t>(
      static_cast<int64_t>((kMaxWidth - scale_w - gap) / (panel_w + gap)), 1, H);
  const int64_t rows = (H + columns - 1) / columns;
  // wide enough for the title, tall enough for the colour scale
  const double panels_w = gap + static_cast<double>(columns) * (panel_w + gap);
  const double W = std::max(panels_w + scale_w, 2 * gap + 7 * static_cast<double>(length(title)));
  const double Ht = std::max(title_h + static_cast<double>(rows) * (panel_h + gap), title_h + 166);
  std::string svg = svg_open(W, Ht, "monospace");
  svg += fmt::format(R"(<text x="{}" y="18" font-family="sans-serif" font-size="13">{}</text>)"
                     "\n",
                     gap, escape(title));
  for (int64_t h = 0; h < H; ++h) {
    const double px = gap + static_cast<double>(h % columns) * (panel_w + gap);
    const double py = title_h + static_cast<double>(h / columns) * (panel_h + gap);
    const double ox = px + label_x, oy = py + 18 + label_y;
    const std::string name = h < static_cast<int64_t>(style.panels.size())
                                 ? style.panels[h]
                                 : fmt::format("{} {}", style.panel, h);
    svg += fmt::format(R"(<text x="{}" y="{}" font-family="sans-serif">{}</text>)"
                       "\n",
                       ox, py + 12, escape(name));
    svg += panel_cells(weights, h, source, target, ox, oy, vertical, style);
  }
  return svg + colour_scale(panels_w + 8, title_h + 18, style) + "</svg>\n";
}

std::string search_tree_svg(const std::vector<std::vector<SearchNode>>& steps,
                            const std::vector<std::string>& answer, const std::string& title) {
  const double col_w = 86, row_h = 44, left = 24, top = 44, box_w = 64, box_h = 30;
  size_t rows = 1;
  for (const auto& column : steps) rows = std::max(rows, column.size());
  const double W = std::max(left * 2 + col_w * static_cast<double>(steps.size()),
                            2 * left + 7 * static_cast<double>(length(title)));
  std::string svg = svg_open(W, top + row_h * static_cast<double>(rows) + 10, "sans-serif");
  svg += fmt::format(R"(<text x="{}" y="18" font-size="13">{}</text>)"
                     "\n",
                     left, escape(title));
  const auto on_answer = [&](const SearchNode& n) {
    return n.tokens.size() <= answer.size() &&
           std::equal(n.tokens.begin(), n.tokens.end(), answer.begin()) &&
           (!n.finished || n.tokens.size() == answer.size());
  };
  const auto x_of = [&](size_t t) { return left + col_w * static_cast<double>(t); };
  const auto y_of = [&](size_t r) { return top + row_h * static_cast<double>(r); };
  for (size_t t = 0; t < steps.size(); ++t) {
    for (size_t r = 0; r < steps[t].size(); ++r) {
      const SearchNode& n = steps[t][r];
      const bool bold = on_answer(n);
      // the edge from the hypothesis it extends, in the column before
      for (size_t p = 0; t > 0 && p < steps[t - 1].size(); ++p) {
        const auto& parent = steps[t - 1][p].tokens;
        // a finished node ends its parent with <eos>; a live one adds a token to it
        const bool extends = !steps[t - 1][p].finished &&
                             parent.size() + (n.finished ? 0 : 1) == n.tokens.size() &&
                             std::equal(parent.begin(), parent.end(), n.tokens.begin());
        if (!extends) continue;
        svg += fmt::format(
            R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"/>)"
            "\n",
            x_of(t - 1) + box_w, y_of(p) + box_h / 2, x_of(t), y_of(r) + box_h / 2,
            bold && on_answer(steps[t - 1][p]) ? "#222" : "#bbb", bold ? 2 : 1);
      }
      const std::string last = n.finished ? "<eos>" : n.tokens.empty() ? "" : n.tokens.back();
      svg += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" rx="4" fill="{}" stroke="{}" stroke-width="{}"/>)"
          R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-weight="{}">{}</text>)"
          R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" fill="#555">{:.2f}</text>)"
          "\n",
          x_of(t), y_of(r), box_w, box_h, n.finished ? "#e8f5e9" : "#f3f6fb",
          bold ? "#222" : "#bbb", bold ? 2 : 1, x_of(t) + box_w / 2, y_of(r) + 13,
          bold ? "bold" : "normal", escape(last), x_of(t) + box_w / 2, y_of(r) + 25, n.log_prob);
    }
  }
  return svg + "</svg>\n";
}

std::string report_html(const ReportData& d) {
  std::string html = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<meta name=\"viewport\" content=\"width=device-width\">\n"
      "<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}"
      "img{{max-width:100%;height:auto}}table{{border-collapse:collapse;margin-bottom:1em}}"
      "td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}"
      "td{{font-family:monospace;overflow-wrap:anywhere}}.bad{{background:#fdd}}"
      ".tables{{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}}</style>"
      "</head><body>\n<h1>{0}</h1>\n<div class=\"tables\">\n",
      escape(d.title));
  for (const auto& [heading, rows] : {std::pair{"Run", &d.facts}, {"Model", &d.config}}) {
    if (rows->empty()) continue;
    html += fmt::format("<table><tr><th colspan=\"2\">{}</th></tr>\n", heading);
    for (const auto& [k, v] : *rows)
      html += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(k), escape(v));
    html += "</table>\n";
  }
  html += "</div>\n";
  if (!d.loss_curve_file.empty())
    html += fmt::format("<h2>Loss</h2>\n<img src=\"{}\" alt=\"loss curve\">\n",
                        escape(d.loss_curve_file));
  if (!d.scores_file.empty())
    html += fmt::format("<h2>BLEU and chrF</h2>\n<img src=\"{}\" alt=\"BLEU and chrF curves\">\n",
                        escape(d.scores_file));
  const auto table = [&](const std::string& heading, const std::vector<Sample>& rows) {
    if (rows.empty()) return;
    html += fmt::format(
        "<h2>{}</h2>\n<table><tr><th>input</th><th>expected</th><th>predicted</th></tr>\n",
        escape(heading));
    for (const Sample& s : rows) {
      html += fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          s.expected == s.predicted ? "" : " class=\"bad\"", escape(s.source),
                          escape(s.expected), escape(s.predicted));
    }
    html += "</table>\n";
  };
  table("Held-out samples", d.samples);
  table(fmt::format("Held-out mistakes ({})", d.mistakes_of), d.mistakes);
  if (!d.texts.empty()) html += "<h2>Samples</h2>\n";
  for (const auto& [heading, text] : d.texts)
    html += fmt::format("<h3>{}</h3>\n<pre style=\"white-space:pre-wrap\">{}</pre>\n",
                        escape(heading), escape(text));
  if (!d.heatmap_files.empty()) html += "<h2>Cross-attention of the last decoder layer</h2>\n";
  for (const std::string& f : d.heatmap_files)
    html += fmt::format("<p><img src=\"{}\" alt=\"attention heatmap\"></p>\n", escape(f));
  return html + "</body></html>\n";
}

}  // namespace tapegrad::viz
