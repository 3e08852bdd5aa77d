// viz: the plots and the report as text a browser reads; their layout bounds and labels.
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/viz/viz.h"

using namespace tapegrad;

namespace {
// The value of the first `name="..."` attribute in an SVG.
double attribute(const std::string& svg, const std::string& name) {
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex(name + "=\"([0-9.]+)\"")));
  return std::stod(m[1]);
}
}  // namespace

TEST_CASE("a heatmap of many heads wraps into rows no wider than a page", "[viz]") {
  Generator gen(1);
  const Tensor w = uniform({8, 5, 40}, 0, 1, gen);  // 8 heads over 40 characters
  std::vector<std::string> src(40, "a"), tgt(5, "b");
  const std::string svg = viz::heatmap_svg(w, src, tgt, "title <&>");
  CHECK(attribute(svg, "width") <= viz::kMaxWidth);
  CHECK(svg.find("head 7") != std::string::npos);
  CHECK(svg.find("title &lt;&amp;&gt;") != std::string::npos);  // escaped
  // the colour scale, labelled
  CHECK(svg.find(">1.0</text>") != std::string::npos);
  CHECK(svg.find(">0.0</text>") != std::string::npos);
  CHECK(svg.find("viewBox=") != std::string::npos);  // scales when shown smaller
}

TEST_CASE("word labels of a heatmap are written vertically, characters are not", "[viz]") {
  const Tensor w = full({1, 2, 3}, 0.5);
  const std::string words = viz::heatmap_svg(w, {"monday", "the", "16th"}, {"x", "y"}, "");
  CHECK(words.find("rotate(-90") != std::string::npos);
  const std::string chars = viz::heatmap_svg(w, {"m", "o", " "}, {"x", "y"}, "");
  CHECK(chars.find("rotate(-90") == std::string::npos);
  CHECK(chars.find("\u2423") != std::string::npos);  // a space is shown as an open box
}

TEST_CASE("a heatmap on a signed scale: red above zero, blue below, its own titles", "[viz]") {
  const Tensor w = tensor({1, -1, 0.5, 0}, {1, 2, 2});
  const std::string svg =
      viz::heatmap_svg(w, {"0", "1"}, {"a", "b"}, "a table",
                       {.legend = "value", .panels = {"the table"}, .signed_scale = true});
  CHECK(svg.find("fill=\"rgb(255,0,0)\"") != std::string::npos);      // +1
  CHECK(svg.find("fill=\"rgb(0,0,255)\"") != std::string::npos);      // -1
  CHECK(svg.find("fill=\"rgb(255,128,128)\"") != std::string::npos);  // +0.5
  CHECK(svg.find(">the table</text>") != std::string::npos);
  CHECK(svg.find("head 0") == std::string::npos);
  CHECK(svg.find(">value</text>") != std::string::npos);
  CHECK(svg.find(">-1.0</text>") != std::string::npos);  // the scale's bottom
  // a one-row heatmap is still tall enough for its colour scale, and wide enough for its title
  const std::string flat =
      viz::heatmap_svg(full({1, 1, 2}, 0.5), {"x", "y"}, {"z"}, std::string(120, 't'));
  CHECK(attribute(flat, "height") >= 26 + 18 + 120 + 4);
  CHECK(attribute(flat, "width") >= 7 * 120);
}

TEST_CASE("a search tree joins each hypothesis to the one it extends, its answer in bold",
          "[viz]") {
  const std::vector<std::vector<viz::SearchNode>> steps = {
      {{{"a"}, -0.1}, {{"b"}, -2.0}},
      {{{"a", "c"}, -0.5}, {{"b", "a"}, -2.5}, {{"a"}, -3.0, true}},
      {{{"a", "c"}, -0.7, true}}};
  const std::string svg = viz::search_tree_svg(steps, {"a", "c"}, "a <search>");
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("<rect x=") == 6);              // a box per node
  CHECK(count("<line ") == 4);                // a -> a c, b -> b a, a -> <eos>, a c -> <eos>
  CHECK(count("font-weight=\"bold\"") == 3);  // a, a c, and its <eos>
  CHECK(count(">&lt;eos&gt;</text>") == 2);
  CHECK(svg.find("a &lt;search&gt;") != std::string::npos);
  CHECK(svg.find(">-0.50</text>") != std::string::npos);
}

TEST_CASE("the loss curve has ticks on both axes and a legend that names each series", "[viz]") {
  viz::Curves c;
  for (int64_t s = 10; s <= 3000; s += 10) c.train.push_back({s, 3.0 / static_cast<double>(s)});
  c.valid = {{500, 0.2}, {3000, 0.1}};
  c.train_label = "training loss (moving average)";
  const std::string svg = viz::loss_curve_svg(c);
  for (const char* tick : {">0</text>", ">500</text>", ">1000</text>", ">3000</text>", ">step<"})
    CHECK(svg.find(tick) != std::string::npos);
  CHECK(svg.find("training loss (moving average)") != std::string::npos);
  CHECK(svg.find("validation loss") != std::string::npos);
  // one vertex per point of the training curve
  const size_t path = svg.find("<path d=\"");
  REQUIRE(path != std::string::npos);
  const std::string d = svg.substr(path, svg.find('"', path + 9) - path);
  CHECK(std::count(d.begin(), d.end(), 'L') == static_cast<long>(c.train.size()) - 1);
  // other axes, for other series
  c.x_label = "target position";
  c.y_label = "right (%)";
  const std::string other = viz::loss_curve_svg(c);
  CHECK(other.find(">target position<") != std::string::npos);
  CHECK(other.find(">right (%)<") != std::string::npos);
  CHECK(other.find(">step<") == std::string::npos);
  // no legend entry for a series that is not there
  c.valid.clear();
  CHECK(viz::loss_curve_svg(c).find("validation loss") == std::string::npos);
}

TEST_CASE("the report shows the config as a table and scales its images", "[viz]") {
  viz::ReportData d;
  d.title = "run";
  d.facts = {{"steps", "3000"}};
  d.config = {{"d_model", "64"}, {"activation", "relu"}};
  d.loss_curve_file = "loss.svg";
  d.heatmap_files = {"attention_0.svg"};
  d.samples = {{"a<b", "1", "1"}, {"c", "2", "3"}};
  const std::string html = viz::report_html(d);
  CHECK(html.find("<th>d_model</th><td>64</td>") != std::string::npos);
  CHECK(html.find("img{max-width:100%") != std::string::npos);
  CHECK(html.find("a&lt;b") != std::string::npos);
  CHECK(html.find("class=\"bad\"><td>c</td>") != std::string::npos);  // the mismatch
  CHECK(html.find("Held-out mistakes") == std::string::npos);         // none given
  d.mistakes = {{"x", "y", "z"}};
  d.mistakes_of = "1 of 2 wrong";
  const std::string with = viz::report_html(d);
  CHECK(with.find("<h2>Held-out mistakes (1 of 2 wrong)</h2>") != std::string::npos);
  CHECK(with.find("class=\"bad\"><td>x</td><td>y</td><td>z</td>") != std::string::npos);
}
