// The tape's drawing: what it captures of a small graph (ops in order, shapes, constants,
// saved buffers, gradient norms after backward), its DOT text exactly, and its SVG's marks.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/viz/tape_drawing.h"

using namespace tapegrad;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

double norm(const Tensor& t) { return std::sqrt(sum(mul(t, t)).item()); }

// y = sum(tanh(x @ w + b)), x a constant
struct Graph {
  Tensor x = tensor({1, 2, 3, 4}, {2, 2}, DType::Float64);
  Tensor w =
      tensor({0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, {2, 3}, DType::Float64).set_requires_grad(true);
  Tensor b = tensor({0.1, 0.2, 0.3}, DType::Float64).set_requires_grad(true);
  Tensor h, y;
  Graph() {
    h = tanh(matmul(x, w) + b);
    y = sum(h);
  }
};

}  // namespace

TEST_CASE("the drawing captures ops in order, shapes, constants and saved buffers", "[viz]") {
  const TapeDetailsGuard details;
  Graph g;
  viz::TapeDrawing d({{"y", g.y}, {"w", g.w}, {"b", g.b}, {"h", g.h}});
  REQUIRE(d.steps().size() == 4);
  const char* ops[] = {"matmul", "add", "tanh", "sum"};
  for (size_t i = 0; i < 4; ++i) CHECK(d.steps()[i].op == ops[i]);
  for (size_t i = 1; i < 4; ++i) CHECK(d.steps()[i].seq > d.steps()[i - 1].seq);

  const auto& v = d.values();
  const auto& matmul_step = d.steps()[0];
  REQUIRE(matmul_step.inputs.size() == 2);
  CHECK(v[matmul_step.inputs[0]].label == "const");
  CHECK_FALSE(v[matmul_step.inputs[0]].requires_grad);
  CHECK(v[matmul_step.inputs[0]].shape == Shape{2, 2});
  CHECK(v[matmul_step.inputs[1]].label == "w");
  CHECK(v[matmul_step.inputs[1]].leaf);
  CHECK(v[matmul_step.outputs.front()].shape == Shape{2, 3});
  CHECK(v[d.steps()[2].outputs.front()].label == "h");
  CHECK(v[d.steps()[3].outputs.front()].label == "y");
  CHECK(v[d.steps()[3].outputs.front()].shape == Shape{});

  // matmul keeps both operands, add nothing, tanh its output, sum nothing
  REQUIRE(matmul_step.saved.size() == 2);
  CHECK(matmul_step.saved[1].name == "b");
  CHECK(matmul_step.saved[1].shape == Shape{2, 3});
  CHECK(d.steps()[1].saved.empty());
  REQUIRE(d.steps()[2].saved.size() == 1);
  CHECK(d.steps()[2].saved[0].name == "y");
  CHECK(d.saved_bytes() == (4 + 6 + 6) * sizeof(double));
}

TEST_CASE("an op with two outputs is drawn writing both", "[viz]") {
  Tensor x = tensor({1, 2, 3, 4}, {2, 2}, DType::Float64).set_requires_grad(true);
  // twice = 2x and square = x^2 as one entry
  Tensor twice = mul(x.detach(), 2.0), square = mul(x.detach(), x.detach());
  record("pair", {x}, {&twice, &square}, {.backward = [x](const Tensor&, Grads& g) {
           const Tensor d0 = g.dout(0), d1 = g.dout(1);
           g.pass(0, add(mul(d0, 2.0), mul(mul(d1, x), 2.0)));
         }});
  const Tensor y = sum(mul(twice, square));
  viz::TapeDrawing drawing({{"y", y}, {"twice", twice}, {"square", square}});
  REQUIRE(drawing.steps().size() == 3);
  const auto& pair = drawing.steps()[0];
  CHECK(pair.op == "pair");
  REQUIRE(pair.outputs.size() == 2);
  CHECK(drawing.values()[pair.outputs[0]].label == "twice");
  CHECK(drawing.values()[pair.outputs[1]].label == "square");
  const std::string dot = drawing.dot();
  CHECK(count(dot, "s0 -> v") == 2);
  // the SVG: an arrow from the op down to each output's row
  CHECK(count(drawing.svg(), "<line ") == 4);
}

