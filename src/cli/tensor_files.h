// The CLI's names for ir/value_files.h (reading .npy / .pb values), kept so command files can
// keep writing ReadInputFile(...) unqualified.
#pragma once

#include "ir/value_files.h"

namespace ferry::cli {

using ir::CopyBits;
using ir::ReadInputFile;
using ir::SanitizeFileName;

}  // namespace ferry::cli
