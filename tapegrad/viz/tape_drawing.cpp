// TapeDrawing (tape_drawing.h): the capture walks back from the named tensors' entries, then
// the SVG and DOT writers lay the steps out in tape order.
#include "tapegrad/viz/tape_drawing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/viz/viz.h"

namespace tapegrad::viz {

namespace {

size_t bytes_of(const SavedBuffer& s) {
  return static_cast<size_t>(numel(s.shape)) * dtype_size(s.dtype);
}

std::string saved_text(const std::vector<SavedBuffer>& saved) {
  if (saved.empty()) return "saves nothing";
  std::string out = "saved:";
  for (size_t i = 0; i < saved.size(); ++i) {
    const SavedBuffer& s = saved[i];
    out +=
        fmt::format("{} {} {} {} ({} B)", i > 0 ? "," : "", s.name, s.shape, s.dtype, bytes_of(s));
  }
  return out;
}

// The entries that produced the named tensors, walked back through their inputs, in tape order.
std::vector<const TapeEntry*> entries_behind(
    const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<const TapeEntry*> entries, stack;
  std::unordered_set<const TapeEntry*> seen;
  for (const auto& [name, t] : named) {
    if (!t.defined() || !t.requires_grad()) continue;
    if (const auto& fn = t.impl().node->grad_fn; fn && seen.insert(fn.get()).second) {
      stack.push_back(fn.get());
    }
  }
  while (!stack.empty()) {
    const TapeEntry* e = stack.back();
    stack.pop_back();
    entries.push_back(e);
    for (const auto& in : e->inputs) {
      if (in && in->grad_fn && seen.insert(in->grad_fn.get()).second) {
        stack.push_back(in->grad_fn.get());
      }
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const TapeEntry* a, const TapeEntry* b) { return a->seq < b->seq; });
  return entries;
}

}  // namespace

TapeDrawing::TapeDrawing(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::unordered_map<const GradNode*, std::string> names;
  for (const auto& [name, t] : named) {
    if (t.defined() && t.requires_grad()) names.emplace(t.impl().node.get(), name);
  }
  std::unordered_map<const GradNode*, int> index;
  std::vector<std::shared_ptr<GradNode>> nodes;  // per value; null for a constant
  auto value_of = [&](const std::shared_ptr<GradNode>& node) {
    if (const auto it = index.find(node.get()); it != index.end()) return it->second;
    const int i = static_cast<int>(values_.size());
    const auto name = names.find(node.get());
    values_.push_back({name != names.end() ? name->second : fmt::format("t{}", i), node->shape,
                       node->dtype, node->grad_fn == nullptr, true});
    nodes.push_back(node);
    index.emplace(node.get(), i);
    return i;
  };
  for (const TapeEntry* e : entries_behind(named)) {
    Step step{e->op, e->seq, {}, {}, e->saved};
    DType dtype = DType::Float32;  // a constant's, unknown: shown as its op's output's
    for (const auto& out : e->outputs) {
      if (const auto node = out.lock()) dtype = node->dtype;
    }
    for (size_t k = 0; k < e->inputs.size(); ++k) {
      if (e->inputs[k]) {
        step.inputs.push_back(value_of(e->inputs[k]));
      } else if (k < e->input_shapes.size()) {  // a constant, known in details mode
        step.inputs.push_back(static_cast<int>(values_.size()));
        values_.push_back({"const", e->input_shapes[k], dtype, true, false});
        nodes.push_back(nullptr);
      }
    }
    for (const auto& out : e->outputs) {
      if (const auto node = out.lock()) step.outputs.push_back(value_of(node));
    }
    steps_.push_back(std::move(step));
  }

  norms_ = std::make_shared<std::vector<std::optional<double>>>(values_.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i]) continue;
    hooks_.push_back(register_hook(nodes[i], [norms = norms_, i](const Tensor& g) {
      const NoGradGuard no_grad;
      (*norms)[i] = std::sqrt(sum(mul(g, g)).item());
      return Tensor();
    }));
  }
}

TapeDrawing::~TapeDrawing() {
  for (HookHandle& h : hooks_) h.remove();
}

std::optional<double> TapeDrawing::grad_norm(size_t value) const { return norms_->at(value); }

size_t TapeDrawing::saved_bytes() const {
  size_t total = 0;
  for (const Step& s : steps_) {
    for (const SavedBuffer& b : s.saved) total += bytes_of(b);
  }
  return total;
}

namespace {

std::string value_text(const TapeDrawing::Value& v) {
  const std::string kind = !v.requires_grad ? " (no grad)" : v.leaf ? " (leaf, requires grad)" : "";
  return fmt::format("{} {} {}{}", v.label, v.shape, v.dtype, kind);
}

// Rows down the page: each step's inputs not yet shown, the step, its output.
struct Row {
  bool op;
  int index;
};
// A read (a tensor's row to a later op's row), an arc in a lane right of the boxes.
struct Arc {
  int from, to, lane;
};

std::vector<Row> layout_rows(const std::vector<TapeDrawing::Step>& steps, size_t num_values,
                             std::vector<Arc>& arcs) {
  std::vector<Row> rows;
  std::vector<int> value_row(num_values, -1), step_row(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) {
      if (value_row[v] < 0) {
        value_row[v] = static_cast<int>(rows.size());
        rows.push_back({false, v});
      }
    }
    step_row[s] = static_cast<int>(rows.size());
    rows.push_back({true, static_cast<int>(s)});
    for (int v : steps[s].outputs) {
      value_row[v] = static_cast<int>(rows.size());
      rows.push_back({false, v});
    }
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) arcs.push_back({value_row[v], step_row[s], 0});
  }
  return rows;
}

