// What python/src/module.cpp's PYBIND11_MODULE calls besides its own bindings: one function a
// source file of tapegrad._C.
#pragma once

#include <pybind11/pybind11.h>

// A long C++ call from Python: the GIL released, and Ctrl-C honoured within a second (the
// engine's interrupt check runs Python's signal handlers, whose KeyboardInterrupt unwinds the
// call). Not for a call that must not stop halfway, such as an optimizer's step.
class LongCall {
 public:
  LongCall();
  ~LongCall();
  LongCall(const LongCall&) = delete;
  LongCall& operator=(const LongCall&) = delete;

 private:
  bool outer_;
  pybind11::gil_scoped_release release_;
};

// save_file and load_file of tapegrad.safetensors (files.cpp).
void bind_files(pybind11::module_& m);
// A translation run folder as a Translator, and the corpus BLEU and chrF scorers (runs.cpp).
void bind_runs(pybind11::module_& m);
// The C++ optimizers over a list of tensors, gradient clipping and the schedules (optim.cpp).
void bind_optim(pybind11::module_& m);
// The C++ models built from their configs, the language-model and classifier runs, and
// load_run for every kind of run folder (models.cpp).
void bind_cpp_models(pybind11::module_& m);
// tapegrad/viz's SVG writers and the tape drawing (viz.cpp).
void bind_viz(pybind11::module_& m);