TEST_CASE("after backward the drawing shows every gradient's norm", "[viz]") {
  Graph g;
  viz::TapeDrawing d({{"y", g.y}, {"w", g.w}, {"b", g.b}, {"h", g.h}});
  for (size_t i = 0; i < d.values().size(); ++i) CHECK_FALSE(d.grad_norm(i).has_value());
  g.y.backward();
  const auto& v = d.values();
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(v[i].label);
    REQUIRE(d.grad_norm(i).has_value());
    if (v[i].label == "w") CHECK(*d.grad_norm(i) == Approx(norm(g.w.grad())).epsilon(1e-14));
    if (v[i].label == "b") CHECK(*d.grad_norm(i) == Approx(norm(g.b.grad())).epsilon(1e-14));
    if (v[i].label == "h") CHECK(*d.grad_norm(i) == Approx(std::sqrt(6.0)).epsilon(1e-14));
    if (v[i].label == "y") CHECK(*d.grad_norm(i) == 1);
  }
  // without details mode: no constant, nothing saved, the same ops
  CHECK(v.size() == 6);
  CHECK(d.saved_bytes() == 0);
}

TEST_CASE("the drawing's DOT text", "[viz]") {
  const TapeDetailsGuard details;
  Graph g;
  viz::TapeDrawing d({{"y", g.y}, {"w", g.w}, {"b", g.b}});
  g.y.backward();
  CHECK(d.dot() == R"dot(digraph tape {
  node [fontname="monospace", fontsize=10];
  v0 [shape=ellipse, style=filled, fillcolor="#eeeeee", label="const [2, 2] float64 (no grad)"];
  v1 [shape=ellipse, style=filled, fillcolor="#d7ecff", label="w [2, 3] float64 (leaf, requires grad)\n|grad| = 3.75915"];
  v2 [shape=ellipse, style=filled, fillcolor="#e3f5e1", label="t2 [2, 3] float64\n|grad| = 0.989842"];
  v3 [shape=ellipse, style=filled, fillcolor="#d7ecff", label="b [3] float64 (leaf, requires grad)\n|grad| = 1.26478"];
  v4 [shape=ellipse, style=filled, fillcolor="#e3f5e1", label="t4 [2, 3] float64\n|grad| = 0.989842"];
  v5 [shape=ellipse, style=filled, fillcolor="#e3f5e1", label="t5 [2, 3] float64\n|grad| = 2.44949"];
  v6 [shape=ellipse, style=filled, fillcolor="#e3f5e1", label="y [] float64\n|grad| = 1"];
  s0 [shape=box, style="rounded,filled", fillcolor="#fff3c4", label="#0 matmul\nsaved: a [2, 2] float64 (32 B), b [2, 3] float64 (48 B)"];
  v0 -> s0;
  v1 -> s0;
  s0 -> v2;
  s1 [shape=box, style="rounded,filled", fillcolor="#fff3c4", label="#1 add\nsaves nothing"];
  v2 -> s1;
  v3 -> s1;
  s1 -> v4;
  s2 [shape=box, style="rounded,filled", fillcolor="#fff3c4", label="#2 tanh\nsaved: y [2, 3] float64 (48 B)"];
  v4 -> s2;
  s2 -> v5;
  s3 [shape=box, style="rounded,filled", fillcolor="#fff3c4", label="#3 sum\nsaves nothing"];
  v5 -> s3;
  s3 -> v6;
}
)dot");
}

TEST_CASE("the drawing's SVG has a box per tensor and op and an arrow per read", "[viz]") {
  const TapeDetailsGuard details;
  Graph g;
  viz::TapeDrawing d({{"y", g.y}, {"w", g.w}, {"b", g.b}});
  const std::string before = d.svg();
  CHECK(before.rfind("<svg ", 0) == 0);
  CHECK(before.substr(before.size() - 7) == "</svg>\n");
  CHECK(count(before, "<rect x=") == 7 + 4);               // seven tensors, four ops
  CHECK(count(before, "fill=\"none\"") == 2 + 2 + 1 + 1);  // an arc for each read
  CHECK(count(before, "marker-end") == 6 + 4);             // the reads and each op's write
  CHECK(count(before, "|grad|") == 0);
  CHECK(before.find("saved for backward in all: 128 bytes") != std::string::npos);
  g.y.backward();
  CHECK(count(d.svg(), "|grad| = ") == 6);  // every tensor that requires grad
  CHECK(d.svg().find("#0 matmul") != std::string::npos);
}

TEST_CASE("a drawing removes its hooks when it goes", "[viz]") {
  Graph g;
  { viz::TapeDrawing d({{"y", g.y}, {"w", g.w}}); }
  g.y.backward();  // no hook writes into the gone drawing
  CHECK(g.w.grad().defined());
}
