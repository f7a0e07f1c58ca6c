// The `chorus` subcommands. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace chorus::cli {

struct VerifyArgs {
  std::vector<std::string> files;
  bool json = false;
  bool targetMsccl = false;
  std::string spec;         // post-condition file for custom collectives
  int maxDiagnostics = 20;  // per file, in text mode
};
// Exit: 0 all correct, 1 any algorithm wrong, 2 any input unreadable.
int runVerify(const VerifyArgs& args);

int runShow(const std::string& file);

struct ConvertArgs {
  std::string input;
  std::string output;  // "-" = stdout
  std::string to;      // "xml" | "json" | "" (from the output's extension)
};
int runConvert(const ConvertArgs& args);

// Lists diagnostic codes, or explains one.
int runExplain(const std::string& code);

}  // namespace chorus::cli
