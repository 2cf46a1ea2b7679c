// Commands: one file per command, one row in main.cc's table.
// To add one: 1. write cli/cmd_<name>.cc with a Setup<Name> function, 2. declare it here,
// 3. add its row to kCommands in main.cc (and a test under tests/cli/).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace ferry::cli {

// A command's action, run after parsing; returns the process exit code.
using Action = std::function<int()>;
using SetupFn = void (*)(CLI::App& sub, Action* action);

void SetupInspect(CLI::App& sub, Action* action);
void SetupRun(CLI::App& sub, Action* action);
void SetupOptimize(CLI::App& sub, Action* action);
void SetupAudit(CLI::App& sub, Action* action);
void SetupConvert(CLI::App& sub, Action* action);
void SetupVerify(CLI::App& sub, Action* action);
void SetupGolden(CLI::App& sub, Action* action);
void SetupBench(CLI::App& sub, Action* action);
void SetupPrep(CLI::App& sub, Action* action);
void SetupCalibrate(CLI::App& sub, Action* action);
void SetupQuantize(CLI::App& sub, Action* action);
void SetupBuild(CLI::App& sub, Action* action);
void SetupKeys(CLI::App& sub, Action* action);
void SetupSign(CLI::App& sub, Action* action);
void SetupArtifact(CLI::App& sub, Action* action);
void SetupServe(CLI::App& sub, Action* action);
void SetupLoadgen(CLI::App& sub, Action* action);

// Prints "ferry: error: <message>" on stderr and returns the status's exit code.
int ReportError(const Status& status);
// Writes a rendered result to stdout as valid UTF-8 (core/utf8.h).
void PrintOut(const std::string& text);

}  // namespace ferry::cli
