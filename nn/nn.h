// Everything in nn/, for programs that want it all in one include.
#pragma once

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/decoding.h"
#include "nn/heads.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/transformer.h"
