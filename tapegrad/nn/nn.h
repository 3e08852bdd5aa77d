// Everything in tapegrad/nn/, for programs that want it all in one include.
#pragma once

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/checkpoint.h"
#include "tapegrad/nn/heads.h"
#include "tapegrad/nn/language_model.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/multi_head_attention.h"
#include "tapegrad/nn/transformer.h"
