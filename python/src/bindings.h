// What python/src/module.cpp's PYBIND11_MODULE calls besides its own bindings: one function a
// source file of tapegrad._C.
#pragma once

#include <pybind11/pybind11.h>

// A run folder as a Translator, and the corpus BLEU and chrF scorers (runs.cpp).
void bind_runs(pybind11::module_& m);
// The C++ optimizers over a list of tensors, gradient clipping and the schedules (optim.cpp).
void bind_optim(pybind11::module_& m);