// Arcs whose row spans overlap take different lanes, the shortest first; returns the count.
size_t assign_lanes(std::vector<Arc>& arcs) {
  std::sort(arcs.begin(), arcs.end(), [](const Arc& a, const Arc& b) {
    return a.to - a.from < b.to - b.from || (a.to - a.from == b.to - b.from && a.from < b.from);
  });
  std::vector<std::vector<std::pair<int, int>>> lanes;
  for (Arc& a : arcs) {
    size_t lane = 0;
    for (; lane < lanes.size(); ++lane) {
      const bool clear = std::none_of(lanes[lane].begin(), lanes[lane].end(), [&](auto span) {
        return a.from <= span.second && span.first <= a.to;
      });
      if (clear) break;
    }
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].emplace_back(a.from, a.to);
    a.lane = static_cast<int>(lane);
  }
  return lanes.size();
}

// The picture's frame: its size, the arrowhead, a white page, the title at x.
std::string svg_header(double width, double height, double x, size_t ops) {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" font-family="monospace" font-size="12">)"
      "\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
      "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" "
      "fill=\"#555\"/></marker></defs>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"14\">the tape: {3} ops in recording order; arrows "
      "show which ops read each tensor</text>\n",
      width, height, x, ops);
}

}  // namespace

std::string TapeDrawing::svg() const {
  std::vector<Arc> arcs;
  const std::vector<Row> rows = layout_rows(steps_, values_.size(), arcs);
  const size_t num_lanes = assign_lanes(arcs);
  constexpr double kRow = 40, kBox = 28, kTop = 50, kValueX = 20, kValueW = 330, kOpX = 70,
                   kOpW = 230, kLane = 12;
  const double text_x = kValueX + kValueW + 30 + kLane * static_cast<double>(num_lanes);
  const double width = text_x + 560, height = kTop + kRow * static_cast<double>(rows.size()) + 40;
  auto y_of = [&](int row) { return kTop + kRow * row; };
  std::string out = svg_header(width, height, kValueX, steps_.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = y_of(static_cast<int>(r));
    if (rows[r].op) {
      const Step& s = steps_[rows[r].index];
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"12\" fill=\"#fff3c4\" "
          "stroke=\"#b8860b\"/>\n<text x=\"{}\" y=\"{}\">#{} {}</text>\n"
          "<text x=\"{}\" y=\"{}\" fill=\"#8a6d00\">{}</text>\n",
          kOpX, y, kOpW, kBox, kOpX + 10, y + 18, rows[r].index, escape(s.op), text_x, y + 18,
          escape(saved_text(s.saved)));
      // the op writes its outputs, the next rows
      for (size_t k = 1; k <= s.outputs.size(); ++k) {
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#555\" "
            "marker-end=\"url(#arrow)\"/>\n",
            kOpX + kOpW / 2, y + kBox, y + kRow * static_cast<double>(k));
      }
    } else {
      const Value& v = values_[rows[r].index];
      const std::string fill = !v.requires_grad ? "#eeeeee" : v.leaf ? "#d7ecff" : "#e3f5e1";
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#555\"/>\n"
          "<text x=\"{}\" y=\"{}\">{}</text>\n",
          kValueX, y, kValueW, kBox, fill, kValueX + 8, y + 18, escape(value_text(v)));
      if (const auto n = grad_norm(static_cast<size_t>(rows[r].index))) {
        out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#a0282d\">|grad| = {:.6g}</text>\n",
                           text_x, y + 18, *n);
      }
    }
  }
  for (const Arc& a : arcs) {
    const double y0 = y_of(a.from) + kBox / 2, y1 = y_of(a.to) + kBox / 2;
    const double x0 = kValueX + kValueW, x1 = kOpX + kOpW, xl = x0 + 14 + kLane * a.lane;
    out += fmt::format(
        "<path d=\"M {} {} C {} {}, {} {}, {} {}\" fill=\"none\" stroke=\"#555\" "
        "marker-end=\"url(#arrow)\"/>\n",
        x0, y0, xl, y0, xl, y1, x1, y1);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\">saved for backward in all: {} bytes</text>\n",
                     kValueX, height - 14, saved_bytes());
  out += "</svg>\n";
  return out;
}

std::string TapeDrawing::dot() const {
  // DOT strings are in double quotes: escape those and backslashes
  auto quoted = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  std::string out = "digraph tape {\n  node [fontname=\"monospace\", fontsize=10];\n";
  for (size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    std::string label = quoted(value_text(v));
    if (const auto n = grad_norm(i)) label += fmt::format("\\n|grad| = {:.6g}", *n);
    out += fmt::format("  v{} [shape=ellipse, style=filled, fillcolor=\"{}\", label=\"{}\"];\n", i,
                       !v.requires_grad ? "#eeeeee"
                       : v.leaf         ? "#d7ecff"
                                        : "#e3f5e1",
                       label);
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    out += fmt::format(
        "  s{} [shape=box, style=\"rounded,filled\", fillcolor=\"#fff3c4\", label=\"#{} "
        "{}\\n{}\"];\n",
        s, s, quoted(st.op), quoted(saved_text(st.saved)));
    for (int v : st.inputs) out += fmt::format("  v{} -> s{};\n", v, s);
    for (int v : st.outputs) out += fmt::format("  s{} -> v{};\n", s, v);
  }
  out += "}\n";
  return out;
}

}  // namespace tapegrad::viz
