// Moved to tapegrad/profile/profile.h in 0.7.0 (CHANGELOG.md); this header goes in 0.8.0.
#pragma once
#include "tapegrad/profile/profile.h"
